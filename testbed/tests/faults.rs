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
