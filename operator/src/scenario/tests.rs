//! A reset, whole, in the mocked-API reconcile tests (see [`super`]): the reconcile of the example
//! pipeline `cart`, its streamlet stopped and a request written, against the API server and Kafka
//! of the world.

use super::step::*;
use super::*;
use crate::connections::fake::{Fault, GroupCall};

const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

/// The end of the request without a fault: done, its group reset to the log start offsets with
/// the request's marker, one `ResetOffsets` event, and nothing the API server did not expect.
fn reset_end() -> End {
    let marker = format!("ankka-flow/reset/{ID}");
    End {
        done: Some(ID.into()),
        phase: Some("Done".into()),
        groups: vec![(GROUP.into(), "Reset".into(), (0..3).map(|p| (p.to_string(), 5)).collect())],
        committed: (0..3).map(|p| (p, (5, marker.clone()))).collect(),
        events: ["ResetOffsets", "TopicAdopted", "TopicSettingsIgnored"].map(String::from).into(),
        unexpected: vec![],
    }
}

#[test]
fn a_reset_fences_commits_at_the_log_start_reads_back_settles_and_is_done() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    let started = world.wall();
    let ran = world.run();
    assert!(ran.results.iter().all(Result::is_ok), "{ran:?}");
    world.expect(&[
        inspect(),
        fence(ID),
        intent(),
        commit_at_log_start(ID),
        read_back(),
        stage("Verifying"),
        settled_read(),
        stage("Reset"),
        event("ResetOffsets"),
        done(ID),
        finished("Reset"),
    ]);
    assert_eq!(world.end(), reset_end());
    // The settle (30 s here) passed on the paused clock, in no real time.
    assert!(world.wall().0 - started.0 >= 30_000, "{:?} .. {:?}", started, world.wall());
}

/// A restart right after any write of the reset (an API write or a Kafka commit) ends as the run
/// without one: done once, committed once at the log start, the same status and events. The ledger
/// is a cache: losing it with the restart changes nothing either.
#[test]
fn a_restart_after_any_write_ends_as_a_run_without_one() {
    let _one = serial();
    let mut clean = World::cart().stopped().request(ID);
    clean.run();
    let writes = clean.state().writes;
    assert!(writes > 10, "{writes} writes");
    for lose_ledger in [false, true] {
        for n in 1..writes {
            let mut world = World::cart().stopped().request(ID);
            assert!(world.run_crashing_after(n), "the process stopped after write {n}");
            if lose_ledger {
                world.lose_ledger();
            }
            world.run();
            let trace = world.trace().join("\n");
            assert_eq!(world.end(), reset_end(), "restart after write {n} (ledger lost: {lose_ledger}):\n{trace}");
            assert_eq!(world.count(&done(ID)), 1, "restart after write {n}:\n{trace}");
            assert_eq!(world.count(&commit_at_log_start(ID)), 1, "restart after write {n}:\n{trace}");
        }
    }
}

/// A done request is never carried out again, not even by a reconcile given a copy of the resource
/// from before its done write (as the watch cache may hold it): the reset acts on a fresh read only
/// (case D2 of docs/field-cases.md).
#[test]
fn a_done_request_never_runs_again() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    let before_done = world.copy();
    world.run();
    // A consumer reads on after the reset; the request, done, must not move it back.
    world.kafka.commit(&world.servers.clone(), GROUP, TOPIC, &[(0, 35), (1, 35), (2, 35)], "");
    let before = world.trace().len();
    world.reconcile_stale(before_done);
    world.run();
    let after: Vec<String> = world.trace().split_off(before);
    assert!(after.iter().all(|s| !s.starts_with("commit") && !s.starts_with("inspect")), "{after:?}");
    assert_eq!(world.kafka.committed(&world.servers, GROUP, TOPIC)[&0].offset, 35);
}

#[test]
fn a_running_streamlet_holds_the_request_without_a_kafka_call_until_its_pod_is_gone() {
    let _one = serial();
    let mut world = World::cart().stopped().router_running().request(ID);
    world.run_reconciles(3);
    world.expect(&[event("ResetRefused"), "status Waiting".into()]);
    assert!(world.trace().iter().all(|s| !s.starts_with("inspect") && !s.starts_with("commit")));
    assert_eq!(world.end().done, None);
    world.pods_gone();
    world.run();
    world.expect(&[inspect(), fence(ID), intent(), commit_at_log_start(ID), done(ID)]);
    assert_eq!(world.end().committed, reset_end().committed);
}

#[test]
fn a_group_with_members_waits_and_is_committed_only_once_they_left() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    let servers = world.servers.clone();
    world.kafka.join(&servers, GROUP, "client id 'stray' at /10.0.0.9");
    world.run_reconciles(3);
    world.expect(&[inspect(), event("ResetWaiting"), stage("Pending")]);
    let waits = world.event_notes("ResetWaiting");
    assert!(waits.len() == 1 && waits[0].contains("client id 'stray' at /10.0.0.9"), "{waits:?}");
    assert!(world.trace().iter().all(|s| !s.starts_with("commit")), "{:?}", world.trace());
    assert_eq!(world.kafka.committed(&servers, GROUP, TOPIC)[&0].offset, 30);
    world.kafka.leave(&servers, GROUP);
    world.run();
    world.expect(&[fence(ID), intent(), commit_at_log_start(ID), read_back(), settled_read(), done(ID)]);
    let mut end = reset_end();
    end.events.insert("ResetWaiting".into());
    assert_eq!(world.end(), end);
}

