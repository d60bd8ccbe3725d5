use super::*;
use crate::resource::GroupStatus;
use crate::targets::tests::cart;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const T0: Timestamp = Timestamp(1_000_000);

fn request(names: &[&str]) -> ResetRequest {
    ResetRequest { id: ID.into(), streamlets: names.iter().map(|s| s.to_string()).collect() }
}

fn drain(m: &mut ResetMachine) -> Vec<Effect> {
    std::iter::from_fn(|| m.poll_effect()).collect()
}

fn router() -> GroupId {
    GroupId::new("cart", "router", "in")
}

fn stopped_router() -> Input {
    Input::Observed { spec: cart(0), pods: BTreeMap::new() }
}

fn empty_group() -> Inspection {
    Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        committed: BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        high_watermark: BTreeMap::from([(0, 100), (1, 100), (2, 100)]),
    }
}

/// Feeds an empty group's inspection and the fence's success; returns the effects after the fence.
fn inspect_and_fence(m: &mut ResetMachine) -> Vec<Effect> {
    m.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    let e = drain(m);
    let fence = BTreeMap::from([(0, 10), (1, 60)]);
    assert!(
        matches!(&e[..], [Effect::Fence { offsets, metadata, .. }] if *offsets == fence && *metadata == fence_marker(ID)),
        "the group's own offsets are fenced first: {e:?}"
    );
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    drain(m)
}

fn pos(offset: i64, metadata: &str) -> Option<Position> {
    Some(Position { offset, metadata: metadata.into() })
}

fn reasons(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Record(ev) => Some(format!("{}: {}", ev.reason, ev.note)),
            _ => None,
        })
        .collect()
}

#[test]
fn happy_path_resets_commits_records_and_writes_done() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    let e = drain(&mut m);
    assert!(matches!(&e[..], [Effect::InspectGroup(t)] if t.group == router() && t.topic == "shop.cart-events.v1"));

    let e = inspect_and_fence(&mut m);
    let target = BTreeMap::from([(0, 0), (1, 50), (2, 30)]);
    assert!(matches!(&e[0], Effect::PersistIntent { intent, .. } if intent.target == target));
    assert!(
        matches!(&e[1], Effect::CommitOffsets { offsets, metadata, .. } if *offsets == target && *metadata == reset_marker(ID))
    );
    assert_eq!(e.len(), 2);

    let read = target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::Committed { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert!(matches!(&e[0], Effect::PersistOutcome { outcome: GroupOutcome::Reset { .. }, .. }));
    assert!(matches!(&e[1], Effect::Record(_)), "the event follows the persisted outcome: {e:?}");
    assert_eq!(e[2], Effect::WriteDone { id: ID.into() });
    assert!(matches!(m.state(), State::Done(Done::Completed { .. })));
    assert_eq!(m.status().phase, "Done");
    assert_eq!(m.status().groups[0].records_to_reprocess, 100 + 50 + 70, "high watermark minus log start, summed");
    assert_eq!(m.status().groups[0].partitions, 3);
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn done_id_means_nothing_happens() {
    let mut m = ResetMachine::new(request(&[]), Some(ID), vec![]);
    m.handle(stopped_router(), T0);
    assert!(drain(&mut m).is_empty());
    assert!(matches!(m.state(), State::Done(Done::AlreadyDone { .. })));
}

#[test]
fn running_target_waits_and_looks_again_in_five_seconds() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    let e = drain(&mut m);
    assert_eq!(
        reasons(&e),
        [format!("ResetRefused: reset {ID} waits: router is not scaled to 0; router still has 1 pod(s)")]
    );
    assert_eq!(e.len(), 1, "a waiting request touches no Kafka: {e:?}");
    assert_eq!(m.poll_timeout(), Some(T0.after(WAIT_RECHECK)));
    // Stopped now: it proceeds.
    m.handle(stopped_router(), T0.after(WAIT_RECHECK));
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
}

