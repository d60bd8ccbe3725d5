//! What histories are made of: the resource's names, the streamlets, what a request asks, and the
//! faults and happenings a history can arm.

use super::*;

/// Name of the `AnkkaFlow` resource (event names start with it).
pub const RESOURCE: &str = "cart";
/// Pipeline id of the resource.
pub const PIPELINE: &str = "cart";
/// Partitions of each topic at the start.
pub const PARTITIONS: i32 = 3;
/// Most partitions a topic grows to ([`World::add_partition`]).
pub const MAX_PARTITIONS: usize = 8;
/// Records in a partition when it is added.
pub const ADDED_RECORDS: i64 = 7;
/// The first instant of every simulation.
pub const START: Timestamp = Timestamp(1_700_000_000_000);

/// The two streamlets with an inlet. A third, `source`, has none and is never a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Streamlet {
    /// Reads `shop.cart-events.v1` as group `cart.router.in`.
    Router,
    /// Reads `cart.valid-carts` as group `cart.sink.in`.
    Sink,
}

impl Streamlet {
    /// Both, in name order.
    pub const ALL: [Streamlet; 2] = [Streamlet::Router, Streamlet::Sink];

    /// The streamlet's name.
    pub fn name(self) -> &'static str {
        match self {
            Streamlet::Router => "router",
            Streamlet::Sink => "sink",
        }
    }

    /// Topic id of its inlet `in`.
    pub fn topic_id(self) -> &'static str {
        match self {
            Streamlet::Router => "cart-events",
            Streamlet::Sink => "valid-carts",
        }
    }

    /// Kafka topic name of its inlet.
    pub fn topic(self) -> &'static str {
        match self {
            Streamlet::Router => "shop.cart-events.v1",
            Streamlet::Sink => "cart.valid-carts",
        }
    }

    /// Consumer group of its inlet.
    pub fn group(self) -> GroupId {
        GroupId::new(PIPELINE, self.name(), "in")
    }

    /// The streamlet whose inlet is `group`.
    pub fn of_group(group: &GroupId) -> Option<Streamlet> {
        Streamlet::ALL.into_iter().find(|s| s.group() == *group)
    }
}

/// What a well-formed request names: its `streamlets` list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ask {
    /// `[]`: every streamlet with an inlet.
    All,
    /// `["router"]`.
    Router,
    /// `["sink"]`.
    Sink,
    /// `["sink", "router"]`.
    Both,
    /// `["router", "nope"]`: an unknown name, refused as a whole.
    Unknown,
    /// `["source"]`: a streamlet without inlets, refused.
    NoInlets,
}

impl Ask {
    /// Every kind.
    pub const ALL: [Ask; 6] = [Ask::All, Ask::Router, Ask::Sink, Ask::Both, Ask::Unknown, Ask::NoInlets];

    /// The names written in the annotation.
    pub fn names(self) -> Vec<String> {
        let names: &[&str] = match self {
            Ask::All => &[],
            Ask::Router => &["router"],
            Ask::Sink => &["sink"],
            Ask::Both => &["sink", "router"],
            Ask::Unknown => &["router", "nope"],
            Ask::NoInlets => &["source"],
        };
        names.iter().map(|s| s.to_string()).collect()
    }

    /// The streamlets whose groups the request resets; `None` when the request must be refused.
    /// Written here from the product rules, independently of `flow_core::targets`.
    pub fn targets(self) -> Option<Vec<Streamlet>> {
        match self {
            Ask::All | Ask::Both => Some(Streamlet::ALL.to_vec()),
            Ask::Router => Some(vec![Streamlet::Router]),
            Ask::Sink => Some(vec![Streamlet::Sink]),
            Ask::Unknown | Ask::NoInlets => None,
        }
    }
}

/// The id of the `n`-th request: a UUID (version 4 layout), lower-case and hyphenated.
pub fn request_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The uid of the `n`-th object of the resource (0: the first; each re-creation gets the next).
pub fn object_uid(n: usize) -> String {
    format!("5f0c1e2a-0000-4000-8000-{n:012x}")
}

/// Annotation texts that do not parse, one per kind of mistake (case D5).
pub const MALFORMED: [&str; 6] = [
    "not json",
    r#"{"streamlets":["router"]}"#,
    r#"{"id":"u1","streamlets":["router"]}"#,
    r#"{"id":"00000000-0000-4000-8000-00000000abcd","extra":1}"#,
    r#"{"id":"00000000-0000-4000-8000-00000000ABCD"}"#,
    r#"{"id":"00000000-0000-4000-8000-00000000abcd","streamlets":["Router"]}"#,
];

/// A fault the next Kafka call meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// The call fails, transiently (a timeout, coordinator not available); nothing is applied.
    Transient,
    /// The call fails for good (authorization); nothing is applied.
    Final,
    /// A commit is applied, but the answer is lost: the call reports a transient timeout. Other
    /// calls just time out.
    TimeoutAfterApply,
    /// The call goes through (lets a fixed history aim a fault at a later call).
    Pass,
    /// The call reaches the broker, which holds it (frozen, overloaded): the operator's wait for
    /// the answer times out, and the broker carries the call out at some later moment
    /// ([`crate::world::Kafka::held`]).
    Held,
}

/// A failure of the operator's own writes: the next one of its kind fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KubeFault {
    /// A status write fails (the API server is restarting, a conflict, a timeout): the drive is
    /// abandoned and starts over later from durable state.
    StatusWrite,
    /// The done write fails the same way.
    DoneWrite,
    /// The ledger cannot be written (its disk is full, its directory was removed): the status alone
    /// carries the progress.
    LedgerWrite,
    /// The ledger cannot be read: the status alone stands in for it.
    LedgerRead,
    /// The operator finds it no longer holds its Lease with a margin (it was paused past its
    /// renewal deadline) as it is about to act: the next piece of work that commits, publishes or
    /// writes is refused before it starts, and the drive is abandoned.
    LeaseLost,
}

/// Something that happens in the world while the operator waits out the settle of the streamlet's
/// group (a drive asleep while the group waits for its read after the read-back), armed beforehand
/// by the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum During {
    /// A consumer that is not a member of the group (a pod past its deletion, closing) commits where
    /// it stands: [`World::stray_commit`].
    StrayCommit(Streamlet),
    /// A partition is added to the streamlet's topic: [`World::add_partition`].
    AddPartition(Streamlet),
}
