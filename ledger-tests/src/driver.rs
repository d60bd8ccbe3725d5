//! The simulated operator: one reconcile of the resource's reset request, running the operator's own
//! run loop (`flow_core::reset::Run`: the intake, the undo's source, the shared-group rule, the
//! effect ordering of its `Drive`, the supersede check) against the simulated world. Only the I/O is
//! simulated, as `operator/src/reset.rs` carries it out:
//! Kafka calls and status writes are started, and complete later, in an order the history chooses;
//! the ledger is written when a persist starts; events and the done write happen at once.
//!
//! Each call is also an operator restart: the machine is rebuilt from durable state (ledger progress
//! merged with the progress in `status.reset`), and nothing the driver held survives the call. A
//! crash after the k-th piece of work leaves what was in flight to the history: each call or write
//! under way either reached its server or did not.

use flow_core::names::GroupId;
use flow_core::reset::{
    Drive, DriveOptions, End, Ended, Fresh, GroupPhase, Input, KafkaCall, Need, Next, Persist, Report, Run, State, Work,
};
use flow_core::tenancy::Verdict;
use std::collections::BTreeMap;

use flow_core::resource::{GroupStage, RequestPhase, ResetStatus};

use crate::world::{Conn, Fact, KubeFault, Streamlet, World};

/// Most pieces of work one reconcile may start before the drive is declared stuck. The machine's
/// retries are bounded, so a real drive stays far below this.
pub const MAX_WORK: usize = 1_000;

/// How a reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// No request annotation: nothing to do.
    NoRequest,
    /// The annotation does not parse: refused (event, status), machine never built.
    Malformed,
    /// The request's id is the done id, or its progress says it is done: nothing happens.
    AlreadyDone,
    /// A target still runs: look again later.
    Waiting,
    /// Every group not finished waits for members (strays) to leave it: look again later.
    Members,
    /// The annotation changed during a retry's sleep: this drive stops, the next takes the new one.
    Superseded,
    /// The machine reached `Done` (refused, or every group finished), or the request was refused
    /// without one (taken up for an earlier object of the resource's name) and marked done.
    Done,
    /// Refused by the shared-group rule (`World::shared`): its status, then the done write.
    SharedRefused,
    /// Held back by the shared-group rule until the clusters can be told apart.
    SharedWaits,
    /// The machine stayed `Resetting` with nothing scheduled (never expected).
    Stalled,
    /// A status or done write failed: the drive was abandoned once nothing was in flight.
    Abandoned,
    /// The operator crashed after starting `effects` pieces of work.
    Crashed {
        /// Work started before the crash.
        effects: usize,
    },
}

/// The order in which work under way completes, as the history chose it: each byte picks one of
/// the pending items (its value modulo their number); once the bytes are used up, the oldest goes
/// first.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    bytes: std::collections::VecDeque<u8>,
}

impl Schedule {
    /// A schedule from the history's bytes.
    pub fn new(bytes: &[u8]) -> Schedule {
        Schedule { bytes: bytes.iter().copied().collect() }
    }

    fn pick(&mut self, n: usize) -> usize {
        self.bytes.pop_front().map_or(0, |b| usize::from(b) % n.max(1))
    }

    /// Whether an item under way when the operator crashed reached its server (most do).
    fn reached(&mut self) -> bool {
        self.bytes.pop_front().is_none_or(|b| b % 4 != 0)
    }
}

/// Work under way.
#[derive(Clone, Debug)]
pub enum Pending {
    /// A Kafka call over one of the operator's connections: applied to the world when it completes.
    Call(KafkaCall, Conn),
    /// A status write: lands when it completes.
    Write(Persist),
}

