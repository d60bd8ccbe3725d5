//! `flow rebuild cart --wait` on the real test bed (docs/rebuild.md): the operator holds router at 0
//! replicas without editing the resource, is killed after the Deployment went to 0 and before the
//! reset, and a restarted operator still resets the group once, restores the replicas, and the
//! command ends when the stand-in (playing router from the Secret the operator rendered) has caught
//! up. A second test stops the operator at the other steps of docs/rebuild.md's table: no operator
//! when the request is written, a kill after the reset and before the done write, and a kill during
//! the catch-up.

use std::process::{Command, Stdio};
use std::time::Duration;

use flow_testbed::cart::DONE;
use flow_testbed::*;

// The fault suite's count of the commits Kafka recorded, read from `__consumer_offsets`.
#[allow(dead_code)]
#[path = "faults/support.rs"]
mod support;

fn at(offset: i64) -> std::collections::BTreeMap<i32, Option<i64>> {
    (0..3).map(|p| (p, Some(offset))).collect()
}

fn deployment_replicas(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "deployment", &format!("flow-{name}-router"), "-o", "jsonpath={.spec.replicas}"])
}

fn condition(ns: &str, name: &str, type_: &str) -> String {
    let path = format!("jsonpath={{.status.conditions[?(@.type==\"{type_}\")].status}}");
    kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", &path])
}

