//! Faults that real clusters have, one test each, on the real test bed. Each ends with the same
//! checks (`Pipe::assert_reset_once`): Kafka recorded one reset commit per partition of each group
//! for the request (read from `__consumer_offsets`), no group is reported reset that is not at its
//! log start offsets with the reset marker, and the status says `Done` with every group `Reset`.

#[path = "faults/support.rs"]
mod support;

use std::time::Duration;

use flow_testbed::*;
use support::Pipe;

/// A status write fails while another group's fence is delayed: the drive that gives up waits for
/// the fence, so it can never land after the next drive's reset of that group.
#[test]
fn a_fence_delayed_past_a_failed_status_write_never_lands_after_the_reset() {
    let _serial = serial();
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
    let _serial = serial();
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
    wait_until("the first operator between an intent and its commit", Duration::from_secs(60), || {
        first.log_text().contains("fault injection: pausing here on purpose").then_some(())
    });
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
    let _serial = serial();
    let ns = "faults-ledger-gone";
    let pipe = Pipe::new(ns, "gone", &["a", "b"]);
    let dir = fresh_dir(ns).join("ledger");
    let op = Operator::start(
        &dir,
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_METRICS_ADDRESS", "127.0.0.1:0"),
            ("FLOW_FAULT_PAUSE_AT", "after-intent"),
            ("FLOW_FAULT_PAUSE_SECONDS", "3"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
        ],
    );
    let id = pipe.request();
    wait_until("the operator between an intent and its commit", Duration::from_secs(60), || {
        op.log_text().contains("fault injection: pausing here on purpose").then_some(())
    });
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

/// A tmpfs of its own, mounted for one test and unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Tmpfs {
        let dir = bed().root.join("target/e2e-tmpfs").join(format!("{name}-{}", std::process::id()));
        let _ = std::process::Command::new("umount").arg("-l").arg(&dir).status();
        std::fs::create_dir_all(&dir).expect("mount point");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount a tmpfs at {} (the fault tests run as root)", dir.display());
        Tmpfs(dir)
    }

    /// Writes zeros into a file of its own until the file system is full.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("fill")).expect("fill file");
        let chunk = vec![0u8; 64 * 1024];
        while f.write_all(&chunk).and_then(|()| f.flush()).is_ok() {}
        let _ = f.sync_all();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The ledger's disk is full when the operator starts (sled cannot even create its files; on a
/// disk that fills up later, its writes fail the same way once they need a new page). The operator
/// starts anyway, the reset goes on with its progress held by the status alone, and finishes: one
/// commit per group, no false success; the resource carries the `ResetLedger` condition and the
/// metrics count the failures. Once space is freed, the ledger is used again and the condition goes.
#[test]
fn a_full_ledger_disk_degrades_to_the_status_and_never_blocks_a_reset() {
    let _serial = serial();
    let ns = "faults-ledger-full";
    let pipe = Pipe::new(ns, "full", &["a", "b"]);
    let disk = Tmpfs::mount(ns, "4m");
    disk.fill();
    let op = Operator::start(
        &disk.0.join("ledger"),
        &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")],
    );
    let id = pipe.request();
    pipe.wait_done(&id, Duration::from_secs(90));
    pipe.assert_reset_once(&id);
    let log = op.log_text();
    assert!(log.contains("cannot open the reset ledger"), "{log}");
    let text = metrics(&op);
    assert!(series(&text, "ankka_flow_ledger_errors_total{operation=\"open\"}").is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(series(&text, "ankka_flow_ledger_available"), Some(0.0), "{text}");
    let (code, health) = http_get(&metrics_address(&op), "/healthz");
    assert_eq!(code, 200);
    assert!(health.starts_with("ok\nledger: cannot be used; resets go on"), "{health}");
    let condition = || {
        kubectl_ok(&[
            "-n",
            ns,
            "get",
            "aflow",
            "full",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"ResetLedger\")]}",
        ])
    };
    let c: serde_json::Value = serde_json::from_str(&condition()).expect("the ResetLedger condition");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("False"), Some("LedgerUnavailable")), "{c}");
    let message = c["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("cannot open the reset ledger in ") && message.contains("resets go on"), "{c}");

    // Space again: the catch-up's next reconcile (within the lag interval) opens the ledger.
    std::fs::remove_file(disk.0.join("fill")).expect("free the disk");
    wait_until("the ResetLedger condition to go", Duration::from_secs(40), || condition().is_empty().then_some(()));
    assert_eq!(series(&metrics(&op), "ankka_flow_ledger_available"), Some(1.0));
    assert!(disk.0.join("ledger/conf").exists(), "the ledger was opened");
}

/// Each crash point of the reset (before a fence, after an intent is durable, after a commit, after
/// an outcome is durable, before the done write): the operator dies there; a new one starts on the
/// same ledger, or, where the ledger is lost as well, on an empty one, and finishes the request. One
/// commit per group, no false success, whatever was durable when it died.
#[test]
fn each_crash_point_is_recovered_without_a_second_commit() {
    let _serial = serial();
    for (point, lose_ledger) in [
        ("before-fence", false),
        ("after-intent", true),
        ("after-commit", false),
        ("after-commit", true),
        ("after-outcome", true),
        ("before-done", false),
    ] {
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
        eprintln!("faults: crash at {point} (ledger lost: {lose_ledger}) recovered");
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
    let _serial = serial();
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
    wait_until("the operator between an intent and its commit", Duration::from_secs(60), || {
        op.log_text().contains("fault injection: pausing here on purpose").then_some(())
    });
    proxy.cut();
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(annotation(ns, "api", flow_testbed::cart::DONE), None, "not done while the API server is away");
    proxy.restore();
    pipe.wait_done(&id, Duration::from_secs(120));
    pipe.assert_reset_once(&id);
    assert!(op.running(), "the operator rode the outage out:\n{}", op.log_text());
}
