//! A bounded status: whatever the partitions of a group, the status keeps a summary of it, and a
//! machine rebuilt from that summary alone (the ledger lost) never commits blindly.

use std::collections::BTreeMap;

use super::*;
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::{GroupStage, RequestPhase, ResetStatus};
use crate::targets::tests::cart;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const T0: Timestamp = Timestamp(1_000_000);
const PARTITIONS: i32 = 1000;

fn router() -> GroupId {
    GroupId::new("cart", "router", "in")
}

fn machine(progress: Vec<GroupProgress>) -> ResetMachine {
    let request = ResetRequest::new(ID, vec!["router".into()]);
    ResetMachine::new(request, None, progress)
}

fn drain(m: &mut ResetMachine) -> Vec<Effect> {
    std::iter::from_fn(|| m.poll_effect()).collect()
}

fn observe(m: &mut ResetMachine) -> Vec<Effect> {
    m.handle(Input::Observed { spec: cart(0), pods: BTreeMap::new() }, T0);
    drain(m)
}

fn size(status: &ResetStatus) -> usize {
    serde_json::to_string(status).map_or(0, |s| s.len())
}

fn at(offset: i64, metadata: &str) -> Option<Position> {
    Some(Position { offset, metadata: metadata.into() })
}

/// Every partition at `offset` with `metadata`.
fn read(offset: i64, metadata: &str) -> Positions {
    (0..PARTITIONS).map(|p| (p, at(offset, metadata))).collect()
}

/// A machine whose router group (1,000 partitions, committed at 20, log start 0) has its intent
/// durable and its commit under way.
fn committing() -> ResetMachine {
    let mut m = machine(vec![]);
    observe(&mut m);
    let seen = Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: (0..PARTITIONS).map(|p| (p, 0)).collect(),
        committed: (0..PARTITIONS).map(|p| (p, Some(20))).collect(),
        high_watermark: (0..PARTITIONS).map(|p| (p, 20)).collect(),
        at_time: BTreeMap::new(),
        topic_configs: BTreeMap::new(),
        member_names: vec![],
    };
    m.handle(Input::Inspected { group: router(), result: Ok(seen) }, T0);
    drain(&mut m);
    m.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    drain(&mut m);
    m
}

#[test]
fn a_group_of_a_thousand_partitions_is_a_summary_at_every_stage() {
    let mut m = committing();
    let committing = m.status();
    let g = &committing.groups[0];
    assert_eq!((g.outcome, g.partitions, g.records_to_reprocess), (GroupStage::Committing, 1000, 20_000));
    assert!(g.offsets_before.is_empty() && g.offsets_after.is_empty(), "{g:?}");
    assert!(size(&committing) < 400, "{} bytes", size(&committing));

    let back = (0..PARTITIONS).map(|p| (p, Some(0))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(back) }, T0);
    assert_eq!(m.status().groups[0].outcome, GroupStage::Verifying);
    assert!(size(&m.status()) < 400, "{} bytes", size(&m.status()));
    let due = T0.after(DEFAULT_SETTLE);
    m.handle(Input::Tick, due);
    drain(&mut m);
    m.handle(Input::Read { group: router(), result: Ok(read(0, &reset_marker(ID))) }, due);
    let e = drain(&mut m);
    assert!(
        e.iter().any(|e| matches!(e, Effect::Record(ev) if ev.note == "cart.router.in: 1000 partition(s) of 'shop.cart-events.v1' to earliest")),
        "{e:?}"
    );
    let done = m.status();
    assert_eq!((done.phase, done.groups[0].outcome), (RequestPhase::Done, GroupStage::Reset));
    // The summary keeps no text the other fields tell; `flow reset status` spells it out.
    assert_eq!(done.groups[0].message, "");
    assert_eq!(group_message(&done, &done.groups[0]), "1000 partition(s) of 'shop.cart-events.v1' to earliest");
    assert!(size(&done) < 300, "{} bytes", size(&done));
}

#[test]
fn a_small_group_still_lists_its_offsets() {
    let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
    let progress = vec![GroupProgress { group: router(), intent: Some(intent.clone()), outcome: None }];
    let mut m = machine(progress);
    observe(&mut m);
    let g = &m.status().groups[0];
    assert_eq!(g.offsets_after, BTreeMap::from([("0".to_string(), 0)]));
    assert_eq!(progress_from_status(&m.status())[0].intent, Some(intent));
}

/// The summary of a committing large group, as a rebuilt operator reads it from the status alone.
fn from_summary() -> ResetMachine {
    let progress = progress_from_status(&committing().status());
    assert_eq!(progress[0].intent, Some(Intent::summary(1000, 20_000)), "{progress:?}");
    let mut m = machine(progress);
    assert!(matches!(&observe(&mut m)[..], [Effect::ReadCommitted(_)]), "recovered, never committed blindly");
    m
}

