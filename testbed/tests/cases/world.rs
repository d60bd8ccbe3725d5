//! The world of the field cases: the [`Case`] fixture builder, and what the tests read back from
//! Kafka and the API server.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The image of every streamlet (kwok runs no containers, so it is never pulled).
pub(crate) const IMAGE: &str = "registry.example.com/cart-router:1.2";

/// A streamlet `name` reading `topic` on the test bed's cluster `shop`, with `replicas`.
pub(crate) fn s<'a>(name: &'a str, topic: &'a str, replicas: i32) -> Streamlet<'a> {
    Streamlet { name, topic, cluster: "shop", replicas }
}

/// The world of one case: the end-to-end lock, shared (every case is isolated: it runs beside the
/// others, [`side_by_side`]), a fresh namespace `ns` and an operator that watches only it (its own
/// Lease, a free metrics port); its topics, groups and pipeline come from the builder methods, each
/// named for the case. The pipeline is named as the namespace unless a test names its own.
pub(crate) struct Case {
    pub(crate) ns: &'static str,
    _operator: Operator,
    // Declared last, so dropped last: the operator stops before a serial test may start.
    _lock: SideBySide,
}

impl Case {
    pub(crate) fn new(ns: &'static str) -> Case {
        Case::with_env(ns, &[])
    }

    /// As [`Case::new`], with more of the operator's environment.
    pub(crate) fn with_env(ns: &'static str, env: &[(&str, &str)]) -> Case {
        let lock = side_by_side();
        install_crd();
        install_cluster_secret();
        fresh_namespace(ns);
        let mut all = vec![("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")];
        all.extend_from_slice(env);
        Case { ns, _operator: Operator::start(&fresh_dir(ns), &all), _lock: lock }
    }

    /// `topic` created anew with `partitions` partitions of `records` records each.
    pub(crate) fn topic(&self, topic: &str, partitions: i32, records: u32) -> &Case {
        kafka::recreate_topic(topic, partitions);
        if records > 0 {
            kafka::produce(topic, partitions, records);
        }
        self
    }

    /// The consumer group of `streamlet`'s inlet, with everything it committed deleted (as offset
    /// expiry does).
    pub(crate) fn fresh_group(&self, streamlet: &str) -> String {
        let g = group(self.ns, streamlet);
        groups::forget(&g);
        g
    }

    /// As [`Case::fresh_group`], then committed at `offset` on each of `partitions` partitions of
    /// `topic`.
    pub(crate) fn group_at(&self, streamlet: &str, topic: &str, partitions: i32, offset: i64) -> String {
        let g = self.fresh_group(streamlet);
        groups::commit(&g, topic, &(0..partitions).map(|p| (p, offset)).collect::<Vec<_>>());
        g
    }

    /// The pipeline (named as the namespace) applied with `streamlets`; waits for their pods.
    pub(crate) fn apply(&self, streamlets: &[Streamlet]) {
        apply_pipeline(self.ns, self.ns, streamlets);
    }
}

pub(crate) fn group(pipeline: &str, streamlet: &str) -> String {
    format!("{pipeline}.{streamlet}.in")
}

/// The group's state as the classic DescribeGroups answers it, with its members' client ids.
pub(crate) fn group_state(g: &str) -> (String, Vec<String>) {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("consumer");
    let list = c.fetch_group_list(Some(g), Duration::from_secs(10)).expect("group list");
    list.groups()
        .iter()
        .find(|x| x.name() == g)
        .map(|x| (x.state().to_string(), x.members().iter().map(|m| m.client_id().to_string()).collect()))
        .unwrap_or_else(|| ("Dead".to_string(), vec![]))
}

