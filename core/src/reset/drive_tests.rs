//! The intake and the drive: the exact work handed out, then that nothing else is.

use std::collections::BTreeMap;

use super::*;
use crate::events::Event;
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::{AnkkaFlowSpec, GroupStage, RequestPhase, ResetHistoryEntry, ResetStatus};
use crate::targets::tests::cart;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const OLD: &str = "0e5b1c2a-1111-4222-8333-444455556666";
const T0: Timestamp = Timestamp(1_764_433_300_000);
/// The uid of the object the tests' requests run on, and of another object of the same name.
const UID: &str = "5f0c1e2a-0000-4000-8000-00000000cafe";
const EARLIER: &str = "0d1e2f3a-0000-4000-8000-0000000dead0";

fn annotation(names: &[&str]) -> String {
    ResetRequest::new(ID, names.iter().map(|s| s.to_string()).collect()).to_annotation()
}

fn router() -> GroupId {
    GroupId::new("cart", "router", "in")
}

fn sink() -> GroupId {
    GroupId::new("cart", "sink", "in")
}

fn stopped_both() -> AnkkaFlowSpec {
    let mut spec = cart(0);
    for s in &mut spec.streamlets {
        s.replicas = if s.inlets.is_empty() { s.replicas } else { 0 };
    }
    spec
}

fn fresh<'a>(request: Option<&'a str>, reset: Option<&'a ResetStatus>, history: &'a [ResetHistoryEntry]) -> Fresh<'a> {
    Fresh { uid: UID, request, done: None, reset, history, ..Default::default() }
}

fn admitted(text: &str) -> Admitted {
    match intake(&fresh(Some(text), None, &[]), T0) {
        Intake::Admitted(a) => a,
        other => panic!("admitted, not {other:?}"),
    }
}

/// A drive of `names` over a resource whose targets are stopped, with `concurrency`.
fn drive(names: &[&str], concurrency: usize) -> Drive {
    let options = DriveOptions { concurrency, ..DriveOptions::default() };
    let Started::Drive(mut d) = admitted(&annotation(names)).start(Some(vec![]), options, T0) else {
        panic!("a drive")
    };
    d.observe(stopped_both(), BTreeMap::new(), T0);
    *d
}

fn work(d: &mut Drive) -> Vec<Work> {
    std::iter::from_fn(|| d.poll_work(T0)).collect()
}

fn empty_group() -> Inspection {
    Inspection {
        state: "Empty".into(),
        members: 0,
        log_start: BTreeMap::from([(0, 0), (1, 0)]),
        committed: BTreeMap::from([(0, Some(5)), (1, None)]),
        high_watermark: BTreeMap::from([(0, 10), (1, 10)]),
        at_time: BTreeMap::new(),
        topic_configs: BTreeMap::new(),
        member_names: vec![],
    }
}

fn landed() -> Positions {
    BTreeMap::from([
        (0, Some(Position { offset: 0, metadata: reset_marker(ID) })),
        (1, Some(Position { offset: 0, metadata: reset_marker(ID) })),
    ])
}

fn kafka(w: &Work) -> Option<&KafkaCall> {
    match w {
        Work::Kafka(c) => Some(c),
        _ => None,
    }
}

#[test]
fn no_annotation_is_idle_and_a_malformed_one_is_refused_once() {
    assert!(matches!(intake(&fresh(None, None, &[]), T0), Intake::Idle));
    let previous = ResetStatus { id: OLD.into(), phase: RequestPhase::Done, ..Default::default() };
    let Intake::Answered(a) = intake(&fresh(Some("not json"), Some(&previous), &[]), T0) else { panic!() };
    assert_eq!((a.reset.id.as_str(), a.reset.phase), ("", RequestPhase::Refused));
    assert!(a.reset.detail.starts_with("it is not a reset request"), "{:?}", a.reset);
    assert_eq!(a.history, [ResetHistoryEntry { id: OLD.into(), phase: RequestPhase::Done, dry_run: false }]);
    assert_eq!(a.events.len(), 1);
    assert_eq!((a.events[0].reason.as_str(), a.events[0].key.as_str()), ("ResetRefused", "malformed/not json"));
    let note = &a.events[0].note;
    let expected = format!(
        "reset request refused, nothing was reset: the annotation {}: {}; write a new request with flow reset",
        crate::names::ANNOTATION_RESET,
        a.reset.detail
    );
    assert_eq!(note, &expected, "the annotation's name, a colon, then why");
}

