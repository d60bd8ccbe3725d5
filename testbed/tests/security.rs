//! Case C5: a topic whose Kafka cluster needs SASL/PLAIN, configured the way JVM clients are (a
//! `sasl.jaas.config` line in the cluster Secret's `connection-config`), on the test bed broker's
//! SASL_PLAINTEXT listener (`FLOW_TESTBED_KAFKA_SASL`, 127.0.0.1:19094; users in docs/testbed.md).
//!
//! One test, three parts: the reset over SASL happens and reads back at the log start; a wrong
//! password fails and commits nothing; and neither password shows in the operator's log, the
//! Events, or the AnkkaFlow's status.
//!
//! A wrong password is reported as an authentication failure, from the error librdkafka gives the
//! client's error callback ([`c5_a_wrong_password_is_reported_as_an_authentication_failure`]).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use flow_testbed::cart::DONE;
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

const GOOD_PASSWORD: &str = "shop-secret";
const BAD_PASSWORD: &str = "not-the-shop-secret-7c1e";

/// The SASL listener's address.
fn sasl_brokers() -> String {
    std::env::var("FLOW_TESTBED_KAFKA_SASL").unwrap_or_else(|_| {
        panic!("FLOW_TESTBED_KAFKA_SASL is not set: load the test bed's settings with `eval \"$(testbed/tb env)\"`")
    })
}

/// Deletes the named cluster Secrets of `ankka-flow` when dropped.
struct Secrets(&'static [&'static str]);

impl Drop for Secrets {
    fn drop(&mut self) {
        for name in self.0 {
            let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", name, "--ignore-not-found"]);
        }
    }
}

/// Cluster Secret `kafka-cluster-<cluster>` for the SASL listener, as written for a JVM client.
fn cluster_secret(cluster: &str, password: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: kafka-cluster-{cluster}
  namespace: ankka-flow
  labels:
    flow.ankka.thinkmorestupidless.com/kafka-cluster: {cluster}
stringData:
  bootstrap.servers: {brokers}
  connection-config: |
    security.protocol=SASL_PLAINTEXT
    sasl.mechanism=PLAIN
    sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="shop" password="{password}";
"#,
        brokers = sasl_brokers()
    )
}

/// Pipeline `pipeline` in `ns`, from the real `flow generate`: one streamlet `router` (the cart
/// example's descriptor, 0 replicas) whose inlet reads unmanaged topic `topic` of cluster `cluster`.
fn apply_pipeline(ns: &str, pipeline: &str, topic: &str, cluster: &str) {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("blueprint-{pipeline}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    std::fs::write(
        dir.join("blueprint.conf"),
        format!(
            "blueprint {{\n  name = {pipeline}\n  streamlets {{\n    router = cart-router\n  }}\n  topics {{\n    \
             events {{\n      managed = false\n      topic.name = \"{topic}\"\n      cluster = {cluster}\n      \
             consumers = [router.in]\n    }}\n  }}\n}}\n"
        ),
    )
    .expect("blueprint");
    std::fs::write(dir.join("stop.conf"), "flow.streamlets.router { replicas = 0 }\n").expect("conf");
    let o = Command::new(bin("flow"))
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "stop.conf"])
        .args(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns])
        .current_dir(&dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", String::from_utf8_lossy(&o.stderr));
    kubectl_apply(&String::from_utf8(o.stdout).expect("UTF-8"));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Deletes group `g` and its offsets, if it exists (PLAINTEXT listener).
fn delete_group(g: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
    let _ = runtime().block_on(admin.delete_groups(&[g], &AdminOptions::new()));
}

/// Commits `offset` on every partition of `topic` for group `g`, without joining it.
fn commit_all(g: &str, topic: &str, partitions: i32, offset: i64) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bed().kafka)
        .set("group.id", g)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Offset(offset)).expect("offset");
    }
    c.commit(&tpl, CommitMode::Sync).expect("commit by hand");
}

/// `flow reset <pipeline> -n <ns>`; the request id it printed.
fn reset(ns: &str, pipeline: &str) -> String {
    let o = flow(&["reset", pipeline, "-n", ns]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "flow reset: {out}{}", String::from_utf8_lossy(&o.stderr));
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

fn wait_done(ns: &str, pipeline: &str, id: &str, timeout: Duration) {
    wait_until(&format!("request {id} of {ns}/{pipeline} done"), timeout, || {
        (annotation(ns, pipeline, DONE).as_deref() == Some(id)).then_some(())
    });
}

/// Waits for request `id` of `pipeline` to be done with one `ResetOffsetsFailed` event, for `group`,
/// and no `ResetOffsets`; returns that event's note.
fn wait_failed(ns: &str, pipeline: &str, group: &str, id: &str) -> String {
    wait_done(ns, pipeline, id, Duration::from_secs(180));
    let failed = event_notes(ns, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].starts_with(&format!("{group}: ")), "{failed:?}");
    assert_eq!(event_notes(ns, "ResetOffsets"), Vec::<String>::new());
    failed[0].clone()
}