/// One reconcile's run and the work it has under way.
struct Turn {
    run: Run,
    /// The request's id, when the run has one.
    id: Option<String>,
    uid: String,
    schedule: Schedule,
    /// The lanes' shift (see `World::lane_shift`), and each group's lane, given at the first call.
    shift: usize,
    lanes: Option<BTreeMap<GroupId, usize>>,
    crash_after: Option<usize>,
    started: usize,
    pending: Vec<Pending>,
}

/// Each group's lane, as the operator gives them: its place among the request's groups (shifted by
/// `shift`, see `World::lane_shift`).
fn lanes_of(run: &Run, shift: usize) -> BTreeMap<GroupId, usize> {
    match run.drive().map(|d| d.machine().state()) {
        Some(State::Resetting(r)) => r.groups.keys().enumerate().map(|(i, g)| (g.clone(), (i + shift) % 16)).collect(),
        _ => BTreeMap::new(),
    }
}

/// The groups of the machine that wait out their settle before their verifying read.
fn settling_now(drive: &Drive) -> Vec<Streamlet> {
    match drive.machine().state() {
        State::Resetting(r) => r
            .groups
            .iter()
            .filter(|(_, g)| matches!(&g.phase, GroupPhase::Verifying { retry, .. } if retry.next.is_some()))
            .filter_map(|(g, _)| Streamlet::of_group(g))
            .collect(),
        _ => vec![],
    }
}

impl World {
    /// Writes `status.reset` and `status.resetHistory`; an intent it carries becomes durable.
    fn write_status(&mut self, reset: &ResetStatus, history: &[flow_core::resource::ResetHistoryEntry]) {
        if reset.phase == RequestPhase::Done && self.kube.done.as_deref() != Some(reset.id.as_str()) {
            self.facts.push(Fact::StatusAhead { id: reset.id.clone() });
        }
        let mut reset = reset.clone();
        if self.summaries {
            for g in &mut reset.groups {
                g.offsets_before.clear();
                g.offsets_after.clear();
            }
        }
        self.kube.status_reset = Some(reset.clone());
        self.kube.status_history = history.to_vec();
        for g in reset.groups.iter().filter(|g| g.outcome.has_intent()) {
            if let Some(group) = Streamlet::of_group(&GroupId::from_raw(&g.group)) {
                self.facts.push(Fact::Intent { id: reset.id.clone(), group });
            }
        }
    }

    /// One reconcile, completing work in the order `order` picks; the operator crashes after the
    /// `crash_after`-th piece of work it starts when given.
    ///
    /// # Panics
    /// When the drive starts more than [`MAX_WORK`] pieces of work (a drive that does not end).
    pub fn reconcile_in(&mut self, crash_after: Option<u8>, order: &[u8]) -> Reconciled {
        // The controller's requeue: time passes between reconciles.
        self.pass_time();
        let mut turn = self.fresh_run(crash_after, order);
        loop {
            let ended = match turn.run.poll(self.now) {
                Next::Start(work) => self.start_work(&mut turn, work),
                Next::Need(need) => {
                    let report = self.need(&turn, need);
                    turn.run.handle(report, self.now);
                    None
                }
                Next::Wait(_) => self.wait(&mut turn),
                Next::Sleep(at) => {
                    assert!(turn.pending.is_empty(), "the run sleeps with work in flight");
                    // Aimed at the settle: what the test armed happens while a group waits to be
                    // verified.
                    self.while_settling(&turn.run.drive().map(settling_now).unwrap_or_default());
                    self.sleep_until(at);
                    if let Some((n, ask)) = self.replace.take() {
                        self.write_request(n, ask);
                    }
                    turn.run.handle(Report::Tick, self.now);
                    None
                }
                Next::Finished(end) => Some(self.finish(end)),
            };
            if let Some(ended) = ended {
                return ended;
            }
        }
    }

