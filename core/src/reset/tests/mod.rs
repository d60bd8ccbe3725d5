//! The reset machine, step by step: each rule of `reset` (see its module documentation) with one
//! machine fed by hand. The recovery of an intent, the settle, and the status are in their own files.

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
        member_names: vec![],
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

fn intent() -> Intent {
    Intent::new(
        BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        220,
    )
}

fn resumed() -> ResetMachine {
    let progress = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![progress]);
    m.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]), "an intent is recovered, never recommitted");
    m
}

fn target_of_router() -> InletTarget {
    crate::targets::select(&cart(0), &["router".into()]).unwrap().remove(0).inlets.remove(0)
}

fn timed_out() -> KafkaFailure {
    KafkaFailure::unreachable("Local: Timed out")
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
    let progress = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![progress]);
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
    let busy = Inspection {
        state: "Stable".into(),
        members: 2,
        member_names: vec!["client id 'billing' at /10.0.0.5".into()],
        ..empty_group()
    };
    let mut now = T0;
    // Well past the time other transient failures are retried for: the group still waits.
    for attempt in 1..=ATTEMPTS + 5 {
        m.handle(Input::Inspected { group: router(), result: Ok(busy.clone()) }, now);
        let e = drain(&mut m);
        if attempt == 1 {
            // Once, as the group starts waiting: the members named, keyed by request and group.
            let [Effect::Record(ev)] = &e[..] else { panic!("one event as the wait starts: {e:?}") };
            assert_eq!((ev.reason.as_str(), ev.type_), ("ResetWaiting", EventType::Warning));
            assert_eq!(ev.key, format!("{ID}/cart.router.in/members"));
            assert!(
                ev.note.starts_with(&format!(
                    "reset {ID} waits for consumer group [cart.router.in] (state Stable) to have no members; it has \
                     2: client id 'billing' at /10.0.0.5 and 1 more. Nothing is committed"
                )),
                "{}",
                ev.note
            );
        } else {
            assert!(e.is_empty(), "no commit, no further event while members stay: {e:?}");
        }
        assert_eq!(m.waits_for_members(), attempt >= MEMBERS_IN_DRIVE, "the driver looks again later");
        let g = &m.status().groups[0];
        assert_eq!(g.outcome, GroupStage::Pending);
        assert_eq!(
            g.message,
            "consumer group [cart.router.in] has 2 active member(s) (state Stable): a consumer still reads it; the \
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

/// The retry time counts from a group's first transient failure even when its drive is rebuilt
/// (an abandoned drive, an operator restart): the status names when the failures began, and the
/// rebuilt machine goes on from then, so a group never retries for longer than the time set.
#[test]
fn the_retry_time_goes_on_across_rebuilt_drives() {
    let retry_for = Duration::from_secs(60);
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]).with_retry_for(retry_for);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let down = KafkaFailure::unreachable("Local: All broker connections are down");
    m.handle(Input::Inspected { group: router(), result: Err(down.clone()) }, T0);
    let status = m.status();
    assert_eq!(status.groups[0].failing_since.as_deref(), Some(T0.rfc3339().as_str()));
    // The drive stops; 50 s later a new one is built from that status: one more transient failure
    // is retried, and the next one, past the minute since T0, is final.
    let since = failing_since(&status);
    assert_eq!(since.get(&router()), Some(&T0));
    let later = T0.after(Duration::from_secs(50));
    let mut m =
        ResetMachine::new(request(&["router"]), None, vec![]).with_retry_for(retry_for).with_failing_since(since);
    m.handle(stopped_router(), later);
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
    m.handle(Input::Inspected { group: router(), result: Err(down.clone()) }, later);
    assert!(drain(&mut m).is_empty(), "still within the minute");
    assert_eq!(m.status().groups[0].failing_since, status.groups[0].failing_since, "the clock did not start again");
    let due = m.poll_timeout().expect("a retry");
    m.handle(Input::Tick, due);
    drain(&mut m);
    let past = T0.after(Duration::from_secs(61));
    m.handle(Input::Inspected { group: router(), result: Err(down) }, past);
    assert_eq!(reasons(&drain(&mut m)), ["ResetOffsetsFailed: cart.router.in: Local: All broker connections are down"]);
}

/// Members in a group are waited for however long they stay, and that wait spends none of the
/// retry time: a transient failure after they left is retried for the whole time again.
#[test]
fn waiting_for_members_spends_none_of_the_retry_time() {
    let retry_for = Duration::from_secs(60);
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]).with_retry_for(retry_for);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let down = KafkaFailure::unreachable("Local: Timed out");
    m.handle(Input::Inspected { group: router(), result: Err(down.clone()) }, T0);
    let mut now = m.poll_timeout().expect("a retry");
    m.handle(Input::Tick, now);
    drain(&mut m);
    // Ten minutes of members.
    let members = Inspection { members: 1, state: "Stable".into(), ..empty_group() };
    while T0.until(now) < Duration::from_secs(600) {
        m.handle(Input::Inspected { group: router(), result: Ok(members.clone()) }, now);
        let e = drain(&mut m);
        assert!(e.iter().all(|e| matches!(e, Effect::Record(ev) if ev.reason == "ResetWaiting")), "waited for: {e:?}");
        assert_eq!(m.status().groups[0].failing_since, None, "waiting for members is no Kafka failure");
        now = m.poll_timeout().expect("looked at again");
        m.handle(Input::Tick, now);
        drain(&mut m);
    }
    m.handle(Input::Inspected { group: router(), result: Err(down) }, now);
    assert!(drain(&mut m).is_empty(), "a transient failure after the members left is retried");
    assert_eq!(m.status().groups[0].failing_since, Some(now.rfc3339()));
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

#[test]
fn finished_groups_are_not_touched_again() {
    let progress = GroupProgress {
        group: router(),
        intent: Some(intent()),
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![progress]);
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
    let progress = GroupProgress { group: router(), intent: None, outcome: Some(outcome.clone()) };
    let mut again = ResetMachine::new(request(&["router"]), None, vec![progress]);
    again.handle(stopped_router(), T0);
    let e = drain(&mut again);
    let persist = Effect::PersistOutcome { id: ID.into(), group: router(), outcome: outcome.clone() };
    assert_eq!(e, [persist, Effect::Record(event.clone()), Effect::WriteDone { id: ID.into() }]);
    assert_eq!(event.name_for("cart"), outcome_event(ID, &target_of_router(), outcome).name_for("cart"));
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    assert_eq!(backoff(1), Duration::from_secs(1));
    assert_eq!(backoff(2), Duration::from_secs(2));
    assert_eq!(backoff(3), Duration::from_secs(4));
    assert_eq!(backoff(10), MAX_BACKOFF);
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

mod recovery;
mod settle;
mod status;