#[test]
fn unknown_streamlet_is_refused_and_marked_done() {
    let mut m = ResetMachine::new(request(&["nope", "router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    let e = drain(&mut m);
    assert_eq!(reasons(&e), [format!("ResetRefused: reset {ID} names unknown streamlet(s) nope")]);
    assert_eq!(e[1], Effect::WriteDone { id: ID.into() });
    assert_eq!(e.len(), 2);
}

#[test]
fn members_are_retried_with_backoff_then_final() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let busy = Inspection { state: "Stable".into(), members: 1, ..empty_group() };
    let mut now = T0;
    for attempt in 1..MAX_ATTEMPTS {
        m.handle(Input::Inspected { group: router(), result: Ok(busy.clone()) }, now);
        assert!(drain(&mut m).is_empty(), "no commit, no event while retrying");
        let due = m.poll_timeout().expect("a retry is scheduled");
        assert_eq!(due, now.after(backoff(attempt)));
        m.handle(Input::Tick, due);
        assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
        now = due;
    }
    m.handle(Input::Inspected { group: router(), result: Ok(busy) }, now);
    let e = drain(&mut m);
    assert_eq!(
        reasons(&e),
        ["ResetOffsetsFailed: cart.router.in: consumer group [cart.router.in] has 1 active member(s) (state Stable): \
          a consumer still reads it; stop it (its streamlet is stopped, so it runs elsewhere, or its pods are still \
          stopping) and request again"]
    );
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. })));
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn final_kafka_failure_is_recorded_once() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let f = KafkaFailure { transient: false, reason: "topic 'shop.cart-events.v1' does not exist".into() };
    m.handle(Input::Inspected { group: router(), result: Err(f) }, T0);
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsetsFailed: cart.router.in: topic 'shop.cart-events.v1' does not exist"]);
}

#[test]
fn read_back_mismatch_is_a_failure_naming_partitions() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let read = BTreeMap::from([(0, Some(0)), (1, Some(60)), (2, None)]);
    m.handle(Input::Committed { group: router(), result: Ok(read) }, T0);
    let r = reasons(&drain(&mut m));
    assert_eq!(
        r,
        ["ResetOffsetsFailed: cart.router.in: the commit did not hold: partition 1 reads back 60, not 50, \
          partition 2 reads back no offset, not 30"]
    );
}

fn intent() -> Intent {
    Intent {
        before: BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        target: BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        records: 220,
    }
}

fn resumed() -> ResetMachine {
    let rec = GroupRecord { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]);
    m.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]), "an intent is settled, never recommitted");
    m
}

#[test]
fn settling_an_intent_that_landed_does_not_commit_again() {
    let mut m = resumed();
    let read = BTreeMap::from([
        (0, pos(0, &reset_marker(ID))),
        (1, pos(50, &reset_marker(ID))),
        (2, pos(30, &reset_marker(ID))),
    ]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. })));
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn settling_after_a_consumer_restarted_from_the_reset_does_not_rewind() {
    // Partition 0 is behind where the group was (10): the consumer started from the reset.
    let mut m = resumed();
    let read = BTreeMap::from([(0, pos(5, "")), (1, pos(60, "")), (2, pos(40, ""))]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))));
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert!(matches!(m.state(), State::Done(Done::Completed { .. })));
}

#[test]
fn settling_when_consumers_read_back_to_where_they_were_neither_rewinds_nor_claims_success() {
    // Case D1: the streamlet re-read everything after the reset and committed the same offsets it
    // had before (or more). Offsets alone would say "never landed"; the missing fence marker says a
    // consumer ran, but not whether it started from the reset: reported as a failure, nothing redone.
    for read in [
        BTreeMap::from([(0, pos(10, "")), (1, pos(60, "")), (2, None)]),
        BTreeMap::from([(0, pos(400, "")), (1, pos(400, "")), (2, pos(400, ""))]),
    ] {
        let mut m = resumed();
        m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
        let e = drain(&mut m);
        assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))), "{e:?}");
        let r = reasons(&e);
        assert_eq!(r.len(), 1);
        assert!(r[0].starts_with("ResetOffsetsFailed: cart.router.in: cannot tell whether the reset landed"), "{r:?}");
        assert!(matches!(m.state(), State::Done(Done::Completed { .. })));
    }
}