/// The members of `g` as Kafka's own tool lists them (both group protocols): one line per member.
pub(crate) fn tool_members(g: &str) -> String {
    let o = Command::new(bed().root.join("testbed/kafka-tool"))
        .args(["consumer-groups", "--bootstrap-server", &bed().kafka, "--describe", "--group", g, "--members"])
        .output()
        .expect("kafka-tool runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn offsets(v: &[Option<i64>]) -> BTreeMap<i32, Option<i64>> {
    v.iter().enumerate().map(|(p, o)| (i32::try_from(p).expect("partition"), *o)).collect()
}

pub(crate) fn all(n: i32, o: i64) -> BTreeMap<i32, Option<i64>> {
    (0..n).map(|p| (p, Some(o))).collect()
}

/// Event objects (events.k8s.io) about AnkkaFlow `pipeline` with `reason`: (name, type, note), sorted
/// by note.
pub(crate) fn events(ns: &str, pipeline: &str, reason: &str) -> Vec<(String, String, String)> {
    let out = kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("events JSON");
    let mut got: Vec<(String, String, String)> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["reason"] == reason && e["regarding"]["kind"] == "AnkkaFlow" && e["regarding"]["name"] == pipeline
        })
        .map(|e| {
            let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
            (text(&e["metadata"]["name"]), text(&e["type"]), text(&e["note"]))
        })
        .collect();
    got.sort_by(|a, b| a.2.cmp(&b.2));
    got
}

pub(crate) fn notes(ns: &str, pipeline: &str, reason: &str) -> Vec<String> {
    events(ns, pipeline, reason).into_iter().map(|e| e.2).collect()
}

/// The status entry of group `g`.
pub(crate) fn group_status(ns: &str, pipeline: &str, g: &str) -> serde_json::Value {
    let st = reset_status(ns, pipeline);
    st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == g).cloned().unwrap_or_else(|| {
        panic!("no group {g} in the status: {st}");
    })
}

/// A stand-in consumer that stays in a group; stopped with SIGTERM (it leaves the group cleanly).
pub(crate) struct Member(Child);

impl Member {
    pub(crate) fn join(g: &str, topic: &str, extra: &[&str]) -> Member {
        Member(standin::hold(g, topic, extra))
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn wait_member(g: &str, client_id: &str) {
    wait_until("the member to join", Duration::from_secs(60), || {
        tool_members(g).lines().any(|l| l.contains(client_id)).then_some(())
    });
}

pub(crate) fn failed_note_prefix(g: &str, n: u32, state: &str) -> String {
    format!("{g}: consumer group [{g}] has {n} active member(s) (state {state})")
}

/// A group with a member waits for it, however long it stays: for `secs`, the request is not done,
/// nothing is reported failed and nothing moves (the group's offsets on `topic`'s 3 partitions stay
/// `before`). Returns the group's last message in the status.
pub(crate) fn waits_for_the_member(
    ns: &str,
    p: &str,
    g: &str,
    topic: &str,
    before: &BTreeMap<i32, Option<i64>>,
    secs: u64,
) -> String {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut message = String::new();
    while Instant::now() < end {
        assert_eq!(annotation(ns, p, DONE), None, "not done while the member is there");
        assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new(), "never failed for a member");
        assert_eq!(&kafka::committed(g, topic, 3), before, "nothing moves while the member is there");
        let st = reset_status(ns, p);
        if let Some(m) = st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == g) {
            assert_eq!(m["outcome"], "Pending", "{st}");
            message = m["message"].as_str().unwrap_or_default().to_string();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    message
}

/// Once the member has left, the group is reset, once: one "to earliest" event, no failure event, every
/// partition at its log start (0).
pub(crate) fn reset_once_the_member_left(ns: &str, p: &str, g: &str, topic: &str, id: &str) {
    wait_done(ns, p, id, Duration::from_secs(60));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new());
    assert_eq!(kafka::committed(g, topic, 3), all(3, 0));
    assert_eq!(group_status(ns, p, g)["outcome"], "Reset");
}

/// Deletes the cluster Secret when dropped.
pub(crate) struct SecretGuard(pub(crate) &'static str);

impl Drop for SecretGuard {
    fn drop(&mut self) {
        let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", self.0, "--ignore-not-found"]);
    }
}

pub(crate) fn bare_pod(ns: &str, pipeline: &str, name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels:
    flow.ankka.thinkmorestupidless.com/pipeline: {pipeline}
    flow.ankka.thinkmorestupidless.com/streamlet: router
spec:
  restartPolicy: Never
  containers: [{{name: process, image: {IMAGE}}}]
"
    )
}

pub(crate) fn pod_phase(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "pod", name, "-o", "jsonpath={.status.phase}"])
}
