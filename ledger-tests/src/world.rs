//! The simulated world: Kafka, Kubernetes, the ledger, a clock, and the log of everything that
//! happened in it ([`Fact`]), which the invariants read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use flow_core::events::Event;
use flow_core::names::GroupId;
use flow_core::request::ResetRequest;
use flow_core::reset::{
    Committed, DEFAULT_SETTLE, GroupProgress, Inspection, KafkaCall, KafkaFailure, Position, Positions, ProgressWrite,
    Timestamp, WAIT_RECHECK,
};
use flow_core::resource::{AnkkaFlowSpec, ResetHistoryEntry, ResetStatus, StreamletSpec, TopicSpec};
use flow_core::targets::InletTarget;

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

/// One partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionLog {
    /// Log start offset (moves up with DeleteRecords).
    pub log_start: i64,
    /// High watermark (moves up as records are produced).
    pub high: i64,
}

/// Simulated Kafka: topics, committed positions with metadata, stray members, a fault queue.
#[derive(Clone, Debug, Default)]
pub struct Kafka {
    /// Per topic (by the streamlet reading it), per partition.
    pub logs: BTreeMap<Streamlet, BTreeMap<i32, PartitionLog>>,
    /// Per group (by streamlet), committed positions; a partition without one is absent.
    pub committed: BTreeMap<Streamlet, BTreeMap<i32, Position>>,
    /// Members of each group that no pod accounts for (a consumer outside Kubernetes).
    pub stray_members: BTreeMap<Streamlet, u32>,
    /// Faults met by the next Kafka calls, in order.
    pub faults: VecDeque<Fault>,
    /// What happens at the operator's next settle of the group it names, in order.
    pub armed: VecDeque<During>,
    /// Kafka calls made by the operator so far.
    pub calls: u64,
    /// Calls an abandoned drive left running (only when [`World::wait_on_abandon`] is off).
    pub late: Vec<KafkaCall>,
}

/// Simulated Kubernetes: the resource's replicas and pods, annotations, status and events.
#[derive(Clone, Debug, Default)]
pub struct Kube {
    /// `spec.streamlets[].replicas` of router and sink (`source` always runs with 1).
    pub replicas: BTreeMap<Streamlet, i32>,
    /// Pods that can still run, per streamlet.
    pub pods: BTreeMap<Streamlet, u32>,
    /// The request annotation's text.
    pub request: Option<String>,
    /// The done annotation.
    pub done: Option<String>,
    /// `status.reset`.
    pub status_reset: Option<ResetStatus>,
    /// `status.resetHistory`.
    pub status_history: Vec<ResetHistoryEntry>,
    /// Names of the Event objects that exist (the API server refuses a second one: 409).
    pub event_names: BTreeSet<String>,
    /// How many of the operator's next writes of each kind fail.
    pub faults: BTreeMap<KubeFault, u8>,
}

impl Kube {
    /// Whether `s` counts as running for a reset: replicas other than 0, or a pod.
    pub fn runs(&self, s: Streamlet) -> bool {
        self.replicas.get(&s).copied().unwrap_or(0) != 0 || self.pods.get(&s).copied().unwrap_or(0) > 0
    }

    /// The resource's spec, built like core's `cart` test helper: `sink` and `router` with one
    /// inlet each, reading different topics, and `source` without inlets.
    pub fn spec(&self) -> AnkkaFlowSpec {
        let replicas = |s: Streamlet| self.replicas.get(&s).copied().unwrap_or(0);
        AnkkaFlowSpec {
            pipeline: PIPELINE.into(),
            version: None,
            protocol_version: Some("1.0".into()),
            on_delete: None,
            streamlets: vec![
                streamlet("sink", replicas(Streamlet::Sink), Some("valid-carts")),
                streamlet("router", replicas(Streamlet::Router), Some("cart-events")),
                streamlet("source", 1, None),
            ],
            topics: Streamlet::ALL.into_iter().map(|s| topic(s.topic_id(), s.topic())).collect(),
        }
    }

    /// Pods per streamlet label value, as the operator counts them (`source` runs one pod).
    pub fn pod_counts(&self) -> BTreeMap<String, u32> {
        let mut pods: BTreeMap<String, u32> =
            self.pods.iter().filter(|(_, n)| **n > 0).map(|(s, n)| (s.name().to_string(), *n)).collect();
        pods.insert("source".into(), 1);
        pods
    }
}

