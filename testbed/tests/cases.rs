//! The field cases of docs/field-cases.md, one end-to-end test each, on the real
//! test bed (Kafka 4.1 broker, Kubernetes control plane with kwok) with the real `flow` and
//! `flow-operator` binaries.
//!
//! Every test has its own namespace (`case-…`), its own pipeline name and so its own consumer groups
//! (`case-<x>.<streamlet>.<inlet>`), and its own topics (`case.<x>-…`). The pipelines come from the
//! real `flow generate`, run on a blueprint built from the cart example's descriptor (see
//! [`generate`]). They deliberately do not share `shop.cart-events.v1` or `cart.router.in` with the
//! other test binaries: those run at the same time on the same broker (other engineers' runs), and a
//! stray member or a topic recreated under a running test would break it.
//!
//! Covered here: A1, A2, A3, A4 (a member present at the operator's inspection), A5, B1 (with B2's
//! read-back), B3, B4, C1 (on the main broker, which does not auto-create topics), C2, C3, E1, F1
//! (first half), F3.
//!
//! A3 found that the classic DescribeGroups answers `Dead` with 0 members for a consumer-protocol
//! (KIP-848) group with a live member; the operator now describes groups with DescribeConsumerGroups,
//! and [`a3_a_consumer_protocol_member_is_seen_as_a_member_before_any_commit`] checks it.
//!
//! Covered in other test files:
//! - A4 on the commit path (a consumer joins the group between the operator's inspection and its
//!   commit, so Kafka answers UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, which must read as consumers
//!   still active, with Kafka's reason): `commit_failures.rs`
//!   (`a4_a_member_that_joins_before_the_commit_is_refused_by_kafka_and_the_reset_waits_for_it`), placed
//!   with the operator's pause fault point (`FLOW_FAULT_PAUSE_AT=after-intent`).
//! - B5 (a partition added between reading metadata and committing) and F1's second half (a consumer
//!   committing right after the reset's read-back, caught by the settle and a second read-back):
//!   `settle.rs`.
//! - C1 as reported, on the test bed's second broker, which has `auto.create.topics.enable=true`:
//!   `autocreate.rs`. [`c1_a_missing_topic_is_a_failure_naming_it_and_creates_nothing`] here covers
//!   the rest of it on the main broker.
//! - C4 (a topic deleted, or recreated with fewer partitions, between the fence and the commit; offsets
//!   that read back otherwise than committed): `commit_failures.rs`, with the same pause fault point.
//!   A commit refused for lack of rights on one topic needs an authorizer, which the test bed's broker
//!   does not run (a test-bed change), and is not covered.
//! - F2 (a request pending when the operator starts, before its caches sync), and F1 with a
//!   Terminating pod whose container commits on close: `running.rs`.
//! - C5 (SASL/PLAIN): `security.rs`, on the test bed broker's SASL listener.
//! - D1 and D5: `exactly_once.rs`.
//!
//! Not covered, and why:
//! - C3's "batched lookups" is not observable from outside on one local broker; only the duration is
//!   measured.
//! - D2–D4 and E2 are not covered here.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use flow_testbed::cart::{DONE, REQUEST};
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

const DESCRIPTOR: &str = "cart-router";
const IMAGE: &str = "registry.example.com/cart-router:1.2";

/// One streamlet of a test pipeline: its name, the Kafka topic its inlet `in` reads, the cluster of
/// that topic (`shop` is the test bed's broker), and its replicas.
#[derive(Clone, Copy)]
struct S<'a> {
    name: &'a str,
    topic: &'a str,
    cluster: &'a str,
    replicas: i32,
}

fn s<'a>(name: &'a str, topic: &'a str, replicas: i32) -> S<'a> {
    S { name, topic, cluster: "shop", replicas }
}

