//! Faults of issue 28, on the test bed: calls a frozen broker holds and carries out late, the API
//! server frozen, etcd restarted, and the operator killed for memory in the middle of a large reset.
//! docs/faults.md describes each and what these tests observed.

use std::time::{Duration, Instant};

use flow_testbed::*;

use crate::outages::{self, Frozen};
use crate::support::{PARTITIONS, Pipe, commit_order, uuid};
use crate::{PAUSE_AFTER_INTENT, paused};

/// A short request deadline (`FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS`): a call the frozen broker holds
/// is given up on after 2 s (plus the second each wait adds), so that the tests wait on the freeze,
/// not on timeouts.
const SHORT_DEADLINE: (&str, &str) = ("FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", "2");

/// Waits until a line of `op`'s log holds every one of `parts`; returns it.
fn logged(op: &Operator, what: &str, parts: &[&str], timeout: Duration) -> String {
    wait_until(what, timeout, || op.log_text().lines().find(|l| parts.iter().all(|p| l.contains(p))).map(String::from))
}

/// The status of `group` in `status.reset` of AnkkaFlow `name` in `ns`.
fn group_status(ns: &str, name: &str, group: &str) -> serde_json::Value {
    let status = reset_status(ns, name);
    status["groups"].as_array().and_then(|gs| gs.iter().find(|g| g["group"] == group).cloned()).unwrap_or_default()
}

/// Issue 28, the frozen broker with a fence queued: the broker is frozen (SIGSTOP) just as the
/// operator sends group b's fence of request 1, which it holds unanswered; request 2, of b alone,
/// replaces request 1 while the broker is still frozen (b's lane in it differs from its lane in
/// request 1); the broker is continued once the operator has started request 2's calls of b. Those
/// calls go over the held fence's connection, behind it: Kafka carries the fence out first, and
/// request 2 ends with its own offsets, one commit per partition, no false success.
#[test]
fn a_fence_held_by_a_frozen_broker_lands_before_the_request_that_replaced_it() {
    // Serial: it freezes or restarts the broker, the API server or etcd.
    let _serial = serial();
    let ns = "faults-held-fence";
    let pipe = Pipe::new(ns, "held", &["a", "b"]);
    let (b, topic_b) = pipe.groups[1].clone();
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            SHORT_DEADLINE,
            ("FLOW_FAULT_PAUSE_AT", "before-fence"),
            ("FLOW_FAULT_GROUP", b.as_str()),
            ("FLOW_FAULT_PAUSE_SECONDS", "3"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
        ],
    );
    let first = pipe.request();
    paused(&op, "before b's fence");
    let broker = Frozen::part("kafka");
    logged(
        &op,
        "b's fence to go unanswered",
        &["Kafka did not answer the write", &b, "fence"],
        Duration::from_secs(30),
    );
    let second = uuid();
    write_request(ns, "held", &second, &["b"]);
    wait_until("request 2's calls of b to queue behind the fence", Duration::from_secs(60), || {
        let behind =
            op.log_text().lines().any(|l| l.contains("goes over that write's connection, behind it") && l.contains(&b));
        (reset_status(ns, "held")["id"] == second && behind).then_some(())
    });
    let frozen = broker.thaw();
    let thawed = Instant::now();
    pipe.wait_done(&second, Duration::from_secs(120));
    eprintln!("faults: the broker was frozen {frozen:?}; request 2 done {:?} after", thawed.elapsed());
    pipe.assert_reset_once_of(&second, &[b.as_str()]);
    // Kafka's own record of b's commits: request 1's fence landed, and before anything of request 2.
    let (fence1, fence2, reset2) = (
        format!("ankka-flow/reset/{first}/fence"),
        format!("ankka-flow/reset/{second}/fence"),
        format!("ankka-flow/reset/{second}"),
    );
    for p in 0..PARTITIONS {
        let order = commit_order(&b, &topic_b, p);
        let at = |m: &str| order.iter().position(|x| x == m);
        assert!(
            !order.contains(&format!("ankka-flow/reset/{first}")),
            "partition {p}: request 1 never reset b: {order:?}"
        );
        let (f1, f2, r2) = (at(&fence1), at(&fence2), at(&reset2));
        assert!(f1.is_some() && f1 < f2 && f2 < r2, "partition {p}: request 1's fence, then request 2's: {order:?}");
        let last1 = order.iter().rposition(|x| x.contains(&first)).unwrap_or(0);
        assert!(last1 < f2.unwrap_or(0), "partition {p}: nothing of request 1 after request 2 began: {order:?}");
    }
}

