//! A [`Drive`]: one request's machine with the ordering of its effects, so that the operator and the
//! model tests carry out the very same work in the very same order, and only the I/O differs.
//!
//! The machine emits effects in order; a driver may carry them out concurrently, as long as what
//! commits or publishes waits for the durability it depends on. The drive holds them accordingly:
//! - **persists** ([`Effect::PersistIntent`], [`Effect::PersistOutcome`]) are batched: every persist
//!   emitted while a write is under way goes into the next write, one [`Persist`] at a time, each
//!   carrying the whole `status.reset` as it stands. A persist also waits until no Kafka call is under
//!   way, for at most [`GATHER`], so that groups whose calls run side by side share one write
//!   instead of taking a write each, one after another; while calls wait for a free slot (a request
//!   of more groups than the concurrency), for at most [`GATHER_QUEUED`], so that its groups share a
//!   few large writes instead of one per wave;
//! - **commits, events and the done write** are held until every persist emitted before them is
//!   durable (a [`Persist`] handed out after them was reported with [`Drive::persisted`]);
//! - **a refusal's status goes before its done write**: the done annotation says only that a
//!   request is finished, and a reader that finds it without a status naming the request takes it
//!   as done. A refused request's status is therefore made durable first, as a persist of its own,
//!   so that it is never read as done;
//! - **a completed request's status follows its done write**: a persist handed out once every group
//!   finished (the last outcome's) shows the request `Resetting`, each group with its outcome, and
//!   only the status written after the done write says `Done` ([`Drive::status`]). So `phase: Done`
//!   is never read without the done annotation (docs/reset.md, "What you see");
//! - **reads, fences and inspections** go at once, at most `concurrency` Kafka calls at a time; the
//!   calls of a group that is under way (fences, reads, commits) go before new inspections, so that
//!   groups finish early and few are open at once.
//!
//! # Drive contract
//! A [`super::Run`] drives it (see the run loop there); these are the rules it keeps:
//! 1. built by [`super::Admitted::start`], it is fed the pods with [`Drive::observe`];
//! 2. [`Drive::poll_work`] is taken until it returns `None`, each [`Work`] started: a Kafka call's
//!    result is fed with [`Drive::handle`] and a persist's success with [`Drive::persisted`], in any
//!    order, whenever they arrive;
//! 3. while [`Drive::in_flight`] is not zero, the driver waits for a result or for
//!    [`Drive::poll_timeout`] (then [`Drive::tick`]), and goes back to 2;
//! 4. with nothing in flight and no work, [`Drive::idle`] says what now: sleep until an instant and
//!    [`Drive::tick`], look again later (the request waits), or stop (done).
//!
//! A persist that fails, or any reason to stop early, is [`Drive::abandon`]: no work is handed out
//! any more (work handed out and refused before it started is [`Drive::not_started`]), and the
//! driver waits until nothing is in flight before it drops the drive, so that no call of an
//! abandoned drive outlives it unnoticed. The next drive starts from durable state.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::approval::ApprovalPolicy;
use super::machine::{DEFAULT_SETTLE, Done, ResetMachine, State};
use super::retry::DEFAULT_RETRY_FOR;
use super::status::Stamps;
use super::vocabulary::{Effect, GroupOutcome, Input, Intent, Timestamp};
use crate::events::Event;
use crate::names::GroupId;
use crate::resource::{AnkkaFlowSpec, RequestPhase, ResetHistoryEntry, ResetStatus};
use crate::targets::InletTarget;

/// How long a persist waits at most for the Kafka calls under way to end (see the module
/// documentation): about one Kafka round trip of a loaded broker, short beside the status
/// write it saves (docs/performance.md, "One status write per step, a lane per group").
pub const GATHER: Duration = Duration::from_millis(30);

/// How long a persist waits at most while Kafka calls also wait for a free slot (see the module
/// documentation): each status write carries the whole status, which grows with the groups, so a
/// request of hundreds of groups that wrote once per wave of calls spent most of its time writing
/// (docs/performance.md, "Topic reads shared, few writes, the pods from the watch").
pub const GATHER_QUEUED: Duration = Duration::from_secs(1);

