//! The simulated operator: one reconcile of the resource's reset request, step for step as
//! `operator/src/reset.rs` (`drive`) and the controller around it do it, against the simulated world.
//!
//! Each call is also an operator restart: the machine is rebuilt from durable state (ledger records
//! merged with the records in `status.reset`), and nothing the driver held survives the call. The
//! status the reconcile computes is written where the operator writes it: with each persisted intent,
//! and once at the end; a crash loses whatever was not written.

use flow_core::names::GroupId;
use flow_core::request::ResetRequest;
use flow_core::reset::{
    Effect, GroupPhase, Input, ResetMachine, State, history, malformed_event, merge_records, records_from_status,
    superseded_event,
};
use flow_core::resource::{ResetHistoryEntry, ResetStatus};

use crate::world::{Fact, Streamlet, World};

/// Most effects one reconcile may carry out before the drive is declared stuck. The machine's
/// retries are bounded (`MAX_ATTEMPTS` per group), so a real drive stays far below this.
pub const MAX_EFFECTS: usize = 1_000;

/// How a reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// No request annotation: nothing to do.
    NoRequest,
    /// The annotation does not parse: refused (event, status), machine never built.
    Malformed,
    /// The request's id is the done id: nothing happens.
    AlreadyDone,
    /// A target still runs: look again later.
    Waiting,
    /// The annotation changed during a retry's sleep: this drive stops, the next takes the new one.
    Superseded,
    /// The machine reached `Done` (refused, or every group finished).
    Done,
    /// The machine stayed `Resetting` with nothing scheduled (never expected).
    Stalled,
    /// The operator crashed after carrying out `effects` effects.
    Crashed {
        /// Effects carried out before the crash.
        effects: usize,
    },
}

/// The groups of the machine that wait out their settle before their second read.
fn settling_now(machine: &ResetMachine) -> Vec<Streamlet> {
    match machine.state() {
        State::Resetting(r) => r
            .groups
            .iter()
            .filter(|(_, (_, p))| matches!(p, GroupPhase::Verifying { read_at: Some(_), .. }))
            .filter_map(|(g, _)| Streamlet::of_group(g))
            .collect(),
        _ => vec![],
    }
}

/// The part of the status a reconcile computes (`status.reset` and `status.resetHistory`).
struct Status {
    reset: Option<ResetStatus>,
    history: Vec<ResetHistoryEntry>,
}

impl World {
    fn write_status(&mut self, status: &Status) {
        self.kube.status_reset.clone_from(&status.reset);
        self.kube.status_history.clone_from(&status.history);
        // An intent is durable from the first status write that carries it, which can come before
        // the group's own `PersistIntent` (another group's write includes it).
        if let Some(reset) = &status.reset {
            for g in
                reset.groups.iter().filter(|g| matches!(g.outcome.as_str(), "Committing" | "Settling" | "Verifying"))
            {
                if let Some(group) = Streamlet::of_group(&GroupId::from_raw(&g.group)) {
                    self.facts.push(Fact::Intent { id: reset.id.clone(), group });
                }
            }
        }
    }

