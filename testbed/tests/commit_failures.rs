//! Case C4 of docs/field-cases.md ("one partition's commit fails"), and the other members
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
//! Case A4 on the commit path lives here too, since it needs the same pause: a stray consumer joins
//! the group after the operator's inspection and fence, before its commit. Kafka must refuse the
//! commit (the group has a member), the operator must read that as consumers still active, with
//! Kafka's reason, and never move the offsets while the member is there; what happens once the
//! member leaves is asserted as the reset machine defines it (`core/src/reset.rs`).
//!
//! Each test has its own namespace, pipeline, topic and group (`cf-c4…`, `cf-a4…`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

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
    let _lock = side_by_side(); // isolated: its own namespace, topics, group and operator
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
    let _lock = side_by_side(); // isolated: its own namespace, topics, group and operator
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
    let _lock = side_by_side(); // isolated: its own namespace, topics, group and operator
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

/// A consumer group as the classic group description shows it, through one client kept for the test.
struct GroupView {
    client: BaseConsumer,
    group: String,
}

impl GroupView {
    fn new(group: &str) -> GroupView {
        let client = ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("consumer");
        GroupView { client, group: group.to_string() }
    }

    /// The group's state and the `client.id` of each member (`Dead` and none when it is unknown).
    fn look(&self) -> (String, Vec<String>) {
        let list = self.client.fetch_group_list(Some(&self.group), Duration::from_secs(10)).expect("group list");
        list.groups()
            .iter()
            .find(|x| x.name() == self.group)
            .map(|x| (x.state().to_string(), x.members().iter().map(|m| m.client_id().to_string()).collect()))
            .unwrap_or_else(|| ("Dead".to_string(), vec![]))
    }
}

/// Every event about an AnkkaFlow in `ns`, as `<reason>: <note>`.
fn all_events(ns: &str) -> Vec<String> {
    kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=AnkkaFlow",
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// How often the operator reached its pause point so far.
fn pauses(op: &Operator) -> usize {
    op.log_text().matches("fault injection: pausing here on purpose").count()
}

/// Everything an A4 test gathers while it polls: who was ever a member of the group, and every text
/// the operator showed (status detail, each group's message, every event).
struct Watch<'a> {
    ns: &'a str,
    pipeline: &'a str,
    group: &'a str,
    topic: &'a str,
    view: GroupView,
    clients: BTreeSet<String>,
    texts: BTreeSet<String>,
    looks: usize,
}

impl Watch<'_> {
    /// One look at the group, the status and the events; returns the status. While the stray member
    /// is there (`fence` is then the request's fence marker), the offsets must still be the group's
    /// own, under that marker, and no "to earliest" event may exist.
    fn look(&mut self, fence: Option<&str>) -> serde_json::Value {
        let (_, clients) = self.view.look();
        self.clients.extend(clients);
        let st = reset_status(self.ns, self.pipeline);
        if let Some(d) = st["detail"].as_str().filter(|d| !d.is_empty()) {
            self.texts.insert(format!("status detail: {d}"));
        }
        for g in st["groups"].as_array().into_iter().flatten() {
            if let Some(m) = g["message"].as_str().filter(|m| !m.is_empty()) {
                self.texts.insert(format!("status of {}: {m}", g["group"]));
            }
        }
        let events = all_events(self.ns);
        if let Some(fence) = fence {
            let pos = groups::positions(self.group, self.topic, 3);
            assert!(
                pos.values().all(|x| x.as_ref().is_some_and(|(o, m)| *o == 20 && m == fence)),
                "the offsets moved while a member was in the group: {pos:?}"
            );
            let success: Vec<&String> = events.iter().filter(|e| e.starts_with("ResetOffsets: ")).collect();
            assert!(success.is_empty(), "a 'to earliest' event while a member was in the group: {success:?}");
        }
        self.texts.extend(events.into_iter().map(|e| format!("event {e}")));
        self.looks += 1;
        st
    }

    /// The group's message in `st`.
    fn message(&self, st: &serde_json::Value) -> String {
        let groups = st["groups"].as_array().into_iter().flatten();
        groups.filter(|g| g["group"] == self.group).find_map(|g| g["message"].as_str()).unwrap_or_default().to_string()
    }
}

