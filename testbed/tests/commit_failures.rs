//! Case C4 of `/work/shared/cases/README.md` ("one partition's commit fails"), and the other members
//! of its kind, end to end on the test bed: the operator's reset is paused between two of its
//! effects (`FLOW_FAULT_PAUSE_AT`, see `operator/src/faults.rs`) and the world is changed under it.
//!
//! - the topic is deleted after the fence and before the commit: every partition's commit fails;
//! - the topic is recreated with 2 of its 3 partitions there: one partition's commit fails, the
//!   others land;
//! - a consumer commits over the reset right after it was read back: the partitions then read back at
//!   other offsets than the reset committed.
//!
//! Each must end in a failure event for the group naming the failing partitions (never a "to
//! earliest" event), the group's outcome `Failed` in the status, and the done annotation written.
//!
//! Not built: a commit refused for lack of rights on one topic needs an authorizer, which the test
//! bed's broker does not run (a test-bed change).
//!
//! Each test has its own namespace, pipeline, topic and group (`cf-c4…`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;

/// A fresh namespace `ns` with an operator that watches only it and pauses `seconds` at `point`.
fn paused_operator(ns: &str, point: &str, seconds: u64) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let secs = seconds.to_string();
    Operator::start(
        &fresh_dir(ns),
        &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_FAULT_PAUSE_AT", point), ("FLOW_FAULT_PAUSE_SECONDS", &secs)],
    )
}

/// The partitions a failure reason names: the numbers right after each "partition", "partitions"
/// or "partition(s)" (a list such as `0, 1 and 2` counts whole), and `<topic>[N]` / `<topic>/N` /
/// `<topic>-N` forms.
fn named_partitions(reason: &str, topic: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    let lower = reason.to_lowercase();
    for (at, _) in lower.match_indices("partition") {
        let mut rest = &reason[at + "partition".len()..];
        rest = rest.strip_prefix("(s)").or_else(|| rest.strip_prefix('s')).unwrap_or(rest);
        loop {
            rest = rest.trim_start_matches([' ', ':', ',']);
            rest = rest.strip_prefix("and ").unwrap_or(rest);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() {
                break;
            }
            out.insert(digits.parse().expect("a partition number"));
            rest = &rest[digits.len()..];
        }
    }
    for sep in ["[", "/", "-"] {
        let needle = format!("{topic}{sep}");
        for (at, _) in reason.match_indices(&needle) {
            let digits: String = reason[at + needle.len()..].chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                out.insert(n);
            }
        }
    }
    out
}

#[test]
fn the_partition_reader_reads_the_usual_forms() {
    let t = "cf.topic";
    assert_eq!(named_partitions("partition 2: Broker: Unknown topic or partition", t), [2].into());
    assert_eq!(named_partitions("commit failed on partition(s) 0, 1 and 2 of 'cf.topic'", t), [0, 1, 2].into());
    assert_eq!(named_partitions("partitions 0, 2: unknown", t), [0, 2].into());
    assert_eq!(named_partitions("cf.topic[1]: unknown; cf.topic/2: unknown", t), [1, 2].into());
    assert_eq!(named_partitions("partition 0 is at 7 (reset to 0)", t), [0].into());
    assert_eq!(named_partitions("Consumer commit error: Broker: Unknown topic or partition", t), BTreeSet::new());
}

/// The group's status entry.
fn group_entry(ns: &str, pipeline: &str, group: &str) -> serde_json::Value {
    let st = reset_status(ns, pipeline);
    st["groups"].as_array().into_iter().flatten().find(|x| x["group"] == group).cloned().unwrap_or_else(|| {
        panic!("no group {group} in the status: {st}");
    })
}

/// Waits until every partition of the group carries the fence of request `id` (the operator is then
/// paused after its intent, before its commit); returns when that was seen.
fn wait_fenced(g: &str, topic: &str, partitions: i32, id: &str) -> Instant {
    let fence = format!("ankka-flow/reset/{id}/fence");
    wait_until("the fence on every partition", Duration::from_secs(60), || {
        let p = groups::positions(g, topic, partitions);
        p.values().all(|x| x.as_ref().is_some_and(|(_, m)| *m == fence)).then_some(())
    });
    Instant::now()
}

