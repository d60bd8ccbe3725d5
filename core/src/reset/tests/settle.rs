//! The settle, and the verifying read after it.

use std::collections::BTreeMap;

use super::*;

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
        member_names: vec![],
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
    let progress = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![progress]).with_settle(Duration::ZERO);
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

/// A machine for router that the operator saw stopped at `stopped` (see
/// [`ResetMachine::with_stopped`]), observed and inspected at `T0`, whose fence answers at `fenced`
/// (the commit is handed out then).
fn committed_stopped(stopped: BTreeMap<String, Timestamp>, fenced: Timestamp) -> ResetMachine {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]).with_stopped(stopped);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    m.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    drain(&mut m);
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, fenced);
    let e = drain(&mut m);
    assert!(e.iter().any(|e| matches!(e, Effect::CommitOffsets { .. })), "{e:?}");
    m
}

/// [`committed_stopped`], whose commit reads back at 0/50/30 at `fenced`.
fn read_back_stopped(stopped: BTreeMap<String, Timestamp>, fenced: Timestamp) -> ResetMachine {
    let mut m = committed_stopped(stopped, fenced);
    m.handle(Input::ReadBack { group: router(), result: Ok(read_back_at_targets()) }, fenced);
    m
}

/// The read-back of router's commit: every partition at its target.
fn read_back_at_targets() -> BTreeMap<i32, Option<i64>> {
    intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect()
}

fn router_stopped_at(at: Timestamp) -> BTreeMap<String, Timestamp> {
    BTreeMap::from([("router".to_string(), at)])
}

/// Milliseconds before `T0`.
fn before_t0(ms: i64) -> Timestamp {
    Timestamp(T0.0 - ms)
}

#[test]
fn a_streamlet_stopped_at_least_the_settle_before_the_commit_is_reset_at_its_read_back() {
    // The seed's path: the streamlet's pods were gone a while before the request.
    let mut m = read_back_stopped(router_stopped_at(before_t0(5_000)), T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::ReadCommitted(_))), "no read after the read-back: {e:?}");
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    assert_eq!(m.poll_timeout(), None, "no settle to wait");

    // Exactly the settle before the commit is enough.
    let mut m = read_back_stopped(router_stopped_at(before_t0(1_000)), T0);
    assert_eq!(drain(&mut m).last(), Some(&Effect::WriteDone { id: ID.into() }));
}

#[test]
fn the_read_back_without_the_wait_still_catches_a_moved_offset_and_an_added_partition() {
    let mut m = committed_stopped(router_stopped_at(before_t0(5_000)), T0);
    let mut read = read_back_at_targets();
    read.insert(0, Some(10));
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    let r = reasons(&drain(&mut m));
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].starts_with("ResetOffsetsFailed: cart.router.in: the commit did not hold"), "{r:?}");

    // The read-back covers every partition the topic has now: partition 3 came after the inspection.
    let mut m = committed_stopped(router_stopped_at(before_t0(5_000)), T0);
    let mut read = read_back_at_targets();
    read.insert(3, None);
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    let r = reasons(&drain(&mut m));
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[1].starts_with("ResetPartitionsAdded: cart.router.in: partition(s) 3 of"), "{r:?}");
}

#[test]
fn a_streamlet_stopped_less_than_the_settle_before_the_commit_waits_the_full_settle() {
    // Its pods went 999 ms before the commit: a commit of its consumer may still be in flight.
    let mut m = read_back_stopped(router_stopped_at(before_t0(999)), T0);
    assert!(drain(&mut m).is_empty(), "nothing read before the settle");
    settle_from(&mut m, T0);
    // The consumer that committed on close right before the request overwrote the reset: caught.
    let read = BTreeMap::from([(0, pos(10, "")), (1, pos(60, "")), (2, pos(30, &reset_marker(ID)))]);
    m.handle(Input::Read { group: router(), result: Ok(read) }, T0.after(DEFAULT_SETTLE));
    let r = reasons(&drain(&mut m));
    assert!(r.len() == 1 && r[0].contains("a consumer overwrote the reset after it was read back"), "{r:?}");
}

#[test]
fn the_settle_counts_to_when_the_commit_is_handed_out_not_to_the_request() {
    // Stopped 600 ms before the request was observed: the commit handed out 400 ms later is the
    // settle after the stop; 1 ms earlier it is not.
    let stopped = router_stopped_at(before_t0(600));
    let mut m = read_back_stopped(stopped.clone(), T0.after(Duration::from_millis(400)));
    assert_eq!(drain(&mut m).last(), Some(&Effect::WriteDone { id: ID.into() }), "reset at its read-back");
    let early = T0.after(Duration::from_millis(399));
    let mut m = read_back_stopped(stopped, early);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(early.after(DEFAULT_SETTLE)), "the full settle from the read-back");
}

#[test]
fn a_streamlet_not_seen_stopped_waits_the_full_settle() {
    // Never seen running by this operator (or seen before a restart): nothing is known of its stop.
    let mut m = read_back_stopped(BTreeMap::new(), T0);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(T0.after(DEFAULT_SETTLE)));
    // Another streamlet's stop says nothing of router's.
    let sink = BTreeMap::from([("sink".to_string(), before_t0(60_000))]);
    let mut m = read_back_stopped(sink, T0);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(T0.after(DEFAULT_SETTLE)));
}

#[test]
fn a_commit_recovered_by_the_markers_waits_the_full_settle_whenever_the_streamlet_stopped() {
    // A rebuilt machine does not know when the commit of its intent was sent.
    let progress = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let mut m = ResetMachine::new(request(&["router"]), None, vec![progress])
        .with_stopped(router_stopped_at(before_t0(60_000)));
    m.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0);
    assert!(drain(&mut m).is_empty());
    settle_from(&mut m, T0);
}

#[test]
fn a_settle_of_zero_stays_off_for_a_stopped_streamlet() {
    let mut m = ResetMachine::new(request(&["router"]), None, vec![])
        .with_settle(Duration::ZERO)
        .with_stopped(router_stopped_at(before_t0(5_000)));
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::ReadCommitted(_))), "{e:?}");
    assert_eq!(reasons(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
}

#[test]
fn a_group_found_with_members_waits_the_full_settle_however_long_ago_its_pods_went() {
    // A consumer ran after the pods went (a pod deleted by force, its process still closing).
    let mut m =
        ResetMachine::new(request(&["router"]), None, vec![]).with_stopped(router_stopped_at(before_t0(60_000)));
    m.handle(stopped_router(), T0);
    drain(&mut m);
    let busy = Inspection { members: 1, state: "Stable".into(), ..empty_group() };
    m.handle(Input::Inspected { group: router(), result: Ok(busy) }, T0);
    let due = m.poll_timeout().expect("looked at again");
    m.handle(Input::Tick, due);
    // (after the event, once per group, that the request waits for its members)
    let e = drain(&mut m);
    assert!(matches!(&e[..], [Effect::Record(w), Effect::InspectGroup(_)] if w.reason == "ResetWaiting"), "{e:?}");
    m.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, due);
    drain(&mut m);
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, due);
    drain(&mut m);
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, due);
    assert!(drain(&mut m).is_empty(), "no read before the settle");
    assert_eq!(m.poll_timeout(), Some(due.after(DEFAULT_SETTLE)));
}
