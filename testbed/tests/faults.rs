//! Faults that real clusters have, one test each, on the real test bed. Each ends with the same
//! checks (`Pipe::assert_reset_once`): Kafka recorded one reset commit per partition of each group
//! for the request (read from `__consumer_offsets`), no group is reported reset that is not at its
//! log start offsets with the reset marker, and the status says `Done` with every group `Reset`.
//! docs/faults.md describes each fault, what the operator does, and what these tests observed.

#[path = "faults/late.rs"]
mod late;
#[path = "faults/outages.rs"]
mod outages;
#[path = "faults/pair.rs"]
mod pair;
#[path = "faults/support.rs"]
mod support;

use std::time::{Duration, Instant};

use flow_testbed::*;
use outages::{BrokerStopped, Disk};
use support::Pipe;

/// A status write fails while another group's fence is delayed: the drive that gives up waits for
/// the fence, so it can never land after the next drive's reset of that group.
#[test]
fn a_fence_delayed_past_a_failed_status_write_never_lands_after_the_reset() {
    let _lock = side_by_side(); // isolated: its own namespace, pipeline, topics, groups and operators
    let ns = "faults-late-fence";
    let pipe = Pipe::new(ns, "late", &["a", "b"]);
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_FAULT_PAUSE_AT", "before-fence"),
            ("FLOW_FAULT_GROUP", "late.b.in"),
            ("FLOW_FAULT_PAUSE_SECONDS", "8"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
            ("FLOW_FAULT_FAIL_AT", "intent-status-write"),
        ],
    );
    let id = pipe.request();
    pipe.wait_done(&id, Duration::from_secs(90));
    let log = op.log_text();
    assert!(log.contains("fault injection: pausing here on purpose"), "the fence was delayed");
    assert!(log.contains("fault injection: failing here on purpose"), "the status write failed");
    pipe.assert_reset_once(&id);
}

/// The leader is stopped (SIGSTOP) mid-reset, between an intent and its commit, for longer than its
/// Lease; a second operator takes the Lease over and finishes the request; the first is continued
/// (SIGCONT) and steps down without acting: one commit per group, no false success.
#[test]
fn a_leader_paused_past_its_lease_steps_down_and_the_new_one_finishes() {
    // Isolated: its own namespace, topics, groups, Lease and operators; it freezes only its own.
    let _lock = side_by_side();
    let ns = "faults-leader";
    let pipe = Pipe::new(ns, "lead", &["a", "b"]);
    let lease = format!("ankka-flow-operator-{ns}");
    let _ = kubectl(&["-n", "ankka-flow", "delete", "lease", &lease, "--ignore-not-found"]);
    // A short Lease and short Kafka deadlines keep the take-over quick: 6 s, plus a grace of 1 s.
    let common = [
        ("FLOW_WATCH_NAMESPACE", ns),
        ("FLOW_LEASE_DURATION_SECONDS", "6"),
        ("FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", "2"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        common.iter().copied().chain(extra.iter().copied()).collect()
    };
    let mut first = Operator::start(
        &fresh_dir(&format!("{ns}-a")),
        &with(&[("HOSTNAME", "leader-a"), ("FLOW_FAULT_PAUSE_AT", "after-intent"), ("FLOW_FAULT_PAUSE_SECONDS", "3")]),
    );
    wait_until("the first operator to hold the lease", Duration::from_secs(30), || {
        first.log_text().contains("holding the lease").then_some(())
    });
    let second = Operator::start(&fresh_dir(&format!("{ns}-b")), &with(&[("HOSTNAME", "leader-b")]));
    wait_until("the second operator to wait", Duration::from_secs(30), || {
        second.log_text().contains("waiting to hold the lease").then_some(())
    });
    let id = pipe.request();
    paused(&first, "between an intent and its commit");
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &first.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig}");
    };
    signal("-STOP");
    let stopped = std::time::Instant::now();
    pipe.wait_done(&id, Duration::from_secs(90));
    assert!(second.log_text().contains("holding the lease"), "{}", second.log_text());
    let holder = kubectl_ok(&["-n", "ankka-flow", "get", "lease", &lease, "-o", "jsonpath={.spec.holderIdentity}"]);
    assert_eq!(holder, "leader-b");
    eprintln!("faults: the second operator finished {:?} after the first was stopped", stopped.elapsed());
    signal("-CONT");
    assert_eq!(first.wait_exit(Duration::from_secs(20)), Some(1), "the first steps down:\n{}", first.log_text());
    let log = first.log_text();
    assert!(log.contains("lost the lease"), "{log}");
    assert!(!log.contains("reset request done"), "{log}");
    pipe.assert_reset_once(&id);
}

