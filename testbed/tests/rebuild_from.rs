//! `flow rebuild --from middle` on the real test bed (docs/rebuild.md, "Rebuild from a streamlet"):
//! the example pipeline `chain` of `examples/chain` (source -> chain.raw -> middle -> chain.cooked ->
//! sink), each streamlet played by `flow-standin`, which reads its inlet and writes its outlet as
//! the streamlet's rendered `streamlet.conf` says. After an old run that the sink has read half
//! of, a rebuild from middle replays middle's input; the sink's stand-in then receives each record
//! of the replay exactly once and none of the old run, the source is left alone, and killing the
//! operator between the steps changes nothing of that. A second test checks the refusals: on the
//! CLI, on a request written by hand, and a producer outside the pipeline seen by the survey.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flow_testbed::cart::{DONE, REQUEST};
use flow_testbed::*;
use serde_json::Value;

// The fault suite's count of the commits Kafka recorded, read from `__consumer_offsets`.
#[allow(dead_code)]
#[path = "faults/support.rs"]
mod support;

/// The topic another team owns, which source reads.
const INPUT: &str = "chain-input.v1";
/// What source writes and middle reads.
const RAW: &str = "chain.raw";
/// What middle writes and sink reads.
const COOKED: &str = "chain.cooked";

/// The example `chain` in `ns`, as `flow generate` writes it from examples/chain.
fn chain_yaml(ns: &str) -> String {
    let dir = bed().root.join("examples/chain");
    let o = Command::new(bin("flow"))
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--images", "images.conf", "-n", ns])
        .current_dir(&dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// Plays `streamlet` of `chain` in `ns` until it read `expect` records, with `extra` arguments
/// (`--forward` to write its outlet too); its JSON summary.
fn play(ns: &str, streamlet: &str, expect: u64, extra: &[&str]) -> Value {
    let o = Command::new(bin("flow-standin"))
        .args(standin::playing(ns, "chain", streamlet))
        .args(["--expect", &expect.to_string(), "--timeout", "60"])
        .args(extra)
        .env("KUBECONFIG", &bed().kubeconfig)
        .output()
        .expect("flow-standin runs");
    assert!(o.status.success(), "flow-standin playing {streamlet}: {}", show(&o));
    serde_json::from_slice(&o.stdout).expect("flow-standin prints JSON")
}

fn group(streamlet: &str) -> String {
    format!("chain.{streamlet}.in")
}

fn committed(streamlet: &str, topic: &str) -> std::collections::BTreeMap<i32, Option<i64>> {
    kafka::committed(&group(streamlet), topic, 3)
}

fn ends(topic: &str) -> std::collections::BTreeMap<i32, Option<i64>> {
    kafka::watermarks(topic).into_iter().map(|(p, (_, high))| (p, Some(high))).collect()
}

fn replicas(ns: &str, streamlet: &str) -> String {
    let name = format!("flow-chain-{streamlet}");
    kubectl_ok(&["-n", ns, "get", "deployment", &name, "-o", "jsonpath={.spec.replicas}"])
}

fn pods_of(ns: &str, streamlet: &str) -> Vec<String> {
    pipeline_pods(ns, "chain").into_iter().filter(|p| p.contains(&format!("flow-chain-{streamlet}-"))).collect()
}

fn condition(ns: &str, type_: &str) -> String {
    let path = format!("jsonpath={{.status.conditions[?(@.type==\"{type_}\")].status}}");
    kubectl_ok(&["-n", ns, "get", "aflow", "chain", "-o", &path])
}

/// Kills the operator at once (SIGKILL: no Lease given back, nothing flushed on the way out).
fn kill(mut op: Operator) {
    let _ = Command::new("kill").args(["-KILL", &op.pid().to_string()]).status();
    op.wait_exit(Duration::from_secs(10));
}

/// A namespace `ns` with `chain` applied (every streamlet at 1 replica) and a running operator
/// (extra environment `env`), after an old run: source relayed the 60 records of its input to
/// chain.raw, middle relayed them to chain.cooked tagged `run-1/`, and sink read 30 of those.
fn chain_scenario(ns: &str, env: &[(&str, &str)]) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    kafka::recreate_topic(INPUT, 3);
    kafka::produce(INPUT, 3, 20);
    // The pipeline's managed topics are the operator's to create, empty.
    kafka::remove_topic(RAW);
    kafka::remove_topic(COOKED);
    let mut env = env.to_vec();
    env.push(("FLOW_WATCH_NAMESPACE", ns));
    let op = Operator::start(&fresh_dir(ns), &env);
    kubectl_apply(&chain_yaml(ns));
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, "chain") == 3 && pipeline_pods(ns, "chain").len() == 3).then_some(())
    });
    wait_until("the managed topics", Duration::from_secs(60), || {
        (kafka::watermarks(RAW).len() == 3 && kafka::watermarks(COOKED).len() == 3).then_some(())
    });
    assert_eq!(play(ns, "source", 60, &["--forward"])["forwarded"], 60);
    assert_eq!(play(ns, "middle", 60, &["--forward", "--tag", "run-1/"])["forwarded"], 60);
    assert_eq!(play(ns, "sink", 30, &[])["records"], 30);
    op
}