    /// The run of one reconcile, built from a fresh read of the resource.
    fn fresh_run(&mut self, crash_after: Option<u8>, order: &[u8]) -> Turn {
        let (request, done) = (self.kube.request.clone(), self.kube.done.clone());
        let (reset, history) = (self.kube.status_reset.clone(), self.kube.status_history.clone());
        let uid = self.kube.uid.clone();
        let fresh = Fresh {
            uid: &uid,
            request: request.as_deref(),
            done: done.as_deref(),
            // The model's API server keeps no managed fields: the time written is display only.
            written: None,
            reset: reset.as_ref(),
            history: &history,
            ..Fresh::default()
        };
        let options = DriveOptions { settle: self.settle, ..DriveOptions::default() };
        let run = Run::new(&fresh, self.kube.spec(), options, self.now);
        Turn {
            id: run.id().map(str::to_string),
            run,
            uid,
            schedule: Schedule::new(order),
            shift: std::mem::take(&mut self.lane_shift),
            lanes: None,
            crash_after: crash_after.map(usize::from),
            started: 0,
            pending: Vec::new(),
        }
    }

    /// Starts one piece of work as the operator does; how the reconcile ended when the operator
    /// crashes right after it.
    fn start_work(&mut self, turn: &mut Turn, work: Work) -> Option<Reconciled> {
        turn.started += 1;
        assert!(
            turn.started <= MAX_WORK,
            "the run of request {:?} did not end after {MAX_WORK} pieces of work",
            turn.id
        );
        // As the operator: work that acts is refused once the Lease's margin is gone.
        if work.acts() && self.take_kube_fault(KubeFault::LeaseLost) {
            turn.run.handle(Report::NotStarted(work), self.now);
            return None;
        }
        match work {
            Work::Kafka(call) => {
                let lanes = turn.lanes.get_or_insert_with(|| lanes_of(&turn.run, turn.shift));
                let conn = self.connection(call.group(), lanes);
                turn.pending.push(Pending::Call(call, conn));
            }
            Work::Persist(persist) => {
                // The ledger is written when the persist starts; the status write runs on.
                if !persist.writes.is_empty() && !self.take_kube_fault(KubeFault::LedgerWrite) {
                    self.ledger.put(turn.id.as_deref().unwrap_or_default(), &turn.uid, &persist.writes);
                }
                turn.pending.push(Pending::Write(persist));
            }
            Work::Record(event) => self.record_event(&event, turn.id.clone()),
            Work::WriteDone(done_id) => {
                if self.take_kube_fault(KubeFault::DoneWrite) {
                    turn.run.handle(Report::Failed, self.now);
                } else {
                    self.write_done(&done_id);
                }
            }
        }
        if turn.crash_after != Some(turn.started) {
            return None;
        }
        // The process dies here: what was under way reached its server or not.
        for item in std::mem::take(&mut turn.pending) {
            if turn.schedule.reached() {
                self.complete(turn.id.as_deref().unwrap_or_default(), turn.run.drive(), item);
            }
        }
        self.facts.push(Fact::Crash { effects: turn.started });
        self.end_process();
        Some(Reconciled::Crashed { effects: turn.started })
    }

    /// Reads the fact the run needs, as the operator does.
    fn need(&mut self, turn: &Turn, need: Need) -> Report {
        match need {
            Need::Ledger(of) => {
                Report::Ledger((!self.take_kube_fault(KubeFault::LedgerRead)).then(|| self.ledger.progress(&of)))
            }
            Need::Pods => Report::Pods { pods: self.kube.pod_counts(), stopped: BTreeMap::new() },
            Need::Shared(_) => {
                if let (Some(Verdict::Refused(_)), Some(id)) = (&self.shared, &turn.id) {
                    self.facts.push(Fact::SharedRefused { id: id.clone() });
                }
                Report::Shared(self.shared.clone())
            }
            // A cache behind a broken watch shows no request at all.
            Need::Requested { fresh } => {
                let seen = (fresh || !self.stale_cache).then(|| self.kube.request.clone()).flatten();
                Report::Requested { annotation: seen, fresh }
            }
        }
    }