#[test]
fn settling_an_intent_that_never_landed_resets_now() {
    let mut m = resumed();
    let read = BTreeMap::from([(0, pos(10, &fence_marker(ID))), (1, pos(60, &fence_marker(ID))), (2, None)]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
}

#[test]
fn a_commit_that_timed_out_is_settled_not_retried_blindly() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let timeout = KafkaFailure { transient: true, reason: "Local: Timed out".into() };
    m.handle(Input::Committed { group: router(), result: Err(timeout) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    // It had landed: done, with no second commit.
    let read = BTreeMap::from([
        (0, pos(0, &reset_marker(ID))),
        (1, pos(50, &reset_marker(ID))),
        (2, pos(30, &reset_marker(ID))),
    ]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. })));
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn finished_groups_are_not_touched_again() {
    let rec = GroupRecord {
        group: router(),
        intent: Some(intent()),
        outcome: Some(GroupOutcome::Reset {
            topic: "shop.cart-events.v1".into(),
            before: intent().before,
            offsets: intent().target,
            records: 220,
        }),
    };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]);
    m.handle(stopped_router(), T0);
    let e = drain(&mut m);
    // No Kafka effect; its event is recorded again, in case the driver stopped before recording it
    // (the API server refuses the duplicate by name).
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert_eq!(e[1..], [Effect::WriteDone { id: ID.into() }]);
}

#[test]
fn a_failure_reported_is_never_followed_by_another_outcome() {
    // Found by ledger-tests: the failure event was recorded before the outcome was persisted, so a
    // driver stopping between the two left a machine that retried the group, reset it, and recorded a
    // second outcome (ResetOffsets after ResetOffsetsFailed) for the same request and group.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let f = KafkaFailure { transient: false, reason: "Broker: Group authorization failed".into() };
    m.handle(Input::Inspected { group: router(), result: Err(f) }, T0);
    let e = drain(&mut m);
    let Some(Effect::PersistOutcome { outcome, .. }) = e.first() else {
        panic!("the outcome is persisted before anything else: {e:?}")
    };
    let Some(Effect::Record(event)) = e.get(1) else { panic!("then its event: {e:?}") };
    assert_eq!(event.reason, "ResetOffsetsFailed");

    // The driver stops right after persisting: the rebuilt machine records the same event (same
    // name) and touches no group.
    let rec = GroupRecord { group: router(), intent: None, outcome: Some(outcome.clone()) };
    let mut again = ResetMachine::new(request(&["router"]), None, vec![rec]);
    again.handle(stopped_router(), T0);
    let e = drain(&mut again);
    assert_eq!(e, [Effect::Record(event.clone()), Effect::WriteDone { id: ID.into() }]);
    assert_eq!(event.name_for("cart"), outcome_event(ID, &target_of_router(), outcome).name_for("cart"));
}

fn target_of_router() -> InletTarget {
    crate::targets::select(&cart(0), &["router".into()]).unwrap().remove(0).inlets.remove(0)
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    assert_eq!(backoff(1), Duration::from_secs(1));
    assert_eq!(backoff(2), Duration::from_secs(2));
    assert_eq!(backoff(3), Duration::from_secs(4));
    assert_eq!(backoff(10), MAX_BACKOFF);
}

#[test]
fn the_status_stands_in_for_a_lost_ledger() {
    // Mid-reset: the group's intent is in the status.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let status = m.status();
    assert_eq!(status.groups[0].outcome, "Committing");
    let recovered = records_from_status(&status);
    assert_eq!(recovered, vec![GroupRecord { group: router(), intent: Some(intent()), outcome: None }]);
    // Rebuilt from the status alone, the machine settles rather than committing again.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_records(vec![], recovered));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]));

    // Done: the outcome round-trips too.
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::Committed { group: router(), result: Ok(read) }, T0);
    drain(&mut m);
    let done = records_from_status(&m.status());
    assert!(matches!(&done[0].outcome, Some(GroupOutcome::Reset { before, .. }) if *before == intent().before));
}

