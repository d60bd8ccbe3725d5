//! What "earliest" means: cases B1, B3 and B4 of docs/field-cases.md.

use std::process::Command;
use std::time::Duration;

use flow_testbed::*;

use crate::world::*;

/// B1 (and B2): log start offsets moved by DeleteRecords to 50 (p1) and 30 (p2), group at 10/10/10.
/// The reset commits the log start offsets, read back as absolute numbers 0/50/30, and the status
/// says the same; a consumer restarted with `auto.offset.reset=latest` starts at them.
#[test]
fn b1_earliest_is_each_partitions_log_start_offset() {
    let case = Case::new("case-b1");
    let (ns, p, topic) = (case.ns, case.ns, "case.b1-events");
    case.topic(topic, 3, 100);
    kafka::delete_records(topic, 1, 50);
    kafka::delete_records(topic, 2, 30);
    assert_eq!(kafka::watermarks(topic), [(0, (0, 100)), (1, (50, 100)), (2, (30, 100))].into());
    let g = case.group_at("router", topic, 3, 10);
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 10));
    case.apply(&[s("router", topic, 0)]);

    let id = flow_reset(ns, p, &[]);
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
    let case = Case::new("case-b3");
    let (ns, p) = (case.ns, case.ns);
    let (sparse_t, fresh_t) = ("case.b3-sparse", "case.b3-fresh");
    kafka::recreate_topic(sparse_t, 3);
    kafka::produce(sparse_t, 1, 5); // p0 only
    case.topic(fresh_t, 3, 0);
    assert_eq!(kafka::watermarks(sparse_t), [(0, (0, 5)), (1, (0, 0)), (2, (0, 0))].into());
    assert_eq!(kafka::watermarks(fresh_t), [(0, (0, 0)), (1, (0, 0)), (2, (0, 0))].into());
    let sparse_g = case.group_at("sparse", sparse_t, 1, 5);
    let fresh_g = case.fresh_group("fresh");
    case.apply(&[s("sparse", sparse_t, 0), s("fresh", fresh_t, 0)]);

    let id = flow_reset(ns, p, &[]);
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
    let case = Case::new("case-b4");
    let (ns, p, topic) = (case.ns, case.ns, "case.b4-events");
    case.topic(topic, 3, 20);
    kafka::delete_records(topic, 2, 5);
    let g = case.group_at("router", topic, 1, 20);
    assert_eq!(kafka::committed(&g, topic, 3), offsets(&[Some(20), None, None]));
    case.apply(&[s("router", topic, 0)]);

    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), offsets(&[Some(0), Some(0), Some(5)]));
    assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    let gs = group_status(ns, p, &g);
    assert_eq!(gs["offsetsBefore"], serde_json::json!({"0": 20}));
    assert_eq!(gs["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 5}));
}
