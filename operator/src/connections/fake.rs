//! An in-memory Kafka for the mocked-API tests of the reconcile: topics by name per bootstrap
//! servers, with each partition's log start offset and high watermark; consumer groups with their
//! committed offsets (and commit metadata) and their members; faults a test injects into the next
//! calls (a failure, a late answer, no answer at all); and a log of every call made.
//!
//! It stands in for the two clients the reconcile uses: topic administration (`describe`, `create`,
//! `delete`, through [`super::Kafka::Fake`]) and a reset's group calls ([`ResetCalls`], through
//! [`FakeKafka::client`]). It is our own rather than a library's: no maintained crate models Kafka's
//! admin and offset APIs in memory, and a reset needs only the few facts above. Its answers follow
//! the real client's: a commit into a group with members is refused as Kafka refuses a commit
//! without a generation (UNKNOWN_MEMBER_ID, see `flow_adapters::kafka::classify`), a missing topic
//! is final, and a call Kafka never answers fails as unreachable after the request deadline.
//!
//! Lives in the operator's tests, not in `flow-adapters` behind a feature: the operator's reconcile
//! tests are its only users (the ledger tests model Kafka in their own world), and a module that
//! exists only under `cfg(test)` can never reach a release build.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_adapters::kafka::{Call, ResetCalls, TopicRead};
use flow_adapters::topics::{Created, Deleted};
use flow_core::connection::KafkaConnection;
use flow_core::render::topics::{KafkaTopic, LiveTopic, TopicCreation};
use flow_core::reset::{Committed, FailureKind, Inspection, KafkaFailure, Position, Positions};
use flow_core::targets::InletTarget;

/// The stand-in cluster (several, told apart by their bootstrap servers).
#[derive(Default)]
pub struct FakeKafka {
    /// Existing topics, by (bootstrap servers, name).
    pub topics: Mutex<BTreeMap<(String, String), LiveTopic>>,
    /// Every call, as `describe <servers> <names>`, `create <servers> <name>`, `delete <servers>
    /// <names>`, and for a group `inspect <group>`, `commit <group> <p>=<offset>,.. <metadata>`,
    /// `read-back <group>`, `read <group>`.
    pub calls: Mutex<Vec<String>>,
    /// Each partition's log, by (bootstrap servers, topic); a topic of `topics` without one has
    /// empty logs (both ends at 0).
    logs: Mutex<BTreeMap<(String, String), BTreeMap<i32, Log>>>,
    /// Consumer groups, by (bootstrap servers, group).
    groups: Mutex<BTreeMap<(String, String), Group>>,
    /// Faults still to come, in the order they were injected.
    faults: Mutex<Vec<Injected>>,
    /// Told of each group call: see [`FakeKafka::on_call`].
    listener: Mutex<Option<Listener>>,
    /// Whether the operator process the test runs is gone (see [`FakeKafka::halt`]).
    halted: std::sync::atomic::AtomicBool,
}

type Listener = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// How long a call Kafka never answers takes to fail: the operator's default request deadline
/// (`FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS`).
pub const DEADLINE: Duration = Duration::from_secs(10);

/// One partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Log {
    /// Its log start offset.
    pub start: i64,
    /// Its high watermark.
    pub end: i64,
}

/// A consumer group as Kafka keeps it.
#[derive(Clone, Debug, Default)]
struct Group {
    /// Committed positions, by (topic, partition).
    committed: BTreeMap<(String, i32), Position>,
    /// Its members, as Kafka describes them.
    members: Vec<String>,
}

/// A group call of a reset, to inject a fault into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupCall {
    /// The inspection (describe, list offsets, committed offsets).
    Inspect,
    /// A commit: the fence or the reset's commit.
    Commit,
    /// The read-back right after a commit.
    ReadBack,
    /// The read of the committed offsets after the settle.
    Read,
}