/// The broker is frozen between a group's commit and its read-back: the commit was answered, its
/// read-back is held. The operator learns whether the commit landed by reading the group's offsets
/// and their markers, a read that waits behind the read-back on the same connection; once the
/// broker goes on, the group is found reset and verified, never committed twice.
#[test]
fn the_broker_frozen_between_a_commit_and_its_read_back_commits_nothing_twice() {
    // Serial: it freezes or restarts the broker, the API server or etcd.
    let _serial = serial();
    let ns = "faults-read-back";
    let pipe = Pipe::new(ns, "readback", &["a", "b"]);
    let b = pipe.groups[1].0.clone();
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            SHORT_DEADLINE,
            ("FLOW_FAULT_PAUSE_AT", "before-read-back"),
            ("FLOW_FAULT_GROUP", b.as_str()),
            ("FLOW_FAULT_PAUSE_SECONDS", "3"),
            ("FLOW_FAULT_PAUSE_TIMES", "1"),
        ],
    );
    let id = pipe.request();
    paused(&op, "between b's commit and its read-back");
    let broker = Frozen::part("kafka");
    let during = wait_until("b to recover its intent", Duration::from_secs(30), || {
        let g = group_status(ns, "readback", &b);
        (g["outcome"] == "Recovering").then_some(g)
    });
    assert_eq!(annotation(ns, "readback", flow_testbed::cart::DONE), None, "not done while the broker is frozen");
    let frozen = broker.thaw();
    pipe.wait_done(&id, Duration::from_secs(90));
    eprintln!("faults: the broker was frozen {frozen:?}; b meanwhile: {during}");
    pipe.assert_reset_once(&id);
}

/// The API server is frozen (SIGSTOP) for 8 s mid-reset, between the intents and their commits,
/// while the operator's Lease lasts 6 s: its calls hang, it cannot renew the Lease, and past the
/// renewal deadline it must stop acting and end, never committing without the Lease; the test starts
/// it again, as Kubernetes would its container. One commit per group, no false success.
#[test]
fn the_api_server_frozen_mid_reset_never_commits_twice() {
    // Serial: it freezes or restarts the broker, the API server or etcd.
    let _serial = serial();
    let ns = "faults-api-frozen";
    let pipe = Pipe::new(ns, "frozen", &["a", "b"]);
    let dir = fresh_dir(ns);
    let _ =
        kubectl(&["-n", "ankka-flow", "delete", "lease", &format!("ankka-flow-operator-{ns}"), "--ignore-not-found"]);
    let env = [("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LEASE_DURATION_SECONDS", "6")];
    let mut first = Operator::start(&dir, &[&env[..], &PAUSE_AFTER_INTENT[..]].concat());
    let id = pipe.request();
    paused(&first, "between the intents and their commits");
    let api = Frozen::part("kube-apiserver");
    std::thread::sleep(Duration::from_secs(8));
    let frozen = api.thaw();
    let done = || annotation(ns, "frozen", flow_testbed::cart::DONE).as_deref() == Some(id.as_str());
    let ended = wait_until("the operator to end or finish", Duration::from_secs(60), || {
        if !first.running() { Some(true) } else { done().then_some(false) }
    });
    let log = first.log_text();
    assert!(ended, "kept acting through {frozen:?} of a frozen API server with a Lease of 6 s:\n{log}");
    assert_eq!(first.wait_exit(Duration::from_secs(5)), Some(1), "{log}");
    assert!(log.contains("lost the lease"), "{log}");
    assert!(!log.contains("reset request done"), "{log}");
    assert_eq!(annotation(ns, "frozen", flow_testbed::cart::DONE), None, "not done by the deposed operator");
    let restarted = Instant::now();
    let second = Operator::start(&dir, &env);
    pipe.wait_done(&id, Duration::from_secs(90));
    eprintln!(
        "faults: API server frozen {frozen:?}; the operator stepped down, and one started again finished in {:?}",
        restarted.elapsed()
    );
    pipe.assert_reset_once(&id);
    second.stop();
}

