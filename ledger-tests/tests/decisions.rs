//! Properties of the three decisions the run loop (`flow_core::reset::Run`) took over from the
//! operator: where an undo's offsets come from, the shared-group rule, and the supersede check. Each
//! drives the very Run the operator drives, through the model driver or, for the undo's source,
//! through its own needs.

use std::collections::{BTreeMap, BTreeSet};

use flow_core::request::{ResetRequest, To};
use flow_core::reset::{
    Destination, DriveOptions, Fresh, GroupProgress, LedgerEntry, Need, Next, ProgressWrite, Report, Run,
    progress_from_status, undo,
};
use flow_core::resource::RequestPhase;
use flow_core::tenancy::Verdict;
use flow_ledger_tests::world::{Fact, request_id};
use flow_ledger_tests::{Ask, Init, Reconciled, Streamlet, TopicInit, World};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn topic_init() -> impl Strategy<Value = TopicInit> {
    let partition = (0i64..40, 1i64..80, proptest::option::of(0i64..140))
        .prop_map(|(start, len, committed)| (start, start + len, committed.map(|c| c.min(start + len))));
    proptest::collection::vec(partition, 3).prop_map(|partitions| TopicInit { partitions })
}

/// Both topics, nothing running.
fn init() -> impl Strategy<Value = Init> {
    (topic_init(), topic_init()).prop_map(|(router, sink)| Init {
        topics: BTreeMap::from([(Streamlet::Router, router), (Streamlet::Sink, sink)]),
        running: BTreeSet::new(),
    })
}

/// A request with at least one group.
fn ask() -> impl Strategy<Value = Ask> {
    prop_oneof![Just(Ask::All), Just(Ask::Router), Just(Ask::Sink), Just(Ask::Both)]
}

fn check(world: &World) -> Result<(), TestCaseError> {
    let v = world.violations(&[]);
    prop_assert!(v.is_empty(), "invariants broken:\n{}", v.join("\n"));
    Ok(())
}

/// Whether request `id` did anything yet, as its rebuilt machine learns it (ledger and status).
fn resumed(world: &World, id: &str) -> bool {
    let ledger = world.ledger.progress(id).iter().any(|e| e.progress.intent.is_some() || e.progress.outcome.is_some());
    let status = world.kube.status_reset.as_ref().filter(|r| r.id == id).map(progress_from_status).unwrap_or_default();
    ledger || status.iter().any(|p| p.intent.is_some() || p.outcome.is_some())
}