/// How a drive runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriveOptions {
    /// The settle delay (see [`ResetMachine::with_settle`]).
    pub settle: Duration,
    /// Most Kafka calls under way at once (at least 1).
    pub concurrency: usize,
    /// How long a group retries transient failures (see [`ResetMachine::with_retry_for`]).
    pub retry_for: Duration,
    /// Whether the request needs approval before it touches anything, and the administrator's
    /// policies (see [`super::approval`]); applied by [`super::Admitted::start`].
    pub approval: ApprovalPolicy,
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            settle: DEFAULT_SETTLE,
            concurrency: 16,
            retry_for: DEFAULT_RETRY_FOR,
            approval: ApprovalPolicy::default(),
        }
    }
}

/// A Kafka call of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KafkaCall {
    /// [`Effect::InspectGroup`]; answer with [`Input::Inspected`].
    Inspect(InletTarget),
    /// [`Effect::Fence`]; answer with [`Input::Fenced`].
    Fence {
        /// The group and its topic.
        target: InletTarget,
        /// The group's own offsets.
        offsets: BTreeMap<i32, i64>,
        /// The fence marker.
        metadata: String,
    },
    /// [`Effect::CommitOffsets`]; answer with [`Input::ReadBack`].
    Commit {
        /// The group and its topic.
        target: InletTarget,
        /// The log start offsets.
        offsets: BTreeMap<i32, i64>,
        /// The reset marker.
        metadata: String,
    },
    /// [`Effect::ReadCommitted`]; answer with [`Input::Read`].
    Read(InletTarget),
}

impl KafkaCall {
    /// The group and topic the call is about.
    pub fn target(&self) -> &InletTarget {
        match self {
            KafkaCall::Inspect(t) | KafkaCall::Read(t) => t,
            KafkaCall::Fence { target, .. } | KafkaCall::Commit { target, .. } => target,
        }
    }

    /// The group the call is about.
    pub fn group(&self) -> &GroupId {
        &self.target().group
    }

    /// The call's name, for logs: `inspect`, `fence`, `commit` or `read`.
    pub fn name(&self) -> &'static str {
        match self {
            KafkaCall::Inspect(_) => "inspect",
            KafkaCall::Fence { .. } => "fence",
            KafkaCall::Commit { .. } => "commit",
            KafkaCall::Read(_) => "read",
        }
    }
}

/// One write of a group's durable progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgressWrite {
    /// A group's intent, before its commit.
    Intent(GroupId, Intent),
    /// A group's outcome.
    Outcome(GroupId, GroupOutcome),
}

/// Make progress durable: write `writes` to the ledger and `reset` and `history` to the status, then
/// report [`Drive::persisted`] with `token`. The status carries every write handed out so far, so
/// the progress is durable once the status write succeeded, whether or not the ledger took it.
#[derive(Clone, Debug, PartialEq)]
pub struct Persist {
    /// Reported back with [`Drive::persisted`].
    pub token: u64,
    /// The ledger's writes (empty when only the status changed).
    pub writes: Vec<ProgressWrite>,
    /// `status.reset`.
    pub reset: ResetStatus,
    /// `status.resetHistory`.
    pub history: Vec<ResetHistoryEntry>,
}

impl Persist {
    /// Whether it makes an intent durable.
    pub fn carries_intent(&self) -> bool {
        self.writes.iter().any(|w| matches!(w, ProgressWrite::Intent(..)))
    }

    /// Whether it makes an outcome durable.
    pub fn carries_outcome(&self) -> bool {
        self.writes.iter().any(|w| matches!(w, ProgressWrite::Outcome(..)))
    }
}

/// Something the driver may start now.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// A Kafka call.
    Kafka(KafkaCall),
    /// A persist.
    Persist(Persist),
    /// An event to record (a failure is logged, not fatal).
    Record(Event),
    /// The done write; a failure ends the drive.
    WriteDone(String),
}

impl Work {
    /// Whether it commits (a fence too), publishes or writes: what an operator does only while it
    /// holds its Lease with a margin. Inspections and reads only look.
    pub fn acts(&self) -> bool {
        !matches!(self, Work::Kafka(KafkaCall::Inspect(_) | KafkaCall::Read(_)))
    }
}