#[test]
fn a_new_request_supersedes_an_unfinished_one_and_a_done_one_is_kept_as_it_is() {
    let waiting = ResetStatus { id: OLD.into(), phase: RequestPhase::Waiting, ..Default::default() };
    let text = annotation(&["router"]);
    let Intake::Admitted(a) = intake(&fresh(Some(&text), Some(&waiting), &[]), T0) else { panic!() };
    let Started::Drive(mut d) = a.start(None, DriveOptions::default(), T0) else { panic!() };
    assert_eq!(d.history(), [ResetHistoryEntry { id: OLD.into(), phase: RequestPhase::Superseded, dry_run: false }]);
    d.observe(stopped_both(), BTreeMap::new(), T0);
    let w = work(&mut d);
    assert!(matches!(&w[0], Work::Record(e) if e.reason == "ResetSuperseded"), "the event goes first: {w:?}");
    assert!(matches!(&w[1..], [Work::Kafka(KafkaCall::Inspect(t))] if t.group == router()), "{w:?}");

    let done = ResetStatus {
        id: ID.into(),
        phase: RequestPhase::Done,
        requested_at: Some("then".into()),
        ..Default::default()
    };
    let f = Fresh {
        uid: UID,
        request: Some(&text),
        done: Some(ID),
        reset: Some(&done),
        history: &[],
        ..Default::default()
    };
    let Intake::Answered(a) = intake(&f, T0) else { panic!() };
    assert_eq!(a.reset, done);
    assert!(a.events.is_empty());
}

#[test]
fn the_time_written_is_the_api_servers_as_first_seen_and_the_time_taken_up_the_operators() {
    let text = annotation(&["router"]);
    let written = "2026-11-29T16:21:40Z";
    let f = Fresh { written: Some(written), ..fresh(Some(&text), None, &[]) };
    let Intake::Admitted(a) = intake(&f, T0) else { panic!() };
    let Started::Drive(mut d) = a.start(Some(vec![]), DriveOptions::default(), T0) else { panic!() };
    let status = d.status(T0);
    assert_eq!((status.written_at.as_deref(), status.requested_at.clone()), (Some(written), Some(T0.rfc3339())));
    // A later reconcile reads another time (the writer changed another field since): the status
    // keeps the first, as it keeps the time taken up.
    let later = Timestamp(T0.0 + 5_000);
    let f = Fresh { written: Some("2026-11-29T17:00:00Z"), ..fresh(Some(&text), Some(&status), &[]) };
    let Intake::Admitted(a) = intake(&f, later) else { panic!() };
    let Started::Drive(mut d) = a.start(Some(vec![]), DriveOptions::default(), later) else { panic!() };
    let again = d.status(later);
    assert_eq!((again.written_at.as_deref(), again.requested_at), (Some(written), Some(T0.rfc3339())));
    // An API server that does not say: none shown.
    let Intake::Admitted(a) = intake(&fresh(Some(&text), None, &[]), T0) else { panic!() };
    let Started::Drive(mut d) = a.start(Some(vec![]), DriveOptions::default(), T0) else { panic!() };
    assert_eq!(d.status(T0).written_at, None);
}

#[test]
fn a_request_done_by_its_progress_is_answered_without_kafka() {
    let outcome = GroupOutcome::Failed { topic: "shop.cart-events.v1".into(), reason: "r".into() };
    let progress = vec![LedgerEntry::of(UID, GroupProgress { group: router(), intent: None, outcome: Some(outcome) })];
    let text = annotation(&["router"]);
    let f = Fresh { uid: UID, request: Some(&text), done: Some(ID), reset: None, history: &[], ..Default::default() };
    let Intake::Admitted(a) = intake(&f, T0) else { panic!() };
    let Started::Answered(a) = a.start(Some(progress), DriveOptions::default(), T0) else { panic!() };
    assert_eq!(a.reset.phase, RequestPhase::Done);
    assert_eq!(a.reset.groups[0].outcome, GroupStage::Failed);
    assert_eq!(a.reset.requested_at, Some(T0.rfc3339()));
    assert_eq!(a.reset.finished_at, Some(T0.rfc3339()));
}

