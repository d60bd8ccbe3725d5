//! The reset machine: one reset request, from the annotation to the done write.
//!
//! # States
//! `Requested` -> `Waiting` -> `Resetting` -> `Done` (product.md §4). A request whose id equals the
//! done annotation starts, and stays, `Done`.
//!
//! # Drive contract (sans-IO)
//! The machine does no I/O and reads no clock. Its driver (the operator) does this, in order:
//! 1. build it with [`ResetMachine::new`] from the parsed request, the done annotation and the durable
//!    [`GroupRecord`]s of this request (ledger and status);
//! 2. feed a fresh [`Input::Observed`] (the resource and its pod counts, read without a cache);
//! 3. drain [`ResetMachine::poll_effect`] until it returns `None`, carrying out each [`Effect`] in the
//!    order given and feeding each result back with [`ResetMachine::handle`] (results may be fed back
//!    after draining, in any order across groups);
//! 4. when no effect is left, ask [`ResetMachine::poll_timeout`]: while the machine is `Resetting`,
//!    wait until that instant and feed [`Input::Tick`]; while `Waiting`, look again at that instant
//!    by starting over at step 1 (a waiting request reads only Kubernetes, never Kafka); `None` means
//!    there is nothing more to do for this request.
//!
//! Effects that persist ([`Effect::PersistIntent`], [`Effect::PersistOutcome`], [`Effect::WriteDone`])
//! must be durable before the driver carries out any effect emitted after them that commits or
//! publishes ([`Effect::CommitOffsets`], [`Effect::Record`], [`Effect::WriteDone`]); effects that only
//! read or fence ([`Effect::InspectGroup`], [`Effect::Fence`], [`Effect::ReadCommitted`]) may go
//! ahead meanwhile, and persists may be carried out earlier than emitted, several at once. If a
//! persist fails, the driver drops the machine and starts over later from durable state. Recording
//! an event may fail without stopping anything (a missing RBAC grant must not block a reset).
//!
//! # Why a group is never reset twice
//! Offsets alone cannot tell "the reset never landed" from "it landed and the streamlet has since
//! read everything again" (the group is back where it was). So each commit carries a marker in
//! Kafka's per-partition commit metadata:
//! 1. the *fence*: the group's current offsets are committed again, unchanged, with the metadata
//!    [`fence_marker`] (no position moves);
//! 2. the intent (offsets before, log start offsets to commit) is persisted (ledger and status);
//! 3. the log start offsets are committed with the metadata [`reset_marker`], and read back.
//!
//! A machine rebuilt from an intent without outcome never commits blindly: it reads the committed
//! offsets and their metadata ([`Effect::ReadCommitted`]) and settles. The reset marker everywhere
//! means the reset landed. The fence everywhere (and no offset where there was none) means it never
//! did, and only then is the group reset. Anything else means a consumer committed after the fence,
//! so the streamlet ran: if some partition is now behind where the group was before, the consumer
//! started from the reset, which landed. Otherwise Kafka cannot tell whether the consumer started from
//! the reset or from where it was; the group is reported failed with that reason (never reset again,
//! which could rewind a finished rebuild, and never reported as a success it may not be).
//! A transient failure of that read is retried like any other: the group waits [`backoff`] (a
//! [`ResetMachine::poll_timeout`]; the read is emitted on the [`Input::Tick`] at or after it), and
//! after [`MAX_ATTEMPTS`] attempts in all, or at once for a final failure, the group fails ("could not
//! learn whether an earlier commit landed"), never committed. Its status shows `Settling` meanwhile.
//!
//! # Settling after the read-back
//! A consumer that was still closing when the reset ran (a pod past its deletion, a consumer outside
//! Kubernetes that never joined the group) can commit its old position right after the reset commit,
//! overwriting it. So once a group's commit reads back at its log start offsets, the machine waits
//! the settle delay ([`DEFAULT_SETTLE`], see [`ResetMachine::with_settle`]) and reads the group's
//! committed positions again ([`Effect::ReadCommitted`], every partition of the topic as its metadata
//! stands then). The wait is a [`ResetMachine::poll_timeout`] like a retry's: the driver feeds
//! [`Input::Tick`] at that instant and carries out the read.
//! - Every partition of the intent still at its target: the group is reset.
//! - Some partition moved: the group fails, and its event lists each moved partition with where it
//!   is now and what it was reset to (a consumer overwrote the reset).
//! - Partitions that the intent did not cover (added to the topic after the inspection): the group
//!   stays reset on the partitions verified (its event counts only those), and a second event,
//!   `ResetPartitionsAdded`, names the added partitions, which were not reset.
//! - The read fails: transient failures are retried with [`backoff`], [`MAX_ATTEMPTS`] reads in
//!   all; a final failure fails the group (the reset landed and read back once, but whether it held
//!   is unknown, and an unknown is never reported as a success).
//!
//! A crash during the settle leaves an intent without outcome, so the rebuilt machine settles by the
//! markers as above; when every partition still carries the reset marker it waits the settle delay
//! and reads again too. A settle of 0 skips the second read (and with it both checks).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::{AnkkaFlowSpec, GroupStatus, ResetHistoryEntry, ResetStatus};
use crate::targets::{self, InletTarget, RunningProblem};

/// Instant in milliseconds since the Unix epoch, UTC. Wall-clock, so it can be persisted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// `self + d`, saturating.
    pub fn after(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }
}

