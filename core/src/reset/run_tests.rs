//! The run loop: the facts it asks for, in order, and the exact work it hands out for the decisions
//! it owns besides the drive; then that nothing else comes out.

use std::collections::BTreeMap;

use super::*;
use crate::request::ResetRequest;
use crate::resource::{AnkkaFlowSpec, RequestPhase, ResetStatus};
use crate::targets::tests::cart;
use crate::tenancy::Verdict;

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
const OLD: &str = "0e5b1c2a-1111-4222-8333-444455556666";
const T0: Timestamp = Timestamp(1_764_433_300_000);
const UID: &str = "5f0c1e2a-0000-4000-8000-00000000cafe";

fn stopped() -> AnkkaFlowSpec {
    let mut spec = cart(0);
    for s in &mut spec.streamlets {
        s.replicas = if s.inlets.is_empty() { s.replicas } else { 0 };
    }
    spec
}

/// A run of a request of every group, over a status that names `previous`, up to the shared-group
/// verdict: its needs, in order.
fn run_to_shared(previous: Option<&ResetStatus>) -> Run {
    let text = ResetRequest::new(ID, vec![]).to_annotation();
    let fresh = Fresh { uid: UID, request: Some(&text), reset: previous, ..Default::default() };
    let mut run = Run::new(&fresh, stopped(), DriveOptions::default(), T0);
    assert!(run.taken_up());
    assert_eq!(run.poll(T0), Next::Need(Need::Ledger(ID.into())));
    run.handle(Report::Ledger(None), T0);
    assert_eq!(run.poll(T0), Next::Need(Need::Pods));
    run.handle(Report::Pods { pods: BTreeMap::new(), stopped: BTreeMap::new() }, T0);
    let Next::Need(Need::Shared(groups)) = run.poll(T0) else { panic!("the shared-group verdict is asked") };
    assert_eq!(groups.len(), 2);
    run
}

fn start(run: &mut Run) -> Work {
    match run.poll(T0) {
        Next::Start(work) => work,
        other => panic!("work, not {other:?}"),
    }
}

#[test]
fn a_shared_group_refusal_records_why_writes_its_status_then_done_and_calls_no_kafka() {
    let previous = ResetStatus { id: OLD.into(), phase: RequestPhase::Resetting, ..Default::default() };
    let mut run = run_to_shared(Some(&previous));
    run.handle(Report::Shared(Some(Verdict::Refused("shared".into()))), T0);
    let Work::Record(superseded) = start(&mut run) else { panic!("the superseded event first") };
    assert_eq!(
        (superseded.reason.as_str(), superseded.key.as_str()),
        ("ResetSuperseded", &*format!("{OLD}/superseded"))
    );
    let Work::Record(refused) = start(&mut run) else { panic!("the refusal's event") };
    assert_eq!((refused.reason.as_str(), refused.key.as_str()), ("ResetRefused", &*format!("{ID}/refused")));
    let Work::Persist(persist) = start(&mut run) else { panic!("the refusal's status") };
    assert_eq!((persist.reset.id.as_str(), persist.reset.phase), (ID, RequestPhase::Refused));
    assert_eq!(persist.reset.detail, "shared");
    assert!(persist.reset.groups.is_empty() && persist.writes.is_empty());
    // The done write waits for the status.
    assert_eq!(run.poll(T0), Next::Wait(None));
    run.handle(Report::Persisted(persist.token), T0);
    assert_eq!(start(&mut run), Work::WriteDone(ID.into()));
    let Next::Finished(end) = run.poll(T0) else { panic!("finished") };
    assert_eq!((end.how, end.recheck), (Ended::SharedRefused, None));
    assert_eq!(end.reset.as_ref(), Some(&persist.reset));
    assert_eq!(run.poll(T0), Next::Finished(end));
}

#[test]
fn a_refusal_whose_status_may_not_be_written_never_writes_done() {
    let mut run = run_to_shared(None);
    run.handle(Report::Shared(Some(Verdict::Refused("shared".into()))), T0);
    assert!(matches!(start(&mut run), Work::Record(_)));
    let persist = start(&mut run);
    run.handle(Report::NotStarted(persist), T0);
    let Next::Finished(end) = run.poll(T0) else { panic!("finished") };
    assert_eq!((end.how, end.reset), (Ended::Abandoned, None));
}

#[test]
fn a_request_waiting_for_clusters_to_be_told_apart_records_why_and_looks_again() {
    let mut run = run_to_shared(None);
    run.handle(Report::Shared(Some(Verdict::Waits("undecided".into()))), T0);
    let Work::Record(waits) = start(&mut run) else { panic!("the wait's event") };
    assert_eq!((waits.reason.as_str(), waits.key.as_str()), ("ResetRefused", "undecided"));
    let Next::Finished(end) = run.poll(T0) else { panic!("finished, no status write of its own") };
    assert_eq!((end.how, end.recheck), (Ended::SharedWaits, Some(WAIT_RECHECK)));
    let shown = end.reset.expect("a status");
    assert_eq!((shown.id.as_str(), shown.phase, shown.detail.as_str()), (ID, RequestPhase::Waiting, "undecided"));
}

#[test]
fn without_a_verdict_the_drive_starts_with_its_inspections() {
    let mut run = run_to_shared(None);
    run.handle(Report::Shared(None), T0);
    assert!(matches!(start(&mut run), Work::Kafka(KafkaCall::Inspect(_))));
    assert!(matches!(start(&mut run), Work::Kafka(KafkaCall::Inspect(_))));
    assert_eq!(run.poll(T0), Next::Wait(None));
    assert_eq!(run.in_flight(), 2);
}

#[test]
fn no_request_is_finished_at_once() {
    let fresh = Fresh { uid: UID, ..Default::default() };
    let mut run = Run::new(&fresh, stopped(), DriveOptions::default(), T0);
    let Next::Finished(end) = run.poll(T0) else { panic!("finished") };
    assert_eq!((end.how, end.reset, end.history, end.recheck), (Ended::NoRequest, None, None, None));
}
