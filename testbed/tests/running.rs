//! Cases F1 and F2 of docs/field-cases.md ("is anything still running?"), end to end on the
//! test bed, with `flow-standin` playing the streamlet pod's container.
//!
//! Each test has its own namespace, pipeline, topic and consumer group (`run-f1…`, `run-f2…`).
//!
//! How a pod stays Terminating here: kwok 0.8 with the test bed's stage set does not honour
//! `terminationGracePeriodSeconds`. Its `pod-delete` stage matches any pod with a `deletionTimestamp`
//! and deletes it at once with grace 0: a pod with a 600 s grace period, deleted, was gone from the
//! API server about 70 ms later (measured on the bed, 2026-11-29). So the F1 test holds the pod in
//! Terminating with a finalizer instead, and plays the kubelet itself: it sends SIGTERM to the
//! container (the stand-in) when the pod is deleted, and lets the pod go (takes the finalizer off)
//! only once the container has exited, as a kubelet deletes a pod whose containers are done.
//!
//! F1's second half (a consumer committing right after the reset was read back, caught by the
//! operator's settle and second read-back) is in `commit_failures.rs`
//! (`c4_offsets_reading_back_otherwise_than_committed_fail_the_group_naming_them`).
//!
//! The older F1 test in `cases/running.rs` (a bare Terminating pod, no consumer) checks the same refusal
//! without a container committing on close; it is kept as it is.
//!
//! F2's "Kafka stays decisive" variant (no pod at all, a live consumer outside Kubernetes: the reset
//! waits, naming the member count and state) is case A1, covered by
//! `cases/activity.rs::a1_a_live_member_outside_kubernetes_makes_the_reset_wait_and_nothing_moves`; it is not
//! repeated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;

/// A fresh namespace `ns` with the CRD and the cluster Secret in place (no operator yet).
fn prepare(ns: &str) {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
}

/// An operator that watches only `ns` (its own Lease), with a fresh ledger.
fn operator(ns: &str) -> Operator {
    Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)])
}

/// Offsets of a committed-positions map, without the metadata.
fn offsets_of(p: &BTreeMap<i32, Option<(i64, String)>>) -> BTreeMap<i32, Option<i64>> {
    p.iter().map(|(k, v)| (*k, v.as_ref().map(|x| x.0))).collect()
}

/// Panics if any committed position of `group` carries the operator's commit metadata
/// (`ankka-flow/reset/<id>` or its fence): the operator committed something.
fn assert_no_operator_commit(p: &BTreeMap<i32, Option<(i64, String)>>, when: &str) {
    for (part, pos) in p {
        if let Some((o, meta)) = pos {
            assert!(
                !meta.starts_with("ankka-flow/"),
                "{when}: partition {part} at {o} was committed by the operator ({meta})"
            );
        }
    }
}

fn the_pod(ns: &str, pipeline: &str) -> String {
    let pods = pipeline_pods(ns, pipeline);
    assert_eq!(pods.len(), 1, "{pods:?}");
    pods[0].trim_start_matches("pod/").to_string()
}