/// How often a waiting request is looked at again (reference.md §8.3).
pub const WAIT_RECHECK: Duration = Duration::from_secs(5);
/// Attempts of a group whose failures are transient before its last failure becomes final.
pub const MAX_ATTEMPTS: u32 = 5;
/// Delay before the second attempt; doubled for each further one, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest delay between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long the machine waits, by default, after a group's commit reads back at its targets before
/// reading the group's offsets again, to catch a consumer that overwrote the reset (case F1). Long
/// enough for a consumer that was closing during the reset to commit its position, short enough not
/// to delay a request noticeably.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(1);

/// Delay before attempt `attempt + 1`, after `attempt` (1-based) failed attempts.
pub fn backoff(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
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

/// What was about to be committed for one group: persisted before the commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Committed offsets before the reset.
    pub before: Committed,
    /// The offsets to commit: each partition's log start offset.
    pub target: BTreeMap<i32, i64>,
    /// Records between the log start offsets and the high watermarks when the intent was taken:
    /// what the streamlet will read again.
    #[serde(default)]
    pub records: i64,
}

impl Intent {
    /// The outcome of this intent once its commit is known to have landed; `added` are partitions of
    /// the topic that the intent did not cover (see [`GroupOutcome::Reset::added`]).
    pub fn into_reset(self, topic: &str, added: Vec<i32>) -> GroupOutcome {
        GroupOutcome::Reset {
            topic: topic.to_string(),
            before: self.before,
            offsets: self.target,
            records: self.records,
            added,
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
        /// Records to reprocess (see [`Intent::records`]).
        #[serde(default)]
        records: i64,
        /// Partitions of the topic that the reset did not cover, because they were added after the
        /// group was inspected (found by the read after the settle); ascending. Not reset.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        added: Vec<i32>,
    },
    /// The group could not be reset; the reason is final.
    Failed {
        /// Kafka topic name.
        topic: String,
        /// Kafka's or our reason, without the group name.
        reason: String,
    },
}

/// The durable record of one group of one request (ledger and status).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The group.
    pub group: GroupId,
    /// Written before the commit.
    pub intent: Option<Intent>,
    /// Written after the read-back.
    pub outcome: Option<GroupOutcome>,
}

/// A failed Kafka step, as the adapter classifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaFailure {
    /// Worth retrying: a timeout, coordinator not available, a rebalance in progress, members present.
    pub transient: bool,
    /// Human reason, Kafka's own words where it gave any. Never holds credentials.
    pub reason: String,
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
}

/// Everything the machine learns from outside.
#[derive(Clone, Debug)]
pub enum Input {
    /// A fresh read of the resource and of the pods that can still run, per streamlet.
    Observed {
        /// The resource's spec.
        spec: AnkkaFlowSpec,
        /// Pods per streamlet label value (see [`targets::pod_counts`]).
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
    Committed {
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
    /// Time passed; retries that are due start.
    Tick,
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
    /// Persist the intent durably before committing.
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
    /// the topic's metadata stands now (partitions added since the inspection included): to settle an
    /// intent without outcome, and again after the settle delay.
    ReadCommitted(InletTarget),
    /// Persist how the group ended.
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

/// Per-group progress while resetting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPhase {
    /// Not started, or waiting for a retry.
    Pending {
        /// Failed attempts so far.
        attempts: u32,
        /// Earliest instant of the next attempt.
        retry_at: Option<Timestamp>,
        /// Last transient failure.
        last_error: Option<String>,
    },
    /// Inspection under way.
    Inspecting {
        /// Failed attempts so far.
        attempts: u32,
    },
    /// Fence under way; the intent is not persisted yet.
    Fencing {
        /// Failed attempts so far.
        attempts: u32,
        /// The intent, persisted once the fence holds.
        intent: Intent,
    },
    /// Intent persisted, commit under way.
    Committing {
        /// Failed attempts so far.
        attempts: u32,
        /// The intent.
        intent: Intent,
    },
    /// Rebuilt from an intent without outcome (or the commit timed out): reading what Kafka holds,
    /// to learn whether the commit landed.
    Settling {
        /// Failed attempts so far.
        attempts: u32,
        /// The intent found.
        intent: Intent,
        /// When to read again after a transient failure; `None` while the read is under way.
        retry_at: Option<Timestamp>,
        /// Last transient failure of the read.
        last_error: Option<String>,
    },
    /// The commit landed (read back at its targets); waiting the settle delay, then reading the
    /// group's positions again to check that no consumer overwrote them.
    Verifying {
        /// Failed reads so far.
        attempts: u32,
        /// The intent committed.
        intent: Intent,
        /// When to read; `None` while the read is under way.
        read_at: Option<Timestamp>,
        /// Last transient failure of the read.
        last_error: Option<String>,
    },
    /// Finished.
    Finished(GroupOutcome),
}

/// Waiting: some target still runs. Holds only what is valid while waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The request.
    pub request: ResetRequest,
    /// Why it waits.
    pub reasons: Vec<RunningProblem>,
    /// When to look again.
    pub next_look: Timestamp,
}

/// Resetting: every target stopped; groups under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resetting {
    /// The request.
    pub request: ResetRequest,
    /// Every target group, with its target and phase.
    pub groups: BTreeMap<GroupId, (InletTarget, GroupPhase)>,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// Its id was already in the done annotation when the machine was built.
    AlreadyDone {
        /// The request id.
        id: String,
    },
    /// Refused as a whole (unknown streamlets, nothing to reset); done so it is not retried.
    Refused {
        /// The request id.
        id: String,
        /// The refusal note.
        why: String,
    },
    /// Every group finished.
    Completed {
        /// The request id.
        id: String,
        /// Per group: its topic and outcome.
        groups: BTreeMap<GroupId, (InletTarget, GroupOutcome)>,
    },
}

