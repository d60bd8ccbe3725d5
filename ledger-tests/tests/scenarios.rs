//! Fixed histories: the minimal failing histories the model-based test found, replayed as plain
//! tests, and a few cases of docs/field-cases.md kind D spelled out. Each runs the same simulated world
//! and checks every invariant after every step.

use std::collections::{BTreeMap, BTreeSet};

use flow_ledger_tests::world::{Committer, Fact, request_id};
use flow_ledger_tests::{Ask, During, Fault, Init, KubeFault, Reconciled, Streamlet, TopicInit, World};

use Streamlet::{Router, Sink};

/// Both topics: 3 partitions of 100 records, log start 0/50/30; the groups committed 10/60/none.
fn init(running: &[Streamlet]) -> Init {
    let topic = TopicInit { partitions: vec![(0, 100, Some(10)), (50, 100, Some(60)), (30, 100, None)] };
    Init {
        topics: BTreeMap::from([(Router, topic.clone()), (Sink, topic)]),
        running: running.iter().copied().collect::<BTreeSet<_>>(),
    }
}

/// Runs `steps` on `world`, checking every invariant after each.
fn run(world: &mut World, steps: &[&dyn Fn(&mut World)]) {
    for (i, step) in steps.iter().enumerate() {
        step(world);
        let v = world.violations(&[]);
        assert!(v.is_empty(), "after step {}: invariants broken:\n{}", i + 1, v.join("\n"));
    }
}

/// Every invariant, strictly.
fn check(world: &World) {
    let v = world.violations(&[]);
    assert!(v.is_empty(), "invariants broken:\n{}", v.join("\n"));
}

fn committed(world: &World, s: Streamlet) -> Vec<(i64, String)> {
    world.kafka.committed[&s].values().map(|p| (p.offset, p.metadata.clone())).collect()
}

#[test]
fn happy_path_resets_each_group_once_with_one_event_each() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::All);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    let id = request_id(1);
    assert_eq!(w.kube.done.as_deref(), Some(id.as_str()));
    let marker = flow_core::reset::reset_marker(&id);
    for s in [Router, Sink] {
        assert_eq!(committed(&w, s), [(0, marker.clone()), (50, marker.clone()), (30, marker.clone())]);
    }
    check(&w);
    // Nothing more happens for a done request.
    assert_eq!(w.reconcile(None), Reconciled::AlreadyDone);
}

/// Found by the model (first run): a group's final failure was recorded as an event, the operator
/// crashed before persisting that outcome, and the rebuilt machine retried the group and reset it,
/// so one group had two outcome events (ResetOffsetsFailed, then ResetOffsets).
#[test]
fn a_failure_recorded_before_a_crash_is_not_followed_by_a_second_outcome() {
    let mut w = World::new(&init(&[Router, Sink]));
    run(
        &mut w,
        &[
            &|w| w.inject(Fault::TimeoutAfterApply, 5),
            &|w| w.stop(Router, false),
            &|w| _ = w.write_request(1, Ask::Router),
            // Five inspections time out: the fifth failure is final; crash right after its effect.
            &|w| assert_eq!(w.reconcile(Some(6)), Reconciled::Crashed { effects: 6 }),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
}

/// Case D1: the operator crashes right after a group's commit, a stand-in consumer reads everything,
/// stops, and the operator restarts: the group is not rewound again.
#[test]
fn d1_crash_after_commit_then_consumer_progress_is_kept() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    // Effects: inspect, fence, persist intent, commit (crash here).
    assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 });
    w.start(Router);
    w.produce(Router, 0, 1_000);
    w.consumer_reads_all(Router);
    w.stop(Router, false);
    let progress = committed(&w, Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(committed(&w, Router), progress, "the consumer's progress must be kept");
    check(&w);
}

/// Case D1 with the ledger lost too: the status alone must stand in for it.
#[test]
fn d1_with_a_lost_ledger_the_status_stands_in() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 });
    w.lose_ledger();
    w.start(Router);
    w.consumer_reads_all(Router);
    w.stop(Router, false);
    let progress = committed(&w, Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(committed(&w, Router), progress);
    check(&w);
}

