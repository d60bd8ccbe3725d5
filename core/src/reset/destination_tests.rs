//! Destinations other than the earliest offsets: a time, and the offsets an undo puts back, with
//! their compare-and-set.

use std::collections::BTreeMap;

use super::*;
use crate::names::GroupId;
use crate::request::{ResetRequest, To};
use crate::resource::{GroupStage, RequestPhase};
use crate::targets::tests::cart;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const EARLIER: &str = "0c0d8a3e-51aa-4c4e-9d2c-6e1b5f7a9b10";
const T0: Timestamp = Timestamp(1_000_000);
/// 2026-11-29T16:00:00Z.
const AT: i64 = 1_795_968_000_000;

fn router() -> GroupId {
    GroupId::new("cart", "router", "in")
}

fn drain(m: &mut ResetMachine) -> Vec<Effect> {
    std::iter::from_fn(|| m.poll_effect()).collect()
}

fn notes(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Record(ev) => Some(format!("{}: {}", ev.reason, ev.note)),
            _ => None,
        })
        .collect()
}

/// Committed 10/60/none, log start 0/50/30, high watermark 100; at the time: 40, 70, no record.
fn seen() -> Inspection {
    Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        committed: BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        high_watermark: BTreeMap::from([(0, 100), (1, 100), (2, 100)]),
        at_time: BTreeMap::from([(0, Some(40)), (1, Some(70)), (2, None)]),
        topic_configs: BTreeMap::new(),
        member_names: vec![],
    }
}

fn to_time() -> ResetRequest {
    ResetRequest {
        to: Some(To::Datetime("2026-11-29T16:00:00Z".into())),
        ..ResetRequest::new(ID, vec!["router".into()])
    }
}

fn undo(force: bool) -> ResetRequest {
    ResetRequest { to: Some(To::Undo(EARLIER.into())), force, ..ResetRequest::new(ID, vec![]) }
}

/// What reset `EARLIER` recorded for router: it moved 10/60/none to 0/50/30.
fn undo_destination(force: bool) -> Destination {
    Destination::Given(Given {
        source: Source::Undo(EARLIER.into()),
        groups: BTreeMap::from([(
            router(),
            GivenOffsets {
                expected: BTreeMap::from([(0, Some(0)), (1, Some(50)), (2, Some(30))]),
                target: BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
            },
        )]),
        force,
    })
}

/// Runs `m` to router's intent from `inspection`; returns the effects after the inspection.
fn inspect(m: &mut ResetMachine, inspection: Inspection) -> Vec<Effect> {
    m.handle(Input::Observed { spec: cart(0), pods: BTreeMap::new() }, T0);
    let e = drain(m);
    assert!(matches!(&e[..], [Effect::InspectGroup(t)] if t.group == router()), "{e:?}");
    m.handle(Input::Inspected { group: router(), result: Ok(inspection) }, T0);
    drain(m)
}

/// Fences, commits and verifies router's intent; returns the effects of its outcome.
fn land(m: &mut ResetMachine) -> Vec<Effect> {
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    let e = drain(m);
    let Some(Effect::CommitOffsets { offsets, .. }) = e.iter().find(|e| matches!(e, Effect::CommitOffsets { .. }))
    else {
        panic!("a commit: {e:?}")
    };
    let offsets = offsets.clone();
    m.handle(
        Input::ReadBack { group: router(), result: Ok(offsets.iter().map(|(p, o)| (*p, Some(*o))).collect()) },
        T0,
    );
    let due = T0.after(DEFAULT_SETTLE);
    m.handle(Input::Tick, due);
    drain(m);
    let read = offsets.iter().map(|(p, o)| (*p, Some(Position { offset: *o, metadata: reset_marker(ID) }))).collect();
    m.handle(Input::Read { group: router(), result: Ok(read) }, due);
    drain(m)
}