/// The machine's state: one struct per phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Parsed, not yet checked against the resource.
    Requested(ResetRequest),
    /// A target still runs.
    Waiting(Waiting),
    /// Groups being reset.
    Resetting(Resetting),
    /// Finished; nothing more will happen for this id.
    Done(Done),
}

/// One reset request's machine. See the module documentation for the drive contract.
#[derive(Debug)]
pub struct ResetMachine {
    state: State,
    records: BTreeMap<GroupId, GroupRecord>,
    /// The topic of each target group, from the last observation (for the status while waiting).
    topics: BTreeMap<GroupId, String>,
    effects: VecDeque<Effect>,
    /// Wait between a commit's read-back and the second read.
    settle: Duration,
}

impl ResetMachine {
    /// Builds the machine for `request`, given the done annotation and the durable records of this
    /// request's groups (records of other requests must not be passed).
    pub fn new(request: ResetRequest, done_id: Option<&str>, records: Vec<GroupRecord>) -> Self {
        let state = if done_id == Some(request.id.as_str()) {
            State::Done(Done::AlreadyDone { id: request.id })
        } else {
            State::Requested(request)
        };
        ResetMachine {
            state,
            records: records.into_iter().map(|r| (r.group.clone(), r)).collect(),
            topics: BTreeMap::new(),
            effects: VecDeque::new(),
            settle: DEFAULT_SETTLE,
        }
    }