/// A4 on the commit path. The operator inspects the group (no member), fences it, persists its intent
/// and pauses; a stray consumer then joins the group (subscribed to another topic, as in A4), so that
/// the group has a live, Stable member when the operator's commit arrives. Kafka refuses a commit
/// without membership into a group with members (UNKNOWN_MEMBER_ID, or REBALANCE_IN_PROGRESS
/// mid-rebalance).
///
/// Expected while the stray is there: the offsets stay the group's own under the fence (read back on
/// every look), never a "to earliest" event, and the operator treats the refusal as consumers still
/// active: a transient failure, so it looks at the group again (core/src/reset: a transient commit
/// failure is resolved by reading the offsets, which still carry the fence, so the group goes back to
/// inspection, where the member is seen and the group waits for it, looked at again every 5 s, however
/// long it stays).
///
/// Then the stray leaves: the next attempt finds no member, fences and
/// persists its intent again (the pause point is reached a second time), commits, and the group is
/// reset, once: one "to earliest" event, no failure event, the offsets at the log start under the
/// reset marker, done written.
///
/// Throughout, only the stray's `client.id` is ever a member: the operator (`ankka-flow-operator`)
/// never joins. Last, Kafka's reason for the refused commit must have reached the user, in the status
/// or an event.
#[test]
fn a4_a_member_that_joins_before_the_commit_is_refused_by_kafka_and_the_reset_waits_for_it() {
    const PAUSE: u64 = 10;
    let _lock = side_by_side(); // isolated: its own namespace, topics, group and operator
    let (ns, p, topic, other) = ("cf-a4-commit", "cf-a4-commit", "cf.a4-commit", "cf.a4-commit-other");
    let g = format!("{p}.router.in");
    let op = paused_operator(ns, "after-intent", PAUSE);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    kafka::recreate_topic(other, 1);
    kafka::produce(other, 1, 5);
    groups::forget(&g);
    groups::commit(&g, topic, &[(0, 20), (1, 20), (2, 20)]);
    apply_own_pipeline(ns, p, &[("router", topic, 0)]);
    let mut watch = Watch {
        ns,
        pipeline: p,
        group: &g,
        topic,
        view: GroupView::new(&g),
        clients: BTreeSet::new(),
        texts: BTreeSet::new(),
        looks: 0,
    };
    assert_eq!(watch.view.look().1, Vec::<String>::new(), "no member before the request");

    let id = "a4c00000-0000-4000-8000-0000000000a4";
    let (fence, reset) = (format!("ankka-flow/reset/{id}/fence"), format!("ankka-flow/reset/{id}"));
    write_request(ns, p, id, &["router"]);
    let fenced = wait_fenced(&g, topic, 3, id);

    // The operator is paused after its intent: the stray joins now and reads its own topic.
    let mut stray = Container::start(&g, other, &["--hold"]);
    stray.wait_line("first record", Duration::from_secs(PAUSE));
    wait_until("the stray a Stable member", Duration::from_secs(PAUSE), || {
        let (state, members) = watch.view.look();
        (state == "Stable" && members == [g.clone()]).then_some(())
    });
    let joined = fenced.elapsed();
    assert!(
        joined < Duration::from_secs(PAUSE - 2),
        "the stray joined {joined:?} after the fence, too late for the {PAUSE} s pause"
    );
    assert_eq!(annotation(ns, p, DONE), None, "still paused when the stray joined");
    assert_eq!(group_entry(ns, p, &g)["outcome"], "Committing", "paused between the intent and the commit");
    assert_eq!(pauses(&op), 1, "paused once, before the commit");

    // The commit comes when the pause ends and is refused; the operator looks at the group again,
    // sees the member, and waits for its next attempt, showing why.
    let active =
        wait_until("the operator to report the member after its commit", Duration::from_secs(PAUSE + 30), || {
            let st = watch.look(Some(fence.as_str()));
            let m = watch.message(&st);
            let outcome = group_entry(ns, p, &g)["outcome"].clone();
            assert!(
                outcome != "Failed" && outcome != "Reset" && annotation(ns, p, DONE).is_none(),
                "the refused commit ended the group ({outcome}) at once instead of being read as consumers still \
                 active (a transient failure, retried while attempts are left): {m}"
            );
            m.contains("active member(s)").then_some(m)
        });
    let refused = fenced.elapsed();
    eprintln!("A4 (commit path): {refused:?} after the fence, the status says: {active}");
    assert!(
        refused >= Duration::from_secs(PAUSE),
        "reported before the pause ended ({refused:?}): not the commit path"
    );
    assert!(active.contains("has 1 active member(s) (state Stable)"), "{active}");
    // Past the first retry (2 s later), the stray still there.
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        watch.look(Some(fence.as_str()));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(pauses(&op), 1, "no second intent while the member is there");
    assert_eq!(annotation(ns, p, DONE), None, "not done while the member is there (attempts are left)");
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new(), "not failed yet: attempts are left");

    // The stray leaves; the next attempt resets the group.
    stray.terminate();
    let (ok, summary) = stray.wait_exit(Duration::from_secs(20));
    assert!(ok, "the stray exits cleanly: {:?}", stray.log());
    assert_eq!(summary["records"], 5, "the stray read its own topic: {summary}");
    let left = Instant::now();
    assert_eq!(watch.view.look().1, Vec::<String>::new(), "the stray left the group");
    wait_until("done", Duration::from_secs(90), || {
        watch.look(None);
        (annotation(ns, p, DONE).as_deref() == Some(id)).then_some(())
    });
    eprintln!("A4 (commit path): done {:?} after the stray left", left.elapsed());
    let want = format!("{g}: 3 partition(s) of '{topic}' to earliest");
    assert_eq!(event_notes(ns, "ResetOffsets"), std::slice::from_ref(&want), "one 'to earliest' event for the group");
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new(), "no failure event");
    let at_start: std::collections::BTreeMap<i32, Option<(i64, String)>> =
        (0..3).map(|n| (n, Some((0, reset.clone())))).collect();
    assert_eq!(groups::positions(&g, topic, 3), at_start, "the group at the log start, under the reset marker");
    let st = reset_status(ns, p);
    assert_eq!(st["phase"], "Done", "{st}");
    assert_eq!(group_entry(ns, p, &g)["outcome"], "Reset");
    assert_eq!(pauses(&op), 2, "the later attempt fenced and persisted its intent again before its commit");
    // Once: nothing more happens for this request.
    std::thread::sleep(Duration::from_secs(5));
    watch.look(None);
    assert_eq!(event_notes(ns, "ResetOffsets"), [want], "still one 'to earliest' event");
    assert_eq!(groups::positions(&g, topic, 3), at_start, "not committed again");
    assert_eq!(pauses(&op), 2, "no third attempt");

    eprintln!("A4 (commit path): {} looks; members ever seen: {:?}", watch.looks, watch.clients);
    assert_eq!(watch.clients, BTreeSet::from([g.clone()]), "only the stray was ever a member");
    assert!(!watch.clients.contains("ankka-flow-operator"), "the operator never joined the group");

    eprintln!("A4 (commit path): texts shown: {:#?}", watch.texts);
    let kafka_said = |t: &str| {
        let t = t.to_lowercase();
        [
            "kafka refused the commit",
            "unknown member",
            "unknown_member_id",
            "rebalance in progress",
            "rebalance_in_progress",
        ]
        .iter()
        .any(|k| t.contains(k))
    };
    let log_has = op.log_text().lines().filter(|l| kafka_said(l)).count();
    assert!(
        watch.texts.iter().any(|t| kafka_said(t)),
        "Kafka refused the commit (the offsets kept the fence and the operator went back to inspecting), but \
         Kafka's reason (UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, consumers still active) reached no status and \
         no event ({log_has} operator log line(s) name it); shown: {:#?}",
        watch.texts
    );
}
