//! Faults only a cluster of more than one broker shows, on the test bed's broker pair (docs/testbed.md,
//! "The broker pair"): broker 2 of the pair stops mid-reset, so the coordinator of a group it led
//! moves to broker 1, and a partition whose only replica is on broker 2 is left without a leader.
//! docs/faults.md describes both and what this test observed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flow_testbed::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::outages::PairBrokerStopped;
use crate::paused;
use crate::support::uuid;

/// The Kafka cluster name of the broker pair in blueprints and in its cluster Secret.
const CLUSTER: &str = "pair";
const SECRET: &str = "kafka-cluster-pair";
/// Records in each partition, all read and committed by each group before its reset.
const RECORDS: i64 = 10;

fn config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", kafka_pair()).set("allow.auto.create.topics", "false");
    c
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// The cluster Secret of cluster `pair`, for namespace `ns`; deleted when dropped.
struct PairSecret;

impl PairSecret {
    fn install(ns: &str) -> PairSecret {
        ensure_namespace("ankka-flow");
        kubectl_apply(&format!(
            "apiVersion: v1
kind: Secret
metadata:
  name: {SECRET}
  namespace: ankka-flow
  labels:
    flow.ankka.thinkmorestupidless.com/kafka-cluster: {CLUSTER}
  annotations:
    flow.ankka.thinkmorestupidless.com/allowed-namespaces: {ns}
stringData:
  bootstrap.servers: {}
  connection-config: |
    security.protocol=PLAINTEXT
",
            kafka_pair()
        ));
        PairSecret
    }
}

impl Drop for PairSecret {
    fn drop(&mut self) {
        let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", SECRET, "--ignore-not-found"]);
    }
}

/// Deletes `topic` on the pair if it exists, creates it with one replica per partition on the
/// brokers `replicas` names (partition `i` on broker `replicas[i]`), writes [`RECORDS`] records to
/// each partition, and commits them all for `group`, without joining it.
fn topic_read_by(topic: &str, replicas: &[i32], group: &str) {
    let admin: AdminClient<DefaultClientContext> = config().create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let assignment: Vec<[i32; 1]> = replicas.iter().map(|b| [*b]).collect();
    let assignment: Vec<&[i32]> = assignment.iter().map(|r| &r[..]).collect();
    runtime().block_on(async {
        let _ = admin.delete_topics(&[topic], &opts).await;
        wait_until("the old topic to go", Duration::from_secs(30), || leaders(topic).is_none().then_some(()));
        let new = NewTopic::new(topic, assignment.len() as i32, TopicReplication::Variable(&assignment));
        for r in admin.create_topics(&[new], &opts).await.expect("create_topics answers") {
            r.expect("topic created");
        }
    });
    wait_until("the topic's partitions to have leaders", Duration::from_secs(30), || {
        leaders(topic).filter(|l| l.len() == replicas.len() && l.values().all(|b| *b > 0)).map(drop)
    });
    let p: BaseProducer = config().create().expect("producer");
    for part in 0..replicas.len() as i32 {
        for i in 0..RECORDS {
            let payload = format!("{{\"cart\":{i}}}");
            p.send(BaseRecord::<str, str>::to(topic).partition(part).payload(&payload)).expect("queued");
        }
    }
    p.flush(Duration::from_secs(30)).expect("records acknowledged");
    let c: BaseConsumer =
        config().set("group.id", group).set("enable.auto.commit", "false").create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for part in 0..replicas.len() as i32 {
        tpl.add_partition_offset(topic, part, Offset::Offset(RECORDS)).expect("offset");
    }
    c.commit(&tpl, CommitMode::Sync).expect("commit by hand");
}

/// Each partition's leader (`-1`: none) of `topic` on the pair; `None` when the topic does not exist.
fn leaders(topic: &str) -> Option<BTreeMap<i32, i32>> {
    let c: BaseConsumer = config().create().expect("consumer");
    let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic && t.error().is_none())?;
    Some(t.partitions().iter().map(|p| (p.id(), p.leader())).collect())
}