/// The id in `<what> requested for 'chain': <id>`.
fn requested_id(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", show(o));
    let out = String::from_utf8_lossy(&o.stdout);
    out.trim().strip_prefix("rebuild requested for 'chain': ").map(str::to_string).unwrap_or_else(|| panic!("{out}"))
}

#[test]
fn rebuild_from_middle_reaches_the_sink_once_across_operator_kills_and_leaves_the_source_alone() {
    // One at a time with the other test here, which shares pipeline `chain`, its topics and groups.
    let _lock = side_by_side_one_at_a_time("chain");
    let ns = "chain-rebuild-from";
    let lag = ("FLOW_LAG_INTERVAL_SECONDS", "1");
    let start = |name: &str, extra: &[(&str, &str)]| {
        let mut env = vec![("FLOW_WATCH_NAMESPACE", ns), lag];
        env.extend_from_slice(extra);
        Operator::start(&fresh_dir(&format!("{ns}-{name}")), &env)
    };
    let op = chain_scenario(ns, &[lag]);
    let source_pod = pods_of(ns, "source");
    let source_at = committed("source", INPUT);
    let middle_at = committed("middle", RAW);
    let sink_at = committed("sink", COOKED);
    let sum = |m: &std::collections::BTreeMap<i32, Option<i64>>| m.values().flatten().sum::<i64>();
    assert_eq!((sum(&middle_at), sum(&sink_at), sum(&ends(COOKED))), (60, 30, 60), "the old run");

    // The plan first: it lists what the rebuild stops and where each group goes; nothing stops.
    let o = flow(&["rebuild", "chain", "-n", ns, "--from", "middle", "--dry-run", "-o", "json", "--timeout", "60s"]);
    assert!(o.status.success(), "{}", show(&o));
    let plan: Value = serde_json::from_slice(&o.stdout).expect("the plan as JSON");
    eprintln!("the plan: {plan}");
    assert_eq!(plan["from"], serde_json::json!(["middle"]));
    let closure: Vec<&str> =
        plan["closure"].as_array().unwrap().iter().map(|c| c["streamlet"].as_str().unwrap()).collect();
    assert_eq!(closure, ["middle", "sink"]);
    assert_eq!(plan["closure"][1]["why"], "downstream of middle (reads 'chain.cooked')");
    assert_eq!(plan["untouched"], serde_json::json!(["source"]));
    let planned = |g: &str| plan["groups"].as_array().unwrap().iter().find(|x| x["group"] == g).cloned().unwrap();
    assert_eq!(planned("chain.middle.in")["recordsToReprocess"], 60, "middle reads its 60 records again");
    let sink_plan = planned("chain.sink.in");
    assert_eq!((sink_plan["recordsToReprocess"].as_i64(), sink_plan["recordsToSkip"].as_i64()), (Some(0), Some(30)));
    assert_eq!(sink_plan["to"], "the end (it reads only what middle writes again)");
    assert_eq!((replicas(ns, "middle"), replicas(ns, "sink")), ("1".into(), "1".into()), "a plan stops nothing");
    assert_eq!((committed("middle", RAW), committed("sink", COOKED)), (middle_at.clone(), sink_at.clone()));

    // No operator runs when the request is written: nothing is held until one starts.
    op.stop();
    let id = requested_id(&flow(&["rebuild", "chain", "-n", ns, "--from", "middle"]));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(replicas(ns, "middle"), "1");

    // Killed during the survey, once middle and sink are held and gone: nothing moved.
    let op = start("survey", &[("FLOW_RESET_SETTLE_SECONDS", "3")]);
    wait_until("the survey", Duration::from_secs(60), || {
        let st = reset_status(ns, "chain");
        let groups = st["groups"].as_array().cloned().unwrap_or_default();
        groups.iter().any(|g| g["message"].as_str().is_some_and(|m| m.starts_with("looked at"))).then_some(())
    });
    assert_eq!(
        (replicas(ns, "middle"), replicas(ns, "sink"), replicas(ns, "source")),
        ("0".into(), "0".into(), "1".into())
    );
    assert!(
        pods_of(ns, "middle").is_empty() && pods_of(ns, "sink").is_empty(),
        "writers stop before positions are taken"
    );
    kill(op);
    assert_eq!((committed("middle", RAW), committed("sink", COOKED)), (middle_at.clone(), sink_at.clone()));

    // Crashes at the first fence, after the survey passed: nothing moved yet.
    let mut op = start("fence", &[("FLOW_FAULT_CRASH_AT", "before-fence")]);
    assert_eq!(op.wait_exit(Duration::from_secs(90)), Some(86));
    assert_eq!((committed("middle", RAW), committed("sink", COOKED)), (middle_at.clone(), sink_at.clone()));

    // middle's reset commit lands, and the operator dies before it reads it back.
    let mut op = start("commit", &[("FLOW_FAULT_CRASH_AT", "after-commit"), ("FLOW_FAULT_GROUP", "chain.middle.in")]);
    assert_eq!(op.wait_exit(Duration::from_secs(90)), Some(86));
    assert_eq!(committed("middle", RAW), (0..3).map(|p| (p, Some(0))).collect(), "middle at the start");

    // Every group reset; killed before the done write.
    let mut op = start("done", &[("FLOW_FAULT_CRASH_AT", "before-done")]);
    assert_eq!(op.wait_exit(Duration::from_secs(90)), Some(86));
    assert_eq!(committed("sink", COOKED), ends(COOKED), "sink at the end of chain.cooked");
    assert_ne!(
        annotation(ns, "chain", DONE).as_deref(),
        Some(id.as_str()),
        "the plan's id is there, not the rebuild's"
    );
    assert_eq!(replicas(ns, "sink"), "0", "still held: the request is not done");

    // The next writes the done annotation without resetting again, and restores middle and sink.
    let op = start("restore", &[]);
    wait_until("the done annotation", Duration::from_secs(60), || {
        (annotation(ns, "chain", DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    wait_until("the replicas restored", Duration::from_secs(30), || {
        (replicas(ns, "middle") == "1" && replicas(ns, "sink") == "1").then_some(())
    });
    // The sink's lag is 0 at the end, but it has not read the replay before middle has written it.
    std::thread::sleep(Duration::from_secs(3));
    let st = reset_status(ns, "chain");
    let sink_status = st["groups"].as_array().unwrap().iter().find(|g| g["group"] == "chain.sink.in").cloned().unwrap();
    assert!(sink_status["caughtUpAt"].is_null(), "{st}");
    assert_eq!(condition(ns, "CaughtUp"), "False");
    kill(op);

    // A last operator follows the catch-up: middle reads its input again and writes it as run 2,
    // and the sink reads what middle wrote.
    let _op = start("catch-up", &[]);
    let m = play(ns, "middle", 60, &["--forward", "--tag", "run-2/"]);
    assert_eq!((m["records"].as_u64(), m["forwarded"].as_u64()), (Some(60), Some(60)), "{m}");
    let s = play(ns, "sink", 60, &["--values"]);
    let values = s["values"].as_object().expect("the values the sink read");
    eprintln!("the sink's stand-in read {} records, {} distinct: {s}", s["records"], values.len());
    assert_eq!(s["records"], 60);
    assert_eq!(values.len(), 60, "each record once: {s}");
    assert!(values.iter().all(|(v, n)| v.starts_with("run-2/") && *n == 1), "only the replay, each once: {s}");
    assert_eq!(committed("sink", COOKED), ends(COOKED), "nothing more to read: none of the old run is left");
    assert_eq!(sum(&ends(COOKED)), 120, "the old run and the replay");
    wait_until("CaughtUp True", Duration::from_secs(60), || (condition(ns, "CaughtUp") == "True").then_some(()));

    // Once, whatever the kills: one reset commit per partition of each group, one event of each.
    let commits = support::commits(&format!("ankka-flow/reset/{id}"));
    for (g, topic) in [("chain.middle.in", RAW), ("chain.sink.in", COOKED)] {
        let per: Vec<usize> =
            (0..3).map(|p| commits.get(&(g.to_string(), topic.to_string(), p)).copied().unwrap_or(0)).collect();
        assert_eq!(per, [1, 1, 1], "reset commits of {g}");
    }
    let mut reset = event_notes(ns, "ResetOffsets");
    reset.sort();
    assert_eq!(
        reset,
        [
            "chain.middle.in: 3 partition(s) of 'chain.raw' to earliest".to_string(),
            "chain.sink.in: 3 partition(s) of 'chain.cooked' to the end (it reads only what middle writes again); 30 \
             record(s) written before the rebuild are skipped"
                .to_string(),
        ]
    );
    assert_eq!(event_notes(ns, "Rebuilding").len(), 1);
    assert_eq!(event_notes(ns, "RebuildRestored").len(), 1);

    // The source was left alone: never held, never restarted, its group where it was.
    assert_eq!(replicas(ns, "source"), "1");
    assert_eq!(pods_of(ns, "source"), source_pod);
    assert_eq!(committed("source", INPUT), source_at);
    assert!(
        event_notes(ns, "Rebuilding")[0].contains("holds middle, sink at 0 replicas"),
        "{:?}",
        event_notes(ns, "Rebuilding")
    );
}

#[test]
fn rebuild_from_refuses_what_would_not_reach_each_streamlet_once_and_changes_nothing() {
    // One at a time with the other test here, which shares pipeline `chain`, its topics and groups.
    let _lock = side_by_side_one_at_a_time("chain");
    let ns = "chain-rebuild-refusals";
    let _op = chain_scenario(ns, &[("FLOW_RESET_SETTLE_SECONDS", "2")]);
    let (middle_at, sink_at) = (committed("middle", RAW), committed("sink", COOKED));

    // The CLI refuses before writing anything.
    let o = flow(&["rebuild", "chain", "-n", ns, "--from", "nope", "--from", "source"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "cannot rebuild from [nope], [source]: no streamlet [nope]");
    assert_eq!(annotation(ns, "chain", REQUEST), None, "nothing was written");

    // A request written by hand is refused by the operator, which holds nothing for it.
    let id = "5d1f8c2a-7b3e-4c9d-8a6f-1e2d3c4b5a69";
    let text = serde_json::json!({"id": id, "streamlets": [], "rebuild": true, "from": ["nope"]}).to_string();
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", "chain", &format!("{REQUEST}={text}")]);
    wait_until("the refusal", Duration::from_secs(60), || {
        (annotation(ns, "chain", DONE).as_deref() == Some(id)).then_some(())
    });
    assert_eq!(
        event_notes(ns, "ResetRefused"),
        [format!("reset {id} refused, nothing was reset: a rebuild from nope: no streamlet nope")]
    );
    assert_eq!(replicas(ns, "middle"), "1");

    // Something outside the pipeline writes chain.cooked while every writer of it is stopped: the
    // survey sees the end move, and refuses the whole rebuild before anything moved.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                kafka::produce(COOKED, 1, 1);
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let o = flow(&["rebuild", "chain", "-n", ns, "--from", "middle", "--wait", "--timeout", "90s"]);
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("the writer ends");
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("flow rebuild --from middle, with a producer outside the pipeline, said:\n{err}");
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(
        err.contains(
            "refused, nothing was reset: topic 'chain.cooked' grew while every streamlet of the pipeline that \
                      writes it was stopped (partition 0 from "
        ),
        "{err}"
    );
    assert!(
        err.contains("something outside the pipeline writes it, and chain.sink.in put at its end would skip"),
        "{err}"
    );
    assert_eq!((committed("middle", RAW), committed("sink", COOKED)), (middle_at, sink_at), "nothing moved");
    assert!(event_notes(ns, "ResetOffsets").is_empty());
    wait_until("middle and sink restored", Duration::from_secs(30), || {
        (replicas(ns, "middle") == "1" && replicas(ns, "sink") == "1").then_some(())
    });
}