/// What a drive with nothing in flight and no work is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Sleep until this instant, then [`Drive::tick`].
    Sleep(Timestamp),
    /// A target still runs: look again from a fresh read at this instant.
    Waiting(Timestamp),
    /// Every group not finished waits for members to leave it: write the status and look again from
    /// a fresh read after [`super::WAIT_RECHECK`] (a group without intent starts from its
    /// inspection then).
    Members,
    /// The request is done: nothing more to do.
    Done,
    /// Resetting with nothing scheduled: never expected; the next reconcile starts over.
    Stalled,
    /// Abandoned: drop it.
    Abandoned,
}

/// An effect that waits until the persists emitted before it are durable.
#[derive(Debug)]
enum Held {
    Commit(KafkaCall),
    Record(Event),
    WriteDone(String),
}

/// One request's machine, and what it asked for that has not been carried out yet. See the module
/// documentation.
#[derive(Debug)]
pub struct Drive {
    machine: ResetMachine,
    annotation: String,
    history: Vec<ResetHistoryEntry>,
    stamps: Stamps,
    limit: usize,
    /// Persist effects emitted so far, and how many of them are durable.
    emitted: u64,
    durable: u64,
    /// The token of the persist under way.
    writing: Option<u64>,
    /// Progress emitted and not handed out yet.
    unwritten: Vec<ProgressWrite>,
    /// Effects waiting for durability: the count of persists they depend on.
    held: VecDeque<(u64, Held)>,
    /// Events and the done write, free to go, in order.
    ready: VecDeque<Work>,
    /// Kafka calls free to go, and how many are under way.
    queue: VecDeque<KafkaCall>,
    calls: usize,
    /// While progress is unwritten: since when it waits for the Kafka calls under way.
    gather: Option<Timestamp>,
    /// The status of the last persist handed out.
    shown: Option<ResetStatus>,
    /// A persist without progress is due: the refusal's status, before its done write.
    show_refusal: bool,
    abandoned: bool,
}

impl Drive {
    pub(super) fn new(
        machine: ResetMachine,
        annotation: String,
        history: Vec<ResetHistoryEntry>,
        stamps: Stamps,
        events: Vec<Event>,
        options: DriveOptions,
    ) -> Self {
        Drive {
            machine,
            annotation,
            history,
            stamps,
            limit: options.concurrency.max(1),
            emitted: 0,
            durable: 0,
            writing: None,
            unwritten: Vec::new(),
            held: VecDeque::new(),
            ready: events.into_iter().map(Work::Record).collect(),
            queue: VecDeque::new(),
            calls: 0,
            gather: None,
            shown: None,
            show_refusal: false,
            abandoned: false,
        }
    }

    /// The machine.
    pub fn machine(&self) -> &ResetMachine {
        &self.machine
    }

    /// The request id.
    pub fn id(&self) -> &str {
        self.machine.id()
    }

    /// The request annotation's text this drive was built for: a different one supersedes it.
    pub fn annotation(&self) -> &str {
        &self.annotation
    }

    /// `status.resetHistory`.
    pub fn history(&self) -> &[ResetHistoryEntry] {
        &self.history
    }

    /// `status.reset` as it stands, stamped: `Done` once every group finished, which a driver writes
    /// only after the done write (a persist before it shows `Resetting`, see the module documentation).
    pub fn status(&mut self, now: Timestamp) -> ResetStatus {
        self.stamps.apply(self.machine.status(), now)
    }

    /// The outcome of each group once the request completed.
    pub fn outcomes(&self) -> Option<&BTreeMap<GroupId, (InletTarget, GroupOutcome)>> {
        match self.machine.state() {
            State::Done(Done::Completed { groups, .. }) => Some(groups),
            _ => None,
        }
    }

    /// Feeds when the operator saw each streamlet stopped (see [`ResetMachine::with_stopped`]);
    /// before [`Drive::observe`], so that every commit of the drive goes by it.
    pub fn seen_stopped(&mut self, stopped: BTreeMap<String, Timestamp>) {
        self.machine.rules.stopped = stopped;
    }