#[test]
fn a_time_goes_to_the_first_offset_at_or_after_it_and_the_log_end_where_none_is() {
    let mut m = ResetMachine::new(to_time(), None, vec![]);
    assert_eq!(m.destination().time(), Some(Timestamp(AT)));
    let e = inspect(&mut m, seen());
    assert!(matches!(&e[..], [Effect::Fence { .. }]), "{e:?}");
    let e = land(&mut m);
    assert_eq!(
        notes(&e),
        [
            "ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to 2026-11-29T16:00:00Z; \
          partition(s) 2 have no record at or after 2026-11-29T16:00:00Z and went to the log end",
            "ResetOffsetsWarning: cart.router.in: partition(s) 2 have no record at or after 2026-11-29T16:00:00Z and \
          went to the log end"
        ]
    );
    let st = m.status();
    let g = &st.groups[0];
    assert_eq!(g.offsets_after, BTreeMap::from([("0".into(), 40), ("1".into(), 70), ("2".into(), 100)]));
    assert_eq!(g.records_to_reprocess, 60 + 30, "from where each partition went to its high watermark");
    assert!(g.message.ends_with("went to the log end"), "{}", g.message);
}

#[test]
fn a_group_already_reset_to_a_time_says_where_it_went_after_a_restart() {
    let outcome = Intent::new(BTreeMap::from([(0, Some(10))]), BTreeMap::from([(0, 40)]), 60)
        .into_reset("shop.cart-events.v1", vec![]);
    let m = ResetMachine::new(
        to_time(),
        Some(ID),
        vec![GroupProgress { group: router(), intent: None, outcome: Some(outcome) }],
    );
    let st = m.status();
    assert_eq!(st.to.as_deref(), Some("2026-11-29T16:00:00Z"));
    assert_eq!(st.groups[0].message, "1 partition(s) of 'shop.cart-events.v1' to 2026-11-29T16:00:00Z");
}

