//! Case C1 of docs/field-cases.md, as reported: the inlet's topic `shop.cart-events.v2` does
//! not exist, on a broker with `auto.create.topics.enable=true` (the test bed's second broker,
//! `FLOW_TESTBED_KAFKA_AUTOCREATE`; docs/testbed.md). Such a broker creates a topic whenever a client
//! asks for the metadata of that one topic and allows creation, so every Kafka call of ours that
//! names the topic could make it appear, and a reset would then "succeed" on an empty topic nobody
//! writes to.
//!
//! The whole kind, one test each, on the real broker, API server and binaries:
//! - the request itself (inspection), then the lag sampler and `/metrics` for several intervals, then
//!   `flow reset status`;
//! - the read-back (resolving the outcome) of a request whose operator crashed after its intent, the topic deleted
//!   meanwhile;
//! - the commit, the topic deleted while the operator pauses between intent and commit.
//!
//! In each, the broker's topic list is taken before and compared after every step: not one topic
//! may appear. The broker is a cluster of its own that only this file uses, so its list is exact.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// The topic of the case; it exists only where a test creates it.
const TOPIC: &str = "shop.cart-events.v2";
/// The Kafka cluster name of the auto-create broker in blueprints and in its cluster Secret.
const CLUSTER: &str = "shop-autocreate";
const SECRET: &str = "kafka-cluster-shop-autocreate";

/// Client settings for the auto-create broker. Our own clients never allow topic creation, so that
/// nothing this test does creates the topic either.
fn config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", kafka_autocreate()).set("allow.auto.create.topics", "false");
    c
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn admin() -> AdminClient<DefaultClientContext> {
    config().create().expect("admin client")
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))
}

/// Every topic of the broker, internal ones included, sorted: from a Metadata request for all topics,
/// which never creates one.
fn topics() -> Vec<String> {
    let c: BaseConsumer = config().create().expect("consumer");
    let md = c.fetch_metadata(None, Duration::from_secs(10)).expect("metadata of all topics");
    let mut names: Vec<String> = md.topics().iter().map(|t| t.name().to_string()).collect();
    names.sort();
    names
}

/// Names of every consumer group the broker knows (ListGroups): a group with committed offsets is
/// listed even without members.
fn groups() -> Vec<String> {
    let c: BaseConsumer = config().create().expect("consumer");
    let list = c.fetch_group_list(None, Duration::from_secs(10)).expect("group list");
    list.groups().iter().map(|g| g.name().to_string()).collect()
}

/// Waits until the broker's group coordinator answers, so that `__consumer_offsets` exists before a
/// test takes its "before" topic list (the first group call of all creates it).
fn coordinator_ready() {
    let group = "flow-testbed-autocreate-warm-up";
    let c: BaseConsumer = config().set("group.id", group).create().expect("consumer");
    wait_until("the auto-create broker's group coordinator", Duration::from_secs(120), || {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(group, 0);
        c.committed_offsets(tpl, Duration::from_secs(5)).ok()?;
        topics().iter().any(|t| t == "__consumer_offsets").then_some(())
    });
}

/// Checks that the broker is what these tests need: a Metadata request that names a missing topic and
/// allows creation makes the broker create it. Without that, "no topic appeared" would prove nothing.
fn assert_broker_auto_creates() {
    let probe = "flow-testbed-autocreate-probe";
    delete_topic(probe);
    {
        let c: BaseConsumer = config().set("allow.auto.create.topics", "true").create().expect("consumer");
        wait_until("the broker to create a topic that a metadata request names", Duration::from_secs(30), || {
            let _ = c.fetch_metadata(Some(probe), Duration::from_secs(5));
            topics().iter().any(|t| t == probe).then_some(())
        });
        // Dropped before the deletion: a client that knows the topic and allows creation asks for
        // it again when it disappears, and the broker creates it again.
    }
    delete_topic(probe);
}

fn delete_topic(topic: &str) {
    let _ = runtime().block_on(admin().delete_topics(&[topic], &opts()));
    wait_until("the topic to go", Duration::from_secs(30), || (!topics().iter().any(|t| t == topic)).then_some(()));
}