    /// Feeds a fresh read of the resource's spec and its pods.
    pub fn observe(&mut self, spec: AnkkaFlowSpec, pods: BTreeMap<String, u32>, now: Timestamp) {
        self.machine.handle(Input::Observed { spec, pods }, now);
    }

    /// Feeds the result of a Kafka call handed out by [`Drive::poll_work`]. Once abandoned, results
    /// only count down what is in flight.
    pub fn handle(&mut self, input: Input, now: Timestamp) {
        self.calls = self.calls.saturating_sub(1);
        if !self.abandoned {
            self.machine.handle(input, now);
        }
    }

    /// Reports that a Kafka call handed out ended without a result (its task failed).
    pub fn call_lost(&mut self) {
        self.calls = self.calls.saturating_sub(1);
    }

    /// Reports that `work`, handed out by [`Drive::poll_work`], was never started (the driver may not
    /// act any more, see [`Work::acts`]): it no longer counts as in flight, and whatever it would have
    /// made durable is not. Call [`Drive::abandon`] as well.
    pub fn not_started(&mut self, work: &Work) {
        match work {
            Work::Kafka(_) => self.calls = self.calls.saturating_sub(1),
            Work::Persist(p) if self.writing == Some(p.token) => self.writing = None,
            Work::Persist(_) | Work::Record(_) | Work::WriteDone(_) => {}
        }
    }

    /// Reports that the [`Persist`] with `token` succeeded: the progress it carries is durable.
    pub fn persisted(&mut self, token: u64) {
        if self.writing == Some(token) {
            self.writing = None;
        }
        self.durable = self.durable.max(token);
    }

    /// Time passed to `now`.
    pub fn tick(&mut self, now: Timestamp) {
        if !self.abandoned {
            self.machine.handle(Input::Tick, now);
        }
    }

    /// Stops handing out work: what is in flight is waited for and its results are dropped.
    pub fn abandon(&mut self) {
        self.abandoned = true;
        self.ready.clear();
        self.held.clear();
        self.queue.clear();
    }

    /// Whether [`Drive::abandon`] was called.
    pub fn abandoned(&self) -> bool {
        self.abandoned
    }

    /// Kafka calls and persists handed out and not reported yet.
    pub fn in_flight(&self) -> usize {
        self.calls + usize::from(self.writing.is_some())
    }