    /// Sets the settle delay: how long after a group's commit reads back at its targets the machine
    /// reads the group's positions again (default [`DEFAULT_SETTLE`]). `Duration::ZERO` skips the
    /// second read: the group is reset as soon as its commit reads back, and neither a consumer that
    /// overwrites the reset nor a partition added during it is noticed (except by the read of a
    /// machine rebuilt from an intent without outcome, which reads every partition anyway).
    #[must_use]
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// The current state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The next effect to carry out, in order; `None` when there is none left.
    #[must_use]
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When the driver should come back: feed [`Input::Tick`] (Resetting) or look again from a fresh
    /// observation (Waiting). `None`: nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match &self.state {
            State::Waiting(w) => Some(w.next_look),
            State::Resetting(r) => r
                .groups
                .values()
                .filter_map(|(_, p)| match p {
                    GroupPhase::Pending { retry_at, .. } => *retry_at,
                    GroupPhase::Verifying { read_at, .. } => *read_at,
                    GroupPhase::Settling { retry_at, .. } => *retry_at,
                    _ => None,
                })
                .min(),
            State::Requested(_) | State::Done(_) => None,
        }
    }

    /// Feeds one input observed at `now`.
    pub fn handle(&mut self, input: Input, now: Timestamp) {
        match input {
            Input::Observed { spec, pods } => self.observed(&spec, &pods, now),
            Input::Inspected { group, result } => self.inspected(group, result, now),
            Input::Fenced { group, result } => self.fenced(group, result, now),
            Input::Committed { group, result } => self.committed(group, result, now),
            Input::Read { group, result } => self.read(group, result, now),
            Input::Tick => self.tick(now),
        }
    }

    fn observed(&mut self, spec: &AnkkaFlowSpec, pods: &BTreeMap<String, u32>, now: Timestamp) {
        let request = match &self.state {
            State::Requested(r) => r.clone(),
            State::Waiting(w) => w.request.clone(),
            // Once resetting, the decision is taken; a group with members is refused by Kafka itself.
            State::Resetting(_) | State::Done(_) => return,
        };
        let id = request.id.clone();
        let selected = match targets::select(spec, &request.streamlets) {
            Ok(t) => t,
            Err(err) => {
                let why = targets::operator_selection_note(&id, &err);
                self.emit(Effect::Record(Event::new(
                    EventType::Warning,
                    "ResetRefused",
                    why.clone(),
                    format!("{id}/refused"),
                )));
                self.emit(Effect::WriteDone { id: id.clone() });
                self.state = State::Done(Done::Refused { id, why });
                return;
            }
        };
        self.topics = selected.iter().flat_map(|t| &t.inlets).map(|i| (i.group.clone(), i.topic.clone())).collect();
        let reasons = targets::running(spec, &selected, pods);
        if !reasons.is_empty() {
            let texts: Vec<String> = reasons.iter().map(RunningProblem::operator_text).collect();
            let note = format!("reset {id} waits: {}", texts.join("; "));
            self.emit(Effect::Record(Event::new(EventType::Warning, "ResetRefused", note.clone(), note)));
            self.state = State::Waiting(Waiting { request, reasons, next_look: now.after(WAIT_RECHECK) });
            return;
        }
        let mut groups = BTreeMap::new();
        for target in selected.into_iter().flat_map(|t| t.inlets) {
            let record = self.records.get(&target.group);
            let phase = match (record.and_then(|r| r.outcome.clone()), record.and_then(|r| r.intent.clone())) {
                (Some(outcome), _) => {
                    // Its event may not have been recorded before the driver stopped: record it again
                    // (a duplicate is refused by name).
                    for event in outcome_events(&id, &target, &outcome) {
                        self.emit(Effect::Record(event));
                    }
                    GroupPhase::Finished(outcome)
                }
                (None, Some(intent)) => {
                    self.emit(Effect::ReadCommitted(target.clone()));
                    GroupPhase::Settling { attempts: 0, intent, retry_at: None, last_error: None }
                }
                (None, None) => {
                    self.emit(Effect::InspectGroup(target.clone()));
                    GroupPhase::Inspecting { attempts: 0 }
                }
            };
            groups.insert(target.group.clone(), (target, phase));
        }
        self.state = State::Resetting(Resetting { request, groups });
        self.maybe_done();
    }

    fn inspected(&mut self, group: GroupId, result: Result<Inspection, KafkaFailure>, now: Timestamp) {
        let Some((target, GroupPhase::Inspecting { attempts })) = self.group(&group) else {
            return;
        };
        let attempts = *attempts;
        let target = target.clone();
        match result {
            Err(f) => self.failed(&target, attempts, f, now),
            Ok(seen) if seen.members > 0 => {
                let reason = format!(
                    "consumer group [{group}] has {} active member(s) (state {}): a consumer still reads it; stop it \
                     (its streamlet is stopped, so it runs elsewhere, or its pods are still stopping) and request again",
                    seen.members, seen.state
                );
                self.failed(&target, attempts, KafkaFailure { transient: true, reason }, now);
            }
            Ok(seen) if seen.log_start.is_empty() => {
                let reason = format!("topic '{}' has no partitions", target.topic);
                self.failed(&target, attempts, KafkaFailure { transient: false, reason }, now);
            }
            Ok(seen) => {
                let records = seen
                    .log_start
                    .iter()
                    .map(|(p, start)| seen.high_watermark.get(p).map_or(0, |high| (high - start).max(0)))
                    .sum();
                let intent = Intent { before: seen.committed, target: seen.log_start, records };
                let offsets = intent.before.iter().filter_map(|(p, o)| o.map(|o| (*p, o))).collect();
                self.emit(Effect::Fence { target, offsets, metadata: fence_marker(&self.id()) });
                self.set_phase(&group, GroupPhase::Fencing { attempts, intent });
            }
        }
    }

    fn fenced(&mut self, group: GroupId, result: Result<(), KafkaFailure>, now: Timestamp) {
        let Some((target, GroupPhase::Fencing { attempts, intent })) = self.group(&group) else { return };
        let (target, attempts, intent) = (target.clone(), *attempts, intent.clone());
        match result {
            Err(f) => self.failed(&target, attempts, f, now),
            Ok(()) => {
                let id = self.id();
                self.emit(Effect::PersistIntent { id: id.clone(), group: group.clone(), intent: intent.clone() });
                self.emit(Effect::CommitOffsets {
                    target,
                    offsets: intent.target.clone(),
                    metadata: reset_marker(&id),
                });
                self.set_phase(&group, GroupPhase::Committing { attempts, intent });
            }
        }
    }

    fn committed(&mut self, group: GroupId, result: Result<Committed, KafkaFailure>, now: Timestamp) {
        let Some((target, GroupPhase::Committing { attempts, intent })) = self.group(&group) else {
            return;
        };
        let (target, attempts, intent) = (target.clone(), *attempts, intent.clone());
        match result {
            // A final answer (authorization, unknown topic) means the commit was refused.
            Err(f) if !f.transient => self.failed(&target, attempts, f, now),
            // Transient: a timeout may hide a commit that landed, and a refusal (members joined) may
            // follow one that did; learn from Kafka before anything else.
            Err(f) => {
                self.emit(Effect::ReadCommitted(target.clone()));
                let settling =
                    GroupPhase::Settling { attempts: attempts + 1, intent, retry_at: None, last_error: Some(f.reason) };
                self.set_phase(&group, settling);
            }
            Ok(read) => {
                let wrong: Vec<String> = intent
                    .target
                    .iter()
                    .filter(|(p, o)| read.get(p).copied().flatten() != Some(**o))
                    .map(|(p, o)| match read.get(p).copied().flatten() {
                        Some(got) => format!("partition {p} reads back {got}, not {o}"),
                        None => format!("partition {p} reads back no offset, not {o}"),
                    })
                    .collect();
                if wrong.is_empty() {
                    // This read-back covers the committed partitions only: it cannot see added ones.
                    self.landed(&target, intent, vec![], now);
                } else {
                    let reason = format!("the commit did not hold: {}", wrong.join(", "));
                    self.finish(&target, GroupOutcome::Failed { topic: target.topic.clone(), reason });
                }
            }
        }
    }

    fn read(&mut self, group: GroupId, result: Result<Positions, KafkaFailure>, now: Timestamp) {
        match self.group(&group) {
            // A result while no read is under way (a retry is scheduled) is not the answer to any read.
            Some((_, GroupPhase::Settling { retry_at: None, .. })) => self.settled(group, result, now),
            Some((_, GroupPhase::Verifying { read_at: None, .. })) => self.verified(group, result, now),
            _ => {}
        }
    }

    /// The read of a group rebuilt from an intent without outcome (or whose commit timed out).
    fn settled(&mut self, group: GroupId, result: Result<Positions, KafkaFailure>, now: Timestamp) {
        let Some((target, GroupPhase::Settling { attempts, intent, last_error, .. })) = self.group(&group) else {
            return;
        };
        let (target, attempts, intent, last_error) = (target.clone(), *attempts, intent.clone(), last_error.clone());
        match result {
            Err(f) if f.transient && attempts + 1 < MAX_ATTEMPTS => {
                // Read again after the backoff, as every retry waits (a short outage must not use up
                // every read at once); settling never commits, so retrying it is always safe.
                let attempts = attempts + 1;
                let retry_at = Some(now.after(backoff(attempts)));
                let last_error = Some(f.reason);
                self.set_phase(&group, GroupPhase::Settling { attempts, intent, retry_at, last_error });
            }
            Err(f) => {
                let reason = format!("could not learn whether an earlier commit landed: {}", f.reason);
                self.finish(&target, GroupOutcome::Failed { topic: target.topic.clone(), reason });
            }
            Ok(read) => {
                let id = self.id();
                let (fence, reset) = (fence_marker(&id), reset_marker(&id));
                let at = |p: &i32| read.get(p).cloned().flatten();
                // Every partition still as the fence left it: the reset commit never landed.
                let fenced = intent.target.keys().all(|p| match (intent.before.get(p).copied().flatten(), at(p)) {
                    (Some(o), Some(pos)) => pos.offset == o && pos.metadata == fence,
                    (None, None) => true,
                    _ => false,
                });
                let landed_untouched = intent
                    .target
                    .iter()
                    .all(|(p, o)| at(p).is_some_and(|pos| pos.offset == *o && pos.metadata == reset));
                // A consumer behind where the group was before can only have started from the reset.
                let behind_before = intent.target.keys().any(|p| {
                    matches!((intent.before.get(p).copied().flatten(), at(p)), (Some(b), Some(pos)) if pos.offset < b)
                });
                if fenced && !landed_untouched {
                    // The commit never landed: start this group again from inspection; after a failed
                    // commit or read (for example Kafka refusing the commit because consumers are
                    // active), once the backoff has passed, with Kafka's reason shown meanwhile.
                    match last_error {
                        Some(why) => {
                            let retry_at = Some(now.after(backoff(attempts)));
                            self.set_phase(&group, GroupPhase::Pending { attempts, retry_at, last_error: Some(why) });
                        }
                        None => {
                            self.emit(Effect::InspectGroup(target.clone()));
                            self.set_phase(&group, GroupPhase::Inspecting { attempts });
                        }
                    }
                } else if landed_untouched {
                    // Landed, and no consumer committed since: settle and read again, as after a
                    // read-back.
                    let added = added_partitions(&intent, &read);
                    self.landed(&target, intent, added, now);
                } else if behind_before {
                    // Landed; a consumer committed since (it ran after the reset), which is its
                    // progress to keep.
                    let added = added_partitions(&intent, &read);
                    self.finish(&target, intent.into_reset(&target.topic, added));
                } else {
                    // A consumer committed after the fence, at or beyond where the group was: the
                    // streamlet ran, but from the reset or from where it was, Kafka cannot tell. Never
                    // reset again (that could rewind a finished rebuild), never claim success.
                    let reason = "cannot tell whether the reset landed: the operator stopped during the reset, and a \
                                  consumer has committed since at or beyond the offsets the group had before; if the \
                                  streamlet did not read its input again, request a new reset"
                        .to_string();
                    self.finish(&target, GroupOutcome::Failed { topic: target.topic.clone(), reason });
                }
            }
        }
    }

    /// A group's commit landed and read back at its targets: it is read again after the settle
    /// delay, or, without one, reset now (`added`: partitions the read-back found beyond the intent).
    fn landed(&mut self, target: &InletTarget, intent: Intent, added: Vec<i32>, now: Timestamp) {
        if self.settle.is_zero() {
            self.finish(target, intent.into_reset(&target.topic, added));
        } else {
            let read_at = Some(now.after(self.settle));
            self.set_phase(&target.group, GroupPhase::Verifying { attempts: 0, intent, read_at, last_error: None });
        }
    }

    /// The read after the settle delay: the group is reset only if every partition of its intent is
    /// still at its target.
    fn verified(&mut self, group: GroupId, result: Result<Positions, KafkaFailure>, now: Timestamp) {
        let Some((target, GroupPhase::Verifying { attempts, intent, .. })) = self.group(&group) else {
            return;
        };
        let (target, attempts, intent) = (target.clone(), attempts + 1, intent.clone());
        let read = match result {
            Ok(read) => read,
            Err(f) if f.transient && attempts < MAX_ATTEMPTS => {
                // Reading never commits, so retrying it is always safe.
                let read_at = Some(now.after(backoff(attempts)));
                self.set_phase(&group, GroupPhase::Verifying { attempts, intent, read_at, last_error: Some(f.reason) });
                return;
            }
            Err(f) => {
                // The reset landed and read back once, but whether it held is unknown: never a success.
                let reason = format!(
                    "the reset was committed and read back at the log start offsets, but reading the offsets \
                     again after the settle failed: {}; check that a consumer did not move them \
                     (kafka-consumer-groups --describe --group {group}) and request a new reset if one did",
                    f.reason
                );
                self.finish(&target, GroupOutcome::Failed { topic: target.topic.clone(), reason });
                return;
            }
        };
        let moved: Vec<String> = intent
            .target
            .iter()
            .filter_map(|(p, o)| match read.get(p).cloned().flatten() {
                Some(pos) if pos.offset == *o => None,
                Some(pos) => Some(format!("partition {p} is at {} (reset to {o})", pos.offset)),
                None => Some(format!("partition {p} has no offset (reset to {o})")),
            })
            .collect();
        let added = added_partitions(&intent, &read);
        if moved.is_empty() {
            self.finish(&target, intent.into_reset(&target.topic, added));
            return;
        }
        const LISTED: usize = 20;
        let mut list = moved.iter().take(LISTED).cloned().collect::<Vec<_>>().join(", ");
        if moved.len() > LISTED {
            list += &format!(" and {} more partition(s)", moved.len() - LISTED);
        }
        let mut reason = format!(
            "a consumer overwrote the reset after it was read back: {list}; stop every consumer of the group \
             (a pod still stopping, a consumer outside Kubernetes) and request a new reset"
        );
        if !added.is_empty() {
            reason += &format!(
                "; partition(s) {} were added to the topic during the reset and were not reset either",
                join(&added)
            );
        }
        self.finish(&target, GroupOutcome::Failed { topic: target.topic.clone(), reason });
    }

    fn tick(&mut self, now: Timestamp) {
        let State::Resetting(r) = &mut self.state else {
            return;
        };
        let mut due = Vec::new();
        for (target, phase) in r.groups.values_mut() {
            if let GroupPhase::Pending { attempts, retry_at, .. } = phase
                && retry_at.is_none_or(|t| t <= now)
            {
                *phase = GroupPhase::Inspecting { attempts: *attempts };
                due.push(Effect::InspectGroup(target.clone()));
            } else if let GroupPhase::Verifying { read_at: at, .. } | GroupPhase::Settling { retry_at: at, .. } = phase
                && at.is_some_and(|t| t <= now)
            {
                *at = None;
                due.push(Effect::ReadCommitted(target.clone()));
            }
        }
        for effect in due {
            self.emit(effect);
        }
    }

    fn failed(&mut self, target: &InletTarget, attempts: u32, failure: KafkaFailure, now: Timestamp) {
        let attempts = attempts + 1;
        if failure.transient && attempts < MAX_ATTEMPTS {
            self.set_phase(
                &target.group,
                GroupPhase::Pending {
                    attempts,
                    retry_at: Some(now.after(backoff(attempts))),
                    last_error: Some(failure.reason),
                },
            );
        } else {
            self.finish(target, GroupOutcome::Failed { topic: target.topic.clone(), reason: failure.reason });
        }
    }

    fn finish(&mut self, target: &InletTarget, outcome: GroupOutcome) {
        let id = self.id();
        let events = outcome_events(&id, target, &outcome);
        // The outcome is persisted before its event is recorded, so that an outcome with an event is
        // never decided again: a driver that stops between the two rebuilds the machine from the
        // persisted outcome, which records the same event again (refused by the API server as a
        // duplicate). Recording first would let a rebuilt machine retry a group reported failed and
        // record a second, different outcome for it.
        self.emit(Effect::PersistOutcome { id, group: target.group.clone(), outcome: outcome.clone() });
        for event in events {
            self.emit(Effect::Record(event));
        }
        self.set_phase(&target.group, GroupPhase::Finished(outcome));
        self.maybe_done();
    }

    fn maybe_done(&mut self) {
        let State::Resetting(r) = &self.state else {
            return;
        };
        if !r.groups.values().all(|(_, p)| matches!(p, GroupPhase::Finished(_))) {
            return;
        }
        let id = r.request.id.clone();
        let groups = r
            .groups
            .iter()
            .filter_map(|(g, (t, p))| match p {
                GroupPhase::Finished(o) => Some((g.clone(), (t.clone(), o.clone()))),
                _ => None,
            })
            .collect();
        self.emit(Effect::WriteDone { id: id.clone() });
        self.state = State::Done(Done::Completed { id, groups });
    }

    fn group(&self, group: &GroupId) -> Option<&(InletTarget, GroupPhase)> {
        match &self.state {
            State::Resetting(r) => r.groups.get(group),
            _ => None,
        }
    }

    fn set_phase(&mut self, group: &GroupId, phase: GroupPhase) {
        if let State::Resetting(r) = &mut self.state
            && let Some(entry) = r.groups.get_mut(group)
        {
            entry.1 = phase;
        }
    }

    fn id(&self) -> String {
        match &self.state {
            State::Requested(r) => r.id.clone(),
            State::Waiting(w) => w.request.id.clone(),
            State::Resetting(r) => r.request.id.clone(),
            State::Done(Done::AlreadyDone { id } | Done::Refused { id, .. } | Done::Completed { id, .. }) => id.clone(),
        }
    }

    fn emit(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }

    /// The request's status, as written to `status.reset` of the resource. Groups with an intent
    /// carry its offsets, so that the status can stand in for a lost ledger (see
    /// [`records_from_status`]).
    pub fn status(&self) -> ResetStatus {
        let id = self.id();
        match &self.state {
            State::Requested(_) => ResetStatus { id, phase: "Requested".into(), ..Default::default() },
            // A waiting request keeps the progress of its groups from an earlier run (an intent whose
            // commit may have landed, an outcome): written over, the status could no longer stand in
            // for a lost ledger, and a group whose reset landed would be reset again.
            State::Waiting(w) => ResetStatus {
                id,
                phase: "Waiting".into(),
                detail: w.reasons.iter().map(RunningProblem::operator_text).collect::<Vec<_>>().join("; "),
                groups: self.records.values().filter_map(|r| self.record_status(r)).collect(),
                ..Default::default()
            },
            State::Resetting(r) => ResetStatus {
                id,
                phase: "Resetting".into(),
                detail: String::new(),
                groups: r.groups.values().map(|(t, p)| group_status(&t.group, &t.topic, p)).collect(),
                ..Default::default()
            },
            // What the records say: a status whose final write was lost is rebuilt from them.
            State::Done(Done::AlreadyDone { .. }) => ResetStatus {
                id,
                phase: "Done".into(),
                groups: self.records.values().filter_map(|r| self.record_status(r)).collect(),
                ..Default::default()
            },
            State::Done(Done::Refused { why, .. }) => {
                ResetStatus { id, phase: "Refused".into(), detail: why.clone(), ..Default::default() }
            }
            State::Done(Done::Completed { groups, .. }) => ResetStatus {
                id,
                phase: "Done".into(),
                detail: String::new(),
                groups: groups
                    .values()
                    .map(|(t, o)| group_status(&t.group, &t.topic, &GroupPhase::Finished(o.clone())))
                    .collect(),
                ..Default::default()
            },
        }
    }

    /// The status of a group known from its durable record alone; `None` when it holds nothing.
    fn record_status(&self, r: &GroupRecord) -> Option<GroupStatus> {
        let phase = match (&r.outcome, &r.intent) {
            (Some(o), _) => GroupPhase::Finished(o.clone()),
            (None, Some(intent)) => GroupPhase::Committing { attempts: 0, intent: intent.clone() },
            (None, None) => return None,
        };
        let topic = match &r.outcome {
            Some(GroupOutcome::Reset { topic, .. } | GroupOutcome::Failed { topic, .. }) => topic.clone(),
            None => self.topics.get(&r.group).cloned().unwrap_or_default(),
        };
        Some(group_status(&r.group, &topic, &phase))
    }
}