#[test]
fn the_commit_waits_for_its_intent_and_the_event_for_its_outcome() {
    let mut d = drive(&["router"], 16);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Inspect(t))] if t.group == router()), "{w:?}");
    assert_eq!(d.in_flight(), 1);
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Fence { offsets, .. })] if *offsets == BTreeMap::from([(0, 5)])));
    d.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    // The intent goes to the ledger and the status; the commit is held until they are durable.
    let w = work(&mut d);
    let [Work::Persist(p)] = &w[..] else { panic!("only the persist: {w:?}") };
    assert!(p.carries_intent() && !p.carries_outcome());
    assert_eq!(p.reset.groups[0].outcome, GroupStage::Committing);
    assert!(work(&mut d).is_empty(), "nothing while the intent is being written");
    d.persisted(p.token);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Commit { metadata, .. })] if *metadata == reset_marker(ID)));
    d.handle(Input::ReadBack { group: router(), result: Ok(BTreeMap::from([(0, Some(0)), (1, Some(0))])) }, T0);
    // Nothing in flight: the settle is a sleep, shown in the status first.
    let w = work(&mut d);
    assert!(
        matches!(&w[..], [Work::Persist(p)] if p.writes.is_empty() && p.reset.groups[0].outcome == GroupStage::Verifying)
    );
    let Work::Persist(p) = &w[0] else { unreachable!() };
    d.persisted(p.token);
    assert!(work(&mut d).is_empty());
    let due = T0.after(DEFAULT_SETTLE);
    assert_eq!(d.idle(), Idle::Sleep(due));
    d.tick(due);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Read(_))]));
    d.handle(Input::Read { group: router(), result: Ok(landed()) }, due);
    let w = work(&mut d);
    let [Work::Persist(p)] = &w[..] else { panic!("the outcome first, alone: {w:?}") };
    assert!(p.carries_outcome());
    // Every group finished, but the done annotation is not written yet: the status says so.
    assert_eq!((p.reset.phase, p.reset.groups[0].outcome), (RequestPhase::Resetting, GroupStage::Reset));
    assert_eq!(p.reset.finished_at, None);
    assert!(work(&mut d).is_empty(), "the event waits for the outcome");
    d.persisted(p.token);
    let w = work(&mut d);
    assert!(
        matches!(&w[..], [Work::Record(e), Work::WriteDone(id)] if e.reason == "ResetOffsets" && id == ID),
        "{w:?}"
    );
    assert_eq!(d.in_flight(), 0);
    assert_eq!(d.idle(), Idle::Done);
    assert!(d.outcomes().is_some());
    // What the driver writes after the done write.
    assert_eq!(d.status(due).phase, RequestPhase::Done);
}

#[test]
fn a_streamlet_stopped_long_before_is_reset_at_its_read_back_with_no_sleep_and_no_other_read() {
    let options = DriveOptions::default();
    let Started::Drive(mut d) = admitted(&annotation(&["router"])).start(Some(vec![]), options, T0) else {
        panic!("a drive")
    };
    d.seen_stopped(BTreeMap::from([("router".to_string(), Timestamp(T0.0 - 10_000))]));
    d.observe(stopped_both(), BTreeMap::new(), T0);
    assert!(matches!(&work(&mut d)[..], [Work::Kafka(KafkaCall::Inspect(_))]));
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    assert!(matches!(&work(&mut d)[..], [Work::Kafka(KafkaCall::Fence { .. })]));
    d.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    let w = work(&mut d);
    let [Work::Persist(p)] = &w[..] else { panic!("{w:?}") };
    d.persisted(p.token);
    assert!(matches!(&work(&mut d)[..], [Work::Kafka(KafkaCall::Commit { .. })]));
    d.handle(Input::ReadBack { group: router(), result: Ok(BTreeMap::from([(0, Some(0)), (1, Some(0))])) }, T0);
    // The outcome at once: no sleep, no status write of a wait, no read after the read-back.
    let w = work(&mut d);
    let [Work::Persist(p)] = &w[..] else { panic!("the outcome: {w:?}") };
    assert!(p.carries_outcome());
    d.persisted(p.token);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Record(e), Work::WriteDone(_)] if e.reason == "ResetOffsets"), "{w:?}");
    assert_eq!(d.idle(), Idle::Done);
}

