//! The simulated world: Kafka, Kubernetes, the ledger, a clock, and the log of everything that
//! happened in it ([`Fact`]), which the invariants read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use flow_core::events::Event;
use flow_core::names::GroupId;
use flow_core::request::ResetRequest;
use flow_core::reset::{
    Committed, DEFAULT_SETTLE, GroupProgress, Input, Inspection, KafkaCall, KafkaFailure, LedgerEntry, Pins, Position,
    Positions, ProgressWrite, Timestamp, WAIT_RECHECK, fence_marker, reset_marker,
};
use flow_core::resource::{AnkkaFlowSpec, ResetHistoryEntry, ResetStatus, StreamletSpec, TopicSpec};
use flow_core::targets::InletTarget;
use flow_core::tenancy::Verdict;

mod facts;
mod model;
mod state;

pub use facts::*;
pub use model::*;
pub use state::*;

/// Initial contents of one topic and its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInit {
    /// Per partition: log start, high watermark, the group's committed offset.
    pub partitions: Vec<(i64, i64, Option<i64>)>,
}

/// The initial world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init {
    /// Per streamlet: its topic and group.
    pub topics: BTreeMap<Streamlet, TopicInit>,
    /// Streamlets running at the start (replicas 1, one pod).
    pub running: BTreeSet<Streamlet>,
}

/// The whole simulated world. Everything the driver keeps in memory lives in [`crate::driver`]
/// and is dropped at the end of each reconcile; everything here survives operator restarts.
#[derive(Clone, Debug)]
pub struct World {
    /// The simulated clock.
    pub now: Timestamp,
    /// Kafka.
    pub kafka: Kafka,
    /// Kubernetes.
    pub kube: Kube,
    /// The operator's ledger.
    pub ledger: Ledger,
    /// Every well-formed request ever written, by id.
    pub requests: BTreeMap<String, Ask>,
    /// Everything that happened, in order.
    pub facts: Vec<Fact>,
    /// On (the operator): a status write carries outcomes as well as intents. Off: the operator as
    /// it was, whose status writes carried only intents
    /// ([`crate::invariants::KnownIssue::OutcomeOnlyInLedger`]).
    pub outcome_in_status: bool,
    /// On (the operator): a drive that stops early waits for the Kafka calls it started. Off: the
    /// driver as it was, which returned at once and left them running ([`World::land_late_calls`]).
    pub wait_on_abandon: bool,
    /// On: the status keeps a summary of every group, without its offsets per partition, as it does
    /// for a group of more than `flow_core::reset::LISTED_OFFSETS` partitions; a lost ledger then
    /// leaves only the summaries and Kafka's markers to recover from.
    pub summaries: bool,
    /// The operator's settle delay (`FLOW_RESET_SETTLE_SECONDS`), given to the machine it builds.
    pub settle: Duration,
    /// The operator process that runs now.
    pub process: Process,
    /// A request to write while the next reconcile first sleeps (`flow reset --replace` while a
    /// group waits for its retry or its settle): its number and what it asks. The test writes it
    /// after the reconcile when the reconcile never slept.
    pub replace: Option<(u64, Ask)>,
    /// Added to each group's lane in the next drive (modulo 16, the operator's lanes per
    /// connection): the operator promises a group no lane from one drive to the next (a request of
    /// other groups, the clients the pool closed), so a history may give it any.
    pub lane_shift: usize,
    /// On (the operator): a group whose write Kafka has not answered is pinned to that write's
    /// connection (`flow_core::reset::Pins`). Off: the operator as it was, whose calls of a group
    /// went over its lane of the request at hand, whatever connection an unanswered write took.
    pub pin_unanswered: bool,
    /// What the shared-group rule says of the request's groups (another resource maps to them on
    /// the same cluster, or on one that cannot be told apart yet); `None`: nothing holds it back.
    pub shared: Option<Verdict>,
    /// On: the operator's cache of the resource is behind a broken watch and shows no request.
    pub stale_cache: bool,
}