#[test]
fn a_summary_whose_commit_landed_is_verified_and_counted() {
    let mut m = from_summary();
    m.handle(Input::Read { group: router(), result: Ok(read(0, &reset_marker(ID))) }, T0);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.status().groups[0].outcome, GroupStage::Verifying);
    let due = T0.after(DEFAULT_SETTLE);
    m.handle(Input::Tick, due);
    drain(&mut m);
    m.handle(Input::Read { group: router(), result: Ok(read(0, &reset_marker(ID))) }, due);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::Fence { .. })), "{e:?}");
    let Some(Effect::PersistOutcome { outcome, .. }) = e.first() else { panic!("{e:?}") };
    assert_eq!(outcome.partitions(), 1000);
}

#[test]
fn a_summary_whose_commit_never_landed_starts_again() {
    let mut m = from_summary();
    m.handle(Input::Read { group: router(), result: Ok(read(20, &fence_marker(ID))) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::InspectGroup(_)]));
}

#[test]
fn a_summary_after_a_consumer_ran_is_neither_committed_nor_a_success() {
    let mut m = from_summary();
    m.handle(Input::Read { group: router(), result: Ok(read(20, "")) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))), "{e:?}");
    assert!(
        matches!(&e[0], Effect::PersistOutcome { outcome: GroupOutcome::Failed { reason, .. }, .. } if reason.starts_with("cannot tell whether the reset landed")),
        "{e:?}"
    );
}

#[test]
fn messages_and_partition_lists_stay_bounded() {
    let mut m = committing();
    let long = "x".repeat(10_000);
    m.handle(Input::ReadBack { group: router(), result: Err(KafkaFailure::refused(long)) }, T0);
    let e = drain(&mut m);
    let st = m.status();
    assert!(st.groups[0].message.len() <= MESSAGE_LIMIT, "{}", st.groups[0].message.len());
    let events: Vec<&crate::events::Event> =
        e.iter().filter_map(|e| if let Effect::Record(ev) = e { Some(ev) } else { None }).collect();
    assert!(events.iter().all(|ev| ev.note.len() <= crate::events::NOTE_LIMIT));

    // A read-back that went wrong everywhere names the first partitions and counts the rest.
    let mut m = committing();
    let wrong = (0..PARTITIONS).map(|p| (p, Some(20))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(wrong) }, T0);
    let message = &m.status().groups[0].message;
    assert!(message.contains("partition 19 reads back 20, not 0 and 980 more partition(s)"), "{message}");
}

/// The status of a done request of `groups` groups, each reset over `partitions` partitions, with
/// the lag its catch-up writes.
fn done_status(groups: usize, partitions: i32) -> ResetStatus {
    let progress = (0..groups)
        .map(|i| {
            let before = (0..partitions).map(|p| (p, Some(1_000_000))).collect();
            let target = (0..partitions).map(|p| (p, 0)).collect();
            let intent = Intent::new(before, target, 1_000_000 * i64::from(partitions));
            let group = GroupId::new("bench", &format!("l{}", i % 10), &format!("i{}", i / 10));
            GroupProgress { group, intent: None, outcome: Some(intent.into_reset("bench.p1000", vec![])) }
        })
        .collect();
    let request = ResetRequest::new(ID, vec![]);
    let mut status = ResetMachine::new(request, Some(ID), progress).status();
    for g in &mut status.groups {
        g.lag = Some(1_000_000_000);
        g.caught_up_at = Some("2026-12-01T07:05:36.512Z".into());
    }
    status
}

#[test]
fn two_hundred_groups_fit_whatever_their_partitions() {
    let (small, large) = (done_status(200, 1000), done_status(200, 100_000));
    assert_eq!(small.groups.len(), 200);
    assert_eq!(small.groups[0].partitions, 1000);
    // Only the digits of the counts differ: partitions and records.
    assert_eq!(size(&large) - size(&small), 200 * 2 * 2, "{} / {}", size(&small), size(&large));
    assert!(size(&small) < 36 * 1024, "{} bytes", size(&small));
    // Groups of a few partitions each are summed up as well in a request of that many groups.
    let few = done_status(200, 16);
    assert!(few.groups.iter().all(|g| g.offsets_before.is_empty() && g.offsets_after.is_empty()));
    assert!(size(&few) <= size(&small), "{} bytes", size(&few));
    let detailed = done_status(LISTED_GROUPS, 16);
    assert!(detailed.groups.iter().all(|g| g.offsets_after.len() == 16), "a small request is shown in detail");
}