#[test]
fn an_authorization_error_fails_the_group_and_the_request_is_done_without_a_commit() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    world.kafka.fault(GroupCall::Commit, GROUP, 1, Fault::denied());
    world.run();
    world.expect(&[inspect(), stage("Failed"), event("ResetOffsetsFailed"), done(ID), finished("Failed")]);
    assert!(world.trace().iter().all(|s| !s.starts_with("commit")), "{:?}", world.trace());
    let end = world.end();
    assert_eq!(end.done.as_deref(), Some(ID));
    assert!(end.committed.values().all(|(offset, metadata)| *offset == 30 && metadata.is_empty()), "{end:?}");
}

#[test]
fn a_transient_failure_is_retried_and_the_group_is_reset() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    world.kafka.fault(GroupCall::Inspect, GROUP, 2, Fault::coordinator_moving());
    world.run();
    assert_eq!(world.count(&inspect()), 3, "{:?}", world.trace());
    world.expect(&[inspect(), inspect(), inspect(), fence(ID), commit_at_log_start(ID), done(ID)]);
    assert_eq!(world.end(), reset_end());
}

/// A commit Kafka never answers fails as unreachable at the request deadline, whether it landed or
/// not; the group tries again and ends reset.
#[test]
fn a_commit_kafka_never_answers_is_tried_again() {
    for lands in [false, true] {
        let _one = serial();
        let mut world = World::cart().stopped().request(ID);
        world.kafka.fault(GroupCall::Commit, GROUP, 1, Fault::Lost { lands });
        world.run();
        assert_eq!(world.count(&fence(ID)), usize::from(lands) + 1, "{:?}", world.trace());
        world.expect(&[fence(ID), intent(), commit_at_log_start(ID), read_back(), done(ID)]);
        assert_eq!(world.end(), reset_end(), "lands: {lands}");
    }
}

#[test]
fn a_late_read_back_changes_nothing() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    world.kafka.fault(GroupCall::ReadBack, GROUP, 1, Fault::Late(Duration::from_secs(8)));
    world.run();
    world.expect(&[commit_at_log_start(ID), read_back(), stage("Verifying"), settled_read(), done(ID)]);
    assert_eq!(world.end(), reset_end());
}

/// A consumer the operator could not see commits its old position during the settle: the read
/// after it finds that, and the group fails instead of showing reset.
#[test]
fn a_commit_during_the_settle_fails_the_group() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    world.kafka.fault(GroupCall::Read, GROUP, 1, Fault::StrayCommit(vec![(1, 30)]));
    world.run();
    world.expect(&[commit_at_log_start(ID), read_back(), settled_read(), stage("Failed"), done(ID)]);
    let end = world.end();
    assert_eq!(end.groups[0].1, "Failed", "{end:?}");
    let failed = world.event_notes("ResetOffsetsFailed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with(&format!(
            "{GROUP}: a consumer overwrote the reset after it was read back: partition 1 is at 30"
        )),
        "{failed:?}"
    );
    let message = world.copy()["status"]["reset"]["groups"][0]["message"].clone();
    assert!(message.as_str().is_some_and(|m| m.starts_with("a consumer overwrote the reset")), "{message}");
    assert!(world.event_notes("ResetOffsets").is_empty(), "never a 'to earliest' event");
}

/// The process stops right after the commit at the log start landed, and the streamlet reads part
/// of its input again before the next one starts: the reset landed, and is neither done again nor
/// reported otherwise (case D1 of docs/field-cases.md, its partial reread).
#[test]
fn a_crash_after_the_commit_and_a_partial_reread_is_reset_once() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    assert!(world.run_crashing_at(&commit_at_log_start(ID)));
    world.kafka.commit(&world.servers.clone(), GROUP, TOPIC, &[(0, 12), (1, 5), (2, 9)], "");
    world.run();
    assert_eq!(world.count(&commit_at_log_start(ID)), 1, "{:?}", world.trace());
    let end = world.end();
    assert_eq!((end.done.as_deref(), end.groups[0].1.as_str()), (Some(ID), "Reset"), "{end:?}");
    assert_eq!(end.committed[&0].0, 12, "the streamlet's progress stays");
}

/// As above, but the streamlet read everything again and is back where it was: Kafka cannot tell
/// that from a reset that never landed, so nothing is committed again and the group is reported as
/// uncertain, not as reset (case D1 of docs/field-cases.md, its full reread).
#[test]
fn a_crash_after_the_commit_and_a_full_reread_is_neither_redone_nor_claimed() {
    let _one = serial();
    let mut world = World::cart().stopped().request(ID);
    assert!(world.run_crashing_at(&commit_at_log_start(ID)));
    world.kafka.commit(&world.servers.clone(), GROUP, TOPIC, &[(0, 30), (1, 30), (2, 30)], "");
    world.run();
    assert_eq!(world.count(&commit_at_log_start(ID)), 1, "{:?}", world.trace());
    let end = world.end();
    assert_eq!((end.done.as_deref(), end.groups[0].1.as_str()), (Some(ID), "Failed"), "{end:?}");
    assert!(end.events.contains("ResetOffsetsFailed") && !end.events.contains("ResetOffsets"), "{end:?}");
}