/// A commit whose answer is lost (it applied, the call timed out) is resolved by a read, not
/// repeated.
#[test]
fn a_commit_that_timed_out_after_applying_is_not_repeated() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    // Calls: inspect, fence, then the commit applies and times out; the read resolves it, and the
    // read after the settle delay verifies it.
    w.kafka.faults.extend([Fault::Pass, Fault::Pass, Fault::TimeoutAfterApply]);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(w.kafka.calls, 5, "inspect, fence, commit, read, read after the settle");
    check(&w);
}

#[test]
fn a_malformed_request_is_reported_once_and_nothing_moves() {
    let mut w = World::new(&init(&[]));
    w.write_malformed(0);
    let before = w.kafka.committed.clone();
    assert_eq!(w.reconcile(None), Reconciled::Malformed);
    assert_eq!(w.reconcile(None), Reconciled::Malformed);
    assert_eq!(w.kafka.committed, before);
    assert_eq!(w.kube.event_names.len(), 1, "the same bad text is one event: {:?}", w.kube.event_names);
    check(&w);
}

#[test]
fn an_unknown_streamlet_is_refused_and_marked_done() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Unknown);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(w.kube.done, Some(request_id(1)));
    assert_eq!(w.kafka.calls, 0);
    check(&w);
}

/// Found by the model (deep run): a restart that found a target running again wrote a `Waiting`
/// status without the groups' progress, so the status no longer stood in for the ledger; with the
/// ledger lost too, a group whose reset had landed was reset a second time, rewinding its consumer.
#[test]
fn a_waiting_restart_keeps_the_progress_that_stands_in_for_a_lost_ledger() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            // Inspect, fence, persist the intent, commit (it lands): crash.
            &|w| assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 }),
            &|w| w.start(Router),
            &|w| w.consumer_reads_all(Router),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Waiting),
            &|w| w.lose_ledger(),
            &|w| w.stop(Router, false),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
}

/// Known issue `SettleAmbiguity` (docs/ledger-tests.md), reported to the lead: the operator stops
/// between a group's persisted intent and its reset commit, the streamlet runs and commits before
/// the operator is back; resolving the intent cannot tell this from case D1 and reports the group reset, though
/// its reset commit never landed.
#[test]
fn a_consumer_run_between_intent_and_commit_is_not_reported_as_a_reset() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            // Inspect, fence, persist the intent: crash before the commit.
            &|w| assert_eq!(w.reconcile(Some(3)), Reconciled::Crashed { effects: 3 }),
            &|w| w.start(Router),
            &|w| w.consumer_reads_all(Router),
            &|w| w.stop(Router, false),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
}

/// Known issue `OutcomeOnlyInLedger` (docs/ledger-tests.md), reported to the lead: the driver
/// persists an outcome to the ledger only; lost with the ledger before the request is done, the
/// group is decided again and gets a second, different outcome event.
#[test]
fn an_outcome_lost_with_the_ledger_is_not_decided_again() {
    let mut w = World::new(&init(&[]));
    w.outcome_in_status = false;
    // Without the outcome in the status (as the operator was before), the history breaks an
    // invariant: this checks that the model still sees it.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| outcome_lost_with_the_ledger(&mut w)));
    assert!(caught.is_err(), "the model no longer catches an outcome kept in the ledger only");
}

/// The same history with the operator change proposed for it: the status holds the outcome too.
#[test]
fn with_the_outcome_in_the_status_a_lost_ledger_decides_nothing_again() {
    let mut w = World::new(&init(&[]));
    w.outcome_in_status = true;
    outcome_lost_with_the_ledger(&mut w);
}

fn outcome_lost_with_the_ledger(w: &mut World) {
    run(
        w,
        &[
            // The second Kafka call, the fence, fails finally.
            &|w| w.kafka.faults.extend([Fault::Pass, Fault::Final]),
            &|w| _ = w.write_request(1, Ask::Router),
            // Inspect, fence (final failure), persist the outcome, record its event: crash.
            &|w| assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 }),
            &|w| w.lose_ledger(),
            // Nothing remembers the failure: the group is tried again, and reset.
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
}