/// What goes wrong with a call.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Kafka answers with this failure (a commit does not land).
    Fails(KafkaFailure),
    /// Kafka answers as usual, this late.
    Late(Duration),
    /// Kafka never answers: the call fails as unreachable after [`DEADLINE`]; a commit lands (at
    /// the deadline) when `lands`, as a request the broker took and whose answer was lost.
    Lost {
        /// Whether a commit lands all the same.
        lands: bool,
    },
    /// A consumer outside the operator's sight commits these offsets of the group's topic (with
    /// empty metadata) just before Kafka answers the call, which it then answers as usual.
    StrayCommit(Vec<(i32, i64)>),
}

impl Fault {
    /// An ACL denies the call (final).
    pub fn denied() -> Fault {
        Fault::Fails(KafkaFailure::authorization("Broker: Group authorization failed"))
    }

    /// The group's coordinator is moving (transient).
    pub fn coordinator_moving() -> Fault {
        Fault::Fails(KafkaFailure::unavailable("Broker: Not coordinator"))
    }
}

/// A fault waiting for its calls.
struct Injected {
    call: GroupCall,
    group: String,
    times: u32,
    fault: Fault,
}

/// The topic id the in-memory cluster gives a topic it creates under `name`.
pub fn fake_topic_id(name: &str) -> String {
    let sum: i64 = name.bytes().map(i64::from).sum();
    flow_core::render::owners::topic_id(sum, i64::try_from(name.len()).unwrap_or(0) + 1).unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeKafka {
    fn log(&self, line: String) {
        lock(&self.calls).push(line);
    }

    /// Topic `topic` on `servers`, with one partition per log (log start offset, high watermark).
    pub fn topic(&self, servers: &str, topic: &str, logs: &[(i64, i64)]) {
        let key = (servers.to_string(), topic.to_string());
        let partitions = i32::try_from(logs.len()).unwrap_or(i32::MAX);
        lock(&self.topics).entry(key.clone()).or_insert_with(|| LiveTopic {
            partitions,
            replication: 1,
            configs: BTreeMap::new(),
            topic_id: Some(fake_topic_id(topic)),
        });
        let logs = (0..).zip(logs).map(|(p, (start, end))| (p, Log { start: *start, end: *end })).collect();
        lock(&self.logs).insert(key, logs);
    }

    /// Group `group` on `servers` commits `offsets` of `topic` with `metadata`, as a consumer does.
    pub fn commit(&self, servers: &str, group: &str, topic: &str, offsets: &[(i32, i64)], metadata: &str) {
        let mut groups = lock(&self.groups);
        let g = groups.entry((servers.to_string(), group.to_string())).or_default();
        for (p, offset) in offsets {
            g.committed.insert((topic.to_string(), *p), Position { offset: *offset, metadata: metadata.to_string() });
        }
    }

    /// A consumer named `member` joins group `group` on `servers`.
    pub fn join(&self, servers: &str, group: &str, member: &str) {
        lock(&self.groups).entry((servers.to_string(), group.to_string())).or_default().members.push(member.into());
    }

    /// Every member leaves group `group` on `servers`.
    pub fn leave(&self, servers: &str, group: &str) {
        if let Some(g) = lock(&self.groups).get_mut(&(servers.to_string(), group.to_string())) {
            g.members.clear();
        }
    }

    /// What group `group` on `servers` has committed on `topic`, by partition.
    pub fn committed(&self, servers: &str, group: &str, topic: &str) -> BTreeMap<i32, Position> {
        lock(&self.groups)
            .get(&(servers.to_string(), group.to_string()))
            .map(|g| g.committed.iter().filter(|((t, _), _)| t == topic).map(|((_, p), x)| (*p, x.clone())).collect())
            .unwrap_or_default()
    }

    /// The next `times` calls `call` of group `group` meet `fault`.
    pub fn fault(&self, call: GroupCall, group: &str, times: u32, fault: Fault) {
        lock(&self.faults).push(Injected { call, group: group.to_string(), times, fault });
    }

    /// Calls `listener` with each group call as it is made (its line in [`FakeKafka::calls`], and
    /// `false`), except a commit, which it is told of once it landed (and `true`): a test traces
    /// the durable effects with it, and may stop the world there.
    pub fn on_call(&self, listener: impl Fn(&str, bool) + Send + Sync + 'static) {
        *lock(&self.listener) = Some(Arc::new(listener));
    }

    fn tell(&self, line: &str, landed: bool) {
        let listener = lock(&self.listener).clone();
        if let Some(listener) = listener {
            listener(line, landed);
        }
    }

    /// From now on, until [`FakeKafka::resume`], no call is answered and nothing lands: the
    /// operator process that made them is gone (a test stops it there to restart it).
    pub fn halt(&self) {
        self.halted.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Calls are answered again (by the operator's next process).
    pub fn resume(&self) {
        self.halted.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    fn halted(&self) -> bool {
        self.halted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A client of the reset's group calls over `conn`.
    pub fn client(kafka: &Arc<FakeKafka>, conn: &KafkaConnection) -> Arc<dyn ResetCalls> {
        Arc::new(Client { kafka: Arc::clone(kafka), servers: conn.bootstrap_servers.clone() })
    }

    /// The fault the next `call` of `group` meets, if any (taking one of its times).
    fn take_fault(&self, call: GroupCall, group: &str) -> Option<Fault> {
        let mut faults = lock(&self.faults);
        let i = faults.iter().position(|f| f.call == call && f.group == group && f.times > 0)?;
        faults[i].times -= 1;
        let fault = faults[i].fault.clone();
        if faults[i].times == 0 {
            faults.remove(i);
        }
        Some(fault)
    }

    /// The partitions of `topic` on `servers` with their logs.
    fn logs(&self, servers: &str, topic: &str) -> Result<BTreeMap<i32, Log>, KafkaFailure> {
        let key = (servers.to_string(), topic.to_string());
        if let Some(logs) = lock(&self.logs).get(&key) {
            return Ok(logs.clone());
        }
        match lock(&self.topics).get(&key) {
            Some(t) => Ok((0..t.partitions).map(|p| (p, Log { start: 0, end: 0 })).collect()),
            None => Err(KafkaFailure::unknown_topic(format!("topic '{topic}' does not exist"))),
        }
    }

    fn group(&self, servers: &str, group: &str) -> Group {
        lock(&self.groups).get(&(servers.to_string(), group.to_string())).cloned().unwrap_or_default()
    }

    fn read_topic(&self, servers: &str, topic: &str) -> Result<TopicRead, KafkaFailure> {
        let logs = self.logs(servers, topic)?;
        Ok(TopicRead {
            partitions: logs.keys().copied().collect(),
            log_start: logs.iter().map(|(p, l)| (*p, l.start)).collect(),
            high_watermark: logs.iter().map(|(p, l)| (*p, l.end)).collect(),
            at_time: BTreeMap::new(),
        })
    }

    fn inspect(&self, servers: &str, target: &InletTarget, topic: TopicRead) -> Result<Inspection, KafkaFailure> {
        let g = self.group(servers, target.group.as_str());
        let state = match (g.members.is_empty(), g.committed.is_empty()) {
            (false, _) => "Stable",
            (true, false) => "Empty",
            (true, true) => "Dead",
        };
        let position = |p: i32| g.committed.get(&(target.topic.clone(), p)).map(|x| x.offset);
        Ok(Inspection {
            state: state.into(),
            members: u32::try_from(g.members.len()).unwrap_or(u32::MAX),
            member_names: g.members.iter().take(flow_core::reset::NAMED_MEMBERS).cloned().collect(),
            committed: topic.partitions.iter().map(|p| (*p, position(*p))).collect(),
            log_start: topic.log_start,
            high_watermark: topic.high_watermark,
            at_time: topic.at_time,
            topic_configs: BTreeMap::new(),
        })
    }

    /// A commit without a generation, as Kafka takes it: refused while the group has members.
    fn write(
        &self,
        servers: &str,
        target: &InletTarget,
        offsets: &BTreeMap<i32, i64>,
        metadata: &str,
        line: &str,
    ) -> Result<(), KafkaFailure> {
        let logs = self.logs(servers, &target.topic)?;
        if let Some(p) = offsets.keys().find(|p| !logs.contains_key(p)) {
            return Err(KafkaFailure::unknown_topic(format!("partition {p}: Broker: Unknown topic or partition")));
        }
        if self.halted() {
            return Err(KafkaFailure::unreachable("the operator process is gone"));
        }
        {
            let mut groups = lock(&self.groups);
            let g = groups.entry((servers.to_string(), target.group.to_string())).or_default();
            if !g.members.is_empty() {
                return Err(KafkaFailure::new(
                    FailureKind::MembersPresent,
                    "Kafka refused the commit because consumers are still active in the group (Broker: Unknown member)",
                ));
            }
            for (p, offset) in offsets {
                g.committed
                    .insert((target.topic.clone(), *p), Position { offset: *offset, metadata: metadata.to_string() });
            }
        }
        self.tell(line, true);
        Ok(())
    }

    fn positions(&self, servers: &str, target: &InletTarget, ps: &[i32]) -> Positions {
        let g = self.group(servers, target.group.as_str());
        ps.iter().map(|p| (*p, g.committed.get(&(target.topic.clone(), *p)).cloned())).collect()
    }

    pub(super) fn describe(
        &self,
        conn: &KafkaConnection,
        wanted: BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeMap<String, KafkaTopic> {
        let names: Vec<&str> = wanted.keys().map(String::as_str).collect();
        self.log(format!("describe {} {}", conn.bootstrap_servers, names.join(",")));
        let topics = lock(&self.topics);
        wanted
            .into_iter()
            .map(|(name, keys)| {
                let state = match topics.get(&(conn.bootstrap_servers.clone(), name.clone())) {
                    None => KafkaTopic::Missing,
                    Some(t) => {
                        let mut t = t.clone();
                        t.configs.retain(|k, _| keys.contains(k));
                        KafkaTopic::Exists(t)
                    }
                };
                (name, state)
            })
            .collect()
    }

    pub(super) fn create(&self, conn: &KafkaConnection, c: &TopicCreation) -> Result<Created, KafkaFailure> {
        self.log(format!("create {} {}", conn.bootstrap_servers, c.name));
        let mut topics = lock(&self.topics);
        let key = (conn.bootstrap_servers.clone(), c.name.clone());
        if topics.contains_key(&key) {
            return Ok(Created::AlreadyExisted);
        }
        let id = fake_topic_id(&c.name);
        topics.insert(
            key,
            LiveTopic {
                partitions: c.partitions,
                replication: c.replication,
                configs: c.config.clone(),
                topic_id: Some(id.clone()),
            },
        );
        Ok(Created::Created(Some(id)))
    }

    pub(super) fn delete(
        &self,
        conn: &KafkaConnection,
        names: &[String],
    ) -> Vec<(String, Result<Deleted, KafkaFailure>)> {
        self.log(format!("delete {} {}", conn.bootstrap_servers, names.join(",")));
        let mut topics = lock(&self.topics);
        names
            .iter()
            .map(|n| {
                let gone = topics.remove(&(conn.bootstrap_servers.clone(), n.clone())).is_some();
                lock(&self.logs).remove(&(conn.bootstrap_servers.clone(), n.clone()));
                (n.clone(), Ok(if gone { Deleted::Deleted } else { Deleted::Missing }))
            })
            .collect()
    }
}

/// A client of the in-memory cluster over one connection (its bootstrap servers).
struct Client {
    kafka: Arc<FakeKafka>,
    servers: String,
}

impl Client {
    /// Runs `call` of `target`'s group as the cluster answers it now, after the fault injected
    /// for it, if any. `write` is whether the call commits (a lost commit may still land).
    fn run<T: Send + 'static>(
        self: Arc<Self>,
        kind: GroupCall,
        line: String,
        target: InletTarget,
        call: impl FnOnce(&FakeKafka, &str, &InletTarget) -> Result<T, KafkaFailure> + Send + 'static,
    ) -> Call<T> {
        Box::pin(async move {
            if self.kafka.halted() {
                std::future::pending::<()>().await;
            }
            if kind != GroupCall::Commit {
                self.kafka.tell(&line, false);
            }
            self.kafka.log(line);
            let answer = |c: Arc<Client>| call(&c.kafka, &c.servers, &target);
            match self.kafka.take_fault(kind, target.group.as_str()) {
                None => answer(self),
                Some(Fault::Fails(f)) => Err(f),
                Some(Fault::StrayCommit(offsets)) => {
                    self.kafka.commit(&self.servers, target.group.as_str(), &target.topic, &offsets, "");
                    answer(self)
                }
                Some(Fault::Late(after)) => {
                    tokio::time::sleep(after).await;
                    answer(self)
                }
                Some(Fault::Lost { lands }) => {
                    tokio::time::sleep(DEADLINE).await;
                    let group = target.group.to_string();
                    if lands && kind == GroupCall::Commit {
                        let _ = answer(self);
                    }
                    Err(KafkaFailure::unreachable(format!(
                        "no answer from Kafka about group '{group}' within {} s (Local: Timed out)",
                        DEADLINE.as_secs()
                    )))
                }
            }
        })
    }
}

impl ResetCalls for Client {
    fn read_topic(self: Arc<Self>, topic: String, _at: Option<i64>) -> Call<TopicRead> {
        Box::pin(async move {
            if self.kafka.halted() {
                std::future::pending::<()>().await;
            }
            self.kafka.read_topic(&self.servers, &topic)
        })
    }

    fn inspect(self: Arc<Self>, target: InletTarget, topic: TopicRead) -> Call<Inspection> {
        let line = format!("inspect {}", target.group);
        self.run(GroupCall::Inspect, line, target, |k, servers, t| k.inspect(servers, t, topic))
    }

    fn write(
        self: Arc<Self>,
        target: InletTarget,
        offsets: BTreeMap<i32, i64>,
        metadata: String,
    ) -> Call<std::time::Instant> {
        let listed: Vec<String> = offsets.iter().map(|(p, o)| format!("{p}={o}")).collect();
        let line = format!("commit {} {} {metadata}", target.group, listed.join(","));
        let landed = line.clone();
        self.run(GroupCall::Commit, line, target, move |k, servers, t| {
            let sent = std::time::Instant::now();
            k.write(servers, t, &offsets, &metadata, &landed).map(|()| sent)
        })
    }

    fn list_partitions(self: Arc<Self>, topic: String) -> Call<Vec<i32>> {
        Box::pin(async move {
            if self.kafka.halted() {
                std::future::pending::<()>().await;
            }
            Ok(self.kafka.logs(&self.servers, &topic)?.into_keys().collect())
        })
    }

    fn read_back(self: Arc<Self>, target: InletTarget, partitions: Vec<i32>) -> Call<Committed> {
        let line = format!("read-back {}", target.group);
        self.run(GroupCall::ReadBack, line, target, move |k, servers, t| {
            Ok(k.positions(servers, t, &partitions).into_iter().map(|(p, x)| (p, x.map(|x| x.offset))).collect())
        })
    }

    fn read_committed(self: Arc<Self>, target: InletTarget) -> Call<Positions> {
        let line = format!("read {}", target.group);
        self.run(GroupCall::Read, line, target, |k, servers, t| {
            let ps: Vec<i32> = k.logs(servers, &t.topic)?.into_keys().collect();
            Ok(k.positions(servers, t, &ps))
        })
    }
}
