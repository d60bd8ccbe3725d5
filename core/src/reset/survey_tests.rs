//! A rebuild from streamlets in the reset machine (see `survey`): the closure waits for every
//! streamlet of it, is surveyed before anything moves, then the named streamlet's group goes to the
//! start and the one downstream of it to the end; the survey refuses the whole request when the end
//! of a topic moves while its writers are stopped, when a group cannot be looked at, or when a plan
//! no longer holds.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::closure::tests::chain;
use crate::names::GroupId;
use crate::request::{PlanOffsets, ResetRequest, To};
use crate::resource::{GroupStage, RequestPhase};

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const PLAN: &str = "0c0d8a3e-51aa-4c4e-9d2c-6e1b5f7a9b10";
const T0: Timestamp = Timestamp(1_000_000);

fn middle() -> GroupId {
    GroupId::new("chain", "middle", "in")
}

fn sink() -> GroupId {
    GroupId::new("chain", "sink", "in")
}

fn from_middle() -> ResetRequest {
    ResetRequest { rebuild: true, from: vec!["middle".into()], ..ResetRequest::new(ID, vec![]) }
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

fn inspected(group: &GroupId) -> Vec<GroupId> {
    vec![group.clone()]
}

fn inspections(effects: &[Effect]) -> Vec<GroupId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::InspectGroup(t) => Some(t.group.clone()),
            _ => None,
        })
        .collect()
}

fn fences(effects: &[Effect]) -> Vec<GroupId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Fence { target, .. } => Some(target.group.clone()),
            _ => None,
        })
        .collect()
}

/// Two partitions from offset 0 up to `end` each, the group committed at `committed`.
fn seen(committed: i64, end: i64) -> Inspection {
    Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: BTreeMap::from([(0, 0), (1, 0)]),
        committed: BTreeMap::from([(0, Some(committed)), (1, Some(committed))]),
        high_watermark: BTreeMap::from([(0, end), (1, end)]),
        at_time: BTreeMap::new(),
        topic_configs: BTreeMap::new(),
    }
}

fn stopped() -> Input {
    Input::Observed { spec: chain(), pods: BTreeMap::new() }
}

/// A machine of `request` whose closure just stopped: both groups are being inspected.
fn surveying(request: ResetRequest) -> ResetMachine {
    let mut m = ResetMachine::new(request, None, vec![]);
    m.handle(stopped(), T0);
    assert_eq!(inspections(&drain(&mut m)), [middle(), sink()], "every group is looked at first");
    m
}

/// Feeds the first look (middle read 60 of 60 per partition, sink read 30 of the 60 middle wrote),
/// waits the settle delay, and feeds sink's second look at `end_now`; returns the effects.
fn survey(m: &mut ResetMachine, end_now: i64) -> Vec<Effect> {
    m.handle(Input::Inspected { group: middle(), result: Ok(seen(60, 60)) }, T0);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0);
    assert!(drain(m).is_empty(), "nothing moves after the first look");
    let due = T0.after(DEFAULT_SETTLE);
    assert_eq!(m.poll_timeout(), Some(due), "the second look comes the settle delay later");
    m.handle(Input::Tick, Timestamp(due.0 - 1));
    assert!(drain(m).is_empty());
    m.handle(Input::Tick, due);
    assert_eq!(inspections(&drain(m)), inspected(&sink()), "only the group at the end is looked at again");
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, end_now)) }, due);
    drain(m)
}