/// The uid of pod `pod` while it is Terminating (it exists and has a `deletionTimestamp`).
///
/// The timestamp itself is no identity: kwok's own delete with grace 0 can land seconds after the
/// Deployment controller's graceful one and moves the `deletionTimestamp` earlier (the API server
/// shortens a pending graceful deletion), so the test compares the pod's uid instead.
fn terminating_uid(ns: &str, pod: &str) -> Option<String> {
    let o = kubectl(&["-n", ns, "get", "pod", pod, "-o", "jsonpath={.metadata.uid} {.metadata.deletionTimestamp}"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (uid, deleted) = out.trim().split_once(' ')?;
    (o.status.success() && !deleted.is_empty()).then(|| uid.to_string())
}

fn group_entry(ns: &str, pipeline: &str, group: &str) -> serde_json::Value {
    let st = reset_status(ns, pipeline);
    st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == group).cloned().unwrap_or_else(|| {
        panic!("no group {group} in the status: {st}");
    })
}

/// JSON object {"<partition>": offset} of a map.
fn json_offsets(m: &BTreeMap<i32, i64>) -> serde_json::Value {
    m.iter().map(|(p, o)| (p.to_string(), serde_json::json!(o))).collect::<serde_json::Map<_, _>>().into()
}

/// F1: the pipeline's last pod is Terminating (deleted by the scale-down, held by its long grace
/// period, here a finalizer) and its container, a consumer of the group, reads on for 10 s after
/// SIGTERM, then commits its position on close. A reset requested meanwhile waits, saying why, and
/// commits nothing while the pod exists, even after the container has left the group. Once the pod
/// is gone the reset runs once: the group reads back at the log start offsets (the close commit
/// landed before the reset and was reset, never over it), one "to earliest" event, and it stays
/// there after a settle.
#[test]
fn f1_a_terminating_pod_that_commits_on_close_holds_the_reset_until_it_is_gone() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operators
    let (ns, p, topic) = ("run-f1", "run-f1", "run.f1-events");
    let g = format!("{p}.router.in");
    prepare(ns);
    let _op = operator(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 200);
    kafka::delete_records(topic, 1, 5);
    let log_start: BTreeMap<i32, i64> = kafka::watermarks(topic).into_iter().map(|(p, (low, _))| (p, low)).collect();
    assert_eq!(log_start, [(0, 0), (1, 5), (2, 0)].into());
    groups::forget(&g);

    // The streamlet runs: one pod, whose container is the stand-in, reading 20 records a second and
    // committing as it goes.
    apply_own_pipeline(ns, p, &[("router", topic, 1)]);
    let pod = the_pod(ns, p);
    // kwok would delete the pod at once whatever its grace period (see the module's comment): the
    // finalizer stands for the grace period that the kubelet would honour.
    kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "pod",
        &pod,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["testbed.flow/grace-period"]}}"#,
    ]);
    let release = ReleasePod(ns.to_string(), pod.clone());
    let mut container = Container::start(
        &g,
        topic,
        &[
            "--hold",
            "--rate",
            "20",
            "--commit-on-close",
            "--close-delay-seconds",
            // Long enough for a few samples below on a loaded machine: the refusal and the waits
            // event come first, and each sample asks Kafka and the API server.
            "10",
            "--property",
            "max.partition.fetch.bytes=512",
        ],
    );
    container.wait_line("first record: ", Duration::from_secs(60));
    wait_until("the container's first commit", Duration::from_secs(30), || {
        offsets_of(&groups::positions(&g, topic, 3)).values().any(|o| o.is_some_and(|o| o > 5)).then_some(())
    });

    // Scale-down: the Deployment's controller deletes the pod, which stays Terminating; the kubelet
    // sends SIGTERM to its container, which reads on for 10 s.
    apply_own_pipeline_replicas_zero(ns, p, topic);
    let uid = wait_until("the pod Terminating", Duration::from_secs(30), || terminating_uid(ns, &pod));
    container.terminate();
    container.wait_line("SIGTERM received: reading on for 10 s before closing", Duration::from_secs(10));

    // The CLI refuses; a request written past it waits, naming the pod.
    let o = flow(&["reset", p, "-n", ns]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .starts_with("cannot reset offsets while streamlets are running: [router] still has 1 pod(s)."),
        "{}",
        show(&o)
    );
    let id = "f1000000-0000-4000-8000-0000000000f1";
    write_request(ns, p, id, &[]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = event_notes(ns, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: router still has 1 pod(s)")]);
    let st = reset_status(ns, p);
    assert_eq!((st["id"].as_str(), st["phase"].as_str()), (Some(id), Some("Waiting")), "{st}");
    assert_eq!(st["detail"], "router still has 1 pod(s)", "{st}");

    // While the container closes: it commits its progress, the operator nothing.
    let mut last = offsets_of(&groups::positions(&g, topic, 3));
    let mut samples = 0;
    let close = wait_until("the container's close commit", Duration::from_secs(20), || {
        let now = groups::positions(&g, topic, 3);
        assert_no_operator_commit(&now, "while the pod is Terminating");
        let offsets = offsets_of(&now);
        for (part, o) in &offsets {
            assert!(
                o >= &last[part],
                "partition {part} went back from {:?} to {o:?} while the pod is Terminating",
                last[part]
            );
        }
        last = offsets;
        samples += 1;
        assert_eq!(annotation(ns, p, DONE), None);
        let line = container
            .log()
            .iter()
            .find_map(|l| l.strip_prefix("flow-standin: committed on close: ").map(str::to_string))?;
        Some(line)
    });
    assert!(samples >= 3, "the offsets were watched while the container closed ({samples} samples)");
    let close: BTreeMap<String, i64> = serde_json::from_str(&close).expect("close commit JSON");
    let close: BTreeMap<i32, i64> = close.into_iter().map(|(p, o)| (p.parse().expect("partition"), o)).collect();
    let (ok, summary) = container.wait_exit(Duration::from_secs(30));
    assert!(ok, "the stand-in failed: {:?}", container.log());
    assert!(container.log().iter().any(|l| l == "flow-standin: left the group"), "{:?}", container.log());
    assert_eq!(summary["next"], json_offsets(&close), "the close commit is the container's position");
    assert!(!close.is_empty() && close.iter().all(|(p, o)| *o > log_start[p]), "{close:?}");
    let after_close = groups::positions(&g, topic, 3);
    for (part, o) in &close {
        assert_eq!(after_close[part], Some((*o, String::new())), "the close commit landed on partition {part}");
    }

    // The container has left the group, but the pod still exists: still waiting, still nothing moves
    // (longer than the operator's 5 s look-again interval).
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(groups::positions(&g, topic, 3), after_close, "nothing moves while the pod is Terminating");
    assert_eq!(annotation(ns, p, DONE), None);
    assert_eq!(reset_status(ns, p)["phase"], "Waiting");
    assert_eq!(event_notes(ns, "ResetOffsets"), Vec::<String>::new());
    assert_eq!(terminating_uid(ns, &pod), Some(uid), "the pod is still Terminating");

    // The kubelet is done with the pod: it goes, and the reset runs once.
    let released = Instant::now();
    drop(release);
    wait_until("the pod gone", Duration::from_secs(30), || pipeline_pods(ns, p).is_empty().then_some(()));
    wait_until("done", Duration::from_secs(60), || (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(()));
    eprintln!("F1: the reset was done {:?} after the pod was let go", released.elapsed());
    let want: BTreeMap<i32, Option<i64>> = log_start.iter().map(|(p, o)| (*p, Some(*o))).collect();
    assert_eq!(kafka::committed(&g, topic, 3), want, "read back at the log start offsets");
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new());
    let entry = group_entry(ns, p, &g);
    assert_eq!(entry["outcome"], "Reset", "{entry}");
    assert_eq!(entry["offsetsAfter"], json_offsets(&log_start), "{entry}");
    // The reset started from the close commit: it landed before the reset.
    let before: BTreeMap<i32, i64> =
        after_close.iter().filter_map(|(p, o)| o.as_ref().map(|(o, _)| (*p, *o))).collect();
    assert_eq!(entry["offsetsBefore"], json_offsets(&before), "{entry}");

    // After the settle: nothing wrote over the reset, and it ran once.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(kafka::committed(&g, topic, 3), want, "read back again after a settle");
    assert_eq!(event_notes(ns, "ResetOffsets").len(), 1);
}

/// Scales the pipeline of [`f1_a_terminating_pod_that_commits_on_close_holds_the_reset_until_it_is_gone`]
/// to 0 without waiting for its pod to go (it cannot while its finalizer holds it).
fn apply_own_pipeline_replicas_zero(ns: &str, pipeline: &str, topic: &str) {
    kubectl_apply(&own_pipeline_yaml(ns, pipeline, &[("router", topic, 0)]));
}

/// F2: the operator starts with a request already pending, written while the streamlet runs (replicas
/// 1, its pod Running, the stand-in a live member of the group). Its first status for the request is
/// Waiting, naming the running streamlet; it never reports done and never commits (not even the
/// fence) while the pod runs; once the container has stopped and the pod is gone, the request
/// proceeds and the group reads back at its log start.
#[test]
fn f2_a_request_pending_when_the_operator_starts_waits_while_the_pod_runs() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, group and operators
    let (ns, p, topic) = ("run-f2", "run-f2", "run.f2-events");
    let g = format!("{p}.router.in");
    prepare(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 50);
    groups::forget(&g);
    standin::read(&g, topic, 150);
    let read: BTreeMap<i32, Option<(i64, String)>> = (0..3).map(|p| (p, Some((50, String::new())))).collect();
    assert_eq!(groups::positions(&g, topic, 3), read);

    // The streamlet runs (an operator renders its Deployment, then stops, as in an upgrade), and the
    // request is written while no operator runs.
    let first = operator(ns);
    apply_own_pipeline(ns, p, &[("router", topic, 1)]);
    first.stop();
    let mut container = Container::start(&g, topic, &["--hold"]);
    wait_until("the container in the group", Duration::from_secs(60), || (kafka::members(&g) == 1).then_some(()));
    let id = "f2000000-0000-4000-8000-0000000000f2";
    write_request(ns, p, id, &["router"]);
    let versions = Versions::watch(ns, p);
    wait_until("the watch's first version", Duration::from_secs(30), || (!versions.seen().is_empty()).then_some(()));
    assert_eq!(versions.phases(id), Vec::<(String, String)>::new(), "no status before the operator runs");

    let started = Instant::now();
    let op = operator(ns);
    let running = "router is not scaled to 0; router still has 1 pod(s)";
    wait_until("a status for the request", Duration::from_secs(60), || (!versions.phases(id).is_empty()).then_some(()));
    eprintln!("F2: first status {:?} after the operator started", started.elapsed());
    assert_eq!(versions.phases(id)[0], ("Waiting".to_string(), running.to_string()), "the first status");

    // For a while (longer than the 5 s look-again interval): waiting, no done, no commit at all.
    let end = Instant::now() + Duration::from_secs(7);
    while Instant::now() < end {
        assert_eq!(groups::positions(&g, topic, 3), read, "nothing committed while the pod runs");
        assert_eq!(annotation(ns, p, DONE), None, "never done while the pod runs");
        std::thread::sleep(Duration::from_millis(300));
    }
    let phases = versions.phases(id);
    assert!(phases.iter().all(|(ph, d)| ph == "Waiting" && d == running), "{phases:?}");
    assert_eq!(event_notes(ns, "ResetRefused"), [format!("reset {id} waits: {running}")]);
    assert_eq!(event_notes(ns, "ResetOffsets"), Vec::<String>::new());
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new());
    assert!(!op.log_text().contains("panicked"), "{}", op.log_text());

    // The streamlet stops: its container leaves the group, the pod goes; the request proceeds.
    container.terminate();
    let (ok, _) = container.wait_exit(Duration::from_secs(30));
    assert!(ok, "{:?}", container.log());
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);
    wait_until("done", Duration::from_secs(60), || (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(()));
    assert_eq!(kafka::committed(&g, topic, 3), (0..3).map(|p| (p, Some(0))).collect());
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    let phases = wait_until("the watch to show Done", Duration::from_secs(30), || {
        let phases = versions.phases(id);
        (phases.last().map(|x| x.0.as_str()) == Some("Done")).then_some(phases)
    });
    let first_other = phases.iter().position(|(ph, _)| ph != "Waiting").expect("a status after Waiting");
    assert!(first_other > 0, "{phases:?}");
    let entry = group_entry(ns, p, &g);
    assert_eq!(entry["outcome"], "Reset", "{entry}");
    assert_eq!(entry["offsetsBefore"], serde_json::json!({"0": 50, "1": 50, "2": 50}), "{entry}");
}
