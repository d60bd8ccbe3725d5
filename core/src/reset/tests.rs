use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::events::EventType;
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::{GroupStage, GroupStatus, RequestPhase, ResetHistoryEntry, ResetStatus};
use crate::targets::InletTarget;
use crate::targets::tests::cart;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const T0: Timestamp = Timestamp(1_000_000);

fn request(names: &[&str]) -> ResetRequest {
    ResetRequest::new(ID, names.iter().map(|s| s.to_string()).collect())
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
        at_time: BTreeMap::new(),
        topic_configs: BTreeMap::new(),
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

/// What Kafka holds right after the reset commit of [`ID`] landed at 0/50/30.
fn landed_read() -> Positions {
    BTreeMap::from([(0, pos(0, &reset_marker(ID))), (1, pos(50, &reset_marker(ID))), (2, pos(30, &reset_marker(ID)))])
}

/// A machine whose router commit (0/50/30) just read back: waiting for the settle since `T0`.
fn read_back(settle: Option<Duration>) -> ResetMachine {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    if let Some(s) = settle {
        m = m.with_settle(s);
    }
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    m
}

/// Waits out the settle (from `since`) as a driver does: nothing before it is due, then one read.
fn settle_from(m: &mut ResetMachine, since: Timestamp) {
    let due = since.after(DEFAULT_SETTLE);
    assert_eq!(m.poll_timeout(), Some(due), "the settle is a timeout of its own");
    m.handle(Input::Tick, Timestamp(due.0 - 1));
    assert!(drain(m).is_empty(), "nothing is read before the settle is over");
    m.handle(Input::Tick, due);
    assert!(matches!(&drain(m)[..], [Effect::ReadCommitted(t)] if t.group == router()), "one read after the settle");
    assert_eq!(m.poll_timeout(), None, "nothing else is scheduled while the read is under way");
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
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    assert!(drain(&mut m).is_empty(), "read back once: no outcome before the settle");
    assert_eq!(m.status().groups[0].outcome, GroupStage::Verifying);
    settle_from(&mut m, T0);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert!(matches!(&e[0], Effect::PersistOutcome { outcome: GroupOutcome::Reset { .. }, .. }));
    assert!(matches!(&e[1], Effect::Record(_)), "the event follows the persisted outcome: {e:?}");
    assert_eq!(e[2], Effect::WriteDone { id: ID.into() });
    assert!(matches!(m.state(), State::Done(Done::Completed { .. })));
    assert_eq!(m.status().phase, RequestPhase::Done);
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
fn a_request_whose_groups_all_finished_is_done_even_after_its_streamlets_started_again() {
    // The done write failed after every group finished, and the user started the streamlets.
    let rec = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::InspectGroup(_) | Effect::CommitOffsets { .. })), "{e:?}");
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }), "{e:?}");
    assert!(matches!(m.state(), State::Done(Done::Completed { .. })));

    // A group not finished yet still waits for its streamlet.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    drain(&mut m);
    assert!(matches!(m.state(), State::Waiting(_)));
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
fn members_are_waited_for_while_they_stay_and_nothing_moves() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let busy = Inspection { state: "Stable".into(), members: 1, ..empty_group() };
    let mut now = T0;
    // Well past the time other transient failures are retried for: the group still waits.
    for attempt in 1..=ATTEMPTS + 5 {
        m.handle(Input::Inspected { group: router(), result: Ok(busy.clone()) }, now);
        assert!(drain(&mut m).is_empty(), "no commit, no event while members stay");
        assert_eq!(m.waits_for_members(), attempt >= MEMBERS_IN_DRIVE, "the driver looks again later");
        let g = &m.status().groups[0];
        assert_eq!(g.outcome, GroupStage::Pending);
        assert_eq!(
            g.message,
            "consumer group [cart.router.in] has 1 active member(s) (state Stable): a consumer still reads it; the \
             reset waits until it leaves (its streamlet is stopped, so it runs elsewhere, or its pods are still \
             stopping)"
        );
        let due = m.poll_timeout().expect("a retry is scheduled");
        assert_eq!(due, now.after(backoff(attempt)));
        m.handle(Input::Tick, due);
        assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
        now = due;
    }
    assert!(T0.until(now) > DEFAULT_RETRY_FOR, "{:?}", T0.until(now));
    // The member left: the group is reset.
    m.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, now);
    assert!(matches!(&drain(&mut m)[..], [Effect::Fence { .. }]));
}