#[test]
fn rebuild_holds_resets_once_across_an_operator_kill_restores_and_catches_up() {
    let _side_by_side = side_by_side();
    let ns = "shop-rebuild";
    let cart = Cart::own("rebuild");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let lag = ("FLOW_LAG_INTERVAL_SECONDS", "1");
    // The pipeline runs (router at 1 replica) and its group has read everything (20/20/20).
    let mut op = cart.scenario(ns, 1, &[lag, ("FLOW_FAULT_CRASH_AT", "before-fence")]);
    assert_eq!(deployment_replicas(ns, name), "1");
    let spec_before = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.spec}"]);

    let rebuild = Command::new(bin("flow"))
        .args(["rebuild", name, "-n", ns, "--wait", "--timeout", "180s"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flow rebuild starts");

    // The operator renders router at 0, waits for its pod to go, and is killed before the first
    // fence: held, nothing reset yet.
    assert_eq!(op.wait_exit(Duration::from_secs(90)), Some(86), "the operator stops before the reset");
    assert_eq!(deployment_replicas(ns, name), "0", "the Deployment is held at 0");
    assert!(pipeline_pods(ns, name).is_empty(), "no pod left");
    let spec_held = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.spec}"]);
    assert_eq!(spec_held, spec_before, "the resource's spec is not edited");
    assert_eq!(condition(ns, name, "Rebuilding"), "True");
    assert_eq!(condition(ns, name, "CaughtUp"), "False");
    let held = event_notes(ns, "Rebuilding");
    assert!(held.len() == 1 && held[0].contains(" holds router at 0 replicas"), "{held:?}");
    assert_eq!(annotation(ns, name, DONE), None);
    assert_eq!(kafka::committed(group, topic, 3), at(20), "nothing was reset before the kill");

    // A restarted operator (its ledger lost too) holds router still, resets, and restores.
    let _op = Operator::start(&fresh_dir(&format!("{ns}-restarted")), &[("FLOW_WATCH_NAMESPACE", ns), lag]);
    let id = wait_until("the done annotation", Duration::from_secs(60), || annotation(ns, name, DONE));
    wait_until("router's replicas restored", Duration::from_secs(30), || {
        (deployment_replicas(ns, name) == "1").then_some(())
    });
    assert_eq!(kafka::committed(group, topic, 3), at(0), "reset to the earliest offsets");
    wait_until("Rebuilding False", Duration::from_secs(30), || {
        (condition(ns, name, "Rebuilding") == "False").then_some(())
    });

    // Router runs again: the stand-in plays it, from the Secret the operator rendered.
    let reader = Command::new(bin("flow-standin"))
        .args(standin::playing(ns, name, "router"))
        .args(["--expect", "60", "--rate", "10", "--timeout", "60"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::null())
        .spawn()
        .expect("flow-standin starts");
    let out = rebuild.wait_with_output().expect("flow rebuild ends");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    eprintln!("flow rebuild --wait printed:\n{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("rebuild requested for '{name}': {id}\n")), "{stdout}");
    assert!(stderr.contains(&format!("reset {id} of '{name}': Waiting")) || stderr.contains("Resetting"), "{stderr}");
    assert!(stderr.contains(&format!("catch-up: {group} ")) && stderr.contains(" of 60 records left ("), "{stderr}");
    assert!(stderr.contains(&format!("catch-up: {group} caught up at ")), "{stderr}");
    let mut reader = reader;
    assert!(reader.wait().expect("stand-in ends").success());

    // Once, whatever the kill: one reset event for the one group, one restore event.
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(event_notes(ns, "RebuildRestored").len(), 1);
    assert_eq!(condition(ns, name, "CaughtUp"), "True");
    let waited = kubectl(&["-n", ns, "wait", "--for=condition=CaughtUp", &format!("aflow/{name}"), "--timeout=10s"]);
    assert!(waited.status.success(), "{}", show(&waited));
    assert_eq!(kafka::committed(group, topic, 3), at(20), "the stand-in read the whole input again");
    assert_eq!(kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.spec}"]), spec_before);
}

/// Kills the operator at once (SIGKILL: no Lease given back, nothing flushed on the way out).
fn kill(mut op: Operator) {
    let _ = Command::new("kill").args(["-KILL", &op.pid().to_string()]).status();
    op.wait_exit(Duration::from_secs(10));
}

fn condition_reason(ns: &str, name: &str, type_: &str) -> String {
    let path = format!("jsonpath={{.status.conditions[?(@.type==\"{type_}\")].reason}}");
    kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", &path])
}

#[test]
fn rebuild_survives_no_operator_at_the_request_a_kill_before_done_and_a_kill_during_the_catch_up() {
    let _side_by_side = side_by_side();
    let ns = "shop-rebuild-kills";
    let cart = Cart::own("rebuild-kills");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let lag = ("FLOW_LAG_INTERVAL_SECONDS", "1");
    let start = |name: &str, extra: &[(&str, &str)]| {
        let mut env = vec![("FLOW_WATCH_NAMESPACE", ns), lag];
        env.extend_from_slice(extra);
        Operator::start(&fresh_dir(&format!("{ns}-{name}")), &env)
    };
    let op = cart.scenario(ns, 1, &[lag]);

    // No operator runs when the request is written: nothing is held until one starts.
    op.stop();
    let o = flow(&["rebuild", name, "-n", ns]);
    assert!(o.status.success(), "{}", show(&o));
    let id = String::from_utf8_lossy(&o.stdout)
        .trim()
        .strip_prefix(&format!("rebuild requested for '{name}': "))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", show(&o)));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(deployment_replicas(ns, name), "1", "nothing renders the hold without an operator");

    // An operator holds router at 0, resets the group and is killed before the done write.
    let mut op = start("before-done", &[("FLOW_FAULT_CRASH_AT", "before-done")]);
    assert_eq!(op.wait_exit(Duration::from_secs(90)), Some(86), "the operator stops before the done write");
    assert_eq!(kafka::committed(group, topic, 3), at(0), "the group was reset before the kill");
    assert_eq!(annotation(ns, name, DONE), None);
    assert_eq!(deployment_replicas(ns, name), "0", "still held: the request is not done");
    // The reconcile that reset the group was killed before its status write: what the status holds
    // of the request is its write-ahead progress (docs/rebuild.md, "When the operator stops").
    let st = reset_status(ns, name);
    assert_eq!(st["id"].as_str(), Some(id.as_str()), "{st}");

    // The next one writes the done annotation without resetting again, and restores router; it is
    // killed before the stand-in reads anything, so the group has not caught up.
    let op = start("restore", &[]);
    wait_until("the done annotation", Duration::from_secs(60), || {
        (annotation(ns, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    wait_until("router's replicas restored", Duration::from_secs(30), || {
        (deployment_replicas(ns, name) == "1").then_some(())
    });
    wait_until("the restore event", Duration::from_secs(30), || {
        (event_notes(ns, "RebuildRestored").len() == 1).then_some(())
    });
    wait_until("CaughtUp False while catching up", Duration::from_secs(30), || {
        (condition_reason(ns, name, "CaughtUp") == "CatchingUp").then_some(())
    });
    kill(op);
    assert_eq!(condition(ns, name, "CaughtUp"), "False");

    // A last operator follows the catch-up to the end.
    let _op = start("catch-up", &[]);
    let reader = standin::read_as_streamlet(ns, name, "router", 60);
    assert_eq!(reader["records"], 60);
    wait_until("CaughtUp True", Duration::from_secs(60), || (condition(ns, name, "CaughtUp") == "True").then_some(()));

    // Once, whatever the stops: one reset commit per partition, one event of each kind.
    let commits = support::commits(&format!("ankka-flow/reset/{id}"));
    let per_partition: Vec<usize> =
        (0..3).map(|p| commits.get(&(group.to_string(), topic.to_string(), p)).copied().unwrap_or(0)).collect();
    assert_eq!(per_partition, [1, 1, 1], "reset commits of {id} per partition");
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(event_notes(ns, "Rebuilding").len(), 1);
    assert_eq!(event_notes(ns, "RebuildRestored").len(), 1);
    assert_eq!(condition(ns, name, "Rebuilding"), "False");
    let st = reset_status(ns, name);
    assert_eq!((st["id"].as_str(), st["phase"].as_str()), (Some(id.as_str()), Some("Done")), "{st}");
    assert!(st["groups"][0]["caughtUpAt"].is_string(), "{st}");
}