/// A drive of both groups, inspected and with both fences handed out.
fn fencing_both() -> Drive {
    let mut d = drive(&[], 16);
    let w = work(&mut d);
    assert_eq!(w.iter().filter_map(kafka).count(), 2, "both groups are inspected at once: {w:?}");
    for g in [router(), sink()] {
        d.handle(Input::Inspected { group: g.clone(), result: Ok(empty_group()) }, T0);
    }
    assert_eq!(work(&mut d).len(), 2, "both fences");
    d
}

#[test]
fn an_intent_waits_for_the_kafka_calls_under_way_and_shares_their_write() {
    let mut d = fencing_both();
    d.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    assert!(work(&mut d).is_empty(), "router's intent waits for sink's fence, still under way");
    assert_eq!(d.poll_timeout(), Some(T0.after(GATHER)), "for at most the gather");
    d.handle(Input::Fenced { group: sink(), result: Ok(()) }, T0);
    let w = work(&mut d);
    let [Work::Persist(both)] = &w[..] else { panic!("one write for both intents: {w:?}") };
    assert!(
        matches!(&both.writes[..], [ProgressWrite::Intent(a, _), ProgressWrite::Intent(b, _)] if *a == router() && *b == sink())
    );
    assert_eq!(d.poll_timeout(), None, "no gather any more");
    d.persisted(both.token);
    let w = work(&mut d);
    assert_eq!(w.iter().filter(|w| matches!(w, Work::Kafka(KafkaCall::Commit { .. }))).count(), 2, "{w:?}");
}

#[test]
fn a_gather_ends_at_its_deadline_and_intents_emitted_while_a_write_is_under_way_share_the_next_write() {
    let mut d = fencing_both();
    d.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    assert!(work(&mut d).is_empty());
    let late = T0.after(GATHER);
    let w: Vec<Work> = std::iter::from_fn(|| d.poll_work(late)).collect();
    let [Work::Persist(first)] = &w[..] else { panic!("router's intent alone once the gather is over: {w:?}") };
    assert_eq!(first.writes.len(), 1);
    d.handle(Input::Fenced { group: sink(), result: Ok(()) }, late);
    assert!(work(&mut d).is_empty(), "sink's intent waits for the write under way");
    assert_eq!(d.poll_timeout(), None, "the write's end wakes the driver: no tick is due meanwhile");
    d.persisted(first.token);
    let w = work(&mut d);
    // Router's commit may go; sink's intent goes in the next write, its commit after it.
    let [Work::Persist(second), Work::Kafka(KafkaCall::Commit { target, .. })] = &w[..] else { panic!("{w:?}") };
    assert_eq!(target.group, router());
    assert!(matches!(&second.writes[..], [ProgressWrite::Intent(g, _)] if *g == sink()));
    d.persisted(second.token);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Commit { target, .. })] if target.group == sink()));
}

#[test]
fn kafka_calls_stay_within_the_concurrency_and_groups_under_way_go_first() {
    let mut d = drive(&[], 1);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Inspect(t))] if t.group == router()), "one at a time: {w:?}");
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Kafka(KafkaCall::Fence { target, .. })] if target.group == router()), "{w:?}");
}