/// The event of a group's outcome, keyed `<request id>/<group>`: one per request and group.
fn outcome_event(id: &str, target: &InletTarget, outcome: &GroupOutcome) -> Event {
    match outcome {
        GroupOutcome::Reset { topic, offsets, .. } => Event::new(
            EventType::Normal,
            "ResetOffsets",
            format!("{}: {} partition(s) of '{topic}' to earliest", target.group, offsets.len()),
            format!("{id}/{}", target.group),
        ),
        GroupOutcome::Failed { reason, .. } => Event::new(
            EventType::Warning,
            "ResetOffsetsFailed",
            format!("{}: {reason}", target.group),
            format!("{id}/{}", target.group),
        ),
    }
}

/// The events of a group's outcome: [`outcome_event`], and for a reset that did not cover partitions
/// added during it, a `ResetPartitionsAdded` warning naming them, keyed `<request id>/<group>/added`.
fn outcome_events(id: &str, target: &InletTarget, outcome: &GroupOutcome) -> Vec<Event> {
    let mut events = vec![outcome_event(id, target, outcome)];
    if let GroupOutcome::Reset { topic, offsets, added, .. } = outcome
        && !added.is_empty()
    {
        events.push(Event::new(
            EventType::Warning,
            "ResetPartitionsAdded",
            format!(
                "{}: partition(s) {} of '{topic}' were added to the topic during the reset and were not reset (the \
                 {} partition(s) it had before were); before the streamlet starts, request a new reset, which \
                 covers every partition",
                target.group,
                join(added),
                offsets.len()
            ),
            format!("{id}/{}/added", target.group),
        ));
    }
    events
}