/// Deletes group `g` with everything it committed; no error when it does not exist.
fn forget_group(g: &str) {
    let _ = runtime().block_on(admin().delete_groups(&[g], &opts()));
    wait_until("the group to go", Duration::from_secs(30), || (!groups().iter().any(|x| x == g)).then_some(()));
}

/// Creates `topic` with `partitions` partitions of `per_partition` records each.
fn create_topic(topic: &str, partitions: i32, per_partition: u32) {
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for r in runtime().block_on(admin().create_topics(&[new], &opts())).expect("create_topics answers") {
        r.expect("topic created");
    }
    let c: BaseConsumer = config().create().expect("consumer");
    wait_until("the topic's partitions to have leaders", Duration::from_secs(30), || {
        (0..partitions).all(|p| c.fetch_watermarks(topic, p, Duration::from_secs(5)).is_ok()).then_some(())
    });
    let producer: BaseProducer = config().set("linger.ms", "5").create().expect("producer");
    for p in 0..partitions {
        for i in 0..per_partition {
            let payload = format!("{{\"cart\":{i},\"partition\":{p}}}");
            while producer.send(BaseRecord::<(), _>::to(topic).partition(p).payload(&payload)).is_err() {
                producer.poll(Duration::from_millis(50));
            }
        }
    }
    producer.flush(Duration::from_secs(30)).expect("records acknowledged");
}

/// Commits `offset` on every one of `partitions` partitions of `topic` for group `g`, without joining.
fn commit(g: &str, topic: &str, partitions: i32, offset: i64) {
    let c: BaseConsumer = config().set("group.id", g).set("enable.auto.commit", "false").create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Offset(offset)).expect("offset");
    }
    c.commit(&tpl, CommitMode::Sync).expect("commit by hand");
}

/// The group's committed offsets on `partitions` partitions of `topic` (OffsetFetch, which creates no
/// topic), `None` where it has none. A failed fetch is retried for 30 s.
fn committed(g: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i64>> {
    let c: BaseConsumer = config().set("group.id", g).create().expect("consumer");
    wait_until(&format!("the committed offsets of {g}"), Duration::from_secs(30), || {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        match c.committed_offsets(tpl, Duration::from_secs(10)) {
            Ok(got) => Some(
                got.elements()
                    .iter()
                    .map(|e| (e.partition(), if let Offset::Offset(n) = e.offset() { Some(n) } else { None }))
                    .collect(),
            ),
            Err(e) => {
                eprintln!("committed offsets of {g} on {topic}: {e}; asking again");
                None
            }
        }
    })
}

/// After `topic` was deleted: no partition of group `g` ever reads the reset's target (0, the log
/// start of the deleted topic), and the broker drops the offsets the group had there (it deletes a
/// deleted topic's offsets, asynchronously).
fn assert_nothing_committed_after_deletion(g: &str) {
    let now = committed(g, TOPIC, 3);
    assert!(now.values().all(|o| *o != Some(0)), "a reset commit landed: {now:?}");
    wait_until("the deleted topic's offsets to go", Duration::from_secs(30), || {
        committed(g, TOPIC, 3).values().all(Option::is_none).then_some(())
    });
}

/// The cluster Secret of cluster `shop-autocreate`, deleted when dropped. Its client settings allow
/// topic creation, as a Java consumer's default does (and as librdkafka then would): the operator's
/// clients must not take that setting over.
struct ClusterSecret;

impl ClusterSecret {
    fn install() -> ClusterSecret {
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
    flow.ankka.thinkmorestupidless.com/allowed-namespaces: autocreate-c1, autocreate-c1-read, autocreate-c1-commit
stringData:
  bootstrap.servers: {}
  connection-config: |
    security.protocol=PLAINTEXT
    allow.auto.create.topics=true
",
            kafka_autocreate()
        ));
        ClusterSecret
    }
}

impl Drop for ClusterSecret {
    fn drop(&mut self) {
        let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", SECRET, "--ignore-not-found"]);
    }
}