#[test]
fn transient_failures_are_retried_for_the_time_set_then_final() {
    let retry_for = Duration::from_secs(60);
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]).with_retry_for(retry_for);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let down = KafkaFailure::unreachable("Local: All broker connections are down");
    let mut now = T0;
    // Failures at 0, 1, 3, 7, 15, 31 s are retried; the one at 61 s is past the minute.
    for attempt in 1..=6 {
        m.handle(Input::Inspected { group: router(), result: Err(down.clone()) }, now);
        assert!(drain(&mut m).is_empty(), "attempt {attempt}: no event while retrying");
        assert!(!m.waits_for_members(), "the drive sleeps until the retry");
        let due = m.poll_timeout().expect("a retry is scheduled");
        m.handle(Input::Tick, due);
        drain(&mut m);
        now = due;
    }
    assert_eq!(T0.until(now), Duration::from_secs(61));
    m.handle(Input::Inspected { group: router(), result: Err(down) }, now);
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsetsFailed: cart.router.in: Local: All broker connections are down"]);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })));
}

/// Transient failures of a group retried with the default [`DEFAULT_RETRY_FOR`] (300 s) before the
/// last one is final: failures at 0, 1, 3, 7, 15, 31 s and then every 30 s up to 271 s are retried,
/// the one at 301 s is final.
const ATTEMPTS: u32 = 15;

#[test]
fn the_default_retry_time_allows_fifteen_attempts() {
    let mut at = Duration::ZERO;
    for attempt in 1..ATTEMPTS {
        assert!(at < DEFAULT_RETRY_FOR, "attempt {attempt} at {at:?}");
        at += backoff(attempt);
    }
    assert!(at >= DEFAULT_RETRY_FOR, "{at:?}");
}

#[test]
fn final_kafka_failure_is_recorded_once() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let f = KafkaFailure::refused("topic 'shop.cart-events.v1' does not exist");
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
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    let r = reasons(&drain(&mut m));
    assert_eq!(
        r,
        ["ResetOffsetsFailed: cart.router.in: the commit did not hold: partition 1 reads back 60, not 50, \
          partition 2 reads back no offset, not 30"]
    );
}

fn intent() -> Intent {
    Intent::new(
        BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        220,
    )
}

fn resumed() -> ResetMachine {
    let rec = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]);
    m.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]), "an intent is recovered, never recommitted");
    m
}

#[test]
fn recovering_an_intent_that_landed_does_not_commit_again() {
    let mut m = resumed();
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0);
    // Untouched since the commit: it is read again after the settle, like a fresh read-back.
    assert!(drain(&mut m).is_empty());
    settle_from(&mut m, T0);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. })));
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn recovering_after_a_consumer_restarted_from_the_reset_does_not_rewind() {
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
fn recovering_when_consumers_read_back_to_where_they_were_neither_rewinds_nor_claims_success() {
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
fn recovering_an_intent_that_never_landed_resets_now() {
    let mut m = resumed();
    let read = BTreeMap::from([(0, pos(10, &fence_marker(ID))), (1, pos(60, &fence_marker(ID))), (2, None)]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
}

#[test]
fn a_commit_that_timed_out_is_recovered_not_retried_blindly() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let timeout = KafkaFailure::unreachable("Local: Timed out");
    m.handle(Input::ReadBack { group: router(), result: Err(timeout) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    // It had landed: done after the settle, with no second commit.
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0);
    assert!(drain(&mut m).is_empty());
    settle_from(&mut m, T0);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. })));
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn finished_groups_are_not_touched_again() {
    let rec = GroupProgress {
        group: router(),
        intent: Some(intent()),
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]);
    m.handle(stopped_router(), T0);
    let e = drain(&mut m);
    // No Kafka effect; its event is recorded again, in case the driver stopped before recording it
    // (the API server refuses the duplicate by name), after the outcome is made durable again.
    assert!(matches!(&e[0], Effect::PersistOutcome { outcome: GroupOutcome::Reset { .. }, .. }), "{e:?}");
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert_eq!(e[2..], [Effect::WriteDone { id: ID.into() }]);
}