/// Partitions in `read` (the topic's partitions now) that `intent` did not cover.
fn added_partitions(intent: &Intent, read: &Positions) -> Vec<i32> {
    read.keys().filter(|p| !intent.target.contains_key(p)).copied().collect()
}

fn join(partitions: &[i32]) -> String {
    partitions.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}

fn offsets_map<'a>(it: impl IntoIterator<Item = (&'a i32, Option<&'a i64>)>) -> BTreeMap<String, i64> {
    it.into_iter().filter_map(|(p, o)| o.map(|o| (p.to_string(), *o))).collect()
}

fn group_status(group: &GroupId, topic: &str, phase: &GroupPhase) -> GroupStatus {
    let mut g = GroupStatus {
        group: group.to_string(),
        topic: topic.to_string(),
        outcome: "Pending".into(),
        ..Default::default()
    };
    let with_intent = |g: &mut GroupStatus, before: &Committed, target: &BTreeMap<i32, i64>| {
        g.offsets_before = offsets_map(before.iter().map(|(p, o)| (p, o.as_ref())));
        g.offsets_after = offsets_map(target.iter().map(|(p, o)| (p, Some(o))));
        g.partitions = u32::try_from(target.len()).unwrap_or(u32::MAX);
    };
    match phase {
        GroupPhase::Pending { last_error, .. } => g.message = last_error.clone().unwrap_or_default(),
        GroupPhase::Inspecting { .. } | GroupPhase::Fencing { .. } => {}
        GroupPhase::Committing { intent, .. } => {
            g.outcome = "Committing".into();
            with_intent(&mut g, &intent.before, &intent.target);
            g.records_to_reprocess = intent.records;
        }
        GroupPhase::Settling { intent, last_error, .. } => {
            g.outcome = "Settling".into();
            let why = "whether the reset commit landed is unknown (the operator stopped during the reset, or the \
                       commit's answer was lost)";
            g.message = match last_error {
                None => format!("{why}: reading the committed offsets and their markers to learn it"),
                Some(e) => format!("{why}: reading the committed offsets and their markers failed, retrying: {e}"),
            };
            with_intent(&mut g, &intent.before, &intent.target);
            g.records_to_reprocess = intent.records;
        }
        GroupPhase::Verifying { intent, last_error, .. } => {
            g.outcome = "Verifying".into();
            g.message = match last_error {
                None => "read back at the log start offsets; reading them again after the settle delay, to check \
                         that no consumer overwrote the reset"
                    .into(),
                Some(e) => format!("read back at the log start offsets; reading them again failed, retrying: {e}"),
            };
            with_intent(&mut g, &intent.before, &intent.target);
            g.records_to_reprocess = intent.records;
        }
        GroupPhase::Finished(GroupOutcome::Reset { before, offsets, records, added, .. }) => {
            g.outcome = "Reset".into();
            g.message = format!("{} partition(s) of '{topic}' to earliest", offsets.len());
            if !added.is_empty() {
                g.message += &format!("; partition(s) {} were added during the reset and were not reset", join(added));
            }
            with_intent(&mut g, before, offsets);
            g.records_to_reprocess = *records;
            g.added_partitions.clone_from(added);
        }
        GroupPhase::Finished(GroupOutcome::Failed { reason, .. }) => {
            g.outcome = "Failed".into();
            g.message = reason.clone();
        }
    }
    g
}