/// The notes of the events recorded (created or refused as duplicates) with `reason`.
fn notes(world: &World, reason: &str) -> Vec<String> {
    world
        .facts
        .iter()
        .filter_map(|f| match f {
            Fact::Event(e) if e.reason == reason => Some(e.note.clone()),
            _ => None,
        })
        .collect()
}

/// Reset commits the operator applied on `s`'s group.
fn reset_commits(world: &World, s: Streamlet) -> usize {
    world
        .facts
        .iter()
        .filter(|f| matches!(f, Fact::Commit(c) if c.by == Committer::Operator && c.group == s && !c.metadata.ends_with("/fence")))
        .count()
}

/// Case F1: a closing consumer commits its position while the operator waits out the settle: the
/// group fails, listing the moved partitions, and is not reset again.
#[test]
fn f1_a_consumer_commit_during_the_settle_fails_the_group() {
    let mut w = World::new(&init(&[]));
    w.arm(During::StrayCommit(Router));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    check(&w);
    assert_eq!(notes(&w, "ResetOffsets"), Vec::<String>::new(), "never a success");
    assert_eq!(
        notes(&w, "ResetOffsetsFailed"),
        ["cart.router.in: a consumer overwrote the reset after it was read back: partition 0 is at 100 (reset to 0), \
          partition 1 is at 100 (reset to 50), partition 2 is at 100 (reset to 30); stop every consumer of the group \
          (a pod still stopping, a consumer outside Kubernetes) and request a new reset"]
    );
    assert_eq!(committed(&w, Router), [(100, String::new()), (100, String::new()), (100, String::new())]);
    assert_eq!(reset_commits(&w, Router), 1);
    assert_eq!(w.reconcile(None), Reconciled::AlreadyDone);
}

/// Case B5: a partition is added to the topic while the operator waits out the settle: the group
/// is reset on the 3 partitions it covered, and a warning names the added one.
#[test]
fn b5_a_partition_added_during_the_settle_is_named_and_not_counted() {
    let mut w = World::new(&init(&[]));
    w.arm(During::AddPartition(Router));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    check(&w);
    assert_eq!(notes(&w, "ResetOffsets"), ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    let added = notes(&w, "ResetPartitionsAdded");
    assert_eq!(added.len(), 1, "{added:?}");
    assert!(added[0].starts_with("cart.router.in: partition(s) 3 of 'shop.cart-events.v1' were added"), "{added:?}");
    assert_eq!(w.kafka.committed[&Router].get(&3), None, "the added partition is not reset");
    let status = w.kube.status_reset.as_ref().expect("a status");
    assert_eq!(status.groups[0].added_partitions, [3]);
}

/// The operator stops while it waits out the settle (nothing is persisted between the commit and
/// the read, so this is a crash right after the commit), and a closing consumer overwrites the reset
/// before it is back: resolved by the markers, the group fails and is not reset again.
#[test]
fn a_crash_during_the_settle_then_an_overwrite_is_neither_redone_nor_a_success() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            // Inspect, fence, persist the intent, commit: crash.
            &|w| assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 }),
            &|w| w.stray_commit(Router),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
    assert_eq!(reset_commits(&w, Router), 1);
    assert_eq!(notes(&w, "ResetOffsets"), Vec::<String>::new());
    let failed = notes(&w, "ResetOffsetsFailed");
    assert!(failed.len() == 1 && failed[0].starts_with("cart.router.in: cannot tell whether the reset landed"));
}

/// Without an overwrite, the rebuilt machine resolves the intent by the markers, waits out the settle, reads
/// again and reports the reset: one commit, six Kafka calls.
#[test]
fn a_crash_during_the_settle_is_resolved_and_verified_without_a_second_commit() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 });
    assert_eq!(w.reconcile(None), Reconciled::Done);
    check(&w);
    assert_eq!(reset_commits(&w, Router), 1);
    assert_eq!(w.kafka.calls, 5, "inspect, fence, commit; then the markers read and the read after the settle");
    assert_eq!(notes(&w, "ResetOffsets"), ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
}