#[test]
fn a_failure_reported_is_never_followed_by_another_outcome() {
    // Found by ledger-tests: the failure event was recorded before the outcome was persisted, so a
    // driver stopping between the two left a machine that retried the group, reset it, and recorded a
    // second outcome (ResetOffsets after ResetOffsetsFailed) for the same request and group.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let f = KafkaFailure::refused("Broker: Group authorization failed");
    m.handle(Input::Inspected { group: router(), result: Err(f) }, T0);
    let e = drain(&mut m);
    let Some(Effect::PersistOutcome { outcome, .. }) = e.first() else {
        panic!("the outcome is persisted before anything else: {e:?}")
    };
    let Some(Effect::Record(event)) = e.get(1) else { panic!("then its event: {e:?}") };
    assert_eq!(event.reason, "ResetOffsetsFailed");

    // The driver stops right after persisting: the rebuilt machine records the same event (same
    // name) and touches no group.
    let rec = GroupProgress { group: router(), intent: None, outcome: Some(outcome.clone()) };
    let mut again = ResetMachine::new(request(&["router"]), None, vec![rec]);
    again.handle(stopped_router(), T0);
    let e = drain(&mut again);
    let persist = Effect::PersistOutcome { id: ID.into(), group: router(), outcome: outcome.clone() };
    assert_eq!(e, [persist, Effect::Record(event.clone()), Effect::WriteDone { id: ID.into() }]);
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
    assert_eq!(status.groups[0].outcome, GroupStage::Committing);
    let recovered = progress_from_status(&status);
    assert_eq!(recovered, vec![GroupProgress { group: router(), intent: Some(intent()), outcome: None }]);
    // Rebuilt from the status alone, the machine recovers the intent rather than committing again.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_progress(vec![], recovered));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]));

    // Done: the outcome round-trips too.
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    settle_from(&mut m, T0);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    drain(&mut m);
    let done = progress_from_status(&m.status());
    assert!(matches!(&done[0].outcome, Some(GroupOutcome::Reset { before, .. }) if *before == intent().before));
}

#[test]
fn a_waiting_status_keeps_the_progress_that_stands_in_for_a_lost_ledger() {
    // Found by ledger-tests: a restart that found a target running again wrote a Waiting status without
    // the groups, so after the ledger was lost too, a group whose reset had landed was reset again.
    let sink = GroupId::new("cart", "sink", "in");
    let records = vec![
        GroupProgress { group: router(), intent: Some(intent()), outcome: None },
        GroupProgress {
            group: sink.clone(),
            intent: None,
            outcome: Some(GroupOutcome::Failed { topic: "cart.valid-carts".into(), reason: "r".into() }),
        },
    ];
    let mut m = ResetMachine::new(request(&[]), None, records.clone());
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    assert!(matches!(m.state(), State::Waiting(_)));
    let status = m.status();
    assert_eq!(status.phase, RequestPhase::Waiting);
    let groups: Vec<_> = status.groups.iter().map(|g| (g.group.as_str(), g.topic.as_str(), g.outcome)).collect();
    assert_eq!(
        groups,
        [
            ("cart.router.in", "shop.cart-events.v1", GroupStage::Committing),
            ("cart.sink.in", "cart.valid-carts", GroupStage::Failed)
        ]
    );
    assert_eq!(progress_from_status(&status), records);
}

#[test]
fn merged_records_prefer_outcomes() {
    let with_intent = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let failed = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(GroupOutcome::Failed { topic: "t".into(), reason: "r".into() }),
    };
    assert_eq!(merge_progress(vec![with_intent.clone()], vec![failed.clone()]), vec![failed.clone()]);
    assert_eq!(merge_progress(vec![failed.clone()], vec![with_intent.clone()]), vec![failed]);
    assert_eq!(merge_progress(vec![], vec![with_intent.clone()]), vec![with_intent]);
}

#[test]
fn an_unfinished_request_replaced_by_a_new_one_is_superseded_and_kept_in_history() {
    let waiting = ResetStatus { id: "old".into(), phase: RequestPhase::Waiting, ..Default::default() };
    let ev = superseded_event(Some(&waiting), ID).expect("an event");
    assert_eq!(ev.reason, "ResetSuperseded");
    assert_eq!(ev.note, format!("reset old was superseded by reset {ID} before it finished (Waiting)"));
    let h = history(&[ResetHistoryEntry { id: "older".into(), phase: RequestPhase::Done }], Some(&waiting), ID);
    assert_eq!(
        h.iter().map(|e| (e.id.as_str(), e.phase)).collect::<Vec<_>>(),
        [("old", RequestPhase::Superseded), ("older", RequestPhase::Done)]
    );

    let done = ResetStatus { id: "old".into(), phase: RequestPhase::Done, ..Default::default() };
    assert_eq!(superseded_event(Some(&done), ID), None);
    assert_eq!(history(&[], Some(&done), ID)[0].phase, RequestPhase::Done);
    // The same request again changes nothing; the history stays bounded.
    assert_eq!(superseded_event(Some(&waiting), "old"), None);
    let long: Vec<ResetHistoryEntry> =
        (0..20).map(|i| ResetHistoryEntry { id: format!("r{i}"), phase: RequestPhase::Done }).collect();
    assert_eq!(history(&long, Some(&done), ID).len(), HISTORY_LEN);
}