/// Carries each fenced group through its commit, read-back and settle; returns the effects.
fn land(m: &mut ResetMachine, groups: &[GroupId], at: Timestamp) -> Vec<Effect> {
    let mut all = Vec::new();
    for g in groups {
        m.handle(Input::Fenced { group: g.clone(), result: Ok(()) }, at);
    }
    let e = drain(m);
    for effect in &e {
        if let Effect::CommitOffsets { target, offsets, .. } = effect {
            let read = offsets.iter().map(|(p, o)| (*p, Some(*o))).collect();
            m.handle(Input::ReadBack { group: target.group.clone(), result: Ok(read) }, at);
        }
    }
    all.extend(e);
    m.handle(Input::Tick, at.after(DEFAULT_SETTLE));
    let reads = drain(m);
    for effect in &reads {
        if let Effect::ReadCommitted(target) = effect {
            let committed: &BTreeMap<i32, i64> = all
                .iter()
                .find_map(|e| match e {
                    Effect::CommitOffsets { target: t, offsets, .. } if t.group == target.group => Some(offsets),
                    _ => None,
                })
                .expect("a commit of the group");
            let marker = reset_marker(ID);
            let held =
                committed.iter().map(|(p, o)| (*p, Some(Position { offset: *o, metadata: marker.clone() }))).collect();
            m.handle(Input::Read { group: target.group.clone(), result: Ok(held) }, at.after(DEFAULT_SETTLE));
        }
    }
    all.extend(reads);
    all.extend(drain(m));
    all
}