#[test]
fn an_abandoned_drive_hands_out_nothing_and_counts_down_what_is_in_flight() {
    let mut d = drive(&[], 16);
    assert_eq!(work(&mut d).len(), 2);
    d.abandon();
    assert_eq!(d.in_flight(), 2);
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    assert!(work(&mut d).is_empty(), "a result of an abandoned drive starts nothing");
    d.call_lost();
    assert_eq!(d.in_flight(), 0);
    assert_eq!(d.idle(), Idle::Abandoned);
}

#[test]
fn work_refused_before_it_started_is_not_in_flight() {
    let mut d = drive(&["router"], 16);
    let w = work(&mut d);
    assert!(!w[0].acts(), "an inspection only looks");
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    let w = work(&mut d);
    let [fence @ Work::Kafka(KafkaCall::Fence { .. })] = &w[..] else { panic!("{w:?}") };
    assert!(fence.acts());
    assert_eq!(d.in_flight(), 1);
    // The driver may not act any more: the fence is never started, and nothing waits for it.
    d.not_started(fence);
    d.abandon();
    assert_eq!(d.in_flight(), 0);
    assert_eq!(d.idle(), Idle::Abandoned);

    // A persist refused the same way leaves nothing durable and nothing in flight.
    let mut d = drive(&["router"], 16);
    work(&mut d);
    d.handle(Input::Inspected { group: router(), result: Ok(empty_group()) }, T0);
    work(&mut d);
    d.handle(Input::Fenced { group: router(), result: Ok(()) }, T0);
    let w = work(&mut d);
    let [persist @ Work::Persist(_)] = &w[..] else { panic!("{w:?}") };
    assert!(persist.acts());
    assert_eq!(d.in_flight(), 1);
    d.not_started(persist);
    d.abandon();
    assert_eq!(d.in_flight(), 0);
    assert!(work(&mut d).is_empty(), "the commit that waited for it never goes");
}

#[test]
fn a_group_waiting_for_its_retry_is_shown_once() {
    let mut d = drive(&["router"], 16);
    work(&mut d);
    let f = KafkaFailure::unreachable("Local: Timed out");
    d.handle(Input::Inspected { group: router(), result: Err(f) }, T0);
    let w = work(&mut d);
    let [Work::Persist(p)] = &w[..] else { panic!("{w:?}") };
    assert_eq!(p.reset.groups[0].message, "Local: Timed out");
    d.persisted(p.token);
    assert!(work(&mut d).is_empty(), "shown once");
    assert_eq!(d.idle(), Idle::Sleep(T0.after(backoff(1))));
}

#[test]
fn a_waiting_request_records_why_and_goes_back_to_the_controller() {
    let Started::Drive(mut d) = admitted(&annotation(&["router"])).start(None, DriveOptions::default(), T0) else {
        panic!()
    };
    d.observe(cart(1), BTreeMap::from([("router".into(), 1)]), T0);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::Record(Event { reason, .. })] if reason == "ResetRefused"), "{w:?}");
    assert_eq!(d.idle(), Idle::Waiting(T0.after(WAIT_RECHECK)));
    assert_eq!(d.status(T0).phase, RequestPhase::Waiting);
}

/// Router's progress once reset.
fn reset_router() -> GroupProgress {
    let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
    GroupProgress { group: router(), intent: None, outcome: Some(intent.into_reset("shop.cart-events.v1", vec![])) }
}

#[test]
fn a_request_taken_up_for_an_earlier_object_of_the_name_is_refused_and_marked_done() {
    // The ledger holds the request's progress for an object deleted since; this one has the same
    // name and the same request annotation.
    let entries = vec![LedgerEntry::of(EARLIER, reset_router())];
    let a = admitted(&annotation(&["router"]));
    let Started::Answered(a) = a.start(Some(entries), DriveOptions::default(), T0) else {
        panic!("answered without Kafka")
    };
    assert_eq!(a.reset.phase, RequestPhase::Refused);
    assert_eq!(a.reset.uid.as_deref(), Some(UID));
    assert!(a.reset.groups.is_empty(), "nothing of the other object's progress is taken: {:?}", a.reset);
    assert!(a.reset.detail.contains(EARLIER), "{}", a.reset.detail);
    assert_eq!(a.done.as_deref(), Some(ID), "marked done, so it is never carried out for this object");
    let [e] = &a.events[..] else { panic!("{:?}", a.events) };
    assert_eq!((e.reason.as_str(), e.key.as_str()), ("ResetRefused", format!("{ID}/refused").as_str()));
    assert!(e.note.starts_with(&format!("reset {ID} refused: it was taken up for an earlier AnkkaFlow")), "{}", e.note);
}

