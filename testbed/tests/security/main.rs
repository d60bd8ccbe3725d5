//! Case C5: a topic whose Kafka cluster needs SASL/PLAIN, configured the way JVM clients are (a
//! `sasl.jaas.config` line in the cluster Secret's `connection-config`), on the test bed broker's
//! SASL_PLAINTEXT listener (`FLOW_TESTBED_KAFKA_SASL`, 127.0.0.1:19094; users in docs/testbed.md).
//!
//! One test, three parts: the reset over SASL happens and reads back at the log start; a wrong
//! password fails and commits nothing; and neither password shows in the operator's log, the
//! Events, or the AnkkaFlow's status.
//!
//! A wrong password is reported as an authentication failure, from the error librdkafka gives the
//! client's error callback (`sasl_plain::c5_a_wrong_password_is_reported_as_an_authentication_failure`).
//!
//! `secured` runs resets over the test bed's TLS, mutual TLS, SCRAM and OAUTHBEARER listeners, each
//! failure naming its cause, and checks that no sensitive setting leaves its Secret.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

mod sasl_plain;
mod secured;

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
  annotations:
    flow.ankka.thinkmorestupidless.com/allowed-namespaces: case-c5, case-c5-bad, case-c5-auth
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