/// The AnkkaFlow of pipeline `pipeline` in `ns`: the output of the real `flow generate` on a blueprint
/// whose streamlets all run the cart example's `cart-router` descriptor, each reading its own
/// unmanaged topic (outlets left unconnected), with each streamlet's replicas from a deploy-time file.
fn generate(ns: &str, pipeline: &str, streamlets: &[S]) -> String {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("blueprint-{pipeline}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    let mut bp = format!("blueprint {{\n  name = {pipeline}\n  streamlets {{\n");
    for x in streamlets {
        bp += &format!("    {} = {DESCRIPTOR}\n", x.name);
    }
    bp += "  }\n  topics {\n";
    for x in streamlets {
        bp += &format!(
            "    t-{n} {{\n      managed = false\n      topic.name = \"{t}\"\n      cluster = {c}\n      consumers = [{n}.in]\n      consumer-config {{ auto.offset.reset = earliest }}\n    }}\n",
            n = x.name,
            t = x.topic,
            c = x.cluster
        );
    }
    bp += "  }\n}\n";
    std::fs::write(dir.join("blueprint.conf"), bp).expect("blueprint");
    let conf: String =
        streamlets.iter().map(|x| format!("flow.streamlets.{} {{ replicas = {} }}\n", x.name, x.replicas)).collect();
    std::fs::write(dir.join("replicas.conf"), conf).expect("conf");
    let mut args: Vec<String> =
        ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "replicas.conf"].map(String::from).to_vec();
    for x in streamlets {
        args.extend(["--image".to_string(), format!("{}={IMAGE}", x.name)]);
    }
    args.extend(["-n".to_string(), ns.to_string()]);
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// Applies the pipeline and waits until it has exactly as many pods (all Running) as its replicas.
fn apply(ns: &str, pipeline: &str, streamlets: &[S]) {
    kubectl_apply(&generate(ns, pipeline, streamlets));
    let want = streamlets.iter().map(|x| usize::try_from(x.replicas).unwrap_or(0)).sum::<usize>();
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, pipeline) == want && pipeline_pods(ns, pipeline).len() == want).then_some(())
    });
}

/// A fresh namespace `ns` and an operator that watches only it (its own Lease, a free metrics port).
fn operator(ns: &str) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")])
}

fn group(pipeline: &str, streamlet: &str) -> String {
    format!("{pipeline}.{streamlet}.in")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Deletes consumer group `g` with everything it committed (as offset expiry does); no error when it
/// does not exist.
fn forget_group(g: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let _ = runtime().block_on(admin.delete_groups(&[g], &opts));
    wait_until("the group to be gone", Duration::from_secs(30), || (group_state(g).0 == "Dead").then_some(()));
}

/// Commits `offsets` for group `g` on `topic` by hand, without joining the group.
fn commit(g: &str, topic: &str, offsets: &[(i32, i64)]) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bed().kafka)
        .set("group.id", g)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*o)).expect("offset");
    }
    c.commit(&tpl, CommitMode::Sync).expect("commit by hand");
}

/// The group's state as the classic DescribeGroups answers it, with its members' client ids.
fn group_state(g: &str) -> (String, Vec<String>) {
    let c: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("consumer");
    let list = c.fetch_group_list(Some(g), Duration::from_secs(10)).expect("group list");
    list.groups()
        .iter()
        .find(|x| x.name() == g)
        .map(|x| (x.state().to_string(), x.members().iter().map(|m| m.client_id().to_string()).collect()))
        .unwrap_or_else(|| ("Dead".to_string(), vec![]))
}