#[test]
fn only_reset_groups_of_a_done_request_are_followed_until_caught_up() {
    let g = |outcome: GroupStage, caught_up: Option<&str>| GroupStatus {
        group: "g".into(),
        outcome,
        caught_up_at: caught_up.map(str::to_string),
        ..Default::default()
    };
    let mut st = ResetStatus {
        id: ID.into(),
        phase: RequestPhase::Done,
        groups: vec![
            g(GroupStage::Reset, None),
            g(GroupStage::Failed, None),
            g(GroupStage::Reset, Some("2026-11-29T16:00:00Z")),
        ],
        ..Default::default()
    };
    assert_eq!(catching_up(&st), [0]);
    st.phase = RequestPhase::Resetting;
    assert!(catching_up(&st).is_empty());
}

#[test]
fn an_already_done_request_reports_its_recorded_groups() {
    let rec = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let m = ResetMachine::new(request(&["router"]), Some(ID), vec![rec]);
    let st = m.status();
    assert_eq!(st.phase, RequestPhase::Done);
    assert_eq!(st.groups.len(), 1);
    assert_eq!(st.groups[0].outcome, GroupStage::Reset);
    assert_eq!(st.groups[0].records_to_reprocess, 220);
}

#[test]
fn the_default_settle_is_one_second() {
    assert_eq!(DEFAULT_SETTLE, Duration::from_secs(1));
}

#[test]
fn a_consumer_that_overwrites_the_reset_during_the_settle_fails_the_group_listing_each_moved_partition() {
    // Case F1: a consumer that was still closing commits its old position right after the reset.
    let mut m = read_back(None);
    settle_from(&mut m, T0);
    let read = BTreeMap::from([(0, pos(10, "")), (1, pos(50, &reset_marker(ID))), (2, None)]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert_eq!(
        reasons(&e),
        ["ResetOffsetsFailed: cart.router.in: a consumer overwrote the reset after it was read back: partition 0 is \
          at 10 (reset to 0), partition 2 has no offset (reset to 30); stop every consumer of the group (a pod \
          still stopping, a consumer outside Kubernetes) and request a new reset"]
    );
    assert!(matches!(&e[1], Effect::Record(ev) if ev.type_ == EventType::Warning));
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))), "never redone");
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    let st = m.status();
    assert_eq!(st.groups[0].outcome, GroupStage::Failed);
    assert!(st.groups[0].message.starts_with("a consumer overwrote the reset"), "{:?}", st.groups[0]);
}

#[test]
fn a_position_at_its_target_without_the_marker_has_not_moved() {
    // A consumer committed the very offsets of the reset (an empty partition, say): nothing moved.
    let mut m = read_back(None);
    settle_from(&mut m, T0);
    let read = BTreeMap::from([(0, pos(0, "")), (1, pos(50, &reset_marker(ID))), (2, pos(30, ""))]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0.after(DEFAULT_SETTLE));
    assert_eq!(
        reasons(&drain(&mut m)),
        ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]
    );
}

#[test]
fn a_long_list_of_moved_partitions_is_cut_and_keeps_the_advice() {
    let n = 300;
    let target: BTreeMap<i32, i64> = (0..n).map(|p| (p, 0)).collect();
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let seen = Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: target.clone(),
        committed: target.keys().map(|p| (*p, None)).collect(),
        high_watermark: target.keys().map(|p| (*p, 10)).collect(),
        at_time: BTreeMap::new(),
        topic_configs: BTreeMap::new(),
    };
    m.handle(Input::Inspected { group: router(), result: Ok(seen) }, T0);
    drain(&mut m);
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    drain(&mut m);
    m.handle(Input::ReadBack { group: router(), result: Ok(target.keys().map(|p| (*p, Some(0))).collect()) }, T0);
    settle_from(&mut m, T0);
    let read = target.keys().map(|p| (*p, pos(10, ""))).collect();
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0.after(DEFAULT_SETTLE));
    let r = reasons(&drain(&mut m));
    assert_eq!(r.len(), 1);
    assert!(
        r[0].contains("partition 19 is at 10 (reset to 0) and 280 more partition(s); stop every consumer"),
        "{r:?}"
    );
    assert!(!r[0].contains("partition 20 "), "{r:?}");
    assert!(r[0].len() <= crate::events::NOTE_LIMIT + "ResetOffsetsFailed: ".len());
}

