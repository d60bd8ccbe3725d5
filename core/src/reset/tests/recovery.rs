//! Recovering an intent whose commit may or may not have landed, by the markers Kafka holds.

use std::collections::BTreeMap;

use super::*;

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