/// The members of `g` as Kafka's own tool lists them (both group protocols): one line per member.
fn tool_members(g: &str) -> String {
    let o = Command::new(bed().root.join("testbed/kafka-tool"))
        .args(["consumer-groups", "--bootstrap-server", &bed().kafka, "--describe", "--group", g, "--members"])
        .output()
        .expect("kafka-tool runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn offsets(v: &[Option<i64>]) -> BTreeMap<i32, Option<i64>> {
    v.iter().enumerate().map(|(p, o)| (i32::try_from(p).expect("partition"), *o)).collect()
}

fn all(n: i32, o: i64) -> BTreeMap<i32, Option<i64>> {
    (0..n).map(|p| (p, Some(o))).collect()
}

/// Writes request `{"id":id,"streamlets":[…]}` on AnkkaFlow `pipeline` by hand, past the CLI's guards.
fn request(ns: &str, pipeline: &str, id: &str, streamlets: &[&str]) {
    let text = serde_json::json!({"id": id, "streamlets": streamlets}).to_string();
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", pipeline, &format!("{REQUEST}={text}")]);
}

/// `flow reset <pipeline> -n <ns> <extra…>`; returns the request id it printed.
fn cli_reset(ns: &str, pipeline: &str, extra: &[&str]) -> String {
    let mut args = vec!["reset", pipeline, "-n", ns];
    args.extend(extra);
    let o = flow(&args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "flow {args:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.starts_with(&format!("reset requested for '{pipeline}': ")), "{out}");
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

fn wait_done(ns: &str, pipeline: &str, id: &str, timeout: Duration) {
    wait_until(&format!("request {id} done"), timeout, || {
        (annotation(ns, pipeline, DONE).as_deref() == Some(id)).then_some(())
    });
}

/// Event objects (events.k8s.io) about AnkkaFlow `pipeline` with `reason`: (name, type, note), sorted
/// by note.
fn events(ns: &str, pipeline: &str, reason: &str) -> Vec<(String, String, String)> {
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

fn notes(ns: &str, pipeline: &str, reason: &str) -> Vec<String> {
    events(ns, pipeline, reason).into_iter().map(|e| e.2).collect()
}

fn reset_status(ns: &str, pipeline: &str) -> serde_json::Value {
    let text = kubectl_ok(&["-n", ns, "get", "aflow", pipeline, "-o", "jsonpath={.status.reset}"]);
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// The status entry of group `g`.
fn group_status(ns: &str, pipeline: &str, g: &str) -> serde_json::Value {
    let st = reset_status(ns, pipeline);
    st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == g).cloned().unwrap_or_else(|| {
        panic!("no group {g} in the status: {st}");
    })
}

/// A stand-in consumer that stays in a group; stopped with SIGTERM (it leaves the group cleanly).
struct Member(Child);

impl Member {
    fn join(g: &str, topic: &str, extra: &[&str]) -> Member {
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

fn wait_member(g: &str, client_id: &str) {
    wait_until("the member to join", Duration::from_secs(60), || {
        tool_members(g).lines().any(|l| l.contains(client_id)).then_some(())
    });
}

fn failed_note_prefix(g: &str, n: u32, state: &str) -> String {
    format!("{g}: consumer group [{g}] has {n} active member(s) (state {state})")
}

/// A group with a member waits for it, however long it stays: for `secs`, the request is not done,
/// nothing is reported failed and nothing moves (the group's offsets on `topic`'s 3 partitions stay
/// `before`). Returns the group's last message in the status.
fn waits_for_the_member(
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
fn reset_once_the_member_left(ns: &str, p: &str, g: &str, topic: &str, id: &str) {
    wait_done(ns, p, id, Duration::from_secs(60));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new());
    assert_eq!(kafka::committed(g, topic, 3), all(3, 0));
    assert_eq!(group_status(ns, p, g)["outcome"], "Reset");
}

/// A1: a live member outside Kubernetes; replicas 0 and no pods. Nothing is committed while it stays,
/// however long (20 s here, past the 15 s after which a group used to fail), and the group's status
/// names the member count and state; never a failure. Once it has left, the group is reset, once.
#[test]
fn a1_a_live_member_outside_kubernetes_makes_the_reset_wait_and_nothing_moves() {
    let _serial = serial();
    let (ns, p, topic) = ("case-a1", "case-a1", "case.a1-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    forget_group(&g);
    standin::read(&g, topic, 60);
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20));
    apply(ns, p, &[s("router", topic, 0)]);
    assert!(pipeline_pods(ns, p).is_empty());

    let member = Member::join(&g, topic, &[]);
    wait_until("the group Stable with 1 member", Duration::from_secs(60), || {
        let (state, members) = group_state(&g);
        (state == "Stable" && members.len() == 1).then_some(())
    });

    let id = "a1000000-0000-4000-8000-000000000001";
    request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 20);
    let prefix = failed_note_prefix(&g, 1, "Stable");
    let shown = prefix.split_once(": ").map_or("", |(_, m)| m);
    assert!(message.starts_with(shown) && message.contains("the reset waits until it leaves"), "{message}");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A2: a group that never existed, and a group that describes as Dead because its offsets are gone
/// (deleted, as expiry does): both count as inactive, and the reset creates offsets for every
/// partition at its log start.
#[test]
fn a2_groups_that_never_existed_or_are_dead_get_offsets_at_every_partition() {
    let _serial = serial();
    let (ns, p) = ("case-a2", "case-a2");
    let (fresh_t, dead_t) = ("case.a2-fresh", "case.a2-expired");
    let (fresh_g, dead_g) = (group(p, "fresh"), group(p, "expired"));
    let _op = operator(ns);
    for t in [fresh_t, dead_t] {
        kafka::recreate_topic(t, 3);
        kafka::produce(t, 3, 10);
    }
    kafka::delete_records(fresh_t, 2, 3);
    forget_group(&fresh_g);
    standin::read(&dead_g, dead_t, 30);
    assert_eq!(kafka::committed(&dead_g, dead_t, 3), all(3, 10));
    forget_group(&dead_g);
    for (g, t) in [(&fresh_g, fresh_t), (&dead_g, dead_t)] {
        assert_eq!(group_state(g), ("Dead".to_string(), vec![]), "{g}");
        assert_eq!(kafka::committed(g, t, 3), offsets(&[None, None, None]), "{g}");
    }
    apply(ns, p, &[s("fresh", fresh_t, 0), s("expired", dead_t, 0)]);

    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&fresh_g, fresh_t, 3), offsets(&[Some(0), Some(0), Some(3)]));
    assert_eq!(kafka::committed(&dead_g, dead_t, 3), all(3, 0));
    assert_eq!(
        notes(ns, p, "ResetOffsets"),
        [
            format!("{dead_g}: 3 partition(s) of '{dead_t}' to earliest"),
            format!("{fresh_g}: 3 partition(s) of '{fresh_t}' to earliest"),
        ]
    );
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new());
    assert_eq!(group_status(ns, p, &fresh_g)["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 3}));
    assert_eq!(group_status(ns, p, &fresh_g).get("offsetsBefore"), None, "no offsets before");
}

/// A3: the group's only member uses the consumer group protocol (KIP-848), which the classic describe
/// may not show. The reset must not go ahead while it is there: nothing committed, no event; once it
/// has left, the group is reset.
#[test]
fn a3_a_consumer_protocol_member_is_never_taken_for_an_inactive_group() {
    let _serial = serial();
    let (ns, p, topic) = ("case-a3", "case-a3", "case.a3-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    forget_group(&g);
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, p, &[s("router", topic, 0)]);
    let member = Member::join(&g, topic, &["--group-protocol", "consumer"]);
    wait_member(&g, &g);
    let classic = group_state(&g);

    let id = "a3000000-0000-4000-8000-000000000003";
    request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 8);
    eprintln!("A3: classic describe said {classic:?}; the operator shows {message:?}");
    assert!(
        message.contains("has 1 active member(s)") || message.contains("consumers are still active in the group"),
        "classic describe said {classic:?}; {message:?}"
    );
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new(), "never a 'to earliest' event");
    assert!(tool_members(&g).contains(&g), "the member is still there");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A4: a stray consumer joined the inlet's group while reading another topic. The reset waits for it
/// (members present); nothing is committed on the inlet's topic; the operator itself never joins the
/// group; once the stray has left, the group is reset.
#[test]
fn a4_a_stray_member_reading_another_topic_makes_the_reset_wait_and_the_operator_never_joins() {
    let _serial = serial();
    let (ns, p, topic, other) = ("case-a4", "case-a4", "case.a4-events", "case.a4-other");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    kafka::recreate_topic(other, 1);
    forget_group(&g);
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, p, &[s("router", topic, 0)]);
    let stray = Member::join(&g, other, &[]);
    wait_until("the stray Stable", Duration::from_secs(60), || {
        let (state, members) = group_state(&g);
        (state == "Stable" && members.len() == 1).then_some(())
    });

    let id = "a4000000-0000-4000-8000-000000000004";
    request(ns, p, id, &["router"]);
    let end = Instant::now() + Duration::from_secs(8);
    let mut seen = 0;
    while Instant::now() < end {
        let (_, members) = group_state(&g);
        assert_eq!(members, std::slice::from_ref(&g), "only the stray is ever a member: the operator never joins");
        seen += 1;
    }
    assert!(seen > 10, "the group was looked at during the reset");
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 1);
    assert!(message.starts_with(&format!("consumer group [{g}] has 1 active member(s) (state Stable)")), "{message}");
    drop(stray);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A5: one request for `router` (stopped) and `enricher` (running). The rule: the request is one
/// unit. It waits as a whole, naming only the running target, and nothing is committed for either
/// group; once every target has stopped, all are reset. To reset the stopped one now, request it
/// alone: `flow reset <pipeline> --streamlet router`.
#[test]
fn a5_a_request_with_one_running_target_waits_as_a_whole() {
    let _serial = serial();
    let (ns, p) = ("case-a5", "case-a5");
    let (rt, et) = ("case.a5-router", "case.a5-enricher");
    let (rg, eg) = (group(p, "router"), group(p, "enricher"));
    let _op = operator(ns);
    for (g, t) in [(&rg, rt), (&eg, et)] {
        kafka::recreate_topic(t, 3);
        kafka::produce(t, 3, 20);
        forget_group(g);
        commit(g, t, &[(0, 20), (1, 20), (2, 20)]);
    }
    apply(ns, p, &[s("router", rt, 0), s("enricher", et, 1)]);

    // The CLI refuses the pair while enricher runs.
    let o = flow(&["reset", p, "--streamlet", "router", "--streamlet", "enricher", "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(
            "cannot reset offsets while streamlets are running: [enricher] is not scaled to 0; [enricher] still has 1 pod(s)."
        ),
        "{err}"
    );

    // Past the CLI, the operator waits for the whole request.
    let id = "a5000000-0000-4000-8000-000000000005";
    request(ns, p, id, &["router", "enricher"]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: enricher is not scaled to 0; enricher still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 20), "router is not reset while the request waits");
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 20));
    assert_eq!(annotation(ns, p, DONE), None);
    let st = reset_status(ns, p);
    assert_eq!(st["phase"], "Waiting");
    assert_eq!(st["detail"], "enricher is not scaled to 0; enricher still has 1 pod(s)");
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());

    // enricher stops: both are reset by the same request.
    apply(ns, p, &[s("router", rt, 0), s("enricher", et, 0)]);
    wait_done(ns, p, id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 0));
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 0));
    assert_eq!(
        notes(ns, p, "ResetOffsets"),
        [format!("{eg}: 3 partition(s) of '{et}' to earliest"), format!("{rg}: 3 partition(s) of '{rt}' to earliest"),]
    );

    // The way to reset the stopped one while the other runs: request it alone.
    apply(ns, p, &[s("router", rt, 0), s("enricher", et, 1)]);
    for (g, t) in [(&rg, rt), (&eg, et)] {
        commit(g, t, &[(0, 20), (1, 20), (2, 20)]);
    }
    let id2 = cli_reset(ns, p, &["--streamlet", "router"]);
    wait_done(ns, p, &id2, Duration::from_secs(60));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 0));
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 20), "enricher untouched");
    assert_eq!(notes(ns, p, "ResetOffsets").len(), 3);
}

