//! The settle after a reset's read-back (issue 6), end to end on the test bed: cases F1 (second half)
//! and B5 of docs/field-cases.md. The operator's reset is paused between two of its
//! effects (`FLOW_FAULT_PAUSE_AT`, `operator/src/faults.rs`) and the world is changed under it:
//!
//! - F1: right after the reset's commit was read back, a consumer that is no longer a member (a pod
//!   that was gone but still closing) commits its old position over the reset. The read after the
//!   settle (`FLOW_RESET_SETTLE_SECONDS`) must catch it: a failure event saying a consumer overwrote
//!   the reset, listing every moved partition, the group failed in the status, done written, and
//!   never a "to earliest" event. With the settle off, the same history goes unnoticed (the
//!   documented cost of turning it off, and proof that the setting reaches the machine).
//! - B5: a partition is added to the topic after the intent (the partitions to reset) was taken and
//!   before the commit. The reset stays a success for the 3 partitions it covered, the normal event
//!   counts those 3, and a warning names the added partition, which keeps no offset.
//!
//! Each test has its own namespace, pipeline, topic and group (`settle-…`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;

/// A fresh namespace `ns` with an operator that watches only it, pauses `pause` seconds at `point`
/// and settles `settle` seconds after a read-back.
fn paused_operator(ns: &str, point: &str, pause: u64, settle: u64) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let (pause, settle) = (pause.to_string(), settle.to_string());
    Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_FAULT_PAUSE_AT", point),
            ("FLOW_FAULT_PAUSE_SECONDS", &pause),
            ("FLOW_RESET_SETTLE_SECONDS", &settle),
        ],
    )
}

/// Topic `topic` with 3 partitions of 20 records, which group `g` has read to the end (20/20/20), and
/// the pipeline `p` in `ns` whose stopped streamlet `router` reads it.
fn consumed_topic(ns: &str, p: &str, g: &str, topic: &str) {
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    groups::forget(g);
    groups::commit(g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);
}

/// Events (events.k8s.io) about AnkkaFlow `pipeline` with `reason`: (type, note), sorted by note.
fn events(ns: &str, pipeline: &str, reason: &str) -> Vec<(String, String)> {
    let out = kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("events JSON");
    let mut got: Vec<(String, String)> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["reason"] == reason && e["regarding"]["kind"] == "AnkkaFlow" && e["regarding"]["name"] == pipeline
        })
        .map(|e| (e["type"].as_str().unwrap_or_default().into(), e["note"].as_str().unwrap_or_default().into()))
        .collect();
    got.sort_by(|a, b| a.1.cmp(&b.1));
    got
}

/// The status entry of group `g`.
fn group_entry(ns: &str, pipeline: &str, g: &str) -> serde_json::Value {
    let st = reset_status(ns, pipeline);
    st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == g).cloned().unwrap_or_else(|| {
        panic!("no group {g} in the status: {st}");
    })
}

/// Waits until the operator pauses at its fault point and every partition of `g` holds `want`
/// (offset, metadata); returns when that was seen.
fn wait_paused_at(op: &Operator, g: &str, topic: &str, want: &BTreeMap<i32, Option<(i64, String)>>) -> Instant {
    let n = i32::try_from(want.len()).expect("partitions");
    wait_until(&format!("the operator paused, {g} at {want:?}"), Duration::from_secs(60), || {
        let paused = op.log_text().contains("fault injection: pausing here on purpose");
        (paused && groups::positions(g, topic, n) == *want).then_some(())
    });
    Instant::now()
}