/// The partition of `__consumer_offsets` that holds `group` (Kafka's `abs(group.hashCode()) %
/// partitions`, with Java's `String.hashCode` over UTF-16 code units).
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let h = group.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (h & 0x7fff_ffff) % partitions
}

/// The broker that coordinates `group` on the pair: the leader of its `__consumer_offsets` partition.
fn coordinator(group: &str) -> i32 {
    let leaders = leaders("__consumer_offsets").expect("__consumer_offsets exists on the pair");
    let p = offsets_partition(group, leaders.len() as i32);
    leaders[&p]
}

/// The group's committed offsets and their commit metadata on `partitions` partitions of `topic`,
/// on the pair.
fn positions(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<(i64, String)>> {
    let c: BaseConsumer =
        config().set("group.id", group).set("enable.auto.commit", "false").create().expect("consumer");
    kafka::positions_over(&c, topic, partitions)
}

/// How many commits Kafka recorded for `group` whose metadata names request `id` (its fence or its
/// reset), per partition of `topic`, from the pair's own `__consumer_offsets`.
fn commits_of(group: &str, topic: &str, id: &str) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for (g, t, p, m) in offsets_log::commits(&kafka_pair()) {
        if g == group && t == topic && m.contains(id) {
            out.entry(p).or_default().push(m);
        }
    }
    out
}

/// The status of `group` in `status.reset` of AnkkaFlow `name` in `ns`.
fn group_status(ns: &str, name: &str, group: &str) -> serde_json::Value {
    let status = reset_status(ns, name);
    status["groups"].as_array().and_then(|gs| gs.iter().find(|g| g["group"] == group).cloned()).unwrap_or_default()
}