/// B1 (and B2): log start offsets moved by DeleteRecords to 50 (p1) and 30 (p2), group at 10/10/10.
/// The reset commits the log start offsets, read back as absolute numbers 0/50/30, and the status
/// says the same; a consumer restarted with `auto.offset.reset=latest` starts at them.
#[test]
fn b1_earliest_is_each_partitions_log_start_offset() {
    let _serial = serial();
    let (ns, p, topic) = ("case-b1", "case-b1", "case.b1-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 100);
    kafka::delete_records(topic, 1, 50);
    kafka::delete_records(topic, 2, 30);
    assert_eq!(kafka::watermarks(topic), [(0, (0, 100)), (1, (50, 100)), (2, (30, 100))].into());
    forget_group(&g);
    commit(&g, topic, &[(0, 10), (1, 10), (2, 10)]);
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 10));
    apply(ns, p, &[s("router", topic, 0)]);

    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), offsets(&[Some(0), Some(50), Some(30)]));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    let gs = group_status(ns, p, &g);
    assert_eq!(gs["outcome"], "Reset");
    assert_eq!(gs["offsetsAfter"], serde_json::json!({"0": 0, "1": 50, "2": 30}));
    assert_eq!(gs["offsetsBefore"], serde_json::json!({"0": 10, "1": 10, "2": 10}));
    assert_eq!(gs["partitions"], 3);
    assert_eq!(gs["recordsToReprocess"], 100 + 50 + 70);

    // The streamlet restarts with auto.offset.reset=latest: it starts at the committed log starts.
    let o = Command::new(bin("flow-standin"))
        .args(["--bootstrap-servers", &bed().kafka, "--group", &g, "--topic", topic])
        .args(["--expect", "220", "--timeout", "60", "--auto-offset-reset", "latest"])
        .output()
        .expect("flow-standin runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(summary["first"], serde_json::json!({"0": 0, "1": 50, "2": 30}), "{summary}");
    assert_eq!(summary["records"], 220);
}