impl World {
    /// A world with no request, from `init`.
    pub fn new(init: &Init) -> World {
        let mut kafka = Kafka::default();
        for (s, t) in &init.topics {
            let mut logs = BTreeMap::new();
            let mut committed = BTreeMap::new();
            for (p, (start, high, c)) in (0..).zip(&t.partitions) {
                logs.insert(p, PartitionLog { log_start: *start, high: *high });
                if let Some(o) = c {
                    committed.insert(p, Position { offset: *o, metadata: String::new() });
                }
            }
            kafka.logs.insert(*s, logs);
            kafka.committed.insert(*s, committed);
        }
        let mut kube = Kube { uid: object_uid(0), ..Kube::default() };
        for s in Streamlet::ALL {
            let on = init.running.contains(&s);
            kube.replicas.insert(s, i32::from(on));
            kube.pods.insert(s, u32::from(on));
        }
        World {
            now: START,
            kafka,
            kube,
            ledger: Ledger::default(),
            requests: BTreeMap::new(),
            facts: vec![],
            outcome_in_status: true,
            wait_on_abandon: true,
            summaries: false,
            settle: DEFAULT_SETTLE,
            process: Process::default(),
            replace: None,
            lane_shift: 0,
            pin_unanswered: true,
            shared: None,
            stale_cache: false,
        }
    }

    // ---- Transitions of the world (the test's transitions call these) ----

    /// Writes request `n` (a fresh id) naming `ask`; returns its id.
    pub fn write_request(&mut self, n: u64, ask: Ask) -> String {
        let id = request_id(n);
        let annotation = ResetRequest::new(id.clone(), ask.names()).to_annotation();
        self.requests.insert(id.clone(), ask);
        self.kube.request = Some(annotation);
        id
    }

    /// Writes a request annotation that does not parse.
    pub fn write_malformed(&mut self, kind: usize) {
        self.kube.request = Some(MALFORMED[kind % MALFORMED.len()].to_string());
    }

    /// Sets replicas to 1; its pod starts. Its consumer is not counted as a member between reads,
    /// so the machine's own Kubernetes check is what keeps it from committing while it runs.
    pub fn start(&mut self, s: Streamlet) {
        self.kube.replicas.insert(s, 1);
        self.kube.pods.insert(s, 1);
    }

    /// Sets replicas to 0; the pod goes, or lingers (Terminating) when `linger`.
    pub fn stop(&mut self, s: Streamlet, linger: bool) {
        self.kube.replicas.insert(s, 0);
        if !linger {
            self.kube.pods.insert(s, 0);
        }
    }

    /// The running streamlet's consumer reads everything and commits each partition's high watermark
    /// with empty metadata (the stand-in streamlet).
    pub fn consumer_reads_all(&mut self, s: Streamlet) {
        assert!(self.kube.runs(s), "the model lets a consumer read only while its streamlet runs");
        self.carry_out_orphans();
        let offsets = self.kafka.logs[&s].iter().map(|(p, l)| (*p, l.high)).collect();
        self.apply_commit(s, Committer::Consumer, &offsets, "");
    }

    /// A consumer that is no member of the group (a streamlet pod that is gone but still closing, or
    /// a consumer outside Kubernetes between two polls) commits, without joining, the high watermark of
    /// every partition (where a consumer that had read everything stands), with empty metadata.
    pub fn stray_commit(&mut self, s: Streamlet) {
        self.carry_out_orphans();
        let offsets = self.kafka.logs[&s].iter().map(|(p, l)| (*p, l.high)).collect();
        self.apply_commit(s, Committer::Stray, &offsets, "");
    }

    /// A partition with [`ADDED_RECORDS`] records is added to `s`'s topic, unless it has
    /// [`MAX_PARTITIONS`] already.
    pub fn add_partition(&mut self, s: Streamlet) {
        let logs = self.kafka.logs.entry(s).or_default();
        if logs.len() >= MAX_PARTITIONS {
            return;
        }
        let partition = i32::try_from(logs.len()).unwrap_or(i32::MAX);
        logs.insert(partition, PartitionLog { log_start: 0, high: ADDED_RECORDS });
        self.facts.push(Fact::PartitionAdded { group: s, partition });
    }