/// A settle of 0: no second read, so an overwrite right after the read-back goes unnoticed (the
/// documented cost of turning the settle off).
#[test]
fn a_settle_of_zero_reads_once() {
    let mut w = World::new(&init(&[]));
    w.settle = std::time::Duration::ZERO;
    w.arm(During::StrayCommit(Router));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    check(&w);
    assert_eq!(w.kafka.calls, 3, "inspect, fence, commit with its read-back");
    assert_eq!(w.kafka.armed.len(), 1, "the operator never waited out a settle");
    assert_eq!(notes(&w, "ResetOffsets"), ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
}

/// Found by the model (deep run): with a settle of 0, the operator stopped right after the commit and
/// a partition was added before it was back; the rebuilt machine's read saw it, but the group was
/// reported reset without naming it.
#[test]
fn without_a_settle_a_partition_seen_after_a_restart_is_named() {
    let mut w = World::new(&init(&[]));
    w.settle = std::time::Duration::ZERO;
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            &|w| assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 }),
            &|w| w.add_partition(Router),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
    assert_eq!(notes(&w, "ResetPartitionsAdded").len(), 1);
}

/// A restarted operator resolves an intent by the markers during a short Kafka outage: each read
/// that times out is read again after the backoff (1 s, 2 s, 4 s, 8 s), not at once, so the outage
/// does not use up the reads; the read after it resolves the group, which is never committed again.
#[test]
fn reads_resolving_an_intent_that_time_out_are_read_again_after_the_backoff() {
    use flow_core::reset::{WAIT_RECHECK, backoff};
    use std::time::Duration;

    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    // Inspect, fence, persist the intent, commit (it lands): the operator stops before its answer.
    assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 });
    w.inject(Fault::Transient, 4);
    let (calls, since) = (w.kafka.calls, w.now);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(w.kafka.calls - calls, 6, "five reads by the markers, one after the settle");
    let backoffs: Duration = (1..=4).map(backoff).sum();
    assert_eq!(
        w.now,
        since.after(WAIT_RECHECK + backoffs + w.settle),
        "the requeue, a backoff before each read again, the settle: nothing more, nothing less"
    );
    assert_eq!(reset_commits(&w, Router), 1, "the reset commit was never sent again");
    assert_eq!(notes(&w, "ResetOffsets"), ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    check(&w);
}

/// Case from the review of the concurrent driver: a status write fails while the fence of another
/// group is under way. The driver as it was returned at once and left that fence running; it landed
/// after the next drive had reset the group, putting the old offsets back under a reported reset.
/// The model catches it; the operator now waits for what it started before it gives a drive up.
#[test]
fn a_fence_left_running_by_an_abandoned_drive_is_caught() {
    let mut w = World::new(&init(&[]));
    w.wait_on_abandon = false;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fence_outlives_its_drive(&mut w)));
    assert!(caught.is_err(), "the model no longer catches a late fence");
}

/// The same history with the operator as it is: the abandoned drive waits for its fence.
#[test]
fn an_abandoned_drive_waits_for_its_calls() {
    let mut w = World::new(&init(&[]));
    fence_outlives_its_drive(&mut w);
    assert!(w.kafka.late.is_empty());
    assert_eq!(reset_commits(&w, Sink), 1);
    assert_eq!(notes(&w, "ResetOffsets").len(), 2, "{:?}", notes(&w, "ResetOffsets"));
}

fn fence_outlives_its_drive(w: &mut World) {
    run(
        w,
        &[
            &|w| _ = w.write_request(1, Ask::All),
            &|w| w.inject_kube(KubeFault::StatusWrite, 1),
            // Both inspections start; router's completes, then its fence, while sink's inspection
            // is still under way (its intent waits for that inspection). Sink's inspection
            // completes: router's intent write and sink's fence start, and the write fails while
            // the fence is still under way.
            &|w| assert_eq!(w.reconcile_in(None, &[0, 1, 0, 0]), Reconciled::Abandoned),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
            &|w| w.land_late_calls(),
        ],
    );
}