#[test]
fn a_partition_added_during_the_reset_is_named_in_a_warning_and_not_counted() {
    // Case B5: partition 3 appeared after the inspection; the commit covered 0, 1, 2.
    let mut m = read_back(None);
    settle_from(&mut m, T0);
    let mut read = landed_read();
    read.insert(3, None);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert_eq!(
        reasons(&e),
        [
            "ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest",
            "ResetPartitionsAdded: cart.router.in: partition(s) 3 of 'shop.cart-events.v1' were added to the topic \
             during the reset and were not reset (the 3 partition(s) it had before were); before the streamlet \
             starts, request a new reset, which covers every partition",
        ]
    );
    let (Effect::Record(normal), Effect::Record(warning)) = (&e[1], &e[2]) else { panic!("{e:?}") };
    assert_eq!((normal.type_, warning.type_), (EventType::Normal, EventType::Warning));
    assert_ne!(normal.name_for("cart"), warning.name_for("cart"), "two events for one group, two names");
    let Effect::PersistOutcome { outcome, .. } = &e[0] else { panic!("{e:?}") };
    assert!(matches!(outcome, GroupOutcome::Reset { added, offsets, .. } if *added == [3] && offsets.len() == 3));

    // The status shows it, and stands in for a lost ledger with it.
    let st = m.status();
    assert_eq!(st.groups[0].outcome, GroupStage::Reset);
    assert_eq!(st.groups[0].partitions, 3);
    assert_eq!(st.groups[0].added_partitions, [3]);
    let recovered = progress_from_status(&st);
    assert_eq!(recovered[0].outcome.as_ref(), Some(outcome));

    // Rebuilt from that outcome (the driver stopped before recording the events): both again, same names.
    let mut again = ResetMachine::new(request(&["router"]), None, recovered);
    again.handle(stopped_router(), T0);
    let e2 = drain(&mut again);
    assert_eq!(e2[..3], e[..3], "the outcome made durable again, then both events");
    assert_eq!(e2[3..], [Effect::WriteDone { id: ID.into() }]);
}

#[test]
fn a_crash_during_the_settle_is_recovered_by_the_markers_and_never_committed_again() {
    // The driver persisted the intent, the commit read back, and it stopped while waiting: the intent
    // is durable, the outcome is not.
    let m = read_back(None);
    let st = m.status();
    assert_eq!(st.groups[0].outcome, GroupStage::Verifying);
    assert!(st.groups[0].message.contains("settle"), "{:?}", st.groups[0]);
    let from_ledger = vec![GroupProgress { group: router(), intent: Some(intent()), outcome: None }];
    assert_eq!(progress_from_status(&st), from_ledger, "the status stands in for a lost ledger during the settle");

    // Nothing moved since: recovered by the markers, verified after the settle, reset.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_progress(vec![], progress_from_status(&st)));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]), "the markers first");
    again.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0);
    assert!(drain(&mut again).is_empty());
    settle_from(&mut again, T0);
    again.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut again);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })), "{e:?}");
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);

    // A consumer overwrote it (back where the group was) while the operator was down: never reset
    // again, never a success.
    let mut again = ResetMachine::new(request(&["router"]), None, from_ledger);
    again.handle(stopped_router(), T0);
    drain(&mut again);
    let read = BTreeMap::from([(0, pos(10, "")), (1, pos(60, "")), (2, pos(30, &reset_marker(ID)))]);
    again.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut again);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))), "{e:?}");
    let r = reasons(&e);
    assert!(r.len() == 1 && r[0].starts_with("ResetOffsetsFailed: cart.router.in: cannot tell"), "{r:?}");
}