fn some(v: &[i64]) -> BTreeMap<i32, Option<i64>> {
    (0..).zip(v.iter().map(|o| Some(*o))).collect()
}

#[test]
fn c5_sasl_plain_reset_a_wrong_password_fails_and_no_secret_leaks() {
    let _serial = serial();
    let (ns, p, topic) = ("case-c5", "case-c5", "case.c5-events");
    let (bad_ns, bad_p, bad_topic) = ("case-c5-bad", "case-c5-bad", "case.c5-bad-events");
    let (g, bad_g) = (format!("{p}.router.in"), format!("{bad_p}.router.in"));

    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(&["kafka-cluster-sasl-good", "kafka-cluster-sasl-bad"]);
    kubectl_apply(&cluster_secret("sasl-good", GOOD_PASSWORD));
    kubectl_apply(&cluster_secret("sasl-bad", BAD_PASSWORD));
    fresh_namespace(ns);
    fresh_namespace(bad_ns);

    // The shop user reaches the SASL listener with librdkafka's own settings: the listener works.
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", sasl_brokers())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "shop")
        .set("sasl.password", GOOD_PASSWORD)
        .create()
        .expect("SASL client");
    probe.fetch_metadata(None, Duration::from_secs(10)).expect("metadata over SASL_PLAINTEXT as user shop");

    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    kafka::delete_records(topic, 1, 5);
    kafka::recreate_topic(bad_topic, 3);
    kafka::produce(bad_topic, 3, 20);
    delete_group(&g);
    delete_group(&bad_g);
    commit_all(&g, topic, 3, 20);
    commit_all(&bad_g, bad_topic, 3, 10);

    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")]);
    let bad_op = Operator::start(
        &fresh_dir(bad_ns),
        &[("FLOW_WATCH_NAMESPACE", bad_ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")],
    );
    apply_pipeline(ns, p, topic, "sasl-good");
    apply_pipeline(bad_ns, bad_p, bad_topic, "sasl-bad");

    let id = reset(ns, p);
    let bad_id = reset(bad_ns, bad_p);

    // (a) over SASL/PLAIN, with the Java jaas line translated: reset to the log starts 0/5/0.
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), some(&[0, 5, 0]));
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new());

    // (b) a wrong password: one failure event for the group, nothing committed; the operator's log
    // names the authentication failure (the note does not yet: see the module's known gap).
    let note = wait_failed(bad_ns, bad_p, &bad_g, &bad_id);
    eprintln!("C5: the wrong password's failure note: {note}");
    assert_eq!(kafka::committed(&bad_g, bad_topic, 3), some(&[10, 10, 10]), "nothing committed");
    assert!(
        bad_op.log_text().contains("SASL authentication error: Authentication failed"),
        "the operator's log does not name the authentication failure"
    );

    // (c) neither password anywhere the user or the cluster's readers can see.
    let mut seen = vec![
        ("the operator's log".to_string(), op.log_text()),
        ("the second operator's log".to_string(), bad_op.log_text()),
    ];
    for (n, pl) in [(ns, p), (bad_ns, bad_p)] {
        seen.push((format!("the Events of {n}"), kubectl_ok(&["-n", n, "get", "events", "-o", "json"])));
        seen.push((
            format!("the events.k8s.io Events of {n}"),
            kubectl_ok(&["-n", n, "get", "events.events.k8s.io", "-o", "json"]),
        ));
        seen.push((format!("AnkkaFlow {n}/{pl}"), kubectl_ok(&["-n", n, "get", "aflow", pl, "-o", "json"])));
    }
    for (what, text) in &seen {
        assert!(!text.is_empty(), "{what} is empty");
        for secret in [GOOD_PASSWORD, BAD_PASSWORD] {
            assert!(!text.contains(secret), "{what} shows a password");
        }
    }
    op.stop();
    bad_op.stop();
}

/// The note of a wrong password names the authentication failure (librdkafka reports it only to the
/// client's error callback, which the adapter keeps), and it is final: not retried for a minute.
#[test]
fn c5_a_wrong_password_is_reported_as_an_authentication_failure() {
    let _serial = serial();
    let (ns, p, topic) = ("case-c5-bad", "case-c5-bad", "case.c5-bad-events");
    let g = format!("{p}.router.in");
    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(&["kafka-cluster-sasl-bad"]);
    kubectl_apply(&cluster_secret("sasl-bad", BAD_PASSWORD));
    fresh_namespace(ns);
    kafka::recreate_topic(topic, 1);
    delete_group(&g);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")]);
    apply_pipeline(ns, p, topic, "sasl-bad");
    let id = reset(ns, p);
    let note = wait_failed(ns, p, &g, &id);
    let lower = note.to_lowercase();
    assert!(lower.contains("authentication") || lower.contains("sasl"), "not an authentication reason: {note}");
    assert!(!note.contains(BAD_PASSWORD));
    op.stop();
}