/// Case from the audit of the concurrent driver: the operator finds it lost its Lease's margin as it
/// is about to fence. The fence (and each piece of work after it that acts) is refused before it
/// starts, and the drive must not count it in flight, or the operator would wait for it forever.
/// The next reconcile, with the Lease held, finishes the request with one commit per group.
#[test]
fn work_refused_for_a_lost_lease_is_never_waited_for() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            &|w| w.inject_kube(KubeFault::LeaseLost, 1),
            // The inspection only looks; the fence after it acts, and is refused.
            &|w| assert_eq!(w.reconcile(None), Reconciled::Abandoned),
            &|w| assert_eq!(w.kafka.calls, 1, "only the inspection reached Kafka"),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
    assert_eq!(reset_commits(&w, Router), 1);
}

/// Notes of the events recorded with `reason` whose key is `key`.
fn refusals(world: &World, key: &str) -> Vec<String> {
    world
        .facts
        .iter()
        .filter_map(|f| match f {
            Fact::Event(e) if e.reason == "ResetRefused" && e.key == key => Some(e.note.clone()),
            _ => None,
        })
        .collect()
}

/// A request belongs to its object: the resource is deleted once its request is done and created
/// again from the same manifest (request annotation, no done annotation, no status). The new object
/// does not carry the request out again: it is refused, marked done, and no group is committed twice.
#[test]
fn a_request_done_for_an_earlier_object_is_not_carried_out_again_for_a_new_one() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::All),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
            &|w| w.recreate(),
            &|w| assert_eq!(w.kube.done, None),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
    let id = request_id(1);
    assert_eq!(w.kube.done.as_deref(), Some(id.as_str()), "marked done on the new object");
    for s in [Router, Sink] {
        assert_eq!(reset_commits(&w, s), 1, "{s:?} is committed once");
    }
    let notes = refusals(&w, &format!("{id}/refused"));
    assert!(notes.len() == 1 && notes[0].contains("taken up for an earlier AnkkaFlow"), "{notes:?}");
    let status = w.kube.status_reset.as_ref().expect("a status");
    assert_eq!((status.phase.as_str(), status.uid.as_deref()), ("Refused", Some(w.kube.uid.as_str())));
    // Nothing more happens for it.
    let calls = w.kafka.calls;
    assert_eq!(w.reconcile(None), Reconciled::AlreadyDone);
    assert_eq!(w.kafka.calls, calls);
}

/// The same when the earlier object was deleted mid-reset (an intent whose commit may have landed):
/// the new object never commits for that request, and a new request resets the groups as usual.
#[test]
fn a_request_cut_short_by_the_deletion_of_its_object_is_not_taken_over_by_a_new_one() {
    let mut w = World::new(&init(&[]));
    run(
        &mut w,
        &[
            &|w| _ = w.write_request(1, Ask::Router),
            // Inspect, fence, persist the intent, commit: crash, then the object goes.
            &|w| assert_eq!(w.reconcile(Some(4)), Reconciled::Crashed { effects: 4 }),
            &|w| w.recreate(),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
            &|w| _ = w.write_request(2, Ask::Router),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
        ],
    );
    assert_eq!(reset_commits(&w, Router), 2, "one per request");
    assert!(!refusals(&w, &format!("{}/refused", request_id(1))).is_empty());
}

/// The documented limit (docs/reset.md, "A request belongs to its object"): with the ledger lost as
/// well as the object, nothing is left that says the request ran, and the new object carries it out
/// again. The model's invariants see it as a second reset of the same request.
#[test]
fn with_the_ledger_lost_too_a_new_object_carries_the_request_out_again() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    w.recreate();
    w.lose_ledger();
    assert_eq!(w.reconcile(None), Reconciled::Done);
    assert_eq!(reset_commits(&w, Router), 2);
    let v = w.violations(&[]);
    assert!(v.iter().any(|v| v.contains("a second time")), "{v:?}");
}