/// B3: a partition that is empty (log start = high watermark = 0) next to ones with records, and a
/// fresh topic with no records and a group that never committed: offset 0 is committed and read
/// back as 0, never as "no offset".
#[test]
fn b3_empty_partitions_and_a_fresh_topic_read_back_zero() {
    let _serial = serial();
    let (ns, p) = ("case-b3", "case-b3");
    let (sparse_t, fresh_t) = ("case.b3-sparse", "case.b3-fresh");
    let (sparse_g, fresh_g) = (group(p, "sparse"), group(p, "fresh"));
    let _op = operator(ns);
    kafka::recreate_topic(sparse_t, 3);
    kafka::produce(sparse_t, 1, 5); // p0 only
    kafka::recreate_topic(fresh_t, 3);
    assert_eq!(kafka::watermarks(sparse_t), [(0, (0, 5)), (1, (0, 0)), (2, (0, 0))].into());
    assert_eq!(kafka::watermarks(fresh_t), [(0, (0, 0)), (1, (0, 0)), (2, (0, 0))].into());
    forget_group(&sparse_g);
    forget_group(&fresh_g);
    commit(&sparse_g, sparse_t, &[(0, 5)]);
    apply(ns, p, &[s("sparse", sparse_t, 0), s("fresh", fresh_t, 0)]);

    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&sparse_g, sparse_t, 3), all(3, 0));
    assert_eq!(kafka::committed(&fresh_g, fresh_t, 3), all(3, 0));
    assert_eq!(
        notes(ns, p, "ResetOffsets"),
        [
            format!("{fresh_g}: 3 partition(s) of '{fresh_t}' to earliest"),
            format!("{sparse_g}: 3 partition(s) of '{sparse_t}' to earliest"),
        ]
    );
    assert_eq!(group_status(ns, p, &fresh_g)["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
    assert_eq!(group_status(ns, p, &sparse_g)["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
}

/// B4: the group committed only p0 of 3 partitions. All 3 are reset (the partitions come from the
/// topic's metadata), p2 to its log start 5.
#[test]
fn b4_partitions_the_group_never_committed_are_reset_too() {
    let _serial = serial();
    let (ns, p, topic) = ("case-b4", "case-b4", "case.b4-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    kafka::delete_records(topic, 2, 5);
    forget_group(&g);
    commit(&g, topic, &[(0, 20)]);
    assert_eq!(kafka::committed(&g, topic, 3), offsets(&[Some(20), None, None]));
    apply(ns, p, &[s("router", topic, 0)]);

    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), offsets(&[Some(0), Some(0), Some(5)]));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    let gs = group_status(ns, p, &g);
    assert_eq!(gs["offsetsBefore"], serde_json::json!({"0": 20}));
    assert_eq!(gs["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 5}));
}

/// C1 without the auto-create broker: the inlet's topic does not exist. A final failure naming the
/// topic (at the first attempt), the broker's topics unchanged, nothing committed.
#[test]
fn c1_a_missing_topic_is_a_failure_naming_it_and_creates_nothing() {
    let _serial = serial();
    let (ns, p, topic) = ("case-c1", "case-c1", "case.c1-events-v2");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 1);
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
    runtime()
        .block_on(admin.delete_topics(&[topic], &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))))
        .expect("delete_topics");
    wait_until("the topic gone", Duration::from_secs(30), || {
        (!kafka::topics().contains(&topic.to_string())).then_some(())
    });
    forget_group(&g);
    apply(ns, p, &[s("router", topic, 0)]);
    let mut before = kafka::topics();
    before.sort();

    let t0 = Instant::now();
    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert!(t0.elapsed() < Duration::from_secs(12), "a missing topic is final, not retried: {:?}", t0.elapsed());
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), [format!("{g}: topic '{topic}' does not exist")]);
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
    let mut after = kafka::topics();
    after.sort();
    assert!(!after.contains(&topic.to_string()), "the topic was created");
    let created: Vec<&String> = after.iter().filter(|t| !before.contains(t) && t.starts_with("case.c1")).collect();
    assert!(created.is_empty(), "{created:?}");
    assert_eq!(group_state(&g).0, "Dead", "nothing committed");
}