#[test]
fn entries_of_this_object_and_entries_from_before_the_uid_are_its_own() {
    for uid in [Some(UID.to_string()), None] {
        let entries = vec![LedgerEntry { uid, progress: reset_router() }];
        let text = annotation(&["router"]);
        let f =
            Fresh { uid: UID, request: Some(&text), done: Some(ID), reset: None, history: &[], ..Default::default() };
        let Intake::Admitted(a) = intake(&f, T0) else { panic!() };
        let Started::Answered(a) = a.start(Some(entries), DriveOptions::default(), T0) else { panic!() };
        assert_eq!(a.reset.phase, RequestPhase::Done);
        assert_eq!(a.reset.groups[0].outcome, GroupStage::Reset, "its progress is merged as before");
        assert_eq!(a.done, None);
    }
}

#[test]
fn a_status_of_the_request_for_another_object_is_never_merged() {
    let text = annotation(&["router"]);
    // Restored with the status of the object it replaces, which had reset the group.
    let mut m = ResetMachine::new(ResetRequest::new(ID, vec!["router".into()]), None, vec![reset_router()]);
    m.handle(Input::Observed { spec: stopped_both(), pods: BTreeMap::new() }, T0);
    let theirs = ResetStatus { uid: Some(EARLIER.into()), ..m.status() };
    assert!(!progress_from_status(&theirs).is_empty());
    let Intake::Answered(a) = intake(&fresh(Some(&text), Some(&theirs), &[]), T0) else { panic!("refused") };
    assert_eq!((a.reset.phase, a.done.as_deref()), (RequestPhase::Refused, Some(ID)));
    // A status of it for another object without progress (it only waited there) is no reason to
    // refuse, and stands for nothing: the request runs from the start.
    let waited = ResetStatus {
        id: ID.into(),
        uid: Some(EARLIER.into()),
        phase: RequestPhase::Waiting,
        requested_at: Some("then".into()),
        ..Default::default()
    };
    let Intake::Admitted(a) = intake(&fresh(Some(&text), Some(&waited), &[]), T0) else { panic!("admitted") };
    let Started::Drive(mut d) = a.start(Some(vec![]), DriveOptions::default(), T0) else { panic!() };
    d.observe(stopped_both(), BTreeMap::new(), T0);
    let status = d.status(T0);
    assert_eq!(status.uid.as_deref(), Some(UID), "the status names the object it runs for");
    assert_eq!(status.requested_at, Some(T0.rfc3339()), "nothing of the other object's status is kept");
}

#[test]
fn a_refused_request_shows_its_refusal_before_the_done_write() {
    // A name the pipeline does not have: refused, and marked done so it never runs.
    let Started::Drive(mut d) = admitted(&annotation(&["nope"])).start(None, DriveOptions::default(), T0) else {
        panic!()
    };
    d.observe(cart(0), BTreeMap::new(), T0);
    let w = work(&mut d);
    let [Work::Persist(p), Work::Record(e)] = &w[..] else { panic!("the status and the event: {w:?}") };
    assert_eq!(e.reason, "ResetRefused");
    assert_eq!((p.reset.id.as_str(), p.reset.phase), (ID, RequestPhase::Refused));
    assert!(p.reset.detail.contains("nope"), "{}", p.reset.detail);
    assert!(p.writes.is_empty(), "nothing of the request's progress: {:?}", p.writes);
    // The done annotation reads as done: it waits until the refusal is durable.
    assert!(work(&mut d).is_empty(), "no done write before the status is durable");
    d.persisted(p.token);
    let w = work(&mut d);
    assert!(matches!(&w[..], [Work::WriteDone(id)] if id == ID), "{w:?}");
    assert_eq!(d.idle(), Idle::Done);
}