/// The AnkkaFlow `pipeline` in `ns`, from the real `flow generate`: streamlet `router` (the cart
/// example's descriptor) stopped (0 replicas), its inlet reading `TOPIC` on cluster `shop-autocreate`.
fn pipeline_yaml(ns: &str, pipeline: &str) -> String {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("blueprint-{pipeline}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    let blueprint = format!(
        "blueprint {{
  name = {pipeline}
  streamlets {{
    router = cart-router
  }}
  topics {{
    cart-events {{
      managed = false
      topic.name = \"{TOPIC}\"
      cluster = {CLUSTER}
      consumers = [router.in]
      consumer-config {{ auto.offset.reset = earliest }}
    }}
  }}
}}
"
    );
    std::fs::write(dir.join("blueprint.conf"), blueprint).expect("blueprint");
    std::fs::write(dir.join("stop.conf"), "flow.streamlets.router { replicas = 0 }\n").expect("conf");
    let args = [
        "generate",
        "blueprint.conf",
        "--descriptors",
        "flow",
        "--conf",
        "stop.conf",
        "--image",
        "router=registry.example.com/cart-router:1.2",
        "-n",
        ns,
    ];
    let o = std::process::Command::new(bin("flow")).args(args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?}: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// Applies the pipeline and waits until it has no pod.
fn apply(ns: &str, pipeline: &str) {
    kubectl_apply(&pipeline_yaml(ns, pipeline));
    wait_until("the stopped pipeline to have no pod", Duration::from_secs(60), || {
        pipeline_pods(ns, pipeline).is_empty().then_some(())
    });
}

/// Starts the operator on namespace `ns` with the ledger in `ledger`, a free metrics port, a lag
/// sample every second, and `extra`.
fn operator(ns: &str, ledger: &std::path::Path, extra: &[(&str, &str)]) -> Operator {
    let mut env =
        vec![("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0"), ("FLOW_LAG_INTERVAL_SECONDS", "1")];
    env.extend_from_slice(extra);
    Operator::start(ledger, &env)
}

/// `flow reset <pipeline> -n <ns>`; the request id it printed.
fn cli_reset(ns: &str, pipeline: &str) -> String {
    let o = flow(&["reset", pipeline, "-n", ns]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "flow reset: {}", show(&o));
    assert!(out.starts_with(&format!("reset requested for '{pipeline}': ")), "{out}");
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

fn wait_done(ns: &str, pipeline: &str, id: &str) {
    wait_until(&format!("request {id} done"), Duration::from_secs(90), || {
        (annotation(ns, pipeline, DONE).as_deref() == Some(id)).then_some(())
    });
}

/// Notes of the Event objects (events.k8s.io) about AnkkaFlow `pipeline` with `reason`, sorted.
fn notes(ns: &str, pipeline: &str, reason: &str) -> Vec<String> {
    let out = kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("events JSON");
    let mut got: Vec<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["reason"] == reason && e["regarding"]["kind"] == "AnkkaFlow" && e["regarding"]["name"] == pipeline
        })
        .map(|e| e["note"].as_str().unwrap_or_default().to_string())
        .collect();
    got.sort();
    got
}

/// Lines of the operator's log that say a lag sample of group `g` failed because its topic does not
/// exist.
fn failed_lag_samples(op: &Operator, g: &str) -> usize {
    op.log_text().lines().filter(|l| l.contains("no lag") && l.contains(g) && l.contains("does not exist")).count()
}

/// Asserts that the broker's topics are exactly `before`, naming `step` when not.
fn assert_no_topic_created(before: &[String], step: &str) {
    let now = topics();
    let created: Vec<&String> = now.iter().filter(|t| !before.contains(t)).collect();
    assert!(created.is_empty(), "after {step}, the auto-create broker has new topic(s) {created:?}");
    assert_eq!(now, before, "after {step}, the broker's topic list changed");
}