    /// When to [`Drive::tick`] next, while waiting for results or not.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let machine = match self.machine.state() {
            State::Resetting(_) if !self.abandoned => self.machine.poll_timeout(),
            _ => None,
        };
        // Only while the gather alone holds a persist back: a write under way wakes the driver
        // itself when it ends, and a deadline past would have it tick in a loop until then.
        let gather = self.gather_until().filter(|_| !self.abandoned && self.writing.is_none() && self.calls > 0);
        match (machine, gather) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Until when unwritten progress waits for the Kafka calls: [`GATHER`], or [`GATHER_QUEUED`]
    /// while calls wait for a free slot.
    fn gather_until(&self) -> Option<Timestamp> {
        let most = if self.slots_wanted() { GATHER_QUEUED } else { GATHER };
        self.gather.map(|since| since.after(most))
    }

    /// Whether Kafka calls wait for a free slot: more are queued than the concurrency leaves room for.
    fn slots_wanted(&self) -> bool {
        self.queue.len() > self.limit.saturating_sub(self.calls)
    }

    /// Whether unwritten progress may be handed out now: no Kafka call is under way or waits for a
    /// slot, or it waited as long as [`Drive::gather_until`] says.
    fn gathered(&self, now: Timestamp) -> bool {
        self.calls == 0 && !self.slots_wanted() || self.gather_until().is_none_or(|until| now >= until)
    }

    /// The next work to start now; `None` when there is none for the moment.
    #[must_use]
    pub fn poll_work(&mut self, now: Timestamp) -> Option<Work> {
        if self.abandoned {
            return None;
        }
        self.take_effects(now);
        while let Some((needs, _)) = self.held.front() {
            if *needs > self.durable {
                break;
            }
            match self.held.pop_front().map(|(_, h)| h) {
                Some(Held::Commit(call)) => self.queue.push_front(call),
                Some(Held::Record(event)) => self.ready.push_back(Work::Record(event)),
                Some(Held::WriteDone(id)) => self.ready.push_back(Work::WriteDone(id)),
                None => {}
            }
        }
        if self.writing.is_none() && (self.show_refusal || !self.unwritten.is_empty() && self.gathered(now)) {
            return Some(Work::Persist(self.hand_out(now)));
        }
        if let Some(work) = self.ready.pop_front() {
            return Some(match work {
                Work::Record(e) => Work::Record(e.requested_by(self.stamps.requested_by.as_deref())),
                other => other,
            });
        }
        if self.calls < self.limit
            && let Some(call) = self.queue.pop_front()
        {
            self.calls += 1;
            return Some(Work::Kafka(call));
        }
        // Nothing under way, and a group waits for its next attempt: show why it waits.
        if self.calls == 0
            && self.writing.is_none()
            && self.queue.is_empty()
            && matches!(self.machine.state(), State::Resetting(_))
            && self.machine.poll_timeout().is_some()
        {
            let now_shown = self.status(now);
            if self.shown.as_ref() != Some(&now_shown) {
                return Some(Work::Persist(self.hand_out(now)));
            }
        }
        None
    }

    /// What a drive with nothing in flight and no work waits for.
    pub fn idle(&self) -> Idle {
        if self.abandoned {
            return Idle::Abandoned;
        }
        match self.machine.state() {
            State::Done(_) => Idle::Done,
            State::Waiting(w) => Idle::Waiting(w.next_look),
            State::Resetting(_) if self.machine.waits_for_members() => Idle::Members,
            State::Resetting(_) => self.machine.poll_timeout().map_or(Idle::Stalled, Idle::Sleep),
            State::Requested(_) => Idle::Stalled,
        }
    }

    fn hand_out(&mut self, now: Timestamp) -> Persist {
        let mut reset = self.status(now);
        // The status never runs ahead of the done annotation: until the done write, the request
        // still reads `Resetting`, every group with its outcome (see the module documentation).
        if matches!(self.machine.state(), State::Done(Done::Completed { .. })) {
            reset.phase = RequestPhase::Resetting;
            reset.finished_at = None;
        }
        self.shown = Some(reset.clone());
        self.writing = Some(self.emitted);
        self.gather = None;
        self.show_refusal = false;
        Persist {
            token: self.emitted,
            writes: std::mem::take(&mut self.unwritten),
            reset,
            history: self.history.clone(),
        }
    }

    /// Sorts the machine's new effects into the persists, the held effects and the Kafka queue;
    /// the first progress left unwritten starts a gather (see [`GATHER`]).
    fn take_effects(&mut self, now: Timestamp) {
        let unwritten = !self.unwritten.is_empty();
        while let Some(effect) = self.machine.poll_effect() {
            match effect {
                Effect::PersistIntent { group, intent, .. } => {
                    self.emitted += 1;
                    self.unwritten.push(ProgressWrite::Intent(group, intent));
                }
                Effect::PersistOutcome { group, outcome, .. } => {
                    self.emitted += 1;
                    self.unwritten.push(ProgressWrite::Outcome(group, outcome));
                }
                Effect::InspectGroup(target) => self.queue.push_back(KafkaCall::Inspect(target)),
                Effect::Fence { target, offsets, metadata } => {
                    self.queue.push_front(KafkaCall::Fence { target, offsets, metadata })
                }
                Effect::ReadCommitted(target) => self.queue.push_front(KafkaCall::Read(target)),
                Effect::CommitOffsets { target, offsets, metadata } => {
                    self.held.push_back((self.emitted, Held::Commit(KafkaCall::Commit { target, offsets, metadata })))
                }
                Effect::Record(event) => self.held.push_back((self.emitted, Held::Record(event))),
                Effect::WriteDone { id } => {
                    if matches!(self.machine.state(), State::Done(Done::Refused { .. })) {
                        self.emitted += 1;
                        self.show_refusal = true;
                    }
                    self.held.push_back((self.emitted, Held::WriteDone(id)))
                }
            }
        }
        if !unwritten && !self.unwritten.is_empty() {
            self.gather = Some(now);
        }
    }
}