/// [`DriveOptions`] whose requests need approval.
fn needing_approval() -> DriveOptions {
    DriveOptions { approval: ApprovalPolicy { required: true, ..Default::default() }, ..DriveOptions::default() }
}

/// Intake and start of request `text` with governance annotations `requested_by`, `decision`,
/// `decided_by`, and durable progress `progress`.
fn gated(
    text: &str,
    decision: Option<&str>,
    decided_by: Option<&str>,
    progress: Vec<LedgerEntry>,
    now: Timestamp,
) -> Started {
    let f = Fresh {
        uid: UID,
        request: Some(text),
        requested_by: Some("alice"),
        decision,
        decided_by,
        ..Default::default()
    };
    let Intake::Admitted(a) = intake(&f, now) else { panic!("admitted") };
    a.start(Some(progress), needing_approval(), now)
}

#[test]
fn a_request_awaiting_approval_touches_nothing_and_says_who_asked() {
    let text = annotation(&["router"]);
    let Started::Answered(a) = gated(&text, None, None, vec![], T0) else { panic!("an answer") };
    assert_eq!(a.reset.phase, RequestPhase::AwaitingApproval);
    assert_eq!(a.reset.requested_by.as_deref(), Some("alice"));
    assert_eq!(a.done, None, "it stays open");
    // looked at again when it expires, though nothing changes
    assert_eq!(a.recheck_at, Some(T0.after(needing_approval().approval.timeout)));
    assert_eq!(a.events.len(), 1);
    assert_eq!(
        (a.events[0].reason.as_str(), a.events[0].key.as_str()),
        ("ResetAwaitingApproval", &*format!("{ID}/awaiting"))
    );
    assert_eq!(a.events[0].requested_by.as_deref(), Some("alice"));
}

#[test]
fn a_dry_run_awaiting_approval_is_a_dry_run_in_its_status_and_so_in_the_history() {
    // A policy that does not approve dry runs by itself: the dry run waits, still a dry run.
    let text = format!("{{\"id\":\"{ID}\",\"streamlets\":[\"router\"],\"dryRun\":true}}");
    let mut options = needing_approval();
    options.approval.auto_approve_dry_runs = false;
    let f = Fresh { uid: UID, request: Some(&text), requested_by: Some("alice"), ..Default::default() };
    let Intake::Admitted(a) = intake(&f, T0) else { panic!("admitted") };
    let Started::Answered(a) = a.start(Some(vec![]), options, T0) else { panic!("an answer") };
    assert_eq!((a.reset.phase, a.reset.dry_run), (RequestPhase::AwaitingApproval, true));
    let history = crate::reset::history(&[], Some(&a.reset), "next");
    assert!(history[0].dry_run, "{history:?}");
}

#[test]
fn an_approved_request_runs_and_its_events_name_requester_and_approver() {
    let text = annotation(&["router"]);
    let approved = format!("approved {ID}");
    let Started::Drive(mut d) = gated(&text, Some(&approved), Some("bob"), vec![], T0) else { panic!("a drive") };
    d.observe(stopped_both(), BTreeMap::new(), T0);
    let w = work(&mut d);
    let Work::Record(e) = &w[0] else { panic!("{w:?}") };
    assert_eq!((e.reason.as_str(), e.note.as_str()), ("ResetApproved", &*format!("reset {ID} was approved by bob")));
    assert_eq!(e.requested_by.as_deref(), Some("alice"));
    assert!(matches!(&w[1..], [Work::Kafka(KafkaCall::Inspect(_))]), "{w:?}");
    let status = d.status(T0);
    assert_eq!(status.requested_by.as_deref(), Some("alice"));
    assert_eq!(status.approval.and_then(|a| a.by).as_deref(), Some("bob"));
}