#[test]
fn a_reset_to_the_earliest_offsets_says_so_exactly_and_names_no_time() {
    let mut m = ResetMachine::new(ResetRequest::new(ID, vec!["router".into()]), None, vec![]);
    assert_eq!(m.destination().time(), None);
    inspect(&mut m, Inspection { at_time: BTreeMap::new(), ..seen() });
    let e = land(&mut m);
    assert_eq!(notes(&e), ["ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    assert_eq!(m.status().to, None);
}

#[test]
fn an_undo_puts_back_the_offsets_before_and_the_log_start_where_there_was_none() {
    let mut m = ResetMachine::new(undo(false), None, vec![]).with_destination(undo_destination(false));
    let left = Inspection { committed: BTreeMap::from([(0, Some(0)), (1, Some(50)), (2, Some(30))]), ..seen() };
    let e = inspect(&mut m, left);
    assert!(matches!(&e[..], [Effect::Fence { .. }]), "{e:?}");
    let e = land(&mut m);
    assert_eq!(
        notes(&e),
        [
            format!(
                "ResetOffsets: cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to the offsets before reset \
             {EARLIER}; partition(s) 2 had no committed offset and went to the log start"
            ),
            "ResetOffsetsWarning: cart.router.in: partition(s) 2 had no committed offset and went to the log start"
                .into()
        ]
    );
    assert_eq!(
        m.status().groups[0].offsets_after,
        BTreeMap::from([("0".into(), 10), ("1".into(), 60), ("2".into(), 30)])
    );
}

#[test]
fn an_undo_refuses_a_group_that_consumed_since_and_names_the_partitions() {
    let mut m = ResetMachine::new(undo(false), None, vec![]).with_destination(undo_destination(false));
    let consumed = Inspection { committed: BTreeMap::from([(0, Some(7)), (1, Some(50)), (2, None)]), ..seen() };
    let e = inspect(&mut m, consumed);
    assert!(!e.iter().any(|e| matches!(e, Effect::Fence { .. } | Effect::CommitOffsets { .. })), "{e:?}");
    assert_eq!(
        notes(&e),
        [format!(
            "ResetOffsetsFailed: cart.router.in: its committed offsets moved since reset {EARLIER}: partition 0 is at \
             7 (expected 0), partition 2 has no offset (expected 30); nothing was committed for it (the streamlet \
             consumed since; to put the offsets back anyway, use flow reset undo --force)"
        )]
    );
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    assert_eq!(m.status().groups[0].outcome, GroupStage::Failed);
}

#[test]
fn a_forced_undo_moves_a_group_that_consumed_since() {
    let mut m = ResetMachine::new(undo(true), None, vec![]).with_destination(undo_destination(true));
    let consumed = Inspection { committed: BTreeMap::from([(0, Some(7)), (1, Some(50)), (2, None)]), ..seen() };
    let e = inspect(&mut m, consumed);
    let fence = BTreeMap::from([(0, 7), (1, 50)]);
    assert!(matches!(&e[..], [Effect::Fence { offsets, .. }] if *offsets == fence), "{e:?}");
}

#[test]
fn a_request_with_given_offsets_touches_only_the_groups_they_list() {
    let mut m = ResetMachine::new(undo(false), None, vec![]).with_destination(undo_destination(false));
    m.handle(Input::Observed { spec: cart(0), pods: BTreeMap::new() }, T0);
    let e = drain(&mut m);
    assert!(matches!(&e[..], [Effect::InspectGroup(t)] if t.group == router()), "sink's group is not in it: {e:?}");
}

#[test]
fn an_undo_without_recorded_offsets_is_refused_and_done() {
    let why = format!("the ledger holds no offsets of reset {EARLIER}");
    let mut m = ResetMachine::new(undo(false), None, vec![]).with_destination(Destination::Unavailable(why.clone()));
    m.handle(Input::Observed { spec: cart(0), pods: BTreeMap::new() }, T0);
    let e = drain(&mut m);
    assert_eq!(notes(&e), [format!("ResetRefused: reset {ID} refused: {why}")]);
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    assert_eq!(m.status().phase, RequestPhase::Refused);
    // A request the driver gave no offsets for is refused too, never carried out to the earliest.
    let mut m = ResetMachine::new(undo(false), None, vec![]);
    m.handle(Input::Observed { spec: cart(0), pods: BTreeMap::new() }, T0);
    assert_eq!(m.status().phase, RequestPhase::Refused);
}

#[test]
fn an_undo_puts_back_what_the_ledger_recorded_of_the_groups_it_reset() {
    let reset = Intent::new(
        BTreeMap::from([(0, Some(10)), (1, Some(60)), (2, None)]),
        BTreeMap::from([(0, 0), (1, 50), (2, 30)]),
        220,
    )
    .into_reset("shop.cart-events.v1", vec![]);
    let failed = GroupProgress {
        group: GroupId::new("cart", "sink", "in"),
        intent: None,
        outcome: Some(GroupOutcome::Failed { topic: "t".into(), reason: "no".into() }),
    };
    let recorded = vec![GroupProgress { group: router(), intent: None, outcome: Some(reset) }, failed];
    assert_eq!(super::undo(EARLIER, false, &recorded), undo_destination(false));
    assert!(matches!(super::undo(EARLIER, false, &[]), Destination::Unavailable(_)));
}

fn dry_run() -> ResetRequest {
    ResetRequest { dry_run: true, ..ResetRequest::new(ID, vec!["router".into()]) }
}

#[test]
fn a_dry_run_plans_each_group_with_its_warnings_and_commits_nothing() {
    let mut m = ResetMachine::new(dry_run(), None, vec![]);
    // Its target runs: a dry run does not wait for it.
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    let e = drain(&mut m);
    assert!(matches!(&e[..], [Effect::InspectGroup(t)] if t.group == router()), "{e:?}");
    let seen = Inspection {
        members: 1,
        // Partition 1: committed 60, but retention moved its log start to 65.
        log_start: BTreeMap::from([(0, 0), (1, 65), (2, 30)]),
        topic_configs: BTreeMap::from([
            ("cleanup.policy".into(), "compact,delete".into()),
            ("retention.ms".into(), "604800000".into()),
            ("retention.bytes".into(), "-1".into()),
        ]),
        ..seen()
    };
    m.handle(Input::Inspected { group: router(), result: Ok(seen) }, T0);
    let e = drain(&mut m);
    assert!(!e.iter().any(|e| matches!(e, Effect::Fence { .. } | Effect::CommitOffsets { .. })), "{e:?}");
    assert_eq!(
        notes(&e),
        [
            "ResetPlanned: cart.router.in: would move 3 partition(s) of 'shop.cart-events.v1' to earliest, 205 record(s) \
          to reprocess; 4 warning(s)"
        ]
    );
    assert_eq!(e.last(), Some(&Effect::WriteDone { id: ID.into() }));
    let st = m.status();
    assert!(st.dry_run);
    assert_eq!(st.phase, RequestPhase::Done);
    let g = &st.groups[0];
    assert_eq!(g.outcome, GroupStage::Planned);
    assert_eq!(g.offsets_before, BTreeMap::from([("0".into(), 10), ("1".into(), 60)]));
    assert_eq!(g.offsets_after, BTreeMap::from([("0".into(), 0), ("1".into(), 65), ("2".into(), 30)]));
    assert_eq!(g.high_watermarks, BTreeMap::from([("0".into(), 100), ("1".into(), 100), ("2".into(), 100)]));
    assert_eq!(g.records_to_reprocess, 100 + 35 + 70);
    assert_eq!(g.warnings.len(), 4, "{:?}", g.warnings);
    assert!(
        g.warnings[0].contains("log start passed its committed offset in partition(s) 1 (5 record(s))"),
        "{:?}",
        g.warnings
    );
    assert!(g.warnings[1].starts_with("topic 'shop.cart-events.v1' is compacted (cleanup.policy=compact,delete)"));
    assert!(
        g.warnings[2]
            .contains("retention (retention.ms=604800000) has deleted records of partition(s) 1 (at 65), 2 (at 30)")
    );
    assert!(g.warnings[3].starts_with("the group has 1 active member(s)"));
}

fn plan(expected: i64) -> ResetRequest {
    let groups =
        BTreeMap::from([(router().to_string(), BTreeMap::from([(0, (Some(expected), 5)), (1, (Some(60), 55))]))]);
    ResetRequest {
        to: Some(To::Plan(crate::request::PlanOffsets { id: EARLIER.into(), groups })),
        ..ResetRequest::new(ID, vec![])
    }
}

#[test]
fn a_plan_moves_a_group_whose_offsets_are_as_planned_and_refuses_one_whose_moved() {
    let mut m = ResetMachine::new(plan(10), None, vec![]);
    let e = inspect(&mut m, seen());
    assert!(matches!(&e[..], [Effect::Fence { .. }]), "{e:?}");
    let e = land(&mut m);
    assert_eq!(
        notes(&e)[0],
        format!(
            "ResetOffsets: cart.router.in: 2 partition(s) of 'shop.cart-events.v1' to the offsets of plan {EARLIER}; \
             partition(s) 2 are not in plan {EARLIER} and were left as they are"
        )
    );
    assert_eq!(m.status().groups[0].offsets_after, BTreeMap::from([("0".into(), 5), ("1".into(), 55)]));

    let mut m = ResetMachine::new(plan(9), None, vec![]);
    let e = inspect(&mut m, seen());
    assert_eq!(
        notes(&e),
        [format!(
            "ResetOffsetsFailed: cart.router.in: its committed offsets moved since plan {EARLIER}: partition 0 is at 10 \
             (expected 9); nothing was committed for it (make a new plan with flow reset --dry-run)"
        )]
    );
}

#[test]
fn a_group_reset_to_a_time_is_read_back_at_its_new_offsets_not_the_log_start() {
    let mut m = ResetMachine::new(to_time(), None, vec![]);
    inspect(&mut m, seen());
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    let e = drain(&mut m);
    let Some(Effect::CommitOffsets { offsets, .. }) = e.iter().find(|e| matches!(e, Effect::CommitOffsets { .. }))
    else {
        panic!("a commit: {e:?}")
    };
    let read = offsets.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    let message = &m.status().groups[0].message;
    assert!(message.starts_with("read back at its new offsets; reading them again after the settle"), "{message}");
}