/// Deletes the cluster Secret when dropped.
struct SecretGuard(&'static str);

impl Drop for SecretGuard {
    fn drop(&mut self) {
        let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", self.0, "--ignore-not-found"]);
    }
}

/// C2: a cluster Secret pointing at a port nothing listens on. The group fails with a transport
/// reason once the retry time has passed (`FLOW_RESET_RETRY_SECONDS`, 20 s here), not before, and another pipeline reset at the same time by the same operator
/// is done long before.
#[test]
fn c2_an_unreachable_cluster_fails_in_bounded_time_and_other_pipelines_keep_working() {
    let _serial = serial();
    let ns = "case-c2";
    let (bad_p, good_p) = ("case-c2-broken", "case-c2-good");
    let (bad_t, good_t) = ("case.c2-broken", "case.c2-good");
    let (bad_g, good_g) = (group(bad_p, "router"), group(good_p, "router"));
    // Transient failures are retried for 20 s here (300 s by default).
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let env =
        [("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0"), ("FLOW_RESET_RETRY_SECONDS", "20")];
    let _op = Operator::start(&fresh_dir(ns), &env);
    let _secret = SecretGuard("kafka-cluster-broken");
    kubectl_apply(
        "apiVersion: v1
kind: Secret
metadata:
  name: kafka-cluster-broken
  namespace: ankka-flow
  labels:
    flow.ankka.thinkmorestupidless.com/kafka-cluster: broken
  annotations:
    flow.ankka.thinkmorestupidless.com/allowed-namespaces: case-c2
stringData:
  bootstrap.servers: 127.0.0.1:1
  connection-config: |
    security.protocol=PLAINTEXT
",
    );
    kafka::recreate_topic(good_t, 3);
    kafka::produce(good_t, 3, 20);
    forget_group(&good_g);
    commit(&good_g, good_t, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, bad_p, &[S { name: "router", topic: bad_t, cluster: "broken", replicas: 0 }]);
    apply(ns, good_p, &[s("router", good_t, 0)]);

    let t0 = Instant::now();
    let bad_id = cli_reset(ns, bad_p, &[]);
    let good_id = cli_reset(ns, good_p, &[]);
    wait_done(ns, good_p, &good_id, Duration::from_secs(30));
    let good_took = t0.elapsed();
    assert_eq!(annotation(ns, bad_p, DONE), None, "the broken cluster's reset is still retrying");
    assert_eq!(kafka::committed(&good_g, good_t, 3), all(3, 0));
    assert_eq!(notes(ns, good_p, "ResetOffsets"), [format!("{good_g}: 3 partition(s) of '{good_t}' to earliest")]);

    wait_done(ns, bad_p, &bad_id, Duration::from_secs(180));
    let bad_took = t0.elapsed();
    eprintln!("C2: good pipeline done after {good_took:?}, broken one failed after {bad_took:?}");
    assert!(bad_took >= Duration::from_secs(20), "failed before the retry time: {bad_took:?}");
    assert!(bad_took < Duration::from_secs(180), "{bad_took:?}");
    let failed = notes(ns, bad_p, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let reason = failed[0].strip_prefix(&format!("{bad_g}: ")).unwrap_or_else(|| panic!("{failed:?}"));
    let transport = ["Timed out", "timed out", "transport", "Transport", "Connection refused", "brokers are down"];
    assert!(transport.iter().any(|w| reason.contains(w)), "not a transport reason: {reason}");
    assert_eq!(notes(ns, bad_p, "ResetOffsets"), Vec::<String>::new());
}

/// E1: one request resets three groups with the same outcome: three Event objects on the API
/// server, with three names, each with its own group's note; no more after a while.
#[test]
fn e1_three_groups_give_three_events_each_with_its_own_note() {
    let _serial = serial();
    let (ns, p) = ("case-e1", "case-e1");
    let names = ["alpha", "beta", "gamma"];
    let topics = ["case.e1-alpha", "case.e1-beta", "case.e1-gamma"];
    let _op = operator(ns);
    for (n, t) in names.iter().zip(topics) {
        kafka::recreate_topic(t, 3);
        kafka::produce(t, 3, 10);
        forget_group(&group(p, n));
        commit(&group(p, n), t, &[(0, 10), (1, 10), (2, 10)]);
    }
    let streamlets: Vec<S> = names.iter().zip(topics).map(|(n, t)| s(n, t, 0)).collect();
    apply(ns, p, &streamlets);

    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(3));
    let got = events(ns, p, "ResetOffsets");
    let want: Vec<String> = names
        .iter()
        .zip(topics)
        .map(|(n, t)| format!("{}: 3 partition(s) of '{t}' to earliest", group(p, n)))
        .collect();
    assert_eq!(got.iter().map(|e| e.2.clone()).collect::<Vec<_>>(), want);
    let mut object_names: Vec<&String> = got.iter().map(|e| &e.0).collect();
    object_names.sort();
    object_names.dedup();
    assert_eq!(object_names.len(), 3, "three distinct Event objects: {got:?}");
    assert!(got.iter().all(|e| e.1 == "Normal"), "{got:?}");
    for (n, t) in names.iter().zip(topics) {
        assert_eq!(kafka::committed(&group(p, n), t, 3), all(3, 0));
    }
}

fn bare_pod(ns: &str, pipeline: &str, name: &str) -> String {
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

fn pod_phase(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "pod", name, "-o", "jsonpath={.status.phase}"])
}