#[test]
fn from_middle_waits_for_both_surveys_then_replays_middle_and_puts_sink_at_the_end() {
    let mut m = ResetMachine::new(from_middle(), None, vec![]);
    let pods = BTreeMap::from([("sink".to_string(), 1), ("source".to_string(), 1)]);
    m.handle(Input::Observed { spec: chain(), pods }, T0);
    assert_eq!(
        notes(&drain(&mut m)),
        ["ResetRefused: reset 1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71 waits: sink still has 1 pod(s)"]
    );
    assert_eq!(m.status().phase, RequestPhase::Waiting, "source runs, and is no target");

    let mut m = surveying(from_middle());
    let e = survey(&mut m, 60);
    assert_eq!(fences(&e), [middle(), sink()], "both move once the end of 'chain.cooked' held still");

    let e = land(&mut m, &[middle(), sink()], T0.after(DEFAULT_SETTLE));
    let intents: BTreeMap<GroupId, Intent> = e
        .iter()
        .filter_map(|e| match e {
            Effect::PersistIntent { group, intent, .. } => Some((group.clone(), intent.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(intents[&middle()].target, BTreeMap::from([(0, 0), (1, 0)]), "middle reads 'chain.raw' again");
    assert_eq!(intents[&middle()].records_to_reprocess, 120);
    assert_eq!(intents[&sink()].target, BTreeMap::from([(0, 60), (1, 60)]), "sink goes to the end of 'chain.cooked'");
    assert_eq!((intents[&sink()].records_to_reprocess, intents[&sink()].records_to_skip), (0, 60));
    assert_eq!(
        notes(&e),
        [
            "ResetOffsets: chain.middle.in: 2 partition(s) of 'chain.raw' to earliest",
            "ResetOffsets: chain.sink.in: 2 partition(s) of 'chain.cooked' to the end (it reads only what middle writes \
             again); 60 record(s) written before the rebuild are skipped",
        ]
    );
    assert!(e.iter().any(|e| matches!(e, Effect::WriteDone { id } if id == ID)));
    let status = m.status();
    assert_eq!(status.to, None, "the request goes to the earliest offsets");
    assert_eq!(status.groups[0].to, None);
    assert_eq!(status.groups[1].to.as_deref(), Some("the end (it reads only what middle writes again)"));
    assert_eq!(status.groups[1].records_to_skip, 60);
    assert_eq!(status.groups[1].outcome, GroupStage::Reset);
}

#[test]
fn a_topic_that_grows_while_its_writers_are_stopped_refuses_the_rebuild_and_moves_nothing() {
    let mut m = surveying(from_middle());
    let e = survey(&mut m, 63);
    assert!(fences(&e).is_empty(), "nothing is fenced: {e:?}");
    assert_eq!(
        notes(&e),
        [format!(
            "ResetRefused: reset {ID} refused, nothing was reset: topic 'chain.cooked' grew while every streamlet of the \
             pipeline that writes it was stopped (partition 0 from 60 to 63, partition 1 from 60 to 63): something \
             outside the pipeline writes it, and chain.sink.in put at its end would skip what it writes until the \
             streamlets start; stop it and request again"
        )]
    );
    assert!(matches!(e.last(), Some(Effect::WriteDone { id }) if id == ID));
    assert_eq!(m.status().phase, RequestPhase::Refused);
    assert!(m.status().groups.is_empty());
}

#[test]
fn a_group_that_cannot_be_looked_at_refuses_the_rebuild() {
    let mut m = surveying(from_middle());
    m.handle(Input::Inspected { group: middle(), result: Ok(seen(60, 60)) }, T0);
    let gone = KafkaFailure::unknown_topic("topic 'chain.cooked' does not exist");
    m.handle(Input::Inspected { group: sink(), result: Err(gone) }, T0);
    let e = drain(&mut m);
    assert!(fences(&e).is_empty());
    assert_eq!(
        notes(&e),
        [format!(
            "ResetRefused: reset {ID} refused, nothing was reset: chain.sink.in could not be looked at: topic \
             'chain.cooked' does not exist"
        )]
    );
    // A transient failure is retried, as in any reset: the survey waits for it.
    let mut m = surveying(from_middle());
    m.handle(Input::Inspected { group: sink(), result: Err(KafkaFailure::unreachable("timed out")) }, T0);
    assert!(drain(&mut m).is_empty());
    assert!(m.poll_timeout().is_some_and(|t| t > T0));
}

#[test]
fn without_a_settle_delay_the_end_is_looked_at_once() {
    let mut m = ResetMachine::new(from_middle(), None, vec![]).with_settle(Duration::ZERO);
    m.handle(stopped(), T0);
    drain(&mut m);
    m.handle(Input::Inspected { group: middle(), result: Ok(seen(60, 60)) }, T0);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0);
    assert_eq!(fences(&drain(&mut m)), [middle(), sink()]);
}

#[test]
fn a_rebuild_that_moved_a_group_already_does_not_survey_again() {
    let reset = Intent::new(BTreeMap::from([(0, Some(60)), (1, Some(60))]), BTreeMap::from([(0, 0), (1, 0)]), 120)
        .into_reset("chain.raw", vec![]);
    let progress = GroupProgress { group: middle(), intent: None, outcome: Some(reset) };
    let mut m = ResetMachine::new(from_middle(), None, vec![progress]);
    m.handle(stopped(), T0);
    let e = drain(&mut m);
    assert_eq!(inspections(&e), [sink()], "middle finished before the restart");
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0);
    let e = drain(&mut m);
    assert_eq!(fences(&e), [sink()], "its end is taken at once: middle is still stopped");
}

#[test]
fn a_rebuild_from_middle_to_a_time_moves_only_middle_to_it() {
    let request = ResetRequest { to: Some(To::Datetime("2026-11-29T16:00:00Z".into())), ..from_middle() };
    let mut m = surveying(request);
    let mut at = seen(60, 60);
    at.at_time = BTreeMap::from([(0, Some(40)), (1, None)]);
    m.handle(Input::Inspected { group: middle(), result: Ok(at) }, T0);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0);
    m.handle(Input::Tick, T0.after(DEFAULT_SETTLE));
    drain(&mut m);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0.after(DEFAULT_SETTLE));
    let e = land(&mut m, &[middle(), sink()], T0.after(DEFAULT_SETTLE));
    let n = notes(&e);
    assert!(
        n[0].starts_with("ResetOffsets: chain.middle.in: 2 partition(s) of 'chain.raw' to 2026-11-29T16:00:00Z"),
        "{n:?}"
    );
    assert!(
        n.iter().any(|n| n.starts_with("ResetOffsets: chain.sink.in: 2 partition(s) of 'chain.cooked' to the end"))
    );
    assert_eq!(m.status().to.as_deref(), Some("2026-11-29T16:00:00Z"));
}

fn plan_of(groups: &[(GroupId, i64, i64)]) -> ResetRequest {
    let groups = groups
        .iter()
        .map(|(g, expected, new)| {
            (g.to_string(), BTreeMap::from([(0, (Some(*expected), *new)), (1, (Some(*expected), *new))]))
        })
        .collect();
    ResetRequest { to: Some(To::Plan(PlanOffsets { id: PLAN.into(), groups })), ..from_middle() }
}