    /// One reconcile; the operator crashes after its `crash_after`-th effect when given.
    ///
    /// # Panics
    /// When the drive carries out more than [`MAX_EFFECTS`] effects (a drive that does not end).
    pub fn reconcile(&mut self, crash_after: Option<u8>) -> Reconciled {
        // The controller's requeue: time passes between reconciles.
        self.pass_time();
        // The fresh read of the resource.
        let Some(raw) = self.kube.request.clone() else {
            return Reconciled::NoRequest;
        };
        let done = self.kube.done.clone();
        let previous = self.kube.status_reset.clone();
        let old_history = self.kube.status_history.clone();
        let mut status = Status { reset: previous.clone(), history: old_history.clone() };

        let request = match ResetRequest::parse(&raw) {
            Ok(r) => r,
            Err(why) => {
                self.record_event(&malformed_event(&raw, &why), None);
                status.history = history(&old_history, previous.as_ref(), "");
                status.reset = Some(ResetStatus {
                    id: String::new(),
                    phase: "Refused".into(),
                    detail: why.to_string(),
                    ..Default::default()
                });
                self.write_status(&status);
                return Reconciled::Malformed;
            }
        };
        let id = request.id.clone();
        if let Some(event) = superseded_event(previous.as_ref(), &id) {
            self.record_event(&event, Some(id.clone()));
        }
        status.history = history(&old_history, previous.as_ref(), &id);
        // The fresh read holds the status the finishing reconcile wrote.
        if done.as_deref() == Some(id.as_str())
            && let Some(kept) =
                previous.as_ref().filter(|p| p.id == id && matches!(p.phase.as_str(), "Done" | "Refused"))
        {
            status.reset = Some(kept.clone());
            self.write_status(&status);
            return Reconciled::AlreadyDone;
        }

        let from_status = previous.as_ref().filter(|r| r.id == id).map(records_from_status).unwrap_or_default();
        let records = merge_records(self.ledger.records(&id), from_status);
        let mut machine = ResetMachine::new(request, done.as_deref(), records).with_settle(self.settle);
        if matches!(machine.state(), State::Done(_)) {
            // Done, but the status missed the final write: rebuilt from the records, nothing redone.
            status.reset = Some(machine.status());
            self.write_status(&status);
            return Reconciled::AlreadyDone;
        }
        machine.handle(Input::Observed { spec: self.kube.spec(), pods: self.kube.pod_counts() }, self.now);

        let crash_after = crash_after.map(usize::from);
        let mut carried = 0usize;
        loop {
            while let Some(effect) = machine.poll_effect() {
                carried += 1;
                assert!(carried <= MAX_EFFECTS, "the drive of request {id} did not end after {MAX_EFFECTS} effects");
                let input = self.carry_out(&id, &machine, &mut status, effect);
                if crash_after == Some(carried) {
                    // The process dies here: the result is never fed back, the status not written.
                    self.facts.push(Fact::Crash { effects: carried });
                    return Reconciled::Crashed { effects: carried };
                }
                if let Some(input) = input {
                    machine.handle(input, self.now);
                }
            }
            match machine.state() {
                State::Resetting(_) => match machine.poll_timeout() {
                    Some(at) => {
                        // Aimed at the settle: what the test armed happens while a group waits to be
                        // read again.
                        self.while_settling(&settling_now(&machine));
                        self.sleep_until(at);
                        // A newer request supersedes this one: stop, the next reconcile takes it.
                        if self.kube.request.as_deref() != Some(raw.as_str()) {
                            status.reset = Some(machine.status());
                            self.write_status(&status);
                            return Reconciled::Superseded;
                        }
                        machine.handle(Input::Tick, self.now);
                    }
                    None => break,
                },
                State::Waiting(_) => {
                    status.reset = Some(machine.status());
                    self.write_status(&status);
                    return Reconciled::Waiting;
                }
                State::Requested(_) | State::Done(_) => break,
            }
        }
        status.reset = Some(machine.status());
        self.write_status(&status);
        if matches!(machine.state(), State::Done(_)) { Reconciled::Done } else { Reconciled::Stalled }
    }

    /// Carries out one effect as the operator does; returns the input to feed back, if any.
    fn carry_out(&mut self, id: &str, machine: &ResetMachine, status: &mut Status, effect: Effect) -> Option<Input> {
        match effect {
            Effect::Record(event) => {
                self.record_event(&event, Some(id.to_string()));
                None
            }
            Effect::InspectGroup(target) => {
                let result = self.kafka_inspect(&target);
                Some(Input::Inspected { group: target.group, result })
            }
            Effect::PersistIntent { id, group, intent } => {
                self.ledger.put_intent(&id, &group, &intent);
                if let Some(group) = Streamlet::of_group(&group) {
                    self.facts.push(Fact::Intent { id, group });
                }
                status.reset = Some(machine.status());
                self.write_status(status);
                None
            }
            Effect::Fence { target, offsets, metadata } => {
                // The adapter makes no call when the group has no committed offset.
                let result = if offsets.is_empty() { Ok(()) } else { self.kafka_commit(&target, &offsets, &metadata) };
                Some(Input::Fenced { group: target.group, result })
            }
            Effect::CommitOffsets { target, offsets, metadata } => {
                let partitions: Vec<i32> = offsets.keys().copied().collect();
                let result = self
                    .kafka_commit(&target, &offsets, &metadata)
                    .and_then(|()| self.kafka_committed(&target, &partitions));
                Some(Input::Committed { group: target.group, result })
            }
            Effect::ReadCommitted(target) => {
                // Which read it is, only to tell the two apart in the log (the invariants treat both
                // as reads of the group).
                let verifying = match machine.state() {
                    State::Resetting(r) => {
                        matches!(r.groups.get(&target.group), Some((_, GroupPhase::Verifying { .. })))
                    }
                    _ => false,
                };
                if let Some(group) = Streamlet::of_group(&target.group) {
                    self.facts.push(if verifying { Fact::Verify { group } } else { Fact::Settle { group } });
                }
                let result = self.kafka_read(&target);
                Some(Input::Read { group: target.group, result })
            }
            Effect::PersistOutcome { id, group, outcome } => {
                self.ledger.put_outcome(&id, &group, &outcome);
                if self.outcome_in_status {
                    status.reset = Some(machine.status());
                    self.write_status(status);
                }
                if let Some(group) = Streamlet::of_group(&group) {
                    self.facts.push(Fact::Outcome { id, group });
                }
                None
            }
            Effect::WriteDone { id } => {
                self.write_done(&id);
                None
            }
        }
    }
}