/// F3: pods of the streamlet left in phase Failed or Succeeded do not block a reset (they cannot run
/// any more); a Running one does, counted alone, until it goes.
#[test]
fn f3_failed_and_succeeded_pods_do_not_block_a_reset_running_ones_do() {
    let _serial = serial();
    let (ns, p, topic) = ("case-f3", "case-f3", "case.f3-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    forget_group(&g);
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, p, &[s("router", topic, 0)]);

    // Two leftovers, driven to Failed and Succeeded through the status subresource.
    for (name, phase) in [("router-failed", "Failed"), ("router-succeeded", "Succeeded")] {
        kubectl_apply(&bare_pod(ns, p, name));
        wait_until("the pod Running", Duration::from_secs(60), || (pod_phase(ns, name) == "Running").then_some(()));
        let patch = format!("{{\"status\":{{\"phase\":\"{phase}\"}}}}");
        kubectl_ok(&["-n", ns, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", &patch]);
        wait_until("the phase", Duration::from_secs(30), || (pod_phase(ns, name) == phase).then_some(()));
    }
    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetRefused"), Vec::<String>::new(), "finished pods never made it wait");
    assert_eq!(pod_phase(ns, "router-failed"), "Failed", "kwok left the phase alone");
    assert_eq!(pod_phase(ns, "router-succeeded"), "Succeeded");

    // A Running pod next to them blocks, counted alone.
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    kubectl_apply(&bare_pod(ns, p, "router-running"));
    wait_until("the pod Running", Duration::from_secs(60), || {
        (pod_phase(ns, "router-running") == "Running").then_some(())
    });
    let o = flow(&["reset", p, "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "cannot reset offsets while streamlets are running: [router] still has 1 pod(s). Stop them first: set replicas: 0 \
         for router (flow generate --conf with flow.streamlets.<name>.replicas = 0) and apply, then wait for their pods to go.\n"
    );
    let id2 = "f3000000-0000-4000-8000-000000000003";
    request(ns, p, id2, &[]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id2} waits: router still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20), "nothing moves while a pod runs");
    kubectl_ok(&["-n", ns, "delete", "pod", "router-running", "--wait=true", "--timeout=60s"]);
    wait_done(ns, p, id2, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetOffsets").len(), 2);
}

/// A3, the rule itself: a consumer-protocol (KIP-848) member is seen as a member, so the group waits
/// for having one active member, without any commit being tried (the classic describe's `Dead` with 0
/// members is not taken as proof of inactivity).
#[test]
fn a3_a_consumer_protocol_member_is_seen_as_a_member_before_any_commit() {
    let _serial = serial();
    let (ns, p, topic) = ("case-a3b", "case-a3b", "case.a3b-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    forget_group(&g);
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, p, &[s("router", topic, 0)]);
    let member = Member::join(&g, topic, &["--group-protocol", "consumer"]);
    wait_member(&g, &g);

    let id = "a3000000-0000-4000-8000-00000000003b";
    request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 6);
    // Seen as a member by the inspection, not learnt from a refused commit.
    assert!(message.starts_with(&format!("consumer group [{g}] has 1 active member(s) (state ")), "{message}");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// C3: a 500-partition topic is reset in seconds, every partition at its log start, in one request.
/// Measured from the request to the done annotation.
#[test]
fn c3_a_500_partition_topic_is_reset_in_seconds() {
    let _serial = serial();
    let (ns, p, topic) = ("case-c3", "case-c3", "case.c3-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 500);
    kafka::produce(topic, 500, 2);
    forget_group(&g);
    let offsets: Vec<(i32, i64)> = (0..500).map(|p| (p, 2)).collect();
    commit(&g, topic, &offsets);
    apply(ns, p, &[s("router", topic, 0)]);

    let t0 = Instant::now();
    let id = cli_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(120));
    let took = t0.elapsed();
    eprintln!("C3: 500 partitions reset in {took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(kafka::committed(&g, topic, 500), all(500, 0));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 500 partition(s) of '{topic}' to earliest")]);
    assert_eq!(group_status(ns, p, &g)["partitions"], 500);
}