#[test]
fn a_plan_of_the_rebuild_is_carried_out_while_it_holds_and_refused_whole_when_not() {
    let planned = plan_of(&[(middle(), 60, 0), (sink(), 30, 60)]);
    let mut m = surveying(planned.clone());
    assert_eq!(fences(&survey(&mut m, 60)), [middle(), sink()]);

    // The end moved since the plan (the streamlets ran between the plan and the rebuild).
    let mut m = surveying(planned);
    m.handle(Input::Inspected { group: middle(), result: Ok(seen(60, 60)) }, T0);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 65)) }, T0);
    m.handle(Input::Tick, T0.after(DEFAULT_SETTLE));
    drain(&mut m);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 65)) }, T0.after(DEFAULT_SETTLE));
    let e = drain(&mut m);
    assert!(fences(&e).is_empty());
    assert_eq!(
        notes(&e),
        [format!(
            "ResetRefused: reset {ID} refused, nothing was reset: chain.sink.in: plan {PLAN} put it at the end of \
             'chain.cooked' as it was then (partition 0 at 60, now 65, partition 1 at 60, now 65): streamlets wrote to \
             it since (make a new plan once they are stopped)"
        )]
    );

    // A committed offset moved since: the whole request is refused, not just that group.
    let mut m = surveying(plan_of(&[(middle(), 50, 0), (sink(), 30, 60)]));
    let e = survey(&mut m, 60);
    assert!(fences(&e).is_empty());
    assert!(notes(&e)[0].contains("chain.middle.in: its committed offsets moved since plan"), "{:?}", notes(&e));

    // A plan that does not move every group of the rebuild is not its plan.
    let mut m = ResetMachine::new(plan_of(&[(middle(), 60, 0)]), None, vec![]);
    m.handle(stopped(), T0);
    assert_eq!(
        notes(&drain(&mut m)),
        [format!(
            "ResetRefused: reset {ID} refused, nothing was reset: plan {PLAN} is not a plan of a rebuild from middle: \
             it has no offsets for chain.sink.in; make a new plan with flow rebuild --from middle --dry-run"
        )]
    );
}

#[test]
fn the_plan_of_a_rebuild_shows_where_each_group_goes_and_what_it_skips() {
    let request = ResetRequest { dry_run: true, ..from_middle() };
    let mut m = ResetMachine::new(request, None, vec![]);
    let pods = BTreeMap::from([("middle".to_string(), 1), ("sink".to_string(), 1)]);
    m.handle(Input::Observed { spec: chain(), pods }, T0);
    assert_eq!(inspections(&drain(&mut m)), [middle(), sink()], "a plan stops nothing and surveys nothing");
    m.handle(Input::Inspected { group: middle(), result: Ok(seen(60, 60)) }, T0);
    m.handle(Input::Inspected { group: sink(), result: Ok(seen(30, 60)) }, T0);
    let e = drain(&mut m);
    assert!(fences(&e).is_empty());
    assert_eq!(
        notes(&e)[..2],
        [
            "ResetPlanned: chain.middle.in: would move 2 partition(s) of 'chain.raw' to earliest, 120 record(s) to \
             reprocess",
            "ResetPlanned: chain.sink.in: would move 2 partition(s) of 'chain.cooked' to the end (it reads only what \
             middle writes again), 0 record(s) to reprocess, 60 to skip; 1 warning(s)",
        ]
    );
    let status = m.status();
    let sink_status = &status.groups[1];
    assert_eq!(sink_status.records_to_skip, 60);
    assert_eq!(sink_status.offsets_after, BTreeMap::from([("0".into(), 60), ("1".into(), 60)]));
    assert_eq!(
        sink_status.warnings,
        ["middle still runs and writes 'chain.cooked': the rebuild takes its end once they have stopped, so it skips \
          what they write until then too, and more records than planned"]
    );
}

#[test]
fn a_refused_closure_is_refused_by_the_operator_too() {
    let request = ResetRequest { from: vec!["nope".into()], ..from_middle() };
    let mut m = ResetMachine::new(request, None, vec![]);
    m.handle(stopped(), T0);
    let e = drain(&mut m);
    assert_eq!(
        notes(&e),
        [format!("ResetRefused: reset {ID} refused, nothing was reset: a rebuild from nope: no streamlet nope")]
    );
    assert!(matches!(e.last(), Some(Effect::WriteDone { .. })));
}