/// Retries are bounded by time across drives: Kafka fails transiently for good, and every drive stops
/// (the operator crashes) right after the status showed the group waiting for its next attempt. Each
/// new drive goes on from the first failure the status names, so the group fails once the retry time
/// has passed, instead of retrying for ever with a clock that starts again.
#[test]
fn retries_stay_bounded_by_time_however_often_the_drive_is_rebuilt() {
    let mut w = World::new(&init(&[]));
    w.write_request(1, Ask::Router);
    w.inject(Fault::Transient, 255);
    let start = w.now;
    let failed = |w: &World| {
        w.kube.status_reset.as_ref().is_some_and(|s| s.groups.iter().any(|g| g.outcome.as_str() == "Failed"))
    };
    let mut reconciles = 0;
    // Inspect (it fails), then the status write that shows the retry: crash after it.
    while !failed(&w) {
        assert_eq!(w.reconcile(Some(2)), Reconciled::Crashed { effects: 2 });
        reconciles += 1;
        assert!(reconciles < 200, "the group still retries after {:?}", start.until(w.now));
    }
    let took = start.until(w.now);
    assert_eq!(w.reconcile(None), Reconciled::Done);
    check(&w);
    let id = request_id(1);
    assert_eq!(w.kube.done.as_deref(), Some(id.as_str()));
    let failed = notes(&w, "ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let retry_for = flow_core::reset::DEFAULT_RETRY_FOR;
    assert!(took >= retry_for && took < retry_for + std::time::Duration::from_secs(60), "failed after {took:?}");
}

/// Issue 28: the broker holds sink's fence of request 1 (it never answers, the operator's wait
/// times out); router's group goes on, and while the drive sleeps out router's settle, request 2
/// (sink alone) replaces it. Request 2 gives sink another lane than request 1 did. With the
/// operator as it was, request 2's calls went over that lane's connection, which Kafka does not
/// order against the held fence: the fence lands after request 2's reset and puts the offsets from
/// before it back, under a reported reset. The model catches it.
#[test]
fn a_held_fence_of_a_replaced_request_landing_after_the_next_reset_is_caught() {
    let mut w = World::new(&init(&[]));
    w.pin_unanswered = false;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fence_held_across_requests(&mut w)));
    assert!(caught.is_err(), "the model no longer catches a held fence landing after a later reset");
}

/// The same history with the operator as it is: sink's calls of request 2 go over the held fence's
/// connection, behind it, so the fence is carried out before request 2 inspects the group.
#[test]
fn a_held_fence_is_carried_out_before_the_next_requests_calls_of_its_group() {
    let mut w = World::new(&init(&[]));
    fence_held_across_requests(&mut w);
    let (one, two) = (request_id(1), request_id(2));
    let sink: Vec<String> = w
        .facts
        .iter()
        .filter_map(|f| match f {
            Fact::Commit(c) if c.group == Sink => {
                Some(format!("{}{}", c.metadata, if c.late { " (late)" } else { "" }))
            }
            _ => None,
        })
        .collect();
    let fence = |id: &str| flow_core::reset::fence_marker(id);
    assert_eq!(sink, [format!("{} (late)", fence(&one)), fence(&two), flow_core::reset::reset_marker(&two)]);
    assert_eq!(
        committed(&w, Sink),
        [
            (0, flow_core::reset::reset_marker(&two)),
            (50, flow_core::reset::reset_marker(&two)),
            (30, flow_core::reset::reset_marker(&two))
        ]
    );
}

fn fence_held_across_requests(w: &mut World) {
    run(
        w,
        &[
            &|w| _ = w.write_request(1, Ask::All),
            // Completed oldest first: router's inspection, sink's, router's fence, sink's fence.
            &|w| w.inject(Fault::Pass, 3),
            &|w| w.inject(Fault::Held, 1),
            // Request 2 is written while the drive first sleeps (router's settle): superseded.
            &|w| w.replace = Some((2, Ask::Sink)),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Superseded),
            &|w| assert_eq!(w.kafka.held.len(), 1, "the broker holds sink's fence"),
            &|w| assert_eq!(w.reconcile(None), Reconciled::Done),
            // Whenever the broker gets to it.
            &|w| w.broker_carries_out(0),
        ],
    );
}