#[test]
fn a_settle_of_zero_reports_the_reset_at_the_read_back() {
    let mut m = read_back(Some(Duration::ZERO));
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert!(e.iter().all(|e| !matches!(e, Effect::ReadCommitted(_))), "no second read: {e:?}");
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn a_longer_settle_waits_longer() {
    let mut m = read_back(Some(Duration::from_secs(7)));
    assert_eq!(m.poll_timeout(), Some(T0.after(Duration::from_secs(7))));
    m.handle(Input::Tick, T0.after(DEFAULT_SETTLE));
    assert!(drain(&mut m).is_empty());
}

#[test]
fn a_second_read_that_fails_is_retried_with_backoff_and_then_fails_the_group() {
    let mut m = read_back(None);
    settle_from(&mut m, T0);
    let timeout = KafkaFailure::unreachable("Local: Timed out");
    let mut now = T0.after(DEFAULT_SETTLE);
    for attempt in 1..ATTEMPTS {
        m.handle(Input::Read { group: router(), result: Err(timeout.clone()) }, now);
        assert!(drain(&mut m).is_empty(), "no event while retrying");
        let due = m.poll_timeout().expect("a retry is scheduled");
        assert_eq!(due, now.after(backoff(attempt)));
        assert!(m.status().groups[0].message.ends_with("retrying: Local: Timed out"), "{:?}", m.status());
        m.handle(Input::Tick, due);
        assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
        now = due;
    }
    m.handle(Input::Read { group: router(), result: Err(timeout) }, now);
    let r = reasons(&drain(&mut m));
    assert_eq!(
        r,
        ["ResetOffsetsFailed: cart.router.in: the reset was committed and read back at the log start offsets, but \
          reading the offsets again after the settle failed: Local: Timed out; check that a consumer did not move \
          them (kafka-consumer-groups --describe --group cart.router.in) and request a new reset if one did"]
    );

    // A final failure fails at once.
    let mut m = read_back(None);
    settle_from(&mut m, T0);
    let gone = KafkaFailure::refused("topic 'shop.cart-events.v1' does not exist");
    m.handle(Input::Read { group: router(), result: Err(gone) }, T0);
    let r = reasons(&drain(&mut m));
    assert!(r.len() == 1 && r[0].starts_with("ResetOffsetsFailed:") && r[0].contains("does not exist"), "{r:?}");
}

#[test]
fn groups_go_their_own_way_whatever_order_results_arrive_in() {
    // Two groups: router reads back first and waits its settle while sink is still being inspected; the
    // results of the two interleave.
    let sink = GroupId::new("cart", "sink", "in");
    let mut m = ResetMachine::new(request(&[]), None, vec![]);
    m.handle(Input::Observed { spec: stopped_both(), pods: BTreeMap::new() }, T0);
    assert_eq!(drain(&mut m).len(), 2);
    m.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    drain(&mut m);
    assert_eq!(m.poll_timeout(), Some(T0.after(DEFAULT_SETTLE)));
    // A result for a group that is not reading is ignored.
    m.handle(Input::Read { group: router(), result: Ok(BTreeMap::new()) }, T0);
    m.handle(Input::Read { group: sink.clone(), result: Ok(BTreeMap::new()) }, T0);
    assert!(drain(&mut m).is_empty());
    // Sink's inspection times out: its retry is due later than router's settle.
    let t1 = T0.after(Duration::from_millis(500));
    let timeout = KafkaFailure::unreachable("Local: Timed out");
    m.handle(Input::Inspected { group: sink.clone(), result: Err(timeout) }, t1);
    assert_eq!(m.poll_timeout(), Some(T0.after(DEFAULT_SETTLE)), "the earliest of the two");
    m.handle(Input::Tick, T0.after(DEFAULT_SETTLE));
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(t)] if t.group == router()));
    assert_eq!(m.poll_timeout(), Some(t1.after(backoff(1))));
    m.handle(Input::Tick, t1.after(backoff(1)));
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(t)] if t.group == sink));
    // Sink's inspection answers before router's read.
    m.handle(Input::Inspected { group: sink.clone(), result: Ok(empty_group()) }, t1.after(backoff(1)));
    assert!(matches!(&drain(&mut m)[..], [Effect::Fence { .. }]));
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, t1.after(backoff(1)));
    let e = drain(&mut m);
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert!(!e.contains(&Effect::WriteDone { id: ID.into() }), "sink is not finished");
}

fn stopped_both() -> crate::resource::AnkkaFlowSpec {
    let mut spec = cart(0);
    for s in &mut spec.streamlets {
        if s.name == "sink" {
            s.replicas = 0;
        }
    }
    spec
}

#[test]
fn without_a_settle_a_rebuilt_machine_still_names_partitions_its_read_found() {
    // Found by ledger-tests: settle 0, the driver stopped after the commit, a partition was added;
    // the rebuilt machine's read by the markers saw it, and the group was reported without a word.
    let rec = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![rec]).with_settle(Duration::ZERO);
    m.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    let mut read = landed_read();
    read.insert(3, None);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0);
    let r = reasons(&drain(&mut m));
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0], "ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest");
    assert!(r[1].starts_with("ResetPartitionsAdded: cart.router.in: partition(s) 3 of"), "{r:?}");
}

fn timed_out() -> KafkaFailure {
    KafkaFailure::unreachable("Local: Timed out")
}

