//! The state of the simulated Kafka (per group and topic), Kubernetes (the `cart` resource, its pods,
//! annotations, status and events) and ledger.

use super::*;

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
    /// Calls the broker received and holds without having carried them out (frozen, overloaded, its
    /// socket buffer full), in the order they arrived: the operator's wait for their answer ended
    /// ([`Fault::Held`]), and the broker carries each out at some later moment, or loses it when it
    /// restarts. Kafka's one guarantee holds: the calls of one connection are carried out in the
    /// order they were sent, each before any later call of its connection is answered.
    pub held: Vec<HeldCall>,
}

/// One of the operator's connections to the broker: a lane's client of one operator process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Conn {
    /// The operator process (a new one after each crash).
    pub process: u32,
    /// The lane (`operator/src/reset.rs`: a group's place among its request's groups).
    pub lane: usize,
}

/// A call the broker holds ([`Kafka::held`]).
#[derive(Clone, Debug)]
pub struct HeldCall {
    /// The connection it came over.
    pub conn: Conn,
    /// The call.
    pub call: KafkaCall,
    /// Streamlets that counted as running when the operator sent it.
    pub running: BTreeSet<Streamlet>,
    /// The done annotation when the operator sent it.
    pub done: Option<String>,
    /// Its connection is lost while the broker still holds it (the operator process that sent it
    /// ended): Kafka no longer orders it against anything. The model takes docs/reset.md's limit as
    /// given: the broker carries it out before it answers any call sent after the loss.
    pub orphan: bool,
}

/// What the operator process keeps in memory across its reconciles, lost when it crashes: which
/// process it is, and its pins (`flow_core::reset::Pins`, as `operator/src/reset.rs` keeps them).
#[derive(Clone, Debug, Default)]
pub struct Process {
    /// Its number: each crash starts the next.
    pub epoch: u32,
    /// The connection of each group whose latest write Kafka has not answered.
    pub pins: Pins<GroupId, Conn>,
}

/// Simulated Kubernetes: the resource's replicas and pods, annotations, status and events.
#[derive(Clone, Debug, Default)]
pub struct Kube {
    /// The resource's `metadata.uid`: a new one each time it is created again.
    pub uid: String,
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
    /// `status.reset` as it stood when the done annotation was last written.
    pub status_at_done: Option<ResetStatus>,
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
            pod: None,
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
        pod: None,
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

/// Simulated ledger: each group's progress, keyed by request id, the uid of the object it was
/// recorded for, and group. It can be lost as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    progress: BTreeMap<(String, String, GroupId), GroupProgress>,
}

impl Ledger {
    /// The entries of request `id`, for whichever object they were recorded.
    pub fn progress(&self, id: &str) -> Vec<LedgerEntry> {
        self.progress
            .iter()
            .filter(|((i, _, _), _)| i == id)
            .map(|((_, uid, _), p)| LedgerEntry::of(uid, p.clone()))
            .collect()
    }

    /// Applies `writes` to the progress of request `id` of the object of `uid`.
    pub fn put(&mut self, id: &str, uid: &str, writes: &[ProgressWrite]) {
        for w in writes {
            let group = match w {
                ProgressWrite::Intent(g, _) | ProgressWrite::Outcome(g, _) => g,
            };
            let key = (id.to_string(), uid.to_string(), group.clone());
            let entry = self.progress.entry(key).or_insert_with(|| GroupProgress {
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