    /// `what` happens at the operator's next settle of its group.
    pub fn arm(&mut self, what: During) {
        self.kafka.armed.push_back(what);
    }

    /// The operator waits out the settle of the groups of `settling`: what was armed for them
    /// happens now, in order; the rest stays armed.
    pub fn while_settling(&mut self, settling: &[Streamlet]) {
        let armed = std::mem::take(&mut self.kafka.armed);
        for what in armed {
            match what {
                During::StrayCommit(s) if settling.contains(&s) => self.stray_commit(s),
                During::AddPartition(s) if settling.contains(&s) => self.add_partition(s),
                other => self.kafka.armed.push_back(other),
            }
        }
    }

    /// A consumer outside Kubernetes joins the group.
    pub fn add_stray_member(&mut self, s: Streamlet) {
        *self.kafka.stray_members.entry(s).or_default() += 1;
    }

    /// That consumer leaves.
    pub fn remove_stray_member(&mut self, s: Streamlet) {
        let n = self.kafka.stray_members.entry(s).or_default();
        *n = n.saturating_sub(1);
    }

    /// The next `count` writes of kind `fault` fail.
    pub fn inject_kube(&mut self, fault: KubeFault, count: u8) {
        *self.kube.faults.entry(fault).or_default() += count;
    }

    /// Whether the next write of kind `fault` fails (and counts it).
    pub fn take_kube_fault(&mut self, fault: KubeFault) -> bool {
        match self.kube.faults.get_mut(&fault) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// The next `count` Kafka calls meet `fault`.
    pub fn inject(&mut self, fault: Fault, count: u8) {
        self.kafka.faults.extend(std::iter::repeat_n(fault, usize::from(count)));
    }

    /// `n` records are produced to partition `p` of `s`'s topic.
    pub fn produce(&mut self, s: Streamlet, p: i32, n: i64) {
        if let Some(l) = self.kafka.logs.get_mut(&s).and_then(|t| t.get_mut(&p)) {
            l.high += n;
        }
    }

    /// DeleteRecords moves partition `p`'s log start up by `by`, never past its high watermark.
    pub fn delete_records(&mut self, s: Streamlet, p: i32, by: i64) {
        if let Some(l) = self.kafka.logs.get_mut(&s).and_then(|t| t.get_mut(&p)) {
            l.log_start = (l.log_start + by).min(l.high);
        }
    }

    /// The ledger is lost.
    pub fn lose_ledger(&mut self) {
        self.ledger.lose();
        self.facts.push(Fact::LedgerLost);
    }

    /// The resource is deleted and created again from the same manifest, which carries the request
    /// annotation (a GitOps tool syncing it back, a backup applied again): a new uid, no done
    /// annotation, no status. Its pods and replicas stay as they are; its old events stay too.
    pub fn recreate(&mut self) {
        let n = self.facts.iter().filter(|f| matches!(f, Fact::Recreated { .. })).count() + 1;
        self.kube.uid = object_uid(n);
        self.kube.done = None;
        self.kube.status_reset = None;
        self.kube.status_history.clear();
        self.facts.push(Fact::Recreated { uid: self.kube.uid.clone() });
    }

    /// Time passes (the controller's requeue between two reconciles).
    pub fn pass_time(&mut self) {
        self.now = self.now.after(WAIT_RECHECK);
    }

    /// Sleeps until `at` (never backwards).
    pub fn sleep_until(&mut self, at: Timestamp) {
        self.now = self.now.max(at);
    }

    /// Advances the clock by `d`.
    pub fn sleep(&mut self, d: Duration) {
        self.now = self.now.after(d);
    }

    /// The request annotation's parsed id, if it parses.
    pub fn current_id(&self) -> Option<String> {
        self.kube.request.as_deref().and_then(|r| ResetRequest::parse(r).ok()).map(|r| r.id)
    }

    // ---- Kafka calls (the driver's adapter) ----

    fn members(&self, s: Streamlet) -> u32 {
        self.kafka.stray_members.get(&s).copied().unwrap_or(0)
    }

    fn take_fault(&mut self) -> Option<Fault> {
        self.carry_out_orphans();
        self.kafka.calls += 1;
        self.kafka.faults.pop_front().filter(|f| *f != Fault::Pass)
    }

    /// Whether a fault is still queued for a coming call or write.
    pub fn faults_pending(&self) -> bool {
        self.kafka.faults.iter().any(|f| *f != Fault::Pass) || self.kube.faults.values().any(|n| *n > 0)
    }

    fn applied(&self, s: Streamlet, by: Committer, offsets: &BTreeMap<i32, i64>, metadata: &str) -> AppliedCommit {
        let committed = &self.kafka.committed[&s];
        AppliedCommit {
            group: s,
            by,
            metadata: metadata.to_string(),
            offsets: offsets.clone(),
            before: offsets.keys().map(|p| (*p, committed.get(p).map(|x| x.offset))).collect(),
            running: Streamlet::ALL.into_iter().filter(|s| self.kube.runs(*s)).collect(),
            members: self.members(s),
            done: self.kube.done.clone(),
            late: false,
        }
    }

    fn apply_commit(&mut self, s: Streamlet, by: Committer, offsets: &BTreeMap<i32, i64>, metadata: &str) {
        let fact = self.applied(s, by, offsets, metadata);
        self.apply(fact);
    }

    fn apply(&mut self, fact: AppliedCommit) {
        let committed = self.kafka.committed.entry(fact.group).or_default();
        for (p, o) in &fact.offsets {
            committed.insert(*p, Position { offset: *o, metadata: fact.metadata.clone() });
        }
        self.facts.push(Fact::Commit(fact));
    }

    // ---- The broker holding calls ----

    /// The broker holds `call`, which came over `conn` (its answer will never reach the operator).
    pub fn hold(&mut self, call: KafkaCall, conn: Conn) {
        let running = Streamlet::ALL.into_iter().filter(|s| self.kube.runs(*s)).collect();
        let done = self.kube.done.clone();
        if let (KafkaCall::Fence { metadata, .. } | KafkaCall::Commit { metadata, .. }, Some(group)) =
            (&call, Streamlet::of_group(call.group()))
            && let Some(m) = marker(metadata)
        {
            self.facts.push(Fact::Held { id: m.id().to_string(), group });
        }
        self.kafka.held.push(HeldCall { conn, call, running, done, orphan: false });
    }

    /// Carries out a held call: a write is applied as Kafka applies it now (refused while the group
    /// has members), recorded with the operator's view from when it sent it; a read changes nothing.
    fn carry_out_held(&mut self, held: HeldCall) {
        let (KafkaCall::Fence { target, offsets, metadata } | KafkaCall::Commit { target, offsets, metadata }) =
            &held.call
        else {
            return;
        };
        let Ok(s) = Self::resolve(target) else { return };
        if offsets.is_empty() || self.members(s) > 0 {
            return;
        }
        let fact = AppliedCommit {
            running: held.running.clone(),
            done: held.done.clone(),
            late: true,
            ..self.applied(s, Committer::Operator, offsets, metadata)
        };
        self.apply(fact);
    }

    /// Every call held on `conn`, carried out in the order it came: what Kafka does before it
    /// answers a later call of that connection.
    pub fn carry_out_held_on(&mut self, conn: Conn) {
        let (on, rest): (Vec<HeldCall>, Vec<HeldCall>) =
            std::mem::take(&mut self.kafka.held).into_iter().partition(|h| h.conn == conn);
        self.kafka.held = rest;
        for h in on {
            self.carry_out_held(h);
        }
    }

    /// The held calls whose connection is lost, carried out: what docs/reset.md's limit takes the
    /// broker to do before it answers anything sent after the loss.
    pub fn carry_out_orphans(&mut self) {
        let (orphans, rest): (Vec<HeldCall>, Vec<HeldCall>) =
            std::mem::take(&mut self.kafka.held).into_iter().partition(|h| h.orphan);
        self.kafka.held = rest;
        for h in orphans {
            self.carry_out_held(h);
        }
    }

    /// The connections that hold calls, each once, oldest first.
    pub fn holding(&self) -> Vec<Conn> {
        let mut out: Vec<Conn> = vec![];
        for h in &self.kafka.held {
            if !out.contains(&h.conn) {
                out.push(h.conn);
            }
        }
        out
    }

    /// The broker carries out the oldest call it holds of one connection (`pick`, modulo the
    /// connections holding calls), at any moment it likes.
    pub fn broker_carries_out(&mut self, pick: u8) {
        let holding = self.holding();
        if holding.is_empty() {
            return;
        }
        self.carry_out_oldest(holding[usize::from(pick) % holding.len()]);
    }

    /// The broker carries out the oldest call it holds of `conn`.
    pub fn carry_out_oldest(&mut self, conn: Conn) {
        if let Some(i) = self.kafka.held.iter().position(|h| h.conn == conn) {
            let h = self.kafka.held.remove(i);
            self.carry_out_held(h);
        }
    }

    /// The broker restarts: what it held is lost with its process.
    pub fn restart_broker(&mut self) {
        let lost = std::mem::take(&mut self.kafka.held).len();
        self.facts.push(Fact::BrokerRestarted { lost });
    }

    /// The operator process ends: what the broker holds of it is orphaned, and the next process
    /// starts with no pins.
    pub fn end_process(&mut self) {
        for h in &mut self.kafka.held {
            h.orphan = true;
        }
        self.process = Process { epoch: self.process.epoch + 1, pins: Pins::new() };
    }

    /// The answer of `call` when it never comes: a timeout.
    pub fn no_answer(call: &KafkaCall) -> Input {
        let group = call.group().clone();
        let f = Self::timeout();
        match call {
            KafkaCall::Inspect(_) => Input::Inspected { group, result: Err(f) },
            KafkaCall::Fence { .. } => Input::Fenced { group, result: Err(f) },
            KafkaCall::Commit { .. } => Input::ReadBack { group, result: Err(f) },
            KafkaCall::Read(_) => Input::Read { group, result: Err(f) },
        }
    }

    /// Whether the next Kafka call meets [`Fault::Held`].
    pub fn next_is_held(&self) -> bool {
        self.kafka.faults.front() == Some(&Fault::Held)
    }

    fn resolve(target: &InletTarget) -> Result<Streamlet, KafkaFailure> {
        Streamlet::of_group(&target.group)
            .filter(|s| s.topic() == target.topic)
            .ok_or_else(|| KafkaFailure::unknown_topic(format!("topic '{}' does not exist", target.topic)))
    }

    fn timeout() -> KafkaFailure {
        KafkaFailure::unreachable("Local: Timed out")
    }

    fn fault_failure(fault: Fault) -> KafkaFailure {
        match fault {
            Fault::Transient | Fault::TimeoutAfterApply | Fault::Held | Fault::Pass => Self::timeout(),
            Fault::Final => KafkaFailure::authorization("Broker: Group authorization failed"),
        }
    }

    /// Describe the group, list the topic's log start offsets, read the committed offsets.
    pub fn kafka_inspect(&mut self, target: &InletTarget) -> Result<Inspection, KafkaFailure> {
        let s = Self::resolve(target)?;
        if let Some(f) = self.take_fault() {
            return Err(Self::fault_failure(f));
        }
        let members = self.members(s);
        let committed = &self.kafka.committed[&s];
        let state = if members > 0 {
            "Stable"
        } else if committed.is_empty() {
            "Dead"
        } else {
            "Empty"
        };
        let logs = &self.kafka.logs[&s];
        Ok(Inspection {
            state: state.into(),
            members,
            log_start: logs.iter().map(|(p, l)| (*p, l.log_start)).collect(),
            committed: logs.keys().map(|p| (*p, committed.get(p).map(|x| x.offset))).collect(),
            high_watermark: logs.iter().map(|(p, l)| (*p, l.high)).collect(),
            at_time: BTreeMap::new(),
            topic_configs: BTreeMap::new(),
            member_names: vec![],
        })
    }

    /// A join-less commit: refused with UNKNOWN_MEMBER_ID (transient) while the group has members.
    pub fn kafka_commit(
        &mut self,
        target: &InletTarget,
        offsets: &BTreeMap<i32, i64>,
        metadata: &str,
    ) -> Result<(), KafkaFailure> {
        let s = Self::resolve(target)?;
        let fault = self.take_fault();
        if let Some(f @ (Fault::Transient | Fault::Final | Fault::Held)) = fault {
            return Err(Self::fault_failure(f));
        }
        let members = self.members(s);
        if members > 0 {
            return Err(KafkaFailure::members_present(
                "Kafka refused the commit because consumers are still active in the group (Broker: Unknown member: \
                 UNKNOWN_MEMBER_ID)",
            ));
        }
        self.apply_commit(s, Committer::Operator, offsets, metadata);
        match fault {
            Some(Fault::TimeoutAfterApply) => Err(Self::timeout()),
            _ => Ok(()),
        }
    }

    /// Committed offsets of the group on `partitions`.
    pub fn kafka_committed(&self, target: &InletTarget, partitions: &[i32]) -> Result<Committed, KafkaFailure> {
        let s = Self::resolve(target)?;
        let committed = &self.kafka.committed[&s];
        Ok(partitions.iter().map(|p| (*p, committed.get(p).map(|x| x.offset))).collect())
    }

    /// Committed positions, with metadata, on every partition of the topic.
    pub fn kafka_read(&mut self, target: &InletTarget) -> Result<Positions, KafkaFailure> {
        let s = Self::resolve(target)?;
        if let Some(f) = self.take_fault() {
            return Err(Self::fault_failure(f));
        }
        let committed = &self.kafka.committed[&s];
        Ok(self.kafka.logs[&s].keys().map(|p| (*p, committed.get(p).cloned())).collect())
    }

    // ---- Kubernetes calls ----

    /// Records an event; an existing name is refused (409) and nothing is added.
    pub fn record_event(&mut self, event: &Event, request: Option<String>) {
        let name = event.name_for(RESOURCE);
        let created = self.kube.event_names.insert(name.clone());
        self.facts.push(Fact::Event(EventRecord {
            name,
            reason: event.reason.clone(),
            key: event.key.clone(),
            note: event.note.clone(),
            request,
            created,
        }));
    }

    /// Writes the done annotation.
    pub fn write_done(&mut self, id: &str) {
        self.kube.status_at_done = self.kube.status_reset.clone();
        self.kube.done = Some(id.to_string());
        self.facts.push(Fact::Done { id: id.to_string() });
    }
}

/// What an operator commit's metadata says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    /// [`fence_marker`] of the request.
    Fence(String),
    /// [`reset_marker`] of the request.
    Reset(String),
}

impl Marker {
    /// The request id.
    pub fn id(&self) -> &str {
        match self {
            Marker::Fence(id) | Marker::Reset(id) => id,
        }
    }
}

/// Reads a commit's metadata back into a marker (checked against core's own formatting).
pub fn marker(metadata: &str) -> Option<Marker> {
    let rest = metadata.strip_prefix("ankka-flow/reset/")?;
    match rest.strip_suffix("/fence") {
        Some(id) if fence_marker(id) == metadata => Some(Marker::Fence(id.to_string())),
        Some(_) => None,
        None if reset_marker(rest) == metadata => Some(Marker::Reset(rest.to_string())),
        None => None,
    }
}