/// What every variant must end in: done written, one failure event for the group whose reason names
/// (at least) every partition of `failing`, no "to earliest" event, the group's outcome Failed.
/// Returns the reason.
fn assert_failed_naming(ns: &str, p: &str, g: &str, topic: &str, id: &str, failing: &[i32]) -> String {
    wait_until("done", Duration::from_secs(90), || (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(()));
    let failed = event_notes(ns, "ResetOffsetsFailed");
    eprintln!("C4 ({topic}): failure events {failed:?}");
    assert_eq!(event_notes(ns, "ResetOffsets"), Vec::<String>::new(), "never a 'to earliest' event");
    assert_eq!(failed.len(), 1, "one failure event for the group: {failed:?}");
    let reason = failed[0].strip_prefix(&format!("{g}: ")).unwrap_or_else(|| panic!("{failed:?}")).to_string();
    let st = reset_status(ns, p);
    assert_eq!(st["phase"], "Done", "{st}");
    let entry = group_entry(ns, p, g);
    assert_eq!(entry["outcome"], "Failed", "{entry}");
    let named = named_partitions(&reason, topic);
    let want: BTreeSet<i32> = failing.iter().copied().collect();
    assert!(want.is_subset(&named), "the reason names partitions {named:?}, not every failing one {want:?}: {reason}");
    reason
}

/// C4, the whole topic: it is deleted after the fence, before the commit. Every partition's commit
/// fails; the failure names partitions 0, 1 and 2.
#[test]
fn c4_a_topic_deleted_before_the_commit_fails_the_group_naming_its_partitions() {
    let _serial = serial();
    let (ns, p, topic) = ("cf-c4-deleted", "cf-c4-deleted", "cf.c4-deleted");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-intent", 5);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    groups::forget(&g);
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);

    let id = "c4000000-0000-4000-8000-0000000000d1";
    write_request(ns, p, id, &["router"]);
    let fenced = wait_fenced(&g, topic, 3, id);
    groups::delete_topic(topic);
    let took = fenced.elapsed();
    assert!(took < Duration::from_secs(4), "the topic went {took:?} after the fence, too late for the 5 s pause");
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the topic went");

    let reason = assert_failed_naming(ns, p, &g, topic, id, &[0, 1, 2]);
    eprintln!("C4 (topic deleted): reason: {reason}");
    assert!(op.log_text().contains("fault injection: pausing here on purpose"), "the pause was reached");
}

/// C4, one partition: the topic is recreated with 2 of its 3 partitions after the fence, before the
/// commit. Partition 2's commit fails and partitions 0 and 1 land: the group fails, naming partition 2.
#[test]
fn c4_one_partition_gone_before_the_commit_fails_the_group_naming_it() {
    let _serial = serial();
    let (ns, p, topic) = ("cf-c4-one", "cf-c4-one", "cf.c4-one");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-intent", 8);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    groups::forget(&g);
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);

    let id = "c4000000-0000-4000-8000-0000000000d2";
    write_request(ns, p, id, &["router"]);
    let fenced = wait_fenced(&g, topic, 3, id);
    kafka::recreate_topic(topic, 2);
    let took = fenced.elapsed();
    assert!(
        took < Duration::from_secs(7),
        "the topic was recreated {took:?} after the fence, too late for the 8 s pause"
    );
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the topic was recreated");

    let reason = assert_failed_naming(ns, p, &g, topic, id, &[2]);
    eprintln!("C4 (one partition gone): reason: {reason}");
    assert!(op.log_text().contains("fault injection: pausing here on purpose"), "the pause was reached");
}

/// C4's kind, offsets that read back otherwise than committed: right after the reset's commit was
/// read back (the operator paused there), a consumer commits partition 1 at 7, over the reset. The
/// group must not be reported reset: a failure naming partition 1.
#[test]
fn c4_offsets_reading_back_otherwise_than_committed_fail_the_group_naming_them() {
    let _serial = serial();
    let (ns, p, topic) = ("cf-c4-moved", "cf-c4-moved", "cf.c4-moved");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-commit", 5);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    groups::forget(&g);
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);

    let id = "c4000000-0000-4000-8000-0000000000d3";
    write_request(ns, p, id, &["router"]);
    let reset = format!("ankka-flow/reset/{id}");
    wait_until("the reset's commit on every partition", Duration::from_secs(60), || {
        let pos = groups::positions(&g, topic, 3);
        pos.values().all(|x| x.as_ref().is_some_and(|(o, m)| *o == 0 && *m == reset)).then_some(())
    });
    let landed = Instant::now();
    groups::commit(&g, topic, &[(1, 7)]);
    assert!(landed.elapsed() < Duration::from_secs(4), "{:?}", landed.elapsed());
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the consumer committed");

    let reason = assert_failed_naming(ns, p, &g, topic, id, &[1]);
    eprintln!("C4 (offsets moved after the read-back): reason: {reason}");
    assert_eq!(kafka::committed(&g, topic, 3), [(0, Some(0)), (1, Some(7)), (2, Some(0))].into());
    assert!(op.log_text().contains("fault injection: pausing here on purpose"), "the pause was reached");
}