/// Every stage's message reads the same from a summary as from the detail: `group_message`
/// spells out what the summary leaves out.
#[test]
fn a_summary_reads_as_the_detail_would() {
    use super::group::GroupPhase;
    use super::retry::Retry;
    use super::summary::group_status;
    let intent = Intent::new(BTreeMap::from([(0, Some(5)), (1, None)]), BTreeMap::from([(0, 0), (1, 0)]), 5);
    let error = Retry { last_error: Some("Local: Timed out".into()), ..Retry::default() };
    let reset =
        |added: Vec<i32>, notes: Vec<String>| intent.clone().with_notes(notes).into_reset("shop.cart-events.v1", added);
    let phases = [
        GroupPhase::Pending { retry: error.clone() },
        GroupPhase::Committing { retry: Retry::default(), intent: intent.clone(), settled: false },
        GroupPhase::Recovering { retry: Retry::default(), intent: intent.clone() },
        GroupPhase::Recovering { retry: error.clone(), intent: intent.clone() },
        GroupPhase::Verifying { retry: Retry::default(), intent: intent.clone() },
        GroupPhase::Verifying { retry: error.clone(), intent: intent.clone() },
        GroupPhase::Reporting { reason: "refused".into(), intent: intent.clone() },
        GroupPhase::Finished(reset(vec![], vec![])),
        GroupPhase::Finished(reset(vec![2, 3], vec!["partition 1 has no record after the time".into()])),
        GroupPhase::Finished(GroupOutcome::Failed { topic: "shop.cart-events.v1".into(), reason: "denied".into() }),
    ];
    for to in [None, Some("2026-11-29T16:00:00Z")] {
        for phase in &phases {
            let phase = match phase {
                GroupPhase::Finished(GroupOutcome::Reset { .. }) => {
                    let GroupPhase::Finished(mut o) = phase.clone() else { unreachable!() };
                    if let GroupOutcome::Reset { to: t, .. } = &mut o {
                        *t = to.map(str::to_string);
                    }
                    GroupPhase::Finished(o)
                }
                other => other.clone(),
            };
            let status = |groups: usize| {
                let g = group_status(&router(), "shop.cart-events.v1", &phase, groups, false, to);
                ResetStatus { id: ID.into(), to: to.map(str::to_string), groups: vec![g; groups], ..Default::default() }
            };
            let (detail, summary) = (status(1), status(LISTED_GROUPS + 1));
            assert_eq!(
                group_message(&summary, &summary.groups[0]),
                detail.groups[0].message,
                "{phase:?} to {to:?}: the summary keeps {:?}",
                summary.groups[0].message
            );
            assert!(summary.groups[0].message.len() <= detail.groups[0].message.len());
        }
    }
}

#[test]
fn a_summary_whose_commit_landed_on_some_partitions_only_fails_naming_a_bounded_number() {
    let mut m = from_summary();
    let (fence, reset) = (fence_marker(ID), reset_marker(ID));
    let half: Positions = (0..PARTITIONS).map(|p| (p, if p < 500 { at(0, &reset) } else { at(20, &fence) })).collect();
    m.handle(Input::Read { group: router(), result: Ok(half) }, T0);
    let e = drain(&mut m);
    assert!(e.iter().all(|e| !matches!(e, Effect::CommitOffsets { .. } | Effect::InspectGroup(_))), "{e:?}");
    let Some(Effect::PersistOutcome { outcome: GroupOutcome::Failed { reason, .. }, .. }) = e.first() else {
        panic!("{e:?}")
    };
    assert!(
        reason.starts_with(
            "the reset commit landed on some partitions only; Kafka holds now: partition 0 at 0 (this reset)"
        ),
        "{reason}"
    );
    assert!(reason.contains("and 980 more partition(s)"), "{reason}");
}

/// A dry run's group of many partitions: its plan's text is spelled out from the summary.
#[test]
fn a_planned_summary_reads_as_its_event() {
    use super::group::GroupPhase;
    use super::summary::group_status;
    let before = (0..20).map(|p| (p, Some(7))).collect();
    let intent = Intent::new(before, (0..20).map(|p| (p, 0)).collect(), 140);
    let outcome = GroupOutcome::Planned {
        topic: "shop.cart-events.v1".into(),
        intent,
        high_watermark: (0..20).map(|p| (p, 7)).collect(),
        warnings: vec!["compacted".into()],
        to: None,
    };
    let g = group_status(&router(), "shop.cart-events.v1", &GroupPhase::Finished(outcome.clone()), 1, true, None);
    assert!(g.message.is_empty() && g.offsets_after.is_empty(), "{g:?}");
    let status = ResetStatus { id: ID.into(), dry_run: true, groups: vec![g], ..Default::default() };
    assert_eq!(group_message(&status, &status.groups[0]), super::wording::planned(&outcome));
}