fn wait_done(ns: &str, p: &str, id: &str) {
    wait_until(&format!("request {id} done"), Duration::from_secs(90), || {
        (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(())
    });
}

fn all(offset: i64, metadata: &str) -> BTreeMap<i32, Option<(i64, String)>> {
    (0..3).map(|p| (p, Some((offset, metadata.to_string())))).collect()
}

/// F1, second half: a consumer overwrites the reset during the settle (the operator paused right
/// after the commit's read-back). The group fails with every moved partition listed.
#[test]
fn f1_a_consumer_that_overwrites_the_reset_during_the_settle_fails_the_group() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operator
    let (ns, p, topic) = ("settle-f1", "settle-f1", "settle.f1-events");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-commit", 4, 1);
    consumed_topic(ns, p, &g, topic);

    let id = "5e771e00-0000-4000-8000-0000000000f1";
    write_request(ns, p, id, &["router"]);
    // The commit landed and was read back; the operator pauses before it learns so.
    let landed = wait_paused_at(&op, &g, topic, &all(0, &format!("ankka-flow/reset/{id}")));
    // A consumer closing after its pod was gone commits where it stood, without joining.
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    let took = landed.elapsed();
    assert!(took < Duration::from_secs(3), "the overwrite came {took:?} after the commit, too late for the pause");
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the consumer committed");

    wait_done(ns, p, id);
    let failed = events(ns, p, "ResetOffsetsFailed");
    eprintln!("F1 (settle): failure events {failed:?}");
    assert_eq!(
        failed,
        [(
            "Warning".to_string(),
            format!(
                "{g}: a consumer overwrote the reset after it was read back: partition 0 is at 20 (reset to 0), \
                 partition 1 is at 20 (reset to 0), partition 2 is at 20 (reset to 0); stop every consumer of the \
                 group (a pod still stopping, a consumer outside Kubernetes) and request a new reset"
            )
        )]
    );
    assert_eq!(events(ns, p, "ResetOffsets"), Vec::<(String, String)>::new(), "never a 'to earliest' event");
    let st = reset_status(ns, p);
    assert_eq!(st["phase"], "Done", "{st}");
    let entry = group_entry(ns, p, &g);
    assert_eq!(entry["outcome"], "Failed", "{entry}");
    assert!(entry["message"].as_str().unwrap_or_default().starts_with("a consumer overwrote the reset"), "{entry}");
    // Nothing was reset again: the consumer's commit stands.
    assert_eq!(groups::positions(&g, topic, 3), all(20, ""));
    assert!(op.log_text().contains("fault injection: pausing here on purpose"), "the pause was reached");
}

/// The same history with `FLOW_RESET_SETTLE_SECONDS=0`: no second read, so the overwrite goes
/// unnoticed and the group is reported reset. This is the documented cost of turning the settle off,
/// and shows that the setting reaches the machine.
#[test]
fn f1_with_the_settle_off_an_overwrite_after_the_read_back_goes_unnoticed() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operator
    let (ns, p, topic) = ("settle-f1-off", "settle-f1-off", "settle.f1-off-events");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-commit", 4, 0);
    consumed_topic(ns, p, &g, topic);

    let id = "5e771e00-0000-4000-8000-0000000000f0";
    write_request(ns, p, id, &["router"]);
    let landed = wait_paused_at(&op, &g, topic, &all(0, &format!("ankka-flow/reset/{id}")));
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    assert!(landed.elapsed() < Duration::from_secs(3), "{:?}", landed.elapsed());

    wait_done(ns, p, id);
    assert_eq!(
        events(ns, p, "ResetOffsets"),
        [("Normal".to_string(), format!("{g}: 3 partition(s) of '{topic}' to earliest"))]
    );
    assert_eq!(events(ns, p, "ResetOffsetsFailed"), Vec::<(String, String)>::new());
    assert_eq!(groups::positions(&g, topic, 3), all(20, ""), "the overwrite stands, unnoticed");
}

/// How long request `id` took from the operator's first sight to done, by its status stamps
/// (`requestedAt`, `finishedAt`).
fn took(ns: &str, p: &str, id: &str) -> Duration {
    let st = reset_status(ns, p);
    assert_eq!(st["id"], id, "{st}");
    let at = |key: &str| {
        let text = st[key].as_str().unwrap_or_else(|| panic!("no {key} in {st}"));
        text.parse::<k8s_openapi::jiff::Timestamp>().unwrap_or_else(|e| panic!("{key} {text}: {e}"))
    };
    let took = at("finishedAt").duration_since(at("requestedAt"));
    Duration::try_from(took).unwrap_or_else(|e| panic!("{took:?}: {e}"))
}

/// The settle counts from when the operator saw the streamlet stop (issue 30), by its own watch of
/// the pods. With a settle of 10 s: a streamlet it never saw running, and one whose pod went right
/// before the request, wait the whole settle; one stopped more than the settle before the request is
/// read back at once and is done well within it. (The 10 s only tells the two rules apart: a
/// reset's own work takes a fraction of it.)
#[test]
fn the_settle_counts_from_when_the_operator_saw_the_streamlet_stop() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operator
    let (ns, p, topic) = ("settle-stop", "settle-stop", "settle.stop-events");
    let g = format!("{p}.router.in");
    let settle = Duration::from_secs(10);
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let _op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_RESET_SETTLE_SECONDS", "10")]);
    consumed_topic(ns, p, &g, topic);
    let run_then_stop = || {
        apply_own_pipeline(ns, p, &[("router", topic, 1)]);
        wait_until("router's pod", Duration::from_secs(60), || (!pipeline_pods(ns, p).is_empty()).then_some(()));
        apply_own_pipeline(ns, p, &[("router", topic, 0)]);
        wait_until("router's pod gone", Duration::from_secs(60), || pipeline_pods(ns, p).is_empty().then_some(()));
    };
    let reset = |id: &str| {
        groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
        write_request(ns, p, id, &["router"]);
        wait_done(ns, p, id);
        assert_eq!(groups::positions(&g, topic, 3), all(0, &format!("ankka-flow/reset/{id}")), "reset");
        took(ns, p, id)
    };

    // Never seen running by this operator: the full settle.
    let never = reset("5e771e00-0000-4000-8000-00000000a001");
    assert!(never >= settle, "never seen running: {never:?}");

    // Stopped right before the request (a consumer may still commit on close): the full settle.
    run_then_stop();
    let just_now = reset("5e771e00-0000-4000-8000-00000000a002");
    assert!(just_now >= settle, "stopped just now: {just_now:?}");

    // Stopped more than the settle before the request: read back at once.
    run_then_stop();
    std::thread::sleep(settle + Duration::from_secs(1));
    let before = reset("5e771e00-0000-4000-8000-00000000a003");
    eprintln!("request to done: never seen running {never:?}, stopped just now {just_now:?}, before {before:?}");
    assert!(before < settle, "stopped long before: {before:?}");
    assert_eq!(events(ns, p, "ResetOffsetsFailed"), Vec::<(String, String)>::new());
}