/// Fails the recovering read under way at `now` transiently: no effect follows, the next read is due
/// `backoff(attempt)` later and comes with the tick at that instant, not before; returns that instant.
fn recovering_read_fails_and_waits(m: &mut ResetMachine, now: Timestamp, attempt: u32) -> Timestamp {
    m.handle(Input::Read { group: router(), result: Err(timed_out()) }, now);
    assert!(drain(m).is_empty(), "attempt {attempt}: no read at once, no event");
    let due = now.after(backoff(attempt));
    assert_eq!(m.poll_timeout(), Some(due), "attempt {attempt}: the next read waits backoff({attempt})");
    let g = &m.status().groups[0];
    assert_eq!(g.outcome, GroupStage::Recovering);
    assert!(g.message.ends_with("failed, retrying: Local: Timed out"), "{g:?}");
    // A result arriving while no read is under way answers no read: ignored.
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, now);
    assert!(drain(m).is_empty(), "attempt {attempt}: a stray result changes nothing");
    assert_eq!(m.poll_timeout(), Some(due));
    m.handle(Input::Tick, Timestamp(due.0 - 1));
    assert!(drain(m).is_empty(), "attempt {attempt}: nothing is read before the backoff is over");
    m.handle(Input::Tick, due);
    assert!(matches!(&drain(m)[..], [Effect::ReadCommitted(t)] if t.group == router()), "one read at {due:?}");
    assert_eq!(m.poll_timeout(), None, "nothing else is scheduled while the read is under way");
    due
}

#[test]
fn a_recovering_read_that_fails_transiently_waits_the_backoff_before_each_new_read() {
    let mut m = resumed();
    let mut now = T0;
    for attempt in 1..ATTEMPTS {
        now = recovering_read_fails_and_waits(&mut m, now, attempt);
    }
    // The last read allowed succeeds: the reset had landed, and it is verified as usual.
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, now);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.status().groups[0].outcome, GroupStage::Verifying);
    settle_from(&mut m, now);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, now.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })), "{e:?}");
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn recovering_reads_that_keep_failing_fail_the_group_and_never_commit() {
    let mut m = resumed();
    let mut now = T0;
    for attempt in 1..ATTEMPTS {
        now = recovering_read_fails_and_waits(&mut m, now, attempt);
    }
    // The transient failure past the retry time is the last.
    m.handle(Input::Read { group: router(), result: Err(timed_out()) }, now);
    let e = drain(&mut m);
    assert!(
        e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. } | Effect::ReadCommitted(_)))
    );
    let reason = "could not learn whether an earlier commit landed: Local: Timed out";
    assert!(
        matches!(&e[0], Effect::PersistOutcome { outcome: GroupOutcome::Failed { reason: r, .. }, .. } if r == reason),
        "{e:?}"
    );
    assert_eq!(reasons(&e), [format!("ResetOffsetsFailed: cart.router.in: {reason}")]);
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    assert_eq!(m.poll_timeout(), None);
    assert!(matches!(m.state(), State::Done(Done::Completed { .. })));

    // A final failure fails at once, even after transient ones, with no read scheduled.
    let mut m = resumed();
    let now = recovering_read_fails_and_waits(&mut m, T0, 1);
    let denied = KafkaFailure::refused("Broker: Group authorization failed");
    m.handle(Input::Read { group: router(), result: Err(denied) }, now);
    let r = reasons(&drain(&mut m));
    assert_eq!(
        r,
        ["ResetOffsetsFailed: cart.router.in: could not learn whether an earlier commit landed: Broker: Group \
          authorization failed"]
    );
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn a_group_recovering_by_the_markers_shows_recovering_and_its_status_stands_in_for_a_lost_ledger() {
    let m = resumed();
    let st = m.status();
    let g = &st.groups[0];
    assert_eq!(g.outcome, GroupStage::Recovering);
    assert!(g.message.ends_with("reading the committed offsets and their markers to learn it"), "{g:?}");
    assert_eq!((g.partitions, g.records_to_reprocess), (3, 220), "the intent is in the status: {g:?}");
    let from_ledger = vec![GroupProgress { group: router(), intent: Some(intent()), outcome: None }];
    assert_eq!(progress_from_status(&st), from_ledger, "read back as an intent without outcome");
    // Rebuilt from that status alone, it recovers again rather than committing.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_progress(vec![], progress_from_status(&st)));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]));

    // A commit whose answer was lost is recovered the same way, and shows it.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    m.handle(Input::ReadBack { group: router(), result: Err(timed_out()) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    assert_eq!(m.status().groups[0].outcome, GroupStage::Recovering);
    assert_eq!(progress_from_status(&m.status()), from_ledger);
}