fn streamlet(name: &str, replicas: i32, inlet: Option<&str>) -> StreamletSpec {
    StreamletSpec {
        name: name.into(),
        image: format!("registry.example.com/{name}:1"),
        replicas,
        config: Default::default(),
        inlets: inlet.map(|t| ("in".to_string(), t.to_string())).into_iter().collect(),
        outlets: Default::default(),
        descriptor: Default::default(),
        builtin: false,
    }
}

fn topic(id: &str, name: &str) -> TopicSpec {
    TopicSpec {
        id: id.into(),
        name: name.into(),
        managed: false,
        cluster: None,
        bootstrap_servers: Some("127.0.0.1:19092".into()),
        partitions: None,
        replicas: None,
        connection_config: Default::default(),
        producer_config: Default::default(),
        consumer_config: Default::default(),
        topic_config: Default::default(),
        batch: None,
    }
}

/// Simulated ledger: records keyed by request id and group. It can be lost as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    progress: BTreeMap<(String, GroupId), GroupProgress>,
}

impl Ledger {
    /// The progress of every group of request `id`.
    pub fn progress(&self, id: &str) -> Vec<GroupProgress> {
        self.progress.iter().filter(|((i, _), _)| i == id).map(|(_, r)| r.clone()).collect()
    }

    /// Applies `writes` to the progress of request `id`.
    pub fn put(&mut self, id: &str, writes: &[ProgressWrite]) {
        for w in writes {
            let group = match w {
                ProgressWrite::Intent(g, _) | ProgressWrite::Outcome(g, _) => g,
            };
            let entry = self.progress.entry((id.to_string(), group.clone())).or_insert_with(|| GroupProgress {
                group: group.clone(),
                intent: None,
                outcome: None,
            });
            match w {
                ProgressWrite::Intent(_, intent) => entry.intent = Some(intent.clone()),
                ProgressWrite::Outcome(_, outcome) => entry.outcome = Some(outcome.clone()),
            }
        }
    }

    /// The operator's volume is lost or replaced.
    pub fn lose(&mut self) {
        self.progress.clear();
    }
}

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
    /// The operator crashed after starting `effects` pieces of work of a reconcile.
    Crash {
        /// Effects carried out.
        effects: usize,
    },
}

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
        let mut kube = Kube::default();
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
        let offsets = self.kafka.logs[&s].iter().map(|(p, l)| (*p, l.high)).collect();
        self.apply_commit(s, Committer::Consumer, &offsets, "");
    }

    /// A consumer that is no member of the group (a streamlet pod that is gone but still closing, or
    /// a consumer outside Kubernetes between two polls) commits, without joining, the high watermark of
    /// every partition (where a consumer that had read everything stands), with empty metadata.
    pub fn stray_commit(&mut self, s: Streamlet) {
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
        self.kafka.calls += 1;
        self.kafka.faults.pop_front().filter(|f| *f != Fault::Pass)
    }

    /// Whether a fault is still queued for a coming call or write.
    pub fn faults_pending(&self) -> bool {
        self.kafka.faults.iter().any(|f| *f != Fault::Pass) || self.kube.faults.values().any(|n| *n > 0)
    }

    fn applied(&mut self, s: Streamlet, by: Committer, offsets: &BTreeMap<i32, i64>, metadata: &str) -> AppliedCommit {
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
        }
    }

    fn apply_commit(&mut self, s: Streamlet, by: Committer, offsets: &BTreeMap<i32, i64>, metadata: &str) {
        let fact = self.applied(s, by, offsets, metadata);
        let committed = self.kafka.committed.entry(s).or_default();
        for (p, o) in offsets {
            committed.insert(*p, Position { offset: *o, metadata: metadata.to_string() });
        }
        self.facts.push(Fact::Commit(fact));
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
            Fault::Transient | Fault::TimeoutAfterApply | Fault::Pass => Self::timeout(),
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
        if let Some(f @ (Fault::Transient | Fault::Final)) = fault {
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
        self.kube.done = Some(id.to_string());
        self.facts.push(Fact::Done { id: id.to_string() });
    }
}
