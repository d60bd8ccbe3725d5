//! The words the reset machine and its driver share: time, offsets and their markers, the durable
//! progress of a group, what Kafka answered, and the machine's inputs and effects.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::events::Event;
use crate::names::GroupId;
use crate::resource::AnkkaFlowSpec;
use crate::targets::InletTarget;

/// Instant in milliseconds since the Unix epoch, UTC. Wall-clock, so it can be persisted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// `self + d`, saturating.
    pub fn after(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    /// How long from `self` until `later` (zero when `later` is not later).
    pub fn until(self, later: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0))
    }

    /// RFC 3339 in UTC with milliseconds, as the status shows instants (`2026-11-29T16:21:40.512Z`).
    pub fn rfc3339(self) -> String {
        match k8s_openapi::jiff::Timestamp::from_millisecond(self.0) {
            Ok(t) => t.to_string(),
            // Only instants beyond the year 9999 fail; none is ever fed.
            Err(_) => String::new(),
        }
    }
}

/// Committed offsets per partition; `None` where the group has no committed offset.
pub type Committed = BTreeMap<i32, Option<i64>>;

/// A committed offset with the metadata string committed with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Absolute offset.
    pub offset: i64,
    /// Commit metadata (consumers usually commit an empty string).
    pub metadata: String,
}

/// Committed positions per partition, with their metadata; `None` where the group has none.
pub type Positions = BTreeMap<i32, Option<Position>>;

/// Commit metadata of the fence of request `id`: the group's own offsets, committed again unchanged.
pub fn fence_marker(id: &str) -> String {
    format!("ankka-flow/reset/{id}/fence")
}

/// Commit metadata of the reset commit of request `id`.
pub fn reset_marker(id: &str) -> String {
    format!("ankka-flow/reset/{id}")
}

/// What was about to be committed for one group: made durable before the commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Committed offsets before the reset.
    pub before: Committed,
    /// The offsets to commit: each partition's log start offset.
    pub target: BTreeMap<i32, i64>,
    /// Kafka records between the log start offsets and the high watermarks when the intent was
    /// taken: what the streamlet will read again.
    #[serde(default, alias = "records")]
    pub records_to_reprocess: i64,
    /// How many partitions it covers: `target.len()`, except for an intent known only from the
    /// summary a status keeps of a large group (see [`Intent::summary`]), whose offsets are not known.
    #[serde(default)]
    pub partitions: u32,
    /// What a user should know about where the group goes (a partition without a record after the
    /// time went to the log end, an offset of a plan outside the log now), from its destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// For a group a rebuild from streamlets puts at the end of its topic: the records between where
    /// it was (its committed offsets, else the log start) and the end, which it will not read: what
    /// the topic held before the replay (see [`crate::closure`]). 0 for every other group.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_to_skip: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Intent {
    /// An intent to commit `target`, from the offsets `before`.
    pub fn new(before: Committed, target: BTreeMap<i32, i64>, records_to_reprocess: i64) -> Intent {
        let partitions = u32::try_from(target.len()).unwrap_or(u32::MAX);
        Intent { before, target, records_to_reprocess, partitions, notes: vec![], records_to_skip: 0 }
    }

    /// The same intent, skipping `records` (see [`Intent::records_to_skip`]).
    #[must_use]
    pub fn with_skip(mut self, records: i64) -> Intent {
        self.records_to_skip = records;
        self
    }

    /// The same intent with `notes`.
    #[must_use]
    pub fn with_notes(mut self, notes: Vec<String>) -> Intent {
        self.notes = notes;
        self
    }

    /// An intent known only by its summary: it was made durable for `partitions` partitions, but its
    /// offsets per partition are not known here (the status keeps them only for small groups, and
    /// the ledger, which keeps them all, was lost). Its commit is recovered by the markers alone.
    pub fn summary(partitions: u32, records_to_reprocess: i64) -> Intent {
        Intent {
            before: Committed::new(),
            target: BTreeMap::new(),
            records_to_reprocess,
            partitions,
            notes: vec![],
            records_to_skip: 0,
        }
    }

    /// Whether its offsets per partition are not known ([`Intent::summary`]).
    pub fn is_summary(&self) -> bool {
        self.target.is_empty()
    }

    /// How many partitions it covers.
    pub fn partition_count(&self) -> u32 {
        if self.target.is_empty() { self.partitions } else { u32::try_from(self.target.len()).unwrap_or(u32::MAX) }
    }

    /// The outcome of this intent once its commit is known to have landed; `added` are partitions of
    /// the topic that the intent did not cover (see [`GroupOutcome::Reset::added`]).
    pub fn into_reset(self, topic: &str, added: Vec<i32>) -> GroupOutcome {
        let partitions = self.partition_count();
        GroupOutcome::Reset {
            topic: topic.to_string(),
            before: self.before,
            offsets: self.target,
            records_to_reprocess: self.records_to_reprocess,
            added,
            partitions,
            to: None,
            notes: self.notes,
            records_to_skip: self.records_to_skip,
        }
    }
}