/// The operator's settings that pause its reset once for 3 s, between the first intents made
/// durable and their commits, for a test to cause its fault meanwhile.
const PAUSE_AFTER_INTENT: [(&str, &str); 3] =
    [("FLOW_FAULT_PAUSE_AT", "after-intent"), ("FLOW_FAULT_PAUSE_SECONDS", "3"), ("FLOW_FAULT_PAUSE_TIMES", "1")];

/// Waits until `op` logged that it pauses at its fault point (`where_`, for the message).
fn paused(op: &Operator, where_: &str) {
    wait_until(&format!("the operator to pause {where_}"), Duration::from_secs(60), || {
        op.log_text().contains("fault injection: pausing here on purpose").then_some(())
    });
}

/// The `ResetLedger` condition of AnkkaFlow `name` in `ns`, as JSON; empty when it has none.
fn ledger_condition(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.conditions[?(@.type==\"ResetLedger\")]}"])
}

/// Checks that `op` reports its ledger unusable after a failed `operation` (`open`, `write`): the
/// failure counted, the gauge at 0, `/healthz` ok and saying so, and AnkkaFlow `name` in `ns`
/// carrying the `ResetLedger` condition, which says that the ledger cannot be opened (now) and
/// that resets go on. Returns the condition's message.
fn assert_ledger_unavailable(op: &Operator, ns: &str, name: &str, operation: &str) -> String {
    let text = metrics(op);
    let errors = format!("ankka_flow_ledger_errors_total{{operation=\"{operation}\"}}");
    assert!(series(&text, &errors).is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(series(&text, "ankka_flow_ledger_available"), Some(0.0), "{text}");
    let (code, health) = http_get(&metrics_address(op), "/healthz");
    assert_eq!(code, 200);
    assert!(health.starts_with("ok\nledger: cannot be used; resets go on"), "{health}");
    let c: serde_json::Value = serde_json::from_str(&ledger_condition(ns, name)).expect("the ResetLedger condition");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("LedgerUnavailable")), "{c}");
    let message = c["message"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with("cannot open the reset ledger in ") && message.contains("resets go on"), "{c}");
    message
}

/// Waits until AnkkaFlow `name` in `ns` no longer carries the `ResetLedger` condition, and checks
/// that `op` counts its ledger available again.
fn wait_ledger_back(op: &Operator, ns: &str, name: &str) {
    wait_until("the ResetLedger condition to go", Duration::from_secs(40), || {
        ledger_condition(ns, name).is_empty().then_some(())
    });
    assert_eq!(series(&metrics(op), "ankka_flow_ledger_available"), Some(1.0));
}

/// The operator's metrics text.
fn metrics(op: &Operator) -> String {
    http_get(&metrics_address(op), "/metrics").1
}