/// etcd is restarted mid-reset (SIGTERM, started again on its data), between the intents and their
/// commits, under the running API server, which answers with errors meanwhile. The operator's writes
/// fail and it starts the request again from what is durable; a restart longer than its renewal
/// deadline (10 s of its 15 s Lease) makes it step down instead, and one started again finishes.
/// Either way one commit per group, no false success.
#[test]
fn etcd_restarted_mid_reset_never_commits_twice() {
    // Serial: it freezes or restarts the broker, the API server or etcd.
    let _serial = serial();
    let ns = "faults-etcd";
    let pipe = Pipe::new(ns, "etcd", &["a", "b"]);
    let dir = fresh_dir(ns);
    let _ =
        kubectl(&["-n", "ankka-flow", "delete", "lease", &format!("ankka-flow-operator-{ns}"), "--ignore-not-found"]);
    let env = [("FLOW_WATCH_NAMESPACE", ns)];
    let mut first = Operator::start(&dir, &[&env[..], &PAUSE_AFTER_INTENT[..]].concat());
    let id = pipe.request();
    paused(&first, "between the intents and their commits");
    let took = outages::restart_etcd();
    // Finished: the done annotation, and the status that says Done after it. The operator may also
    // step down between the two (its done write landed while it held the Lease; its renewals then
    // failed): one started again writes the status.
    let finished = || {
        let s = reset_status(ns, "etcd");
        annotation(ns, "etcd", flow_testbed::cart::DONE).as_deref() == Some(id.as_str())
            && s["id"] == id.as_str()
            && s["phase"] == "Done"
    };
    let ended = wait_until("the operator to finish or end", Duration::from_secs(90), || {
        if !first.running() { Some(true) } else { finished().then_some(false) }
    });
    let _second = ended.then(|| {
        let log = first.log_text();
        assert_eq!(first.wait_exit(Duration::from_secs(5)), Some(1), "{log}");
        assert!(log.contains("lost the lease"), "{log}");
        let second = Operator::start(&dir, &env);
        pipe.wait_done(&id, Duration::from_secs(90));
        second
    });
    eprintln!(
        "faults: etcd restarted in {took:?}; the operator {}",
        if ended { "stepped down, and one started again finished" } else { "rode it out" }
    );
    pipe.assert_reset_once(&id);
}

/// The size of the large reset (`<groups>x<partitions>`): `FLOW_FAULTS_LARGE`, by default a reset
/// small enough for every run of the suite; `FLOW_FAULTS_LARGE=200x1000` is the size of issue 28.
fn large_size() -> (usize, i32) {
    let spec = std::env::var("FLOW_FAULTS_LARGE").unwrap_or_else(|_| "20x100".into());
    let (g, p) = spec.split_once('x').unwrap_or_else(|| panic!("FLOW_FAULTS_LARGE is <groups>x<partitions>: {spec}"));
    (g.parse().expect("groups"), p.parse().expect("partitions"))
}

/// The resident and the peak resident memory of process `pid`, in KiB (`VmRSS`, `VmHWM`).
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