#[test]
fn a_denied_or_expired_request_is_settled_without_kafka() {
    let text = annotation(&["router"]);
    let denied = format!("denied {ID}");
    let Started::Answered(a) = gated(&text, Some(&denied), Some("bob"), vec![], T0) else { panic!() };
    assert_eq!((a.reset.phase, a.done.as_deref()), (RequestPhase::Denied, Some(ID)));
    assert_eq!(a.reset.detail, format!("reset {ID} was denied by bob; nothing was reset"));
    assert!(a.events.iter().any(|e| e.reason == "ResetDenied"), "{:?}", a.events);

    let later = T0.after(crate::reset::DEFAULT_APPROVAL_TIMEOUT);
    let f = Fresh { uid: UID, request: Some(&text), requested_by: Some("alice"), ..Default::default() };
    let first_seen = ResetStatus {
        id: ID.into(),
        phase: RequestPhase::AwaitingApproval,
        requested_at: Some(T0.rfc3339()),
        ..Default::default()
    };
    let f = Fresh { reset: Some(&first_seen), ..f };
    let Intake::Admitted(a) = intake(&f, later) else { panic!() };
    let Started::Answered(a) = a.start(Some(vec![]), needing_approval(), later) else { panic!() };
    assert_eq!((a.reset.phase, a.done.as_deref()), (RequestPhase::Expired, Some(ID)));
    assert!(a.events.iter().any(|e| e.reason == "ResetExpired"), "{:?}", a.events);
}

#[test]
fn a_request_that_started_runs_to_its_end_whatever_is_decided_later() {
    let text = annotation(&["router"]);
    let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
    let progress = vec![LedgerEntry::of(UID, GroupProgress { group: router(), intent: Some(intent), outcome: None })];
    let denied = format!("denied {ID}");
    assert!(matches!(gated(&text, Some(&denied), Some("bob"), progress, T0), Started::Drive(_)));
}

#[test]
fn a_denied_request_stays_denied_once_its_done_annotation_is_written() {
    let text = annotation(&["router"]);
    let denied = ResetStatus { id: ID.into(), phase: RequestPhase::Denied, ..Default::default() };
    let f = Fresh { uid: UID, request: Some(&text), done: Some(ID), reset: Some(&denied), ..Default::default() };
    let Intake::Answered(a) = intake(&f, T0) else { panic!() };
    assert_eq!(a.reset, denied);
}

#[test]
fn while_calls_wait_for_a_slot_an_intent_waits_past_the_gather_to_share_a_larger_write() {
    // Four groups, two slots: archive, audit, router and sink, all reading the cart's topics.
    let mut spec = stopped_both();
    let router = spec.streamlets.iter().find(|s| s.name == "router").cloned().expect("router");
    for name in ["archive", "audit"] {
        spec.streamlets.push(crate::resource::StreamletSpec { name: name.into(), ..router.clone() });
    }
    let options = DriveOptions { concurrency: 2, ..DriveOptions::default() };
    let Started::Drive(mut d) = admitted(&annotation(&[])).start(Some(vec![]), options, T0) else { panic!("a drive") };
    d.observe(spec, BTreeMap::new(), T0);
    let archive = GroupId::new("cart", "archive", "in");
    assert_eq!(work(&mut d).iter().filter_map(kafka).count(), 2, "two inspections, two waiting for a slot");
    d.handle(Input::Inspected { group: archive.clone(), result: Ok(empty_group()) }, T0);
    assert!(matches!(&work(&mut d)[..], [Work::Kafka(KafkaCall::Fence { .. })]), "archive's fence first");
    d.handle(Input::Fenced { group: archive, result: Ok(()) }, T0);
    let w = work(&mut d);
    assert!(
        matches!(&w[..], [Work::Kafka(KafkaCall::Inspect(_))]),
        "the intent waits, the next inspection goes: {w:?}"
    );
    assert_eq!(d.poll_timeout(), Some(T0.after(GATHER_QUEUED)), "for longer than the gather, while calls wait");
    assert!(d.poll_work(T0.after(GATHER)).is_none(), "still waiting once the gather alone is over");
    let w = d.poll_work(T0.after(GATHER_QUEUED));
    assert!(matches!(&w, Some(Work::Persist(p)) if p.carries_intent()), "{w:?}");
}