/// Issue 28, item 4, on the broker pair, with broker 2 stopped mid-reset (a controlled shutdown,
/// as in a rolling restart):
///
/// 1. group `m`, whose coordinator is broker 2 and whose topic is on broker 1, is reset by a request
///    that pauses between its intent and its commit; broker 2 stops meanwhile, so the coordinator
///    moves to broker 1 (the other replica of its `__consumer_offsets` partition). The request
///    finishes: `m` reset once, at its log start offsets with the marker, one commit per partition
///    (Kafka's own record), `Done`.
/// 2. with broker 2 still stopped, a request of `a` (a topic on broker 1) and `b` (a topic whose
///    partition 1 has its only replica on broker 2, so no leader) ends within the retry bound: `b`
///    failed naming partition 1, nothing committed for it (not even a fence), its offsets as they
///    were; `a` reset; `Done`.
#[test]
fn a_stopped_broker_moves_a_coordinator_mid_reset_and_leaves_a_partition_without_a_leader() {
    // Isolated: the broker pair is this test's alone (its own namespace, topics, groups and
    // cluster Secret); stopping one of its brokers touches no other test.
    let _lock = side_by_side();
    let ns = "faults-pair";
    install_crd();
    let _secret = PairSecret::install(ns);
    fresh_namespace(ns);
    // __consumer_offsets exists on the pair once any group committed there.
    topic_read_by("faults.pair.a", &[1, 1], "faults-pair.warm-up");
    // A pipeline name whose group `<name>.m.in` the pair's broker 2 coordinates.
    let name = (0..64)
        .map(|i| format!("pair{i}"))
        .find(|n| coordinator(&format!("{n}.m.in")) == 2)
        .expect("a group that broker 2 coordinates among 64 names");
    let group = |s: &str| format!("{name}.{s}.in");
    let (m, a, b) = (group("m"), group("a"), group("b"));
    topic_read_by("faults.pair.m", &[1, 1, 1], &m);
    topic_read_by("faults.pair.a", &[1, 1], &a);
    topic_read_by("faults.pair.b", &[1, 2], &b);
    let streamlet = |name, topic| Streamlet { name, topic, cluster: CLUSTER, replicas: 0 };
    apply_pipeline(
        ns,
        &name,
        &[streamlet("m", "faults.pair.m"), streamlet("a", "faults.pair.a"), streamlet("b", "faults.pair.b")],
    );
    let env = [
        ("FLOW_WATCH_NAMESPACE", ns),
        ("FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", "3"),
        ("FLOW_RESET_RETRY_SECONDS", "15"),
        // once, between the first intent and its commit, long enough for broker 2 to stop
        ("FLOW_FAULT_PAUSE_AT", "after-intent"),
        ("FLOW_FAULT_PAUSE_SECONDS", "8"),
        ("FLOW_FAULT_PAUSE_TIMES", "1"),
    ];
    let op = Operator::start(&fresh_dir(ns), &env);

    // 1. The coordinator moves between m's intent and its commit.
    let first = uuid();
    write_request(ns, &name, &first, &["m"]);
    paused(&op, "between m's intent and its commit");
    let (broker2, stopping) = PairBrokerStopped::stop(2);
    assert_eq!(coordinator(&m), 1, "m's coordinator moved to broker 1");
    let t = Instant::now();
    wait_done(ns, &name, &first, Duration::from_secs(120));
    eprintln!("faults: broker 2 stopped in {stopping:?}; the request of m done {:?} after", t.elapsed());
    let marker = format!("ankka-flow/reset/{first}");
    let now = positions(&m, "faults.pair.m", 3);
    assert!(now.values().all(|x| *x == Some((0, marker.clone()))), "m at its log start with the marker: {now:?}");
    let recorded = commits_of(&m, "faults.pair.m", &first);
    for p in 0..3 {
        let resets = recorded.get(&p).map_or(0, |ms| ms.iter().filter(|x| **x == marker).count());
        assert_eq!(resets, 1, "partition {p}: one reset commit: {recorded:?}");
    }
    let status = group_status(ns, &name, &m);
    assert_eq!(status["outcome"], "Reset", "{status}");

    // 2. A partition without a leader: b fails, naming it, within the retry bound; a is reset.
    assert_eq!(leaders("faults.pair.b").map(|l| l[&1]), Some(-1), "partition 1 of faults.pair.b has no leader");
    let second = uuid();
    let t = Instant::now();
    write_request(ns, &name, &second, &["a", "b"]);
    wait_done(ns, &name, &second, Duration::from_secs(120));
    let took = t.elapsed();
    eprintln!("faults: the request of a and b with b's partition 1 leaderless done in {took:?}");
    let failed = group_status(ns, &name, &b);
    assert_eq!(failed["outcome"], "Failed", "{failed}");
    let why = failed["message"].as_str().unwrap_or_default();
    assert!(why.contains("partition 1") && why.contains("faults.pair.b"), "b's failure names its partition: {why}");
    let notes = event_notes(ns, "ResetOffsetsFailed");
    assert!(notes.iter().any(|n| n.contains(&b) && n.contains("partition 1")), "{notes:?}");
    assert_eq!(commits_of(&b, "faults.pair.b", &second), BTreeMap::new(), "nothing committed for b");
    let reset_a = group_status(ns, &name, &a);
    assert_eq!(reset_a["outcome"], "Reset", "{reset_a}");
    let marker = format!("ankka-flow/reset/{second}");
    let now = positions(&a, "faults.pair.a", 2);
    assert!(now.values().all(|x| *x == Some((0, marker.clone()))), "a at its log start with the marker: {now:?}");
    assert_eq!(reset_status(ns, &name)["phase"], "Done");

    let started = broker2.start();
    // b's offsets are as they were, read from its coordinator with both brokers back.
    let kept = positions(&b, "faults.pair.b", 2);
    assert!(kept.values().all(|x| x.as_ref().is_some_and(|(o, _)| *o == RECORDS)), "b's offsets kept: {kept:?}");
    eprintln!("faults: broker 2 started again in {started:?}");
    op.stop();
    let _ = kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--wait=false"]);
}