/// How one group ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupOutcome {
    /// Every partition was committed at its log start offset and read back there.
    Reset {
        /// Kafka topic name.
        topic: String,
        /// Committed offsets before the reset.
        before: Committed,
        /// The offsets committed, per partition.
        offsets: BTreeMap<i32, i64>,
        /// Kafka records to reprocess (see [`Intent::records_to_reprocess`]).
        #[serde(default, alias = "records")]
        records_to_reprocess: i64,
        /// Partitions of the topic that the reset did not cover, because they were added after the
        /// group was inspected (found by the read after the settle); ascending. Not reset.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        added: Vec<i32>,
        /// How many partitions were reset: `offsets.len()`, unless the outcome is known only from
        /// the summary a status keeps of a large group (`offsets` is then empty).
        #[serde(default)]
        partitions: u32,
        /// Where the group went when not to the earliest offsets (see
        /// [`super::Destination::describe`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        /// The intent's notes (see [`Intent::notes`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
        /// Records of the topic it does not read (see [`Intent::records_to_skip`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        records_to_skip: i64,
    },
    /// A dry run's plan of the group: where it would go; nothing was committed.
    Planned {
        /// Kafka topic name.
        topic: String,
        /// The committed offsets now, where the group would go and the records it would read again.
        intent: Intent,
        /// Each partition's high watermark when planned.
        high_watermark: BTreeMap<i32, i64>,
        /// What the user should know before carrying the plan out.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// Where the group would go when not to the earliest offsets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
    },
    /// The group could not be reset; the reason is final.
    Failed {
        /// Kafka topic name.
        topic: String,
        /// Kafka's or our reason, without the group name.
        reason: String,
    },
}

impl GroupOutcome {
    /// How many partitions a reset covered, or a plan would (0 for a failure).
    pub fn partitions(&self) -> u32 {
        match self {
            GroupOutcome::Reset { offsets, partitions, .. } if offsets.is_empty() => *partitions,
            GroupOutcome::Reset { offsets, .. } => u32::try_from(offsets.len()).unwrap_or(u32::MAX),
            GroupOutcome::Planned { intent, .. } => intent.partition_count(),
            GroupOutcome::Failed { .. } => 0,
        }
    }

    /// The topic the group reads.
    pub fn topic(&self) -> &str {
        match self {
            GroupOutcome::Reset { topic, .. }
            | GroupOutcome::Planned { topic, .. }
            | GroupOutcome::Failed { topic, .. } => topic,
        }
    }
}

/// The durable progress of one group of one request, as the ledger and the status keep it: the
/// intent written before the commit, and the outcome written after the read-back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupProgress {
    /// The group.
    pub group: GroupId,
    /// Written before the commit.
    pub intent: Option<Intent>,
    /// Written once the group finished.
    pub outcome: Option<GroupOutcome>,
}