/// The operator is killed for memory in the middle of a large reset: SIGKILL, as the kernel's OOM
/// killer sends it, once a quarter of the groups have an intent or an outcome (every group's calls
/// are under way then, and the resident memory at its highest). One started again on the same
/// ledger finishes: every group reset once (one reset commit per partition, read from
/// `__consumer_offsets`), at its log start offsets with the reset marker, one `ResetOffsets` each,
/// no failure, `Done`. Its size is [`large_size`]: 20 groups x 100 partitions in every run,
/// 200 x 1,000 with `FLOW_FAULTS_LARGE=200x1000`.
#[test]
fn the_operator_killed_for_memory_mid_reset_finishes_every_group_once() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, groups and operators
    let (groups, partitions) = large_size();
    let (ns, name) = ("faults-oom", "oom");
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let topic = format!("faults.oom.p{partitions}");
    kafka::recreate_topic(&topic, partitions);
    kafka::produce(&topic, partitions, 20);
    let (yaml, names) = inlets_pipeline_yaml(ns, name, &topic, "shop", groups, 10);
    kubectl_apply(&yaml);
    let at20: Vec<(i32, i64)> = (0..partitions).map(|p| (p, 20)).collect();
    for chunk in names.chunks(10) {
        std::thread::scope(|s| {
            for g in chunk {
                let at20 = &at20;
                let topic = &topic;
                s.spawn(move || groups::commit(g, topic, at20));
            }
        });
    }
    let dir = fresh_dir(ns);
    let env = [("FLOW_WATCH_NAMESPACE", ns)];
    let mut first = Operator::start(&dir, &env);
    let id = uuid();
    let requested = Instant::now();
    write_request(ns, name, &id, &[]);
    let mut highest = 0;
    wait_until("a quarter of the groups to have an intent or an outcome", Duration::from_secs(300), || {
        highest = highest.max(memory(first.pid()).0);
        let status = reset_status(ns, name);
        let under_way = status["groups"].as_array().map_or(0, |gs| {
            gs.iter()
                .filter(|g| {
                    ["Committing", "Recovering", "Verifying", "Reset"]
                        .contains(&g["outcome"].as_str().unwrap_or_default())
                })
                .count()
        });
        (status["id"] == id && under_way * 4 >= groups).then_some(())
    });
    let (rss, peak) = memory(first.pid());
    outages::signal(first.pid(), "-KILL");
    assert_eq!(first.wait_exit(Duration::from_secs(10)), None, "killed by a signal");
    let killed = requested.elapsed();
    assert_eq!(annotation(ns, name, flow_testbed::cart::DONE), None, "not done when it was killed");
    let second = Operator::start(&dir, &env);
    wait_done(ns, name, &id, Duration::from_secs(600));
    eprintln!(
        "faults: {groups} x {partitions}: killed {killed:?} after the request at {rss} KiB resident (highest seen {} KiB, peak {peak} KiB); done {:?} after the request",
        highest.max(rss),
        requested.elapsed()
    );
    // Kafka's own record: one reset commit per partition of every group.
    let marker = format!("ankka-flow/reset/{id}");
    let mut recorded = std::collections::BTreeMap::new();
    for (g, t, p, m) in offsets_log::commits(&bed().kafka) {
        if m == marker && t == topic {
            *recorded.entry((g, p)).or_insert(0usize) += 1;
        }
    }
    for g in &names {
        let twice: Vec<i32> = (0..partitions).filter(|p| recorded.get(&(g.clone(), *p)) != Some(&1)).collect();
        assert!(twice.is_empty(), "{g}: partitions without exactly one reset commit of {id}: {twice:?}");
        let now = groups::positions(g, &topic, partitions);
        assert!(now.values().all(|x| *x == Some((0, marker.clone()))), "{g}: {now:?}");
    }
    let reset = event_notes(ns, "ResetOffsets");
    assert_eq!(reset.len(), groups, "one ResetOffsets per group");
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new());
    let status = reset_status(ns, name);
    assert_eq!(status["phase"], "Done", "{status}");
    let listed = status["groups"].as_array().cloned().unwrap_or_default();
    assert!(listed.len() == groups && listed.iter().all(|g| g["outcome"] == "Reset"), "{status}");
    second.stop();
    kafka::remove_topic(&topic);
    let _ = kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--wait=false"]);
}
