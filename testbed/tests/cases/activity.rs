//! Is the group really inactive? Cases A1 to A5 of docs/field-cases.md.

use std::time::{Duration, Instant};

use flow_testbed::cart::DONE;
use flow_testbed::*;

use crate::world::*;

/// A1: a live member outside Kubernetes; replicas 0 and no pods. Nothing is committed while it stays,
/// however long (20 s here, past the 15 s after which a group used to fail), and the group's status
/// names the member count and state; never a failure. Once it has left, the group is reset, once.
#[test]
fn a1_a_live_member_outside_kubernetes_makes_the_reset_wait_and_nothing_moves() {
    let case = Case::new("case-a1");
    let (ns, p, topic) = (case.ns, case.ns, "case.a1-events");
    let g = case.topic(topic, 3, 20).fresh_group("router");
    standin::read(&g, topic, 60);
    assert_eq!(kafka::committed(&g, topic, 3), all(3, 20));
    case.apply(&[s("router", topic, 0)]);
    assert!(pipeline_pods(ns, p).is_empty());

    let member = Member::join(&g, topic, &[]);
    wait_until("the group Stable with 1 member", Duration::from_secs(60), || {
        let (state, members) = group_state(&g);
        (state == "Stable" && members.len() == 1).then_some(())
    });

    let id = "a1000000-0000-4000-8000-000000000001";
    write_request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 20);
    let prefix = failed_note_prefix(&g, 1, "Stable");
    let shown = prefix.split_once(": ").map_or("", |(_, m)| m);
    assert!(message.starts_with(shown) && message.contains("the reset waits until it leaves"), "{message}");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A2: a group that never existed, and a group that describes as Dead because its offsets are gone
/// (deleted, as expiry does): both count as inactive, and the reset creates offsets for every
/// partition at its log start.
#[test]
fn a2_groups_that_never_existed_or_are_dead_get_offsets_at_every_partition() {
    let case = Case::new("case-a2");
    let (ns, p) = (case.ns, case.ns);
    let (fresh_t, dead_t) = ("case.a2-fresh", "case.a2-expired");
    case.topic(fresh_t, 3, 10).topic(dead_t, 3, 10);
    kafka::delete_records(fresh_t, 2, 3);
    let fresh_g = case.fresh_group("fresh");
    let dead_g = group(p, "expired");
    standin::read(&dead_g, dead_t, 30);
    assert_eq!(kafka::committed(&dead_g, dead_t, 3), all(3, 10));
    groups::forget(&dead_g);
    for (g, t) in [(&fresh_g, fresh_t), (&dead_g, dead_t)] {
        assert_eq!(group_state(g), ("Dead".to_string(), vec![]), "{g}");
        assert_eq!(kafka::committed(g, t, 3), offsets(&[None, None, None]), "{g}");
    }
    case.apply(&[s("fresh", fresh_t, 0), s("expired", dead_t, 0)]);

    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&fresh_g, fresh_t, 3), offsets(&[Some(0), Some(0), Some(3)]));
    assert_eq!(kafka::committed(&dead_g, dead_t, 3), all(3, 0));
    assert_eq!(
        notes(ns, p, "ResetOffsets"),
        [
            format!("{dead_g}: 3 partition(s) of '{dead_t}' to earliest"),
            format!("{fresh_g}: 3 partition(s) of '{fresh_t}' to earliest"),
        ]
    );
    assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new());
    assert_eq!(group_status(ns, p, &fresh_g)["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 3}));
    assert_eq!(group_status(ns, p, &fresh_g).get("offsetsBefore"), None, "no offsets before");
}

/// A3: the group's only member uses the consumer group protocol (KIP-848), which the classic describe
/// may not show. The reset must not go ahead while it is there: nothing committed, no event; once it
/// has left, the group is reset.
#[test]
fn a3_a_consumer_protocol_member_is_never_taken_for_an_inactive_group() {
    let case = Case::new("case-a3");
    let (ns, p, topic) = (case.ns, case.ns, "case.a3-events");
    let g = case.topic(topic, 3, 20).group_at("router", topic, 3, 20);
    case.apply(&[s("router", topic, 0)]);
    let member = Member::join(&g, topic, &["--group-protocol", "consumer"]);
    wait_member(&g, &g);
    let classic = group_state(&g);

    let id = "a3000000-0000-4000-8000-000000000003";
    write_request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 8);
    eprintln!("A3: classic describe said {classic:?}; the operator shows {message:?}");
    assert!(
        message.contains("has 1 active member(s)") || message.contains("consumers are still active in the group"),
        "classic describe said {classic:?}; {message:?}"
    );
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new(), "never a 'to earliest' event");
    assert!(tool_members(&g).contains(&g), "the member is still there");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A4: a stray consumer joined the inlet's group while reading another topic. The reset waits for it