/// Adds partitions to `topic` until it has `total`.
fn add_partitions(topic: &str, total: usize) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let r = rt.block_on(admin.create_partitions(&[NewPartitions::new(topic, total)], &opts)).expect("answers");
    for x in r {
        x.expect("partitions added");
    }
    wait_until("the new partition to have a leader", Duration::from_secs(30), || {
        (kafka::watermarks(topic).len() == total).then_some(())
    });
}

/// B5: a partition is added after the intent was taken and before the commit. The group is reset on
/// the 3 partitions the intent covered; the normal event counts 3; a warning names partition 3.
#[test]
fn b5_a_partition_added_during_the_reset_is_named_in_a_warning_and_not_counted() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operator
    let (ns, p, topic) = ("settle-b5", "settle-b5", "settle.b5-events");
    let g = format!("{p}.router.in");
    // A settle of 3 s, so that the status can be seen verifying.
    let op = paused_operator(ns, "after-intent", 5, 3);
    consumed_topic(ns, p, &g, topic);

    let id = "5e771e00-0000-4000-8000-0000000000b5";
    write_request(ns, p, id, &["router"]);
    // Paused after the intent, with the fence on every partition: the commit is next.
    let fenced = wait_paused_at(&op, &g, topic, &all(20, &format!("ankka-flow/reset/{id}/fence")));
    add_partitions(topic, 4);
    let took = fenced.elapsed();
    assert!(took < Duration::from_secs(4), "the partition came {took:?} after the fence, too late for the pause");
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the partition was added");
    assert_eq!(group_entry(ns, p, &g)["outcome"], "Committing", "the intent is in the status");

    let mut outcomes = vec![];
    wait_until(&format!("request {id} done"), Duration::from_secs(90), || {
        let o = group_entry(ns, p, &g)["outcome"].as_str().unwrap_or_default().to_string();
        if outcomes.last() != Some(&o) {
            outcomes.push(o);
        }
        (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(())
    });
    eprintln!("B5: outcomes seen in the status: {outcomes:?}");
    assert!(outcomes.contains(&"Verifying".to_string()), "the settle is shown in the status: {outcomes:?}");

    assert_eq!(
        events(ns, p, "ResetOffsets"),
        [("Normal".to_string(), format!("{g}: 3 partition(s) of '{topic}' to earliest"))]
    );
    let added = events(ns, p, "ResetPartitionsAdded");
    eprintln!("B5: warnings {added:?}");
    assert_eq!(
        added,
        [(
            "Warning".to_string(),
            format!(
                "{g}: partition(s) 3 of '{topic}' were added to the topic during the reset and were not reset (the 3 \
                 partition(s) it had before were); before the streamlet starts, request a new reset, which covers \
                 every partition"
            )
        )]
    );
    assert_eq!(events(ns, p, "ResetOffsetsFailed"), Vec::<(String, String)>::new());
    let entry = group_entry(ns, p, &g);
    assert_eq!(entry["outcome"], "Reset", "{entry}");
    assert_eq!(entry["partitions"], 3, "{entry}");
    assert_eq!(entry["addedPartitions"], serde_json::json!([3]), "{entry}");
    let reset = format!("ankka-flow/reset/{id}");
    let mut want = all(0, &reset);
    want.insert(3, None);
    assert_eq!(groups::positions(&g, topic, 4), want, "partitions 0-2 at their log start, 3 untouched");
    assert!(op.log_text().contains("fault injection: pausing here on purpose"), "the pause was reached");
}