/// An entry of the ledger: the durable progress of one group, and the `metadata.uid` of the object
/// it was recorded for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The uid; `None` for an entry written before requests were bound to the uid, taken as the
    /// object's own (as it always was).
    pub uid: Option<String>,
    /// The progress.
    pub progress: GroupProgress,
}

impl LedgerEntry {
    /// `progress` recorded for the object of `uid`.
    pub fn of(uid: &str, progress: GroupProgress) -> LedgerEntry {
        LedgerEntry { uid: Some(uid.to_string()), progress }
    }

    /// Whether it was recorded for the object of `uid` (or before requests were bound to the uid).
    pub fn belongs_to(&self, uid: &str) -> bool {
        self.uid.as_deref().is_none_or(|u| u == uid)
    }
}

/// What kind of failure a Kafka step met, which decides what the machine does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// No answer in time, or no broker reachable (a timeout, a transport failure, every broker
    /// down). Transient.
    Unreachable,
    /// Kafka answered that it cannot serve the request now: the group coordinator or a partition
    /// leader is moving or loading, a rebalance is under way. Transient.
    Unavailable,
    /// The group has members: a consumer still reads it (Kafka answers UNKNOWN_MEMBER_ID to a commit
    /// into a group with members). Transient: the group waits until they are gone.
    MembersPresent,
    /// The cluster refused the operator's credentials. Final.
    Authentication,
    /// An ACL denies the operation. Final.
    Authorization,
    /// The topic or a partition does not exist. Final.
    UnknownTopic,
    /// The connection cannot be used as configured (client properties, cluster Secret). Final.
    Configuration,
    /// Kafka refused the request for another reason. Final.
    Refused,
}

impl FailureKind {
    /// Whether a later attempt may succeed without anyone changing anything.
    pub fn transient(self) -> bool {
        matches!(self, FailureKind::Unreachable | FailureKind::Unavailable | FailureKind::MembersPresent)
    }
}

/// A failed Kafka step, as the adapter classifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaFailure {
    /// What kind of failure it is.
    pub kind: FailureKind,
    /// Human reason, Kafka's own words where it gave any. Never holds credentials.
    pub reason: String,
}

impl KafkaFailure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, reason: impl Into<String>) -> Self {
        KafkaFailure { kind, reason: reason.into() }
    }

    /// [`FailureKind::Unreachable`].
    pub fn unreachable(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Unreachable, reason)
    }

    /// [`FailureKind::Unavailable`].
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Unavailable, reason)
    }

    /// [`FailureKind::MembersPresent`].
    pub fn members_present(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::MembersPresent, reason)
    }

    /// [`FailureKind::Authentication`].
    pub fn authentication(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Authentication, reason)
    }

    /// [`FailureKind::Authorization`].
    pub fn authorization(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Authorization, reason)
    }

    /// [`FailureKind::UnknownTopic`].
    pub fn unknown_topic(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::UnknownTopic, reason)
    }

    /// [`FailureKind::Configuration`].
    pub fn configuration(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Configuration, reason)
    }

    /// [`FailureKind::Refused`].
    pub fn refused(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Refused, reason)
    }

    /// Whether a later attempt may succeed ([`FailureKind::transient`]).
    pub fn transient(&self) -> bool {
        self.kind.transient()
    }
}

/// What the adapter saw of a group before committing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    /// The group's state as Kafka names it (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// Members of the group, classic and consumer protocol alike.
    pub members: u32,
    /// Each partition's log start offset, from the topic's metadata (never from the group's offsets).
    pub log_start: BTreeMap<i32, i64>,
    /// The group's committed offsets on those partitions.
    pub committed: Committed,
    /// Each partition's high watermark.
    pub high_watermark: BTreeMap<i32, i64>,
    /// For a reset to a time: each partition's first offset whose record's timestamp is at or after
    /// it, `None` where no record is; empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub at_time: BTreeMap<i32, Option<i64>>,
    /// For a dry run: the topic's `cleanup.policy`, `retention.ms` and `retention.bytes` as the
    /// cluster reports them (what the plan warns about); empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topic_configs: BTreeMap<String, String>,
}