/// The value of the series `name` (with its labels, as the exposition writes them) in `text`.
fn series(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The ledger's directory is removed mid-reset, between an intent and its commit. The operator
/// notices at its next use, counts the ledger as lost, opens a new one, and finishes: one commit per
/// group, and the groups whose records went with the directory are never reset twice.
#[test]
fn the_ledger_directory_removed_mid_reset_loses_nothing() {
    let _lock = side_by_side(); // isolated: its own namespace, pipeline, topics, groups and operators
    let ns = "faults-ledger-gone";
    let pipe = Pipe::new(ns, "gone", &["a", "b"]);
    let dir = fresh_dir(ns).join("ledger");
    let op = Operator::start(
        &dir,
        &[&[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")], &PAUSE_AFTER_INTENT[..]].concat(),
    );
    let id = pipe.request();
    paused(&op, "between an intent and its commit");
    std::fs::remove_dir_all(&dir).expect("remove the ledger directory");
    pipe.wait_done(&id, Duration::from_secs(90));
    pipe.assert_reset_once(&id);
    let log = op.log_text();
    assert!(log.contains("the reset ledger's directory was removed"), "{log}");
    assert!(dir.join("conf").exists(), "a new ledger was opened in its place");
    let text = metrics(&op);
    assert_eq!(series(&text, "ankka_flow_ledger_errors_total{operation=\"lost\"}"), Some(1.0), "{text}");
    assert_eq!(series(&text, "ankka_flow_ledger_available"), Some(1.0), "{text}");
}

/// The ledger's disk is full when the operator starts: sled cannot even create its files (a disk
/// that fills up mid-reset is the next test's). The operator starts anyway, the reset goes on with
/// its progress held by the status alone, and finishes: one commit per group, no false success; the
/// resource carries the `ResetLedger` condition and the metrics count the failures. Once space is
/// freed, the ledger is used again and the condition goes.
#[test]
fn a_full_ledger_disk_degrades_to_the_status_and_never_blocks_a_reset() {
    // Isolated: its own namespace, pipeline, topics, groups, operator and disk.
    let _lock = side_by_side();
    let ns = "faults-ledger-full";
    let pipe = Pipe::new(ns, "full", &["a", "b"]);
    let disk = Disk::mount(ns, 4096);
    disk.fill();
    let op = Operator::start(
        &disk.dir.join("ledger"),
        &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")],
    );
    let id = pipe.request();
    pipe.wait_done(&id, Duration::from_secs(90));
    pipe.assert_reset_once(&id);
    let log = op.log_text();
    assert!(log.contains("cannot open the reset ledger"), "{log}");
    assert_ledger_unavailable(&op, ns, "full", "open");

    // Space again: the catch-up's next reconcile (within the lag interval) opens the ledger.
    disk.free();
    wait_ledger_back(&op, ns, "full");
    assert!(disk.dir.join("ledger/conf").exists(), "the ledger was opened");
}

/// Each crash point of the reset (before a fence, after an intent is durable, after a commit, after
/// an outcome is durable, before the done write), each twice: the operator dies there; a new one
/// starts on the same ledger, and again with the ledger lost as well, on an empty one, and finishes
/// the request. One commit per group, no false success, whatever was durable when it died.
#[test]
fn each_crash_point_is_recovered_without_a_second_commit() {
    let _lock = side_by_side(); // isolated: its own namespace, pipeline, topics, groups and operators
    let points = ["before-fence", "after-intent", "after-commit", "after-outcome", "before-done"];
    for (point, lose_ledger) in points.into_iter().flat_map(|p| [(p, false), (p, true)]) {
        let took = Instant::now();
        let ns = format!("faults-crash-{point}{}", if lose_ledger { "-lost" } else { "" });
        let pipe = Pipe::new(&ns, "crash", &["a", "b"]);
        let dir = fresh_dir(&ns);
        let env = [("FLOW_WATCH_NAMESPACE", ns.as_str()), ("FLOW_FAULT_CRASH_AT", point)];
        let mut first = Operator::start(&dir, &env);
        let id = pipe.request();
        assert_eq!(first.wait_exit(Duration::from_secs(60)), Some(86), "{point}: crashed there\n{}", first.log_text());
        assert_eq!(annotation(&ns, "crash", flow_testbed::cart::DONE), None, "{point}: not done at the crash");
        if lose_ledger {
            std::fs::remove_dir_all(&dir).expect("lose the ledger");
        }
        let second = Operator::start(&dir, &[("FLOW_WATCH_NAMESPACE", ns.as_str())]);
        pipe.wait_done(&id, Duration::from_secs(60));
        eprintln!("faults: crash at {point} (ledger lost: {lose_ledger}) recovered; {:?}", took.elapsed());
        pipe.assert_reset_once(&id);
        second.stop();
    }
}

/// The API server goes away for 6 s mid-reset (every connection closed, new ones refused, as during
/// its restart), between an intent and its commit. The operator's writes fail meanwhile; it keeps
/// its Lease (the outage is shorter than the Lease), starts the request again from what is durable,
/// and finishes it: one commit per group, no false success.
#[test]
fn the_api_server_gone_mid_reset_is_ridden_out() {
    // Isolated: its own namespace, pipeline, topics, groups and operator; it cuts only its own proxy.
    let _lock = side_by_side();
    let ns = "faults-apiserver";
    let pipe = Pipe::new(ns, "api", &["a", "b"]);
    let proxy = support::ApiProxy::start(ns);
    let kubeconfig = proxy.kubeconfig.to_string_lossy().into_owned();
    let mut op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("KUBECONFIG", kubeconfig.as_str()),
            ("FLOW_FAULT_PAUSE_AT", "after-intent"),
            ("FLOW_FAULT_PAUSE_SECONDS", "2"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
        ],
    );
    let id = pipe.request();
    paused(&op, "between an intent and its commit");
    proxy.cut();
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(annotation(ns, "api", flow_testbed::cart::DONE), None, "not done while the API server is away");
    proxy.restore();
    pipe.wait_done(&id, Duration::from_secs(120));
    pipe.assert_reset_once(&id);
    assert!(op.running(), "the operator rode the outage out:\n{}", op.log_text());
}

/// The broker is stopped for 60 s mid-reset, between the intents and their commits (the operator
/// paused there), and started again on its data. Meanwhile every commit fails; each group retries
/// it, with a backoff of at most 30 s, for `FLOW_RESET_RETRY_SECONDS` (300 s by default) from its
/// first failure, which covers the outage and the broker's start. While the broker is away the
/// status names each group's failed call and reports none finished; then one commit per group, no
/// false success.
#[test]
fn the_broker_stopped_for_a_minute_mid_reset_is_ridden_out() {
    // Serial: it stops or restarts the broker or the API server.
    let _serial = serial();
    let ns = "faults-broker";
    let pipe = Pipe::new(ns, "broker", &["a", "b"]);
    let pause = Duration::from_secs(15);
    let dir = fresh_dir(ns);
    // Without leader election: this test is about Kafka. On the shared 2-core test bed the API
    // server has stalled during the broker's outage, once for 7 s and once for more than 20 s (a
    // renewal timed out, and none came through before the renewal deadline, 2026-12-07), which
    // deposed the operator, correctly (the Lease faults have tests of their own), and ended this
    // test early. Its Lease of earlier runs goes first all the same, for an operator started with
    // one.
    let _ =
        kubectl(&["-n", "ankka-flow", "delete", "lease", &format!("ankka-flow-operator-{ns}"), "--ignore-not-found"]);
    let mut op = Operator::start(
        &dir,
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_LEADER_ELECTION", "false"),
            ("FLOW_FAULT_PAUSE_AT", "after-intent"),
            ("FLOW_FAULT_PAUSE_SECONDS", "15"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
        ],
    );
    let id = pipe.request();
    paused(&op, "between the intents and their commits");
    let since_pause = Instant::now();
    let (broker, stopping) = BrokerStopped::stop();
    let stopped = Instant::now();
    assert!(
        since_pause.elapsed() < pause,
        "the pause was over before the broker was down ({stopping:?} to stop): the commits did not meet it away"
    );
    std::thread::sleep(Duration::from_secs(60));
    assert_eq!(annotation(ns, "broker", flow_testbed::cart::DONE), None, "not done while the broker is away");
    let status = reset_status(ns, "broker");
    assert_eq!(status["phase"], "Resetting", "{status}");
    // Each group says which Kafka call failed, and none is reported finished.
    let groups = status["groups"].as_array().cloned().unwrap_or_default();
    let unfinished = |g: &serde_json::Value| {
        ["Pending", "Committing", "Recovering"].contains(&g["outcome"].as_str().unwrap_or_default())
    };
    let says = |g: &serde_json::Value| g["message"].as_str().is_some_and(|m| !m.is_empty());
    assert!(groups.len() == 2 && groups.iter().all(|g| unfinished(g) && says(g)), "{status}");
    eprintln!("faults: the status while the broker is away: {status}");
    let starting = broker.start();
    let away = stopped.elapsed();
    let back = Instant::now();
    // The operator must ride the outage out. Should it have died, one started again (as Kubernetes
    // would start its container again) must still finish with one commit per group; the test then
    // fails on the death.
    let done = || annotation(ns, "broker", flow_testbed::cart::DONE).as_deref() == Some(id.as_str());
    wait_until("the request to be done or the operator to end", Duration::from_secs(120), || {
        (done() || !op.running()).then_some(())
    });
    let died = (!op.running()).then(|| {
        let log = op.log_text();
        log.lines().rev().find(|l| !l.contains(" librdkafka: ")).unwrap_or_default().to_string()
    });
    let _restarted = died.is_some().then(|| {
        let again = Operator::start(&dir, &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LEADER_ELECTION", "false")]);
        pipe.wait_done(&id, Duration::from_secs(120));
        again
    });
    eprintln!(
        "faults: broker stopped in {stopping:?}, away {away:?} (its start {starting:?}), done {:?} after it was back{}",
        back.elapsed(),
        if died.is_some() { " (by an operator started again)" } else { "" }
    );
    pipe.assert_reset_once(&id);
    assert_eq!(died, None, "the operator died while the broker was away or coming back (docs/faults.md)");
}

/// The API server is restarted for real mid-reset (`testbed/tb restart-apiserver`: stopped, started,
/// ready), between the intents and their commits, while the operator's Lease lasts 6 s. An outage
/// past the Lease's renewal deadline (4 s) makes the operator stop acting and end, never committing
/// without the Lease; Kubernetes would start its container again, and here the test does. A shorter
/// outage is ridden out in place. Either way one commit per group and no false success.
#[test]
fn the_api_server_restarted_mid_reset_never_commits_twice() {
    // Serial: it stops or restarts the broker or the API server.
    let _serial = serial();
    let ns = "faults-apiserver-restart";
    let pipe = Pipe::new(ns, "restart", &["a", "b"]);
    let dir = fresh_dir(ns);
    let env = [("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LEASE_DURATION_SECONDS", "6")];
    let mut first = Operator::start(&dir, &[&env[..], &PAUSE_AFTER_INTENT[..]].concat());
    let id = pipe.request();
    paused(&first, "between the intents and their commits");
    let away = outages::restart_apiserver();
    let done = || annotation(ns, "restart", flow_testbed::cart::DONE).as_deref() == Some(id.as_str());
    let ended = wait_until("the operator to end or finish", Duration::from_secs(60), || {
        if !first.running() { Some(true) } else { done().then_some(false) }
    });
    let log = first.log_text();
    // A restart that took longer than the Lease cannot have left the Lease renewed in time.
    assert!(ended || away < Duration::from_secs(6), "kept the Lease through {away:?} away:\n{log}");
    let _second = if ended {
        assert_eq!(first.wait_exit(Duration::from_secs(5)), Some(1), "{log}");
        assert!(log.contains("lost the lease"), "{log}");
        assert!(!log.contains("reset request done"), "{log}");
        assert_eq!(annotation(ns, "restart", flow_testbed::cart::DONE), None, "not done by the deposed operator");
        // The container started again: it takes its own Lease back at once.
        let second = Operator::start(&dir, &env);
        pipe.wait_done(&id, Duration::from_secs(90));
        assert!(second.log_text().contains("holding the lease"), "{}", second.log_text());
        Some(second)
    } else {
        None
    };
    eprintln!(
        "faults: API server away {away:?}; the operator {}",
        if ended { "ended and its restart finished" } else { "rode it out" }
    );
    pipe.assert_reset_once(&id);
}

/// The ledger's disk fills up mid-reset: after the operator started and made the intents durable in
/// its ledger, before their commits. The next ledger write fails for want of space; the status,
/// which carries every write too, holds the progress alone, and the reset goes on: one commit per
/// group, no false success; the resource carries the `ResetLedger` condition, the metrics count the
/// failed write and `/healthz` says so. Once space is freed, the next request's ledger write works
/// and the condition goes.
#[test]
fn the_ledger_disk_filling_up_mid_reset_degrades_to_the_status() {
    // Isolated: its own namespace, pipeline, topics, groups, operator and disk.
    let _lock = side_by_side();
    let ns = "faults-ledger-fills";
    let pipe = Pipe::new(ns, "fills", &["a", "b"]);
    let disk = Disk::mount(ns, 4096);
    let op = Operator::start(
        &disk.dir.join("ledger"),
        &[&[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")], &PAUSE_AFTER_INTENT[..]].concat(),
    );
    let id = pipe.request();
    paused(&op, "between the intents and their commits");
    let text = metrics(&op);
    assert_eq!(series(&text, "ankka_flow_ledger_available"), Some(1.0), "the intents are in the ledger: {text}");
    disk.fill();
    pipe.wait_done(&id, Duration::from_secs(90));
    pipe.assert_reset_once(&id);
    let log = op.log_text();
    let failed = log.lines().find(|l| l.contains("cannot write the reset ledger")).unwrap_or_else(|| panic!("{log}"));
    assert!(failed.contains("No space left on device"), "{failed}");
    // The condition says what holds now: the ledger, dropped after the failed write, cannot be
    // opened again on the full disk.
    let message = assert_ledger_unavailable(&op, ns, "fills", "write");
    assert!(message.contains("No space left on device"), "{message}");

    // Space again: the next request's writes go into the ledger, and the condition goes.
    disk.free();
    let again = pipe.request();
    pipe.wait_done(&again, Duration::from_secs(60));
    wait_ledger_back(&op, ns, "fills");
}