/// The case as reported: the request fails with an event naming the missing topic, the topic list is
/// unchanged, nothing is committed, done is written. Then the lag sampler runs against the missing
/// topic for several intervals, `/metrics` is read, and `flow reset status` reports the failure; the
/// topic list is still unchanged.
#[test]
fn c1_a_missing_topic_on_an_auto_create_broker_is_a_failure_and_is_never_created() {
    // One at a time with the other tests of the auto-create broker, whose every topic and group
    // (and `shop.cart-events.v2`) they read; no other test uses that broker.
    let _lock = side_by_side_one_at_a_time("autocreate");
    let (ns, p) = ("autocreate-c1", "cart-autocreate");
    let g = format!("{p}.router.in");
    let t0 = Instant::now();
    coordinator_ready();
    assert_broker_auto_creates();
    delete_topic(TOPIC);
    forget_group(&g);
    let before = topics();
    assert!(!before.iter().any(|t| t == TOPIC), "{before:?}");
    let _secret = ClusterSecret::install();
    install_crd();
    fresh_namespace(ns);
    let op = operator(ns, &fresh_dir(ns), &[]);
    apply(ns, p);
    // The lag sampler has seen the AnkkaFlow from here on.
    assert_no_topic_created(&before, "the operator's start and the pipeline's apply");

    let t1 = Instant::now();
    let id = cli_reset(ns, p);
    wait_done(ns, p, &id);
    let took = t1.elapsed();
    eprintln!("C1 (auto-create broker): request {id} done after {took:?}");
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), [format!("{g}: topic '{TOPIC}' does not exist")]);
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
    assert_no_topic_created(&before, "the reset");
    assert!(!groups().contains(&g), "the group exists on the broker, so something committed for it");
    assert_eq!(committed(&g, TOPIC, 1), BTreeMap::from([(0, None)]), "nothing committed");
    assert_no_topic_created(&before, "the test's own OffsetFetch");

    // The lag sampler measures every inlet of every AnkkaFlow each interval (1 s here): let it fail
    // on the missing topic a few times, and read /metrics, which serves what it sampled.
    wait_until("three failed lag samples of the group", Duration::from_secs(30), || {
        (failed_lag_samples(&op, &g) >= 3).then_some(())
    });
    let (code, body) = http_get(&metrics_address(&op), "/metrics");
    assert_eq!(code, 200);
    assert_eq!(lag_in_metrics(&body, &g), (0, 0), "no lag series for a topic that does not exist");
    assert_no_topic_created(&before, "several lag samples and a /metrics read");

    let o = flow(&["reset", "status", &id, "-n", ns, "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(r["phase"], "Done", "{r}");
    assert_eq!(r["groups"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r["groups"][0]["group"], g.as_str());
    assert_eq!(r["groups"][0]["topic"], TOPIC);
    assert_eq!(r["groups"][0]["outcome"], "Failed", "{r}");
    assert_eq!(r["groups"][0]["message"], format!("topic '{TOPIC}' does not exist"), "{r}");
    let o = flow(&["reset", "status", &id]);
    assert!(o.status.success(), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(TOPIC), "{}", show(&o));

    // More samples after the status reads, then the final look.
    let seen = failed_lag_samples(&op, &g);
    wait_until("two more failed lag samples", Duration::from_secs(30), || {
        (failed_lag_samples(&op, &g) >= seen + 2).then_some(())
    });
    assert_no_topic_created(&before, "the whole case");
    assert!(!groups().contains(&g), "nothing committed for the group, ever");
    eprintln!(
        "C1 (auto-create broker): {} failed lag samples, topics unchanged: {before:?}; test took {:?}",
        failed_lag_samples(&op, &g),
        t0.elapsed()
    );
}

/// The read-back: the operator crashes right after persisting a group's intent (before the commit);
/// the topic is deleted; the restarted operator, which must learn from Kafka whether the commit
/// landed, reads the group's offsets on a topic that no longer exists. The group fails naming the
/// topic, and the topic is not created again, neither by that read nor by the lag samples after it.
#[test]
fn c1_the_read_back_of_a_deleted_topic_fails_and_creates_nothing() {
    // One at a time with the other tests of the auto-create broker, whose every topic and group
    // (and `shop.cart-events.v2`) they read; no other test uses that broker.
    let _lock = side_by_side_one_at_a_time("autocreate");
    let (ns, p) = ("autocreate-c1-read", "cart-autocreate-read");
    let g = format!("{p}.router.in");
    let t0 = Instant::now();
    coordinator_ready();
    assert_broker_auto_creates();
    delete_topic(TOPIC);
    forget_group(&g);
    create_topic(TOPIC, 3, 20);
    commit(&g, TOPIC, 3, 20);
    let _secret = ClusterSecret::install();
    install_crd();
    fresh_namespace(ns);
    let ledger = fresh_dir(ns);
    let mut op = operator(ns, &ledger, &[("FLOW_FAULT_CRASH_AT", "after-intent")]);
    apply(ns, p);

    let id = cli_reset(ns, p);
    assert_eq!(op.wait_exit(Duration::from_secs(60)), Some(86), "the operator crashes after the intent");
    assert_eq!(annotation(ns, p, DONE), None);
    assert_eq!(committed(&g, TOPIC, 3), (0..3).map(|p| (p, Some(20))).collect(), "no reset commit yet");
    delete_topic(TOPIC);
    let before = topics();
    assert!(!before.iter().any(|t| t == TOPIC), "{before:?}");

    let op = operator(ns, &ledger, &[]);
    wait_done(ns, p, &id);
    assert_no_topic_created(&before, "the read-back");
    let failed = notes(ns, p, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with(&format!("{g}: ")) && failed[0].contains(&format!("'{TOPIC}'")), "{failed:?}");
    assert!(failed[0].contains("does not exist"), "{failed:?}");
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
    wait_until("three failed lag samples of the group", Duration::from_secs(30), || {
        (failed_lag_samples(&op, &g) >= 3).then_some(())
    });
    assert_no_topic_created(&before, "the read-back and several lag samples");
    assert_nothing_committed_after_deletion(&g);
    eprintln!("C1 read-back: {}; test took {:?}", failed[0], t0.elapsed());
}

/// The commit: the operator pauses right after persisting a group's intent; the topic is deleted
/// meanwhile; the operator then commits the log start offsets of a topic that no longer exists. The
/// commit is refused, the group fails naming the topic, and the topic is not created again.
#[test]
fn c1_a_commit_to_a_deleted_topic_fails_and_creates_nothing() {
    // One at a time with the other tests of the auto-create broker, whose every topic and group
    // (and `shop.cart-events.v2`) they read; no other test uses that broker.
    let _lock = side_by_side_one_at_a_time("autocreate");
    let (ns, p) = ("autocreate-c1-commit", "cart-autocreate-commit");
    let g = format!("{p}.router.in");
    let t0 = Instant::now();
    coordinator_ready();
    assert_broker_auto_creates();
    delete_topic(TOPIC);
    forget_group(&g);
    create_topic(TOPIC, 3, 20);
    commit(&g, TOPIC, 3, 20);
    let _secret = ClusterSecret::install();
    install_crd();
    fresh_namespace(ns);
    let op =
        operator(ns, &fresh_dir(ns), &[("FLOW_FAULT_PAUSE_AT", "after-intent"), ("FLOW_FAULT_PAUSE_SECONDS", "8")]);
    apply(ns, p);

    let id = cli_reset(ns, p);
    wait_until("the operator to pause after the intent", Duration::from_secs(60), || {
        op.log_text().contains("fault injection: pausing here on purpose").then_some(())
    });
    delete_topic(TOPIC);
    let before = topics();
    assert!(!before.iter().any(|t| t == TOPIC), "{before:?}");

    wait_done(ns, p, &id);
    assert_no_topic_created(&before, "the commit");
    let failed = notes(ns, p, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with(&format!("{g}: ")) && failed[0].contains(&format!("'{TOPIC}'")), "{failed:?}");
    assert!(failed[0].to_lowercase().contains("unknown topic"), "the broker's refusal is named: {failed:?}");
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
    wait_until("three failed lag samples of the group", Duration::from_secs(30), || {
        (failed_lag_samples(&op, &g) >= 3).then_some(())
    });
    assert_no_topic_created(&before, "the commit and several lag samples");
    assert_nothing_committed_after_deletion(&g);
    eprintln!("C1 commit: {}; test took {:?}", failed[0], t0.elapsed());
}