/// Everything the machine learns from outside.
#[derive(Clone, Debug)]
pub enum Input {
    /// A fresh read of the resource and of the pods that can still run, per streamlet.
    Observed {
        /// The resource's spec.
        spec: AnkkaFlowSpec,
        /// Pods per streamlet label value (see [`crate::targets::pod_counts`]).
        pods: BTreeMap<String, u32>,
    },
    /// Result of [`Effect::InspectGroup`].
    Inspected {
        /// The group.
        group: GroupId,
        /// What was seen, or why not.
        result: Result<Inspection, KafkaFailure>,
    },
    /// Result of [`Effect::Fence`].
    Fenced {
        /// The group.
        group: GroupId,
        /// `Ok` once every partition's fence was committed.
        result: Result<(), KafkaFailure>,
    },
    /// Result of [`Effect::CommitOffsets`]: the offsets read back after the commit.
    ReadBack {
        /// The group.
        group: GroupId,
        /// Read-back offsets, or why the commit or read failed.
        result: Result<Committed, KafkaFailure>,
    },
    /// Result of [`Effect::ReadCommitted`].
    Read {
        /// The group.
        group: GroupId,
        /// Committed positions with their metadata, or why they could not be read.
        result: Result<Positions, KafkaFailure>,
    },
    /// Time passed; retries and reads that are due start.
    Tick,
}

impl Input {
    /// The group a Kafka result is about; `None` for [`Input::Observed`] and [`Input::Tick`].
    pub fn group(&self) -> Option<&GroupId> {
        match self {
            Input::Inspected { group, .. }
            | Input::Fenced { group, .. }
            | Input::ReadBack { group, .. }
            | Input::Read { group, .. } => Some(group),
            Input::Observed { .. } | Input::Tick => None,
        }
    }
}

/// Work for the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Record an event about the resource (failure to record is logged, not fatal).
    Record(Event),
    /// Describe the group (state, members), list the topic's partitions and log start offsets, and
    /// read the group's committed offsets, over the topic's own connection.
    InspectGroup(InletTarget),
    /// Commit these offsets (the group's own, unchanged) with `metadata` ([`fence_marker`]), without
    /// joining the group.
    Fence {
        /// The group and its topic.
        target: InletTarget,
        /// Absolute offsets per partition: only partitions that have a committed offset.
        offsets: BTreeMap<i32, i64>,
        /// The fence marker.
        metadata: String,
    },
    /// Make the intent durable before committing.
    PersistIntent {
        /// The request.
        id: String,
        /// The group.
        group: GroupId,
        /// What is about to be committed.
        intent: Intent,
    },
    /// Commit these offsets with `metadata` ([`reset_marker`]) for the group (without joining it),
    /// then read them back.
    CommitOffsets {
        /// The group and its topic.
        target: InletTarget,
        /// Absolute offsets per partition.
        offsets: BTreeMap<i32, i64>,
        /// The reset marker.
        metadata: String,
    },
    /// Read the group's committed offsets, with their metadata, on every partition of its topic as
    /// the topic's metadata stands now (partitions added since the inspection included): to learn
    /// whether an interrupted commit landed, and to verify a commit after the settle delay.
    ReadCommitted(InletTarget),
    /// Make how the group ended durable.
    PersistOutcome {
        /// The request.
        id: String,
        /// The group.
        group: GroupId,
        /// Its outcome.
        outcome: GroupOutcome,
    },
    /// Write the request id to the done annotation (that key alone).
    WriteDone {
        /// The request id.
        id: String,
    },
}