/// Takes the finalizer off a pod when dropped, so that it can go (and its namespace with it).
struct Finalized<'a>(&'a str, &'a str);

impl Drop for Finalized<'_> {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "-n",
            self.0,
            "patch",
            "pod",
            self.1,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
    }
}

/// F1 (its first half): a pod that is Terminating (deletionTimestamp set, kept by a finalizer, long
/// grace period) still counts: the CLI refuses, the operator waits and moves nothing; once the pod is
/// gone, the reset happens. (The second half, a consumer committing right after the reset, cannot be
/// placed deterministically.)
#[test]
fn f1_a_terminating_pod_blocks_the_reset_until_it_is_gone() {
    let _serial = serial();
    let (ns, p, topic) = ("case-f1", "case-f1", "case.f1-events");
    let g = group(p, "router");
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    forget_group(&g);
    commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply(ns, p, &[s("router", topic, 0)]);

    let pod = bare_pod(ns, p, "router-stopping")
        .replace("  restartPolicy: Never\n", "  restartPolicy: Never\n  terminationGracePeriodSeconds: 600\n");
    let pod = pod.replace("  labels:\n", "  finalizers: [case.example.com/hold]\n  labels:\n");
    kubectl_apply(&pod);
    let _release = Finalized(ns, "router-stopping");
    wait_until("the pod Running", Duration::from_secs(60), || {
        (pod_phase(ns, "router-stopping") == "Running").then_some(())
    });
    kubectl_ok(&["-n", ns, "delete", "pod", "router-stopping", "--wait=false"]);
    wait_until("the pod Terminating", Duration::from_secs(30), || {
        let t =
            kubectl_ok(&["-n", ns, "get", "pod", "router-stopping", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
        (!t.is_empty()).then_some(())
    });

    let o = flow(&["reset", p, "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .starts_with("cannot reset offsets while streamlets are running: [router] still has 1 pod(s)."),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let id = "f1000000-0000-4000-8000-000000000001";
    request(ns, p, id, &[]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: router still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20), "nothing moves while a pod is stopping");
    assert_eq!(annotation(ns, p, DONE), None);

    kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "pod",
        "router-stopping",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_done(ns, p, id, Duration::from_secs(60));
    assert!(pipeline_pods(ns, p).is_empty());
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 0));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
}