/// The `ResetRefused` events of request `id` recorded since fact `from`, by key.
fn refusals(world: &World, from: usize) -> Vec<String> {
    world.facts[from..]
        .iter()
        .filter_map(|f| match f {
            Fact::Event(e) if e.reason == "ResetRefused" => Some(e.key.clone()),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/decisions.txt"))),
        ..ProptestConfig::default()
    })]

    /// A request whose groups another resource maps to on the same cluster touches no group: it is
    /// refused, its status says why before the done write, and a request that did something before
    /// (cut short by a crash) keeps its groups in the status, one that did nothing shows none.
    #[test]
    fn a_request_refused_for_a_shared_group_calls_no_kafka_and_shows_why_before_done(
        init in init(),
        ask in ask(),
        crash in proptest::option::of(1u8..8),
        why in "[a-z]{1,12}( [a-z]{1,12}){0,4}",
    ) {
        let mut w = World::new(&init);
        let id = w.write_request(1, ask);
        if let Some(c) = crash {
            w.reconcile(Some(c));
        }
        prop_assume!(w.kube.done.as_deref() != Some(id.as_str()));
        let (resumed, calls, from) = (resumed(&w, &id), w.kafka.calls, w.facts.len());
        w.shared = Some(Verdict::Refused(why.clone()));
        let end = w.reconcile(None);
        // Never asked when every group finished before (the request is only done now); never a call.
        prop_assert!(matches!(end, Reconciled::SharedRefused | Reconciled::Done), "{end:?}");
        prop_assert_eq!(w.kafka.calls, calls, "a refused request calls Kafka");
        prop_assert_eq!(w.kube.done.as_deref(), Some(id.as_str()));
        if end == Reconciled::SharedRefused {
            let shown = w.kube.status_at_done.clone().expect("a status before the done write");
            prop_assert_eq!(&shown.id, &id);
            prop_assert_eq!(shown.phase, RequestPhase::Refused);
            prop_assert_eq!(&shown.detail, &why);
            prop_assert!(shown.finished_at.is_some());
            prop_assert_eq!(!shown.groups.is_empty(), resumed, "groups kept only for a resumed request");
            prop_assert_eq!(w.kube.status_reset.as_ref().map(|r| r.phase), Some(RequestPhase::Refused));
            let key = format!("{id}/refused");
            prop_assert!(refusals(&w, from).contains(&key), "no ResetRefused event keyed {}", key);
        }
        check(&w)?;
    }

    /// While a cluster cannot be told apart, the request waits: no Kafka call, no done write, its
    /// status says why, and once the clusters are told apart a quiet world finishes it.
    #[test]
    fn a_request_held_back_by_an_undecided_cluster_waits_then_goes_on(
        init in init(),
        ask in ask(),
        why in "[a-z]{1,12}( [a-z]{1,12}){0,4}",
    ) {
        let mut w = World::new(&init);
        let id = w.write_request(1, ask);
        w.shared = Some(Verdict::Waits(why.clone()));
        let (calls, from) = (w.kafka.calls, w.facts.len());
        prop_assert_eq!(w.reconcile(None), Reconciled::SharedWaits);
        prop_assert_eq!(w.kafka.calls, calls);
        prop_assert_eq!(w.kube.done.as_deref(), None);
        let shown = w.kube.status_reset.clone().expect("a status");
        prop_assert_eq!((&shown.id, shown.phase, &shown.detail), (&id, RequestPhase::Waiting, &why));
        prop_assert_eq!(refusals(&w, from), vec![why.clone()]);
        w.shared = None;
        prop_assert_eq!(w.reconcile(None), Reconciled::Done);
        prop_assert_eq!(w.kube.done.as_deref(), Some(id.as_str()));
        check(&w)?;
    }

    /// A request replaced while its drive sleeps (the settle) stops there, shown as it stood and not
    /// done, and the next reconcile takes the new one; a cache behind a broken watch (showing no
    /// request) alone never stops a drive.
    #[test]
    fn a_request_replaced_while_it_sleeps_stops_there_and_a_stale_cache_alone_never_stops_it(
        init in init(),
        ask in ask(),
        replace in any::<bool>(),
        stale in any::<bool>(),
    ) {
        let mut w = World::new(&init);
        let id = w.write_request(1, ask);
        w.stale_cache = stale;
        if replace {
            w.replace = Some((2, Ask::All));
        }
        let end = w.reconcile(None);
        if replace {
            prop_assert_eq!(end, Reconciled::Superseded);
            prop_assert_eq!(w.kube.done.as_deref(), None);
            let shown = w.kube.status_reset.clone().expect("a status");
            prop_assert_eq!((&shown.id, shown.phase), (&id, RequestPhase::Resetting));
            prop_assert_eq!(w.reconcile(None), Reconciled::Done);
            prop_assert_eq!(w.kube.done.clone(), Some(request_id(2)));
            prop_assert!(w.kube.status_history.iter().any(|e| e.id == id));
        } else {
            prop_assert_eq!(end, Reconciled::Done);
            prop_assert_eq!(w.kube.done.as_deref(), Some(id.as_str()));
        }
        check(&w)?;
    }

    /// An undo puts back what the ledger recorded of the request it undoes for this object; when the
    /// ledger holds nothing of it for this object (lost, unreadable, or recorded for another object
    /// only), what the status still lists of it, if the status names it for this object; else
    /// nothing (the undo is refused). Another object's progress is never taken.
    #[test]
    fn an_undo_takes_its_offsets_from_this_objects_ledger_else_from_the_status(
        init in init(),
        ask in ask(),
        ledger in prop_oneof![Just(Kept::Whole), Just(Kept::Lost), Just(Kept::Unreadable), Just(Kept::Others)],
        status_theirs in any::<bool>(),
        force in any::<bool>(),
    ) {
        let mut w = World::new(&init);
        let undone = w.write_request(1, ask);
        prop_assert_eq!(w.reconcile(None), Reconciled::Done);
        let recorded: Vec<GroupProgress> = w.ledger.progress(&undone).into_iter().map(|e| e.progress).collect();
        let mut request = ResetRequest::new(request_id(2), vec![]);
        request.to = Some(To::Undo(undone.clone()));
        request.force = force;
        let annotation = request.to_annotation();
        let mut status = w.kube.status_reset.clone().expect("the undone request's status");
        if status_theirs {
            status.uid = Some("another-object".into());
        }
        let from_status = if status_theirs { vec![] } else { progress_from_status(&status) };
        let (entries, expected): (Option<Vec<LedgerEntry>>, Vec<GroupProgress>) = match ledger {
            Kept::Whole => (Some(w.ledger.progress(&undone)), recorded.clone()),
            Kept::Lost => (Some(vec![]), from_status),
            Kept::Unreadable => (None, from_status),
            Kept::Others => {
                let mut theirs = flow_ledger_tests::world::Ledger::default();
                let writes: Vec<ProgressWrite> = recorded
                    .iter()
                    .filter_map(|p| p.outcome.clone().map(|o| ProgressWrite::Outcome(p.group.clone(), o)))
                    .collect();
                theirs.put(&undone, "another-object", &writes);
                (Some(theirs.progress(&undone)), from_status)
            }
        };
        let history = w.kube.status_history.clone();
        let fresh = Fresh {
            uid: &w.kube.uid,
            request: Some(&annotation),
            done: w.kube.done.as_deref(),
            reset: Some(&status),
            history: &history,
            ..Fresh::default()
        };
        let mut run = Run::new(&fresh, w.kube.spec(), DriveOptions::default(), w.now);
        // The undone request's entries first, then the request's own.
        prop_assert_eq!(run.poll(w.now), Next::Need(Need::Ledger(undone.clone())));
        run.handle(Report::Ledger(entries), w.now);
        prop_assert_eq!(run.poll(w.now), Next::Need(Need::Ledger(request_id(2))));
        run.handle(Report::Ledger(Some(vec![])), w.now);
        prop_assert_eq!(run.poll(w.now), Next::Need(Need::Pods));
        run.handle(Report::Pods { pods: w.kube.pod_counts(), stopped: BTreeMap::new() }, w.now);
        let destination = run.drive().map(|d| d.machine().destination().clone());
        prop_assert_eq!(destination.as_ref(), Some(&undo(&undone, force, &expected)));
        if expected.is_empty() {
            prop_assert!(matches!(destination, Some(Destination::Unavailable(_))));
        }
    }
}

/// What the ledger holds of the undone request when the undo comes.
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// Everything it recorded.
    Whole,
    /// Nothing (the volume was lost).
    Lost,
    /// It cannot be read.
    Unreadable,
    /// Only entries recorded for another object.
    Others,
}