#[test]
fn a_commit_refused_because_members_joined_backs_off_showing_kafkas_reason_then_inspects_again() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let why = "Kafka refused the commit because consumers are still active in the group (Broker: Unknown member)";
    m.handle(Input::ReadBack { group: router(), result: Err(KafkaFailure::unreachable(why)) }, T0);
    // A refused commit may still be one that landed (as after a timeout): Kafka is read first.
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    let fenced = BTreeMap::from([(0, pos(10, &fence_marker(ID))), (1, pos(60, &fence_marker(ID))), (2, None)]);
    m.handle(Input::Read { group: router(), result: Ok(fenced) }, T0);
    // It never landed: no new attempt before the backoff, and the status says why it waits.
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(T0.after(backoff(1))));
    let shown = m.status();
    assert!(shown.groups.iter().any(|g| g.message.contains(why)), "{shown:?}");
    m.handle(Input::Tick, T0.after(backoff(1)));
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
}

/// What Kafka holds after the reset commit of [`ID`] landed on partition 0 only (1 still under the
/// fence, 2 without an offset, as before).
fn partial_read() -> Positions {
    BTreeMap::from([(0, pos(0, &reset_marker(ID))), (1, pos(60, &fence_marker(ID))), (2, None)])
}

#[test]
fn a_commit_refused_for_good_reports_what_kafka_holds_per_partition() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let refused = KafkaFailure::unknown_topic(
        "the commit failed on 2 of 3 partition(s) of 'shop.cart-events.v1' (partition 1: Broker: Unknown topic or \
         partition; partition 2: Broker: Unknown topic or partition)",
    );
    m.handle(Input::ReadBack { group: router(), result: Err(refused) }, T0);
    // Not failed yet: what the group holds now is read first.
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    let g = &m.status().groups[0];
    assert_eq!(g.outcome, GroupStage::Committing);
    assert!(g.message.ends_with("; reading what the group holds now"), "{g:?}");
    m.handle(Input::Read { group: router(), result: Ok(partial_read()) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })), "{e:?}");
    assert_eq!(
        reasons(&e),
        ["ResetOffsetsFailed: cart.router.in: the commit failed on 2 of 3 partition(s) of 'shop.cart-events.v1' \
          (partition 1: Broker: Unknown topic or partition; partition 2: Broker: Unknown topic or partition); Kafka \
          holds now: partition 0 at 0 (this reset), partition 1 at 60 (its fence), partition 2 has no offset"]
    );

    // What it holds cannot be read: said so, still failed.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    m.handle(Input::ReadBack { group: router(), result: Err(KafkaFailure::authorization("denied")) }, T0);
    drain(&mut m);
    m.handle(Input::Read { group: router(), result: Err(KafkaFailure::authorization("denied again")) }, T0);
    assert_eq!(
        reasons(&drain(&mut m)),
        ["ResetOffsetsFailed: cart.router.in: denied; what the group holds now could not be read: denied again"]
    );
}

#[test]
fn recovering_a_commit_that_landed_on_some_partitions_only_is_a_failure_never_a_success() {
    let mut m = resumed();
    m.handle(Input::Read { group: router(), result: Ok(partial_read()) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })), "{e:?}");
    assert_eq!(
        reasons(&e),
        ["ResetOffsetsFailed: cart.router.in: the reset commit landed on some partitions only; Kafka holds now: \
          partition 0 at 0 (this reset), partition 1 at 60 (its fence), partition 2 has no offset; request a new \
          reset"]
    );
}

#[test]
fn a_rebuild_waits_for_pods_only_since_the_operator_holds_its_replicas() {
    let rebuild = ResetRequest { rebuild: true, ..request(&["router"]) };
    // The resource still says 1 replica: a rebuild goes on as soon as the pods are gone.
    let mut m = ResetMachine::new(rebuild.clone(), None, vec![]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::new() }, T0);
    let e = drain(&mut m);
    assert!(e.iter().any(|e| matches!(e, Effect::InspectGroup(_))), "{e:?}");
    // A pod still there: it waits, naming the pod and not the replicas.
    let mut m = ResetMachine::new(rebuild, None, vec![]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    let e = drain(&mut m);
    assert!(matches!(m.state(), State::Waiting(_)));
    let Some(Effect::Record(ev)) = e.first() else { panic!("{e:?}") };
    assert_eq!(ev.note, format!("reset {ID} waits: router still has 1 pod(s)"));
    // A plain reset of the same resource waits for the replicas too.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::new() }, T0);
    drain(&mut m);
    assert!(matches!(m.state(), State::Waiting(_)));
}