/// The durable records that a status written by [`ResetMachine::status`] holds: each group with an
/// intent or an outcome. Used when the ledger lost them (its directory was lost or replaced).
pub fn records_from_status(status: &ResetStatus) -> Vec<GroupRecord> {
    status
        .groups
        .iter()
        .filter_map(|g| {
            let target: BTreeMap<i32, i64> =
                g.offsets_after.iter().filter_map(|(p, o)| Some((p.parse().ok()?, *o))).collect();
            let before: Committed =
                target.keys().map(|p| (*p, g.offsets_before.get(&p.to_string()).copied())).collect();
            let group = GroupId::from_raw(&g.group);
            match g.outcome.as_str() {
                // A group settling by the markers, or verifying after its settle, has an intent and no
                // outcome yet, as one committing.
                "Committing" | "Settling" | "Verifying" => Some(GroupRecord {
                    group,
                    intent: Some(Intent { before, target, records: g.records_to_reprocess }),
                    outcome: None,
                }),
                "Reset" => Some(GroupRecord {
                    group,
                    intent: None,
                    outcome: Some(GroupOutcome::Reset {
                        topic: g.topic.clone(),
                        before,
                        offsets: target,
                        records: g.records_to_reprocess,
                        added: g.added_partitions.clone(),
                    }),
                }),
                "Failed" => Some(GroupRecord {
                    group,
                    intent: None,
                    outcome: Some(GroupOutcome::Failed { topic: g.topic.clone(), reason: g.message.clone() }),
                }),
                _ => None,
            }
        })
        .collect()
}

