//! The log of everything that happened in the world, which the invariants read.

use super::*;

/// Who applied a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committer {
    /// The operator (fence or reset commit, without joining the group).
    Operator,
    /// The streamlet's consumer, as a member of the group.
    Consumer,
    /// A consumer that is no member of the group (a pod past its deletion, closing), committing its
    /// position without joining, as the operator does.
    Stray,
}

/// A commit Kafka applied, with the world as it was at that instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedCommit {
    /// The group (by its streamlet).
    pub group: Streamlet,
    /// Who committed.
    pub by: Committer,
    /// The commit metadata.
    pub metadata: String,
    /// The offsets committed.
    pub offsets: BTreeMap<i32, i64>,
    /// The committed offsets just before, on the same partitions.
    pub before: BTreeMap<i32, Option<i64>>,
    /// Streamlets that counted as running at that instant.
    pub running: BTreeSet<Streamlet>,
    /// Members of the group at that instant.
    pub members: u32,
    /// The done annotation at that instant.
    pub done: Option<String>,
    /// A write the broker held and carried out after the operator had stopped waiting for it
    /// ([`Fault::Held`]); `running` and `done` are then as they were when the operator sent it.
    pub late: bool,
}

/// An event the driver asked Kubernetes to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    /// The Event object's name ([`Event::name_for`]).
    pub name: String,
    /// The event's reason.
    pub reason: String,
    /// The event's key.
    pub key: String,
    /// The event's note.
    pub note: String,
    /// The request (id) the reconcile was about; `None` for a malformed annotation.
    pub request: Option<String>,
    /// `false` when the API server answered 409 (an event of that name exists).
    pub created: bool,
}

/// Something that happened, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    /// Kafka applied a commit.
    Commit(AppliedCommit),
    /// An event was recorded (or refused as a duplicate).
    Event(EventRecord),
    /// The done annotation was written.
    Done {
        /// The id written.
        id: String,
    },
    /// The ledger was lost.
    LedgerLost,
    /// The resource was deleted and created again under its name (a new uid), with the same request
    /// annotation, no done annotation and no status.
    Recreated {
        /// The new object's uid.
        uid: String,
    },
    /// The intent of a group became durable: written to the ledger, or carried by a status write.
    Intent {
        /// The request.
        id: String,
        /// The group.
        group: Streamlet,
    },
    /// The outcome of a group was made durable (carried by a status write).
    Outcome {
        /// The request.
        id: String,
        /// The group.
        group: Streamlet,
    },
    /// The operator read a group's committed positions to recover an intent.
    Recover {
        /// The group.
        group: Streamlet,
    },
    /// The operator read a group's committed positions again after the settle delay.
    Verify {
        /// The group.
        group: Streamlet,
    },
    /// A partition was added to the topic of `group`.
    PartitionAdded {
        /// The group (by the streamlet reading the topic).
        group: Streamlet,
        /// The new partition.
        partition: i32,
    },
    /// A write failed and the operator abandoned the drive, once nothing it started was in flight.
    Abandoned,
    /// The shared-group rule refused request `id` (`World::shared`): another resource maps to one
    /// of its groups on the same cluster, so its groups not finished are never reset for it.
    SharedRefused {
        /// The request.
        id: String,
    },
    /// The operator crashed after starting `effects` pieces of work of a reconcile.
    Crash {
        /// Effects carried out.
        effects: usize,
    },
    /// The broker holds a write of request `id` on `group` (its answer never reaches the operator).
    Held {
        /// The request.
        id: String,
        /// The group.
        group: Streamlet,
    },
    /// A call of `group` went over the connection of the group's unanswered write rather than over
    /// its lane of the request at hand (`flow_core::reset::Pins`).
    Pinned {
        /// The group.
        group: Streamlet,
    },
    /// The broker restarted: the calls it held are lost.
    BrokerRestarted {
        /// How many it held.
        lost: usize,
    },
    /// A status write said the request `id` is `Done` while the done annotation did not hold `id`
    /// (the status ran ahead of the annotation).
    StatusAhead {
        /// The request.
        id: String,
    },
}