    /// Waits for work under way: the history picks what happens next, a piece of work ends, or the
    /// broker carries out a call it holds, at any moment it likes. How the reconcile ended when the
    /// driver returned on an abandoned drive.
    fn wait(&mut self, turn: &mut Turn) -> Option<Reconciled> {
        // The operator waits for the tasks it started, and only for them: what the run counts in
        // flight must be exactly what is under way, or it would wait forever.
        assert_eq!(turn.run.in_flight(), turn.pending.len(), "the run counts in flight what was started");
        assert!(!turn.pending.is_empty(), "the run waits with nothing in flight");
        let holding = self.holding();
        let pick = turn.schedule.pick(turn.pending.len() + holding.len());
        if let Some(conn) = pick.checked_sub(turn.pending.len()).and_then(|i| holding.get(i)) {
            self.carry_out_oldest(*conn);
            return None;
        }
        let item = turn.pending.remove(pick);
        let report = match self.complete(turn.id.as_deref().unwrap_or_default(), turn.run.drive(), item) {
            Done::Call(input) => Report::Kafka(input),
            Done::Written(token) => Report::Persisted(token),
            Done::WriteFailed(token) => Report::PersistFailed(token),
        };
        turn.run.handle(report, self.now);
        if !turn.run.drive().is_some_and(Drive::abandoned) || self.wait_on_abandon {
            return None;
        }
        // The driver as it was: it returned at once, and the calls it had started ran on.
        for item in std::mem::take(&mut turn.pending) {
            match item {
                Pending::Call(call, _) => self.kafka.late.push(call),
                Pending::Write(_) => {}
            }
        }
        self.facts.push(Fact::Abandoned);
        Some(Reconciled::Abandoned)
    }

    /// How the reconcile ended; as the operator, its own status write with what the run shows.
    fn finish(&mut self, end: End) -> Reconciled {
        if let Some(reset) = &end.reset {
            let history = end.history.clone().unwrap_or_else(|| self.kube.status_history.clone());
            self.write_status(reset, &history);
        }
        match end.how {
            Ended::NoRequest => Reconciled::NoRequest,
            Ended::Malformed => Reconciled::Malformed,
            Ended::Answered { done: true } | Ended::Done => Reconciled::Done,
            Ended::Answered { done: false } => Reconciled::AlreadyDone,
            Ended::SharedRefused => Reconciled::SharedRefused,
            Ended::SharedWaits => Reconciled::SharedWaits,
            Ended::Waiting => Reconciled::Waiting,
            Ended::Members => Reconciled::Members,
            Ended::Superseded => Reconciled::Superseded,
            Ended::Stalled => Reconciled::Stalled,
            Ended::Abandoned => {
                self.facts.push(Fact::Abandoned);
                Reconciled::Abandoned
            }
        }
    }

    /// One reconcile with work completing in the order it started.
    pub fn reconcile(&mut self, crash_after: Option<u8>) -> Reconciled {
        self.reconcile_in(crash_after, &[])
    }

    /// The connection a call of `group` goes over: its pinned one, else its lane's.
    fn connection(&mut self, group: &GroupId, lanes: &BTreeMap<GroupId, usize>) -> Conn {
        let lane = Conn { process: self.process.epoch, lane: lanes.get(group).copied().unwrap_or(0) };
        match self.process.pins.connection(group).copied() {
            Some(pinned) if self.pin_unanswered => {
                if let Some(group) = Streamlet::of_group(group).filter(|_| pinned != lane) {
                    self.facts.push(Fact::Pinned { group });
                }
                pinned
            }
            _ => lane,
        }
    }