/// (members present); nothing is committed on the inlet's topic; the operator itself never joins the
/// group; once the stray has left, the group is reset.
#[test]
fn a4_a_stray_member_reading_another_topic_makes_the_reset_wait_and_the_operator_never_joins() {
    let case = Case::new("case-a4");
    let (ns, p, topic, other) = (case.ns, case.ns, "case.a4-events", "case.a4-other");
    let g = case.topic(topic, 3, 20).topic(other, 1, 0).group_at("router", topic, 3, 20);
    case.apply(&[s("router", topic, 0)]);
    let stray = Member::join(&g, other, &[]);
    wait_until("the stray Stable", Duration::from_secs(60), || {
        let (state, members) = group_state(&g);
        (state == "Stable" && members.len() == 1).then_some(())
    });

    let id = "a4000000-0000-4000-8000-000000000004";
    write_request(ns, p, id, &["router"]);
    let end = Instant::now() + Duration::from_secs(8);
    let mut seen = 0;
    while Instant::now() < end {
        let (_, members) = group_state(&g);
        assert_eq!(members, std::slice::from_ref(&g), "only the stray is ever a member: the operator never joins");
        seen += 1;
    }
    assert!(seen > 10, "the group was looked at during the reset");
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 1);
    assert!(message.starts_with(&format!("consumer group [{g}] has 1 active member(s) (state Stable)")), "{message}");
    drop(stray);
    reset_once_the_member_left(ns, p, &g, topic, id);
}

/// A5: one request for `router` (stopped) and `enricher` (running). The rule: the request is one
/// unit. It waits as a whole, naming only the running target, and nothing is committed for either
/// group; once every target has stopped, all are reset. To reset the stopped one now, request it
/// alone: `flow reset <pipeline> --streamlet router`.
#[test]
fn a5_a_request_with_one_running_target_waits_as_a_whole() {
    let case = Case::new("case-a5");
    let (ns, p) = (case.ns, case.ns);
    let (rt, et) = ("case.a5-router", "case.a5-enricher");
    let rg = case.topic(rt, 3, 20).group_at("router", rt, 3, 20);
    let eg = case.topic(et, 3, 20).group_at("enricher", et, 3, 20);
    case.apply(&[s("router", rt, 0), s("enricher", et, 1)]);

    // The CLI refuses the pair while enricher runs.
    let o = flow(&["reset", p, "--streamlet", "router", "--streamlet", "enricher", "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(
            "cannot reset offsets while streamlets are running: [enricher] is not scaled to 0; [enricher] still has 1 pod(s)."
        ),
        "{err}"
    );

    // Past the CLI, the operator waits for the whole request.
    let id = "a5000000-0000-4000-8000-000000000005";
    write_request(ns, p, id, &["router", "enricher"]);
    let waits = wait_until("the waits event", Duration::from_secs(30), || {
        let n = notes(ns, p, "ResetRefused");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(waits, [format!("reset {id} waits: enricher is not scaled to 0; enricher still has 1 pod(s)")]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 20), "router is not reset while the request waits");
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 20));
    assert_eq!(annotation(ns, p, DONE), None);
    let st = reset_status(ns, p);
    assert_eq!(st["phase"], "Waiting");
    assert_eq!(st["detail"], "enricher is not scaled to 0; enricher still has 1 pod(s)");
    assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());

    // enricher stops: both are reset by the same request.
    case.apply(&[s("router", rt, 0), s("enricher", et, 0)]);
    wait_done(ns, p, id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 0));
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 0));
    assert_eq!(
        notes(ns, p, "ResetOffsets"),
        [format!("{eg}: 3 partition(s) of '{et}' to earliest"), format!("{rg}: 3 partition(s) of '{rt}' to earliest"),]
    );

    // The way to reset the stopped one while the other runs: request it alone.
    case.apply(&[s("router", rt, 0), s("enricher", et, 1)]);
    for (g, t) in [(&rg, rt), (&eg, et)] {
        groups::commit(g, t, &[(0, 20), (1, 20), (2, 20)]);
    }
    let id2 = flow_reset(ns, p, &["--streamlet", "router"]);
    wait_done(ns, p, &id2, Duration::from_secs(60));
    assert_eq!(kafka::committed(&rg, rt, 3), all(3, 0));
    assert_eq!(kafka::committed(&eg, et, 3), all(3, 20), "enricher untouched");
    assert_eq!(notes(ns, p, "ResetOffsets").len(), 3);
}

/// A3, the rule itself: a consumer-protocol (KIP-848) member is seen as a member, so the group waits
/// for having one active member, without any commit being tried (the classic describe's `Dead` with 0
/// members is not taken as proof of inactivity).
#[test]
fn a3_a_consumer_protocol_member_is_seen_as_a_member_before_any_commit() {
    let case = Case::new("case-a3b");
    let (ns, p, topic) = (case.ns, case.ns, "case.a3b-events");
    let g = case.topic(topic, 3, 20).group_at("router", topic, 3, 20);
    case.apply(&[s("router", topic, 0)]);
    let member = Member::join(&g, topic, &["--group-protocol", "consumer"]);
    wait_member(&g, &g);

    let id = "a3000000-0000-4000-8000-00000000003b";
    write_request(ns, p, id, &["router"]);
    let message = waits_for_the_member(ns, p, &g, topic, &all(3, 20), 6);
    // Seen as a member by the inspection, not learnt from a refused commit.
    assert!(message.starts_with(&format!("consumer group [{g}] has 1 active member(s) (state ")), "{message}");
    drop(member);
    reset_once_the_member_left(ns, p, &g, topic, id);
}