#[test]
fn a_waiting_status_keeps_the_progress_that_stands_in_for_a_lost_ledger() {
    // Found by ledger-tests: a restart that found a target running again wrote a Waiting status without
    // the groups, so after the ledger was lost too, a group whose reset had landed was reset again.
    let sink = GroupId::new("cart", "sink", "in");
    let records = vec![
        GroupRecord { group: router(), intent: Some(intent()), outcome: None },
        GroupRecord {
            group: sink.clone(),
            intent: None,
            outcome: Some(GroupOutcome::Failed { topic: "cart.valid-carts".into(), reason: "r".into() }),
        },
    ];
    let mut m = ResetMachine::new(request(&[]), None, records.clone());
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    assert!(matches!(m.state(), State::Waiting(_)));
    let status = m.status();
    assert_eq!(status.phase, "Waiting");
    let groups: Vec<_> =
        status.groups.iter().map(|g| (g.group.as_str(), g.topic.as_str(), g.outcome.as_str())).collect();
    assert_eq!(
        groups,
        [("cart.router.in", "shop.cart-events.v1", "Committing"), ("cart.sink.in", "cart.valid-carts", "Failed")]
    );
    assert_eq!(records_from_status(&status), records);
}

#[test]
fn merged_records_prefer_outcomes() {
    let with_intent = GroupRecord { group: router(), intent: Some(intent()), outcome: None };
    let failed = GroupRecord {
        group: router(),
        intent: None,
        outcome: Some(GroupOutcome::Failed { topic: "t".into(), reason: "r".into() }),
    };
    assert_eq!(merge_records(vec![with_intent.clone()], vec![failed.clone()]), vec![failed.clone()]);
    assert_eq!(merge_records(vec![failed.clone()], vec![with_intent.clone()]), vec![failed]);
    assert_eq!(merge_records(vec![], vec![with_intent.clone()]), vec![with_intent]);
}

#[test]
fn an_unfinished_request_replaced_by_a_new_one_is_superseded_and_kept_in_history() {
    let waiting = ResetStatus { id: "old".into(), phase: "Waiting".into(), ..Default::default() };
    let ev = superseded_event(Some(&waiting), ID).expect("an event");
    assert_eq!(ev.reason, "ResetSuperseded");
    assert_eq!(ev.note, format!("reset old was superseded by reset {ID} before it finished (Waiting)"));
    let h = history(&[ResetHistoryEntry { id: "older".into(), phase: "Done".into() }], Some(&waiting), ID);
    assert_eq!(
        h.iter().map(|e| (e.id.as_str(), e.phase.as_str())).collect::<Vec<_>>(),
        [("old", "Superseded"), ("older", "Done")]
    );

    let done = ResetStatus { id: "old".into(), phase: "Done".into(), ..Default::default() };
    assert_eq!(superseded_event(Some(&done), ID), None);
    assert_eq!(history(&[], Some(&done), ID)[0].phase, "Done");
    // The same request again changes nothing; the history stays bounded.
    assert_eq!(superseded_event(Some(&waiting), "old"), None);
    let long: Vec<ResetHistoryEntry> =
        (0..20).map(|i| ResetHistoryEntry { id: format!("r{i}"), phase: "Done".into() }).collect();
    assert_eq!(history(&long, Some(&done), ID).len(), HISTORY_LEN);
}

#[test]
fn only_reset_groups_of_a_done_request_are_followed_until_caught_up() {
    let g = |outcome: &str, caught_up: Option<&str>| GroupStatus {
        group: "g".into(),
        outcome: outcome.into(),
        caught_up_at: caught_up.map(str::to_string),
        ..Default::default()
    };
    let mut st = ResetStatus {
        id: ID.into(),
        phase: "Done".into(),
        groups: vec![g("Reset", None), g("Failed", None), g("Reset", Some("2026-11-29T16:00:00Z"))],
        ..Default::default()
    };
    assert_eq!(catching_up(&st), [0]);
    st.phase = "Resetting".into();
    assert!(catching_up(&st).is_empty());
}

#[test]
fn an_already_done_request_reports_its_recorded_groups() {
    let rec = GroupRecord {
        group: router(),
        intent: None,
        outcome: Some(GroupOutcome::Reset {
            topic: "shop.cart-events.v1".into(),
            before: intent().before,
            offsets: intent().target,
            records: 220,
        }),
    };
    let m = ResetMachine::new(request(&["router"]), Some(ID), vec![rec]);
    let st = m.status();
    assert_eq!(st.phase, "Done");
    assert_eq!(st.groups.len(), 1);
    assert_eq!(st.groups[0].outcome, "Reset");
    assert_eq!(st.groups[0].records_to_reprocess, 220);
}
