//! The simulated operator: one reconcile of the resource's reset request, running the operator's own
//! request intake (`flow_core::reset::intake`) and its own effect ordering (`flow_core::reset::Drive`)
//! against the simulated world. Only the I/O is simulated, as `operator/src/reset.rs` carries it out:
//! Kafka calls and status writes are started, and complete later, in an order the history chooses;
//! the ledger is written when a persist starts; events and the done write happen at once.
//!
//! Each call is also an operator restart: the machine is rebuilt from durable state (ledger progress
//! merged with the progress in `status.reset`), and nothing the driver held survives the call. A
//! crash after the k-th piece of work leaves what was in flight to the history: each call or write
//! under way either reached its server or did not.

use flow_core::names::GroupId;
use flow_core::reset::{
    Answer, Drive, DriveOptions, Fresh, GroupPhase, Idle, Input, Intake, KafkaCall, Persist, Started, State, Work,
    intake,
};
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

    fn answer(&mut self, answer: &Answer, request: Option<String>) {
        for event in &answer.events {
            self.record_event(event, request.clone());
        }
        // As the operator: the done write right after the events, the status at the reconcile's end.
        if let Some(id) = &answer.done {
            self.write_done(id);
        }
        self.write_status(&answer.reset, &answer.history);
    }

    /// One reconcile, completing work in the order `order` picks; the operator crashes after the
    /// `crash_after`-th piece of work it starts when given.
    ///
    /// # Panics
    /// When the drive starts more than [`MAX_WORK`] pieces of work (a drive that does not end).
    pub fn reconcile_in(&mut self, crash_after: Option<u8>, order: &[u8]) -> Reconciled {
        // The controller's requeue: time passes between reconciles.
        self.pass_time();
        let mut schedule = Schedule::new(order);
        // The fresh read of the resource.
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
        let admitted = match intake(&fresh, self.now) {
            Intake::Idle => return Reconciled::NoRequest,
            Intake::Answered(answer) => {
                let malformed = answer.reset.id.is_empty();
                self.answer(&answer, (!malformed).then(|| answer.reset.id.clone()));
                return match (malformed, &answer.done) {
                    (true, _) => Reconciled::Malformed,
                    (false, Some(_)) => Reconciled::Done,
                    (false, None) => Reconciled::AlreadyDone,
                };
            }
            Intake::Admitted(admitted) => admitted,
        };
        let id = admitted.id().to_string();
        let ledger = (!self.take_kube_fault(KubeFault::LedgerRead)).then(|| self.ledger.progress(&id));
        let options = DriveOptions { settle: self.settle, ..DriveOptions::default() };
        let mut drive = match admitted.start(ledger, options, self.now) {
            Started::Answered(answer) => {
                self.answer(&answer, Some(id));
                // Refused for good (taken up for an earlier object), or done by its progress.
                return if answer.done.is_some() { Reconciled::Done } else { Reconciled::AlreadyDone };
            }
            Started::Drive(drive) => *drive,
        };
        drive.observe(self.kube.spec(), self.kube.pod_counts(), self.now);
        // Each group's lane, as the operator gives them: its place among the request's groups
        // (shifted as the history likes, see `World::lane_shift`).
        let shift = std::mem::take(&mut self.lane_shift);
        let lanes: BTreeMap<GroupId, usize> = match drive.machine().state() {
            State::Resetting(r) => r.groups.keys().enumerate().map(|(i, g)| (g.clone(), (i + shift) % 16)).collect(),
            _ => BTreeMap::new(),
        };

        let crash_after = crash_after.map(usize::from);
        let mut started = 0usize;
        let mut pending: Vec<Pending> = Vec::new();
        loop {
            while let Some(work) = drive.poll_work(self.now) {
                started += 1;
                assert!(started <= MAX_WORK, "the drive of request {id} did not end after {MAX_WORK} pieces of work");
                // As the operator: work that acts is refused once the Lease's margin is gone, and
                // never waited for.
                if work.acts() && self.take_kube_fault(KubeFault::LeaseLost) {
                    drive.not_started(&work);
                    drive.abandon();
                    continue;
                }
                match work {
                    Work::Kafka(call) => {
                        let conn = self.connection(call.group(), &lanes);
                        pending.push(Pending::Call(call, conn));
                    }
                    Work::Persist(persist) => {
                        // The ledger is written when the persist starts; the status write runs on.
                        if !persist.writes.is_empty() && !self.take_kube_fault(KubeFault::LedgerWrite) {
                            self.ledger.put(&id, &uid, &persist.writes);
                        }
                        pending.push(Pending::Write(persist));
                    }
                    Work::Record(event) => self.record_event(&event, Some(id.clone())),
                    Work::WriteDone(done_id) => {
                        if self.take_kube_fault(KubeFault::DoneWrite) {
                            drive.abandon();
                        } else {
                            self.write_done(&done_id);
                        }
                    }
                }
                if crash_after == Some(started) {
                    // The process dies here: what was under way reached its server or not.
                    for item in std::mem::take(&mut pending) {
                        if schedule.reached() {
                            self.complete(&id, &drive, item);
                        }
                    }
                    self.facts.push(Fact::Crash { effects: started });
                    self.end_process();
                    return Reconciled::Crashed { effects: started };
                }
            }
            // The operator waits for the tasks it started, and only for them: what the drive counts
            // in flight must be exactly what is under way, or it would wait forever.
            assert_eq!(drive.in_flight(), pending.len(), "the drive counts in flight what was started");
            if !pending.is_empty() {
                // The history picks what happens next: a piece of work under way ends, or the
                // broker carries out a call it holds, at any moment it likes.
                let holding = self.holding();
                let pick = schedule.pick(pending.len() + holding.len());
                if let Some(conn) = pick.checked_sub(pending.len()).and_then(|i| holding.get(i)) {
                    self.carry_out_oldest(*conn);
                    continue;
                }
                let item = pending.remove(pick);
                match self.complete(&id, &drive, item) {
                    Done::Call(input) => drive.handle(input, self.now),
                    Done::Written(token) => drive.persisted(token),
                    Done::WriteFailed(token) => {
                        drive.abandon();
                        drive.persisted(token);
                    }
                }
                if drive.abandoned() && !self.wait_on_abandon {
                    // The driver as it was: it returned at once, and the calls it had started ran on.
                    for item in std::mem::take(&mut pending) {
                        match item {
                            Pending::Call(call, _) => self.kafka.late.push(call),
                            Pending::Write(_) => {}
                        }
                    }
                    self.facts.push(Fact::Abandoned);
                    return Reconciled::Abandoned;
                }
                continue;
            }
            match drive.idle() {
                Idle::Done => {
                    let reset = drive.status(self.now);
                    self.write_status(&reset, drive.history());
                    return Reconciled::Done;
                }
                Idle::Stalled => return Reconciled::Stalled,
                Idle::Abandoned => {
                    self.facts.push(Fact::Abandoned);
                    return Reconciled::Abandoned;
                }
                Idle::Waiting(_) => {
                    let reset = drive.status(self.now);
                    self.write_status(&reset, drive.history());
                    return Reconciled::Waiting;
                }
                Idle::Members => {
                    let reset = drive.status(self.now);
                    self.write_status(&reset, drive.history());
                    return Reconciled::Members;
                }
                Idle::Sleep(at) => {
                    // Aimed at the settle: what the test armed happens while a group waits to be
                    // verified.
                    self.while_settling(&settling_now(&drive));
                    self.sleep_until(at);
                    if let Some((n, ask)) = self.replace.take() {
                        self.write_request(n, ask);
                    }
                    // A newer request supersedes this one: stop, the next reconcile takes it.
                    if self.kube.request.as_deref() != Some(drive.annotation()) {
                        let reset = drive.status(self.now);
                        self.write_status(&reset, drive.history());
                        return Reconciled::Superseded;
                    }
                    drive.tick(self.now);
                }
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
    fn complete(&mut self, id: &str, drive: &Drive, item: Pending) -> Done {
        match item {
            Pending::Call(call, conn) => {
                if let KafkaCall::Read(target) = &call
                    && let Some(group) = Streamlet::of_group(&target.group)
                {
                    // Which read it is, only to tell the two apart in the log (the invariants treat
                    // both as reads of the group).
                    let verifying = match drive.machine().state() {
                        State::Resetting(r) => {
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