/// Joins the ledger's records and the status's: per group, a record with an outcome wins over one
/// with only an intent.
pub fn merge_records(ledger: Vec<GroupRecord>, status: Vec<GroupRecord>) -> Vec<GroupRecord> {
    let mut by_group: BTreeMap<GroupId, GroupRecord> = BTreeMap::new();
    for r in ledger.into_iter().chain(status) {
        match by_group.get(&r.group) {
            Some(have) if have.outcome.is_some() || r.outcome.is_none() && have.intent.is_some() => {}
            _ => {
                by_group.insert(r.group.clone(), r);
            }
        }
    }
    by_group.into_values().collect()
}

/// The groups of a finished request whose catch-up is still being followed, as indices into
/// `status.groups`: reset, and not yet seen with a lag of 0. The operator measures their lag until it
/// reaches 0.
pub fn catching_up(status: &ResetStatus) -> Vec<usize> {
    if status.phase != "Done" {
        return vec![];
    }
    (0..status.groups.len())
        .filter(|i| status.groups[*i].outcome == "Reset" && status.groups[*i].caught_up_at.is_none())
        .collect()
}

/// How many earlier requests `status.resetHistory` keeps.
pub const HISTORY_LEN: usize = 10;

fn finished(phase: &str) -> bool {
    matches!(phase, "Done" | "Refused")
}

/// When the request in the annotation (`current_id`) differs from the one the status last described
/// (`previous`) and that one had not finished, it was superseded (`flow reset --replace`): the event
/// that says so.
pub fn superseded_event(previous: Option<&ResetStatus>, current_id: &str) -> Option<Event> {
    let p = previous.filter(|p| !p.id.is_empty() && p.id != current_id && !finished(&p.phase))?;
    Some(Event::new(
        EventType::Warning,
        "ResetSuperseded",
        format!("reset {} was superseded by reset {current_id} before it finished ({})", p.id, p.phase),
        format!("{}/superseded", p.id),
    ))
}

/// The history after the status moves from `previous` to request `current_id`: `previous` is added
/// first (as `Superseded` when it had not finished), newest first, at most [`HISTORY_LEN`] entries.
pub fn history(old: &[ResetHistoryEntry], previous: Option<&ResetStatus>, current_id: &str) -> Vec<ResetHistoryEntry> {
    let mut out = Vec::with_capacity(HISTORY_LEN);
    if let Some(p) = previous.filter(|p| !p.id.is_empty() && p.id != current_id) {
        let phase = if finished(&p.phase) { p.phase.clone() } else { "Superseded".to_string() };
        out.push(ResetHistoryEntry { id: p.id.clone(), phase });
    }
    let added = out.first().map(|e| e.id.clone());
    out.extend(old.iter().filter(|e| e.id != current_id && Some(&e.id) != added.as_ref()).cloned());
    out.truncate(HISTORY_LEN);
    out
}

/// The `ResetRefused` event for a request annotation that does not parse. Keyed by the annotation's
/// text, so the same bad text is reported once, and a corrected one again.
pub fn malformed_event(raw: &str, why: &crate::request::MalformedRequest) -> Event {
    Event::new(
        EventType::Warning,
        "ResetRefused",
        format!(
            "reset request refused, nothing was reset: the annotation {} {why}; write a new request with flow reset",
            crate::names::ANNOTATION_RESET
        ),
        format!("malformed/{raw}"),
    )
}

#[cfg(test)]
mod tests;