    /// Sends `call` over `conn`: the broker holds it ([`crate::Fault::Held`], no answer), or carries
    /// out what it holds of `conn` first and then the call. The operator's pins learn how it ended.
    fn call_over(&mut self, call: KafkaCall, conn: Conn) -> Input {
        let (group, writes) = (call.group().clone(), call.writes());
        // A fence of a group without offsets sends nothing.
        let sends = !matches!(&call, KafkaCall::Fence { offsets, .. } if offsets.is_empty());
        let input = if sends && self.next_is_held() {
            let _ = self.kafka.faults.pop_front();
            self.kafka.calls += 1;
            let input = World::no_answer(&call);
            self.hold(call, conn);
            input
        } else {
            if sends {
                self.carry_out_held_on(conn);
            }
            self.carry_out(call)
        };
        if sends {
            self.process.pins.ended(&group, conn, writes, input.answered());
        }
        input
    }

    /// Completes a piece of work under way: a Kafka call is applied, a status write lands (or fails).
    fn complete(&mut self, id: &str, drive: Option<&Drive>, item: Pending) -> Done {
        match item {
            Pending::Call(call, conn) => {
                if let KafkaCall::Read(target) = &call
                    && let Some(group) = Streamlet::of_group(&target.group)
                {
                    // Which read it is, only to tell the two apart in the log (the invariants treat
                    // both as reads of the group).
                    let verifying = match drive.map(|d| d.machine().state()) {
                        Some(State::Resetting(r)) => {
                            matches!(r.groups.get(&target.group).map(|g| &g.phase), Some(GroupPhase::Verifying { .. }))
                        }
                        _ => false,
                    };
                    self.facts.push(if verifying { Fact::Verify { group } } else { Fact::Recover { group } });
                }
                Done::Call(self.call_over(call, conn))
            }
            Pending::Write(persist) => {
                if self.take_kube_fault(KubeFault::StatusWrite) {
                    return Done::WriteFailed(persist.token);
                }
                // The operator as it was before outcomes went to the status: only intents did.
                let shown = self.outcome_in_status
                    || persist.carries_intent()
                    || !persist
                        .reset
                        .groups
                        .iter()
                        .any(|g| matches!(g.outcome, GroupStage::Reset | GroupStage::Failed));
                if shown {
                    self.write_status(&persist.reset, &persist.history);
                }
                for w in &persist.writes {
                    if let flow_core::reset::ProgressWrite::Outcome(group, _) = w
                        && let Some(group) = Streamlet::of_group(group)
                    {
                        self.facts.push(Fact::Outcome { id: id.to_string(), group });
                    }
                }
                Done::Written(persist.token)
            }
        }
    }

    /// Calls Kafka as the operator's adapter does; returns the input to feed back.
    pub fn carry_out(&mut self, call: KafkaCall) -> Input {
        match call {
            KafkaCall::Inspect(target) => {
                let result = self.kafka_inspect(&target);
                Input::Inspected { group: target.group, result }
            }
            KafkaCall::Fence { target, offsets, metadata } => {
                // The adapter makes no call when the group has no committed offset.
                let result = if offsets.is_empty() { Ok(()) } else { self.kafka_commit(&target, &offsets, &metadata) };
                Input::Fenced { group: target.group, result }
            }
            KafkaCall::Commit { target, offsets, metadata } => {
                let partitions: Vec<i32> = offsets.keys().copied().collect();
                let result = self
                    .kafka_commit(&target, &offsets, &metadata)
                    .and_then(|()| self.kafka_committed(&target, &partitions));
                Input::ReadBack { group: target.group, result }
            }
            KafkaCall::Read(target) => {
                let result = self.kafka_read(&target);
                Input::Read { group: target.group, result }
            }
        }
    }

    /// The calls an abandoned drive left running land now (the driver as it was: see
    /// [`World::wait_on_abandon`]).
    pub fn land_late_calls(&mut self) {
        for call in std::mem::take(&mut self.kafka.late) {
            let _ = self.carry_out(call);
        }
    }
}

/// How a piece of work under way completed.
enum Done {
    Call(Input),
    Written(u64),
    WriteFailed(u64),
}
