use super::*;
use crate::resource::ResetStatus;
use crate::targets::tests::streamlet;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn deployment(hash: &str, image: &str, generation: i64, observed: i64, updated: i32, ready: i32) -> ObservedDeployment {
    ObservedDeployment {
        uid: "u".into(),
        config_hash: Some(hash.into()),
        process_image: Some(image.into()),
        generation,
        observed_generation: observed,
        updated_replicas: updated,
        ready_replicas: ready,
        replica_failure: None,
    }
}

fn topic(id: &str, exists: bool, detail: &str) -> TopicStatus {
    TopicStatus { id: id.into(), exists, detail: detail.into(), ownership: None }
}

#[test]
fn a_streamlet_is_rolled_out_only_with_the_new_hash_image_and_a_finished_rollout() {
    let s = streamlet("router", 3, &[]);
    let image = s.image.clone();
    let rolled_out = |d: Option<&ObservedDeployment>| streamlet_status(&s, "h", d);
    assert_eq!(rolled_out(None).0.detail, "rolling out");
    assert_eq!(rolled_out(None).1, Rollout::Rolling);
    assert_eq!(rolled_out(Some(&deployment("h", &image, 2, 2, 3, 3))).1, Rollout::Done);
    assert_eq!(rolled_out(Some(&deployment("h", &image, 2, 2, 3, 3))).0.detail, "");
    for not in [
        deployment("old", &image, 2, 2, 3, 3),
        deployment("h", "other:1", 2, 2, 3, 3),
        deployment("h", &image, 3, 2, 3, 3),
        deployment("h", &image, 2, 2, 2, 3),
    ] {
        let (st, ok) = rolled_out(Some(&not));
        assert_eq!(ok, Rollout::Rolling, "{not:?}");
        assert_eq!(st.detail, "rolling out");
    }
    let (st, ok) = rolled_out(Some(&deployment("h", &image, 2, 2, 3, 1)));
    assert_eq!(ok, Rollout::Done);
    assert_eq!((st.desired, st.ready, st.detail.as_str()), (3, 1, "1 of 3 ready"));
    // A ReplicaSet that cannot create pods says why, whatever else holds.
    let mut failing = deployment("h", &image, 2, 2, 0, 0);
    failing.replica_failure =
        Some("pods \"flow-cart-router-5f6d-\" is forbidden: failed quota: q: must specify limits.cpu".into());
    let (st, r) = rolled_out(Some(&failing));
    assert_eq!(r, Rollout::Failing);
    assert_eq!(
        st.detail,
        "its pods cannot be created: pods \"flow-cart-router-5f6d-\" is forbidden: failed quota: q: must specify limits.cpu"
    );
}

#[test]
fn a_builtin_has_no_process_image_to_compare() {
    let mut s = streamlet("graph", 1, &[]);
    s.builtin = true;
    s.image = String::new();
    let mut d = deployment("h", "", 1, 1, 1, 1);
    d.process_image = None;
    assert_eq!(streamlet_status(&s, "h", Some(&d)).1, Rollout::Done);
}

#[test]
fn phase_rules() {
    let ok = (StreamletStatus { name: "a".into(), desired: 1, ready: 1, detail: String::new() }, Rollout::Done);
    let rolling =
        (StreamletStatus { name: "b".into(), desired: 1, ready: 0, detail: "rolling out".into() }, Rollout::Rolling);
    let short =
        (StreamletStatus { name: "c".into(), desired: 3, ready: 1, detail: "1 of 3 ready".into() }, Rollout::Done);
    let failing = (
        StreamletStatus { name: "d".into(), desired: 1, ready: 0, detail: "its pods cannot be created: x".into() },
        Rollout::Failing,
    );
    // pods that cannot be created make the pipeline Degraded, even beside one that rolls out
    assert_eq!(
        phase(&[rolling.clone(), failing], &[]),
        (Phase::Degraded, "b: rolling out; d: its pods cannot be created: x".into())
    );
    let present = topic("t", true, "");
    let created = topic("m", true, "created by the operator");
    let missing = topic("u", false, "topic 'shop.cart-events.v1' does not exist");

    let present_only = [present.clone()];
    assert_eq!(phase(std::slice::from_ref(&ok), &[present.clone(), created]), (Phase::Ready, String::new()));
    assert_eq!(phase(&[], &[]), (Phase::Ready, String::new()));
    assert_eq!(phase(&[ok.clone(), rolling.clone()], &present_only), (Phase::Pending, "b: rolling out".into()));
    assert_eq!(phase(&[ok, short.clone()], &present_only), (Phase::Degraded, "c: 1 of 3 ready".into()));
    // not rolled out wins over too few ready
    assert_eq!(phase(&[rolling.clone(), short.clone()], &[]).0, Phase::Pending);
    // a missing topic wins over everything, and comes first in the detail
    assert_eq!(
        phase(&[rolling, short], &[present, missing]),
        (Phase::Degraded, "topic 'shop.cart-events.v1' does not exist; b: rolling out; c: 1 of 3 ready".to_string())
    );
}

fn draft(phase: &str, detail: &str) -> AnkkaFlowStatus {
    AnkkaFlowStatus {
        observed_generation: Some(4),
        phase: Some(phase.into()),
        detail: detail.into(),
        ..AnkkaFlowStatus::default()
    }
}

fn cond<'a>(s: &'a AnkkaFlowStatus, type_: &str) -> &'a Condition {
    s.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn times_are_whole_seconds_in_utc() {
    assert_eq!(api_time(ts("2026-09-28T10:00:00.123456Z")), "2026-09-28T10:00:00Z");
    assert_eq!(api_time(ts("2026-09-28T12:00:05+02:00")), "2026-09-28T10:00:05Z");
}

#[test]
fn ready_and_applied_conditions() {
    let t0 = ts("2026-09-28T10:00:00Z");
    let s = finish(draft("Ready", ""), None, &ApplyOutcome::Applied, t0);
    assert_eq!(s.last_transition_time.as_deref(), Some("2026-09-28T10:00:00Z"));
    assert_eq!(
        s.conditions,
        vec![
            Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Ready".into(),
                message: String::new(),
                last_transition_time: "2026-09-28T10:00:00Z".into(),
                observed_generation: Some(4),
            },
            Condition {
                type_: "Applied".into(),
                status: "True".into(),
                reason: "Applied".into(),
                message: String::new(),
                last_transition_time: "2026-09-28T10:00:00Z".into(),
                observed_generation: Some(4),
            },
        ]
    );

    let pending = finish(draft("Pending", "router: rolling out"), None, &ApplyOutcome::Applied, t0);
    let ready = cond(&pending, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str(), ready.message.as_str()),
        ("False", "Pending", "router: rolling out")
    );

    let refused = finish(
        draft("Failed", "no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator"),
        None,
        &ApplyOutcome::Refused { reason: "SidecarImageMissing".into() },
        t0,
    );
    let applied = cond(&refused, "Applied");
    assert_eq!((applied.status.as_str(), applied.reason.as_str()), ("False", "SidecarImageMissing"));
    assert_eq!(applied.message, refused.detail);
    assert_eq!(cond(&refused, "Ready").reason, "Failed");

    let failed = finish(
        draft("Pending", "router: rolling out"),
        None,
        &ApplyOutcome::Failed { message: "could not apply Deployment 'flow-cart-router': exceeded quota".into() },
        t0,
    );
    let applied = cond(&failed, "Applied");
    assert_eq!((applied.status.as_str(), applied.reason.as_str()), ("False", "ApplyFailed"));
    assert_eq!(applied.message, "could not apply Deployment 'flow-cart-router': exceeded quota");
    assert!(failed.conditions.iter().all(|c| c.type_ != "ResetComplete"), "no reset, no condition");
}

#[test]
fn transition_times_are_kept_while_the_phase_and_each_condition_status_stay() {
    let t0 = ts("2026-09-28T10:00:00Z");
    let t1 = ts("2026-09-28T10:05:00Z");
    let t2 = ts("2026-09-28T10:09:00Z");
    let first = finish(draft("Pending", "router: rolling out"), None, &ApplyOutcome::Applied, t0);
    // same phase, another detail: the time stays, the detail changes
    let second = finish(draft("Pending", "sink: rolling out"), Some(&first), &ApplyOutcome::Applied, t1);
    assert_eq!(second.last_transition_time.as_deref(), Some("2026-09-28T10:00:00Z"));
    assert_eq!(cond(&second, "Ready").last_transition_time, "2026-09-28T10:00:00Z");
    assert!(needs_write(Some(&first), &second));
    // Pending -> Degraded: the phase time moves, Ready stays False so its time does not
    let third = finish(draft("Degraded", "sink: 0 of 1 ready"), Some(&second), &ApplyOutcome::Applied, t2);
    assert_eq!(third.last_transition_time.as_deref(), Some("2026-09-28T10:09:00Z"));
    assert_eq!(cond(&third, "Ready").last_transition_time, "2026-09-28T10:00:00Z");
    assert_eq!(cond(&third, "Applied").last_transition_time, "2026-09-28T10:00:00Z");
    // Degraded -> Ready: both move
    let fourth = finish(draft("Ready", ""), Some(&third), &ApplyOutcome::Applied, t2);
    assert_eq!(cond(&fourth, "Ready").last_transition_time, "2026-09-28T10:09:00Z");
}

#[test]
fn a_status_is_written_only_when_it_differs_in_more_than_its_times() {
    let t0 = ts("2026-09-28T10:00:00Z");
    let a = finish(draft("Ready", ""), None, &ApplyOutcome::Applied, t0);
    let mut b = a.clone();
    b.last_transition_time = Some("2030-01-01T00:00:00Z".into());
    b.conditions[0].last_transition_time = "2030-01-01T00:00:00Z".into();
    assert!(!needs_write(Some(&a), &b));
    assert!(needs_write(None, &b));
    let mut c = a.clone();
    c.conditions[1].message = "x".into();
    assert!(needs_write(Some(&a), &c));
    let mut d = a.clone();
    d.topics.push(topic("t", true, ""));
    assert!(needs_write(Some(&a), &d));
}

/// A reset status from its JSON, as the reset driver writes it.
fn reset(value: serde_json::Value) -> Option<ResetStatus> {
    Some(serde_json::from_value(value).unwrap())
}

#[test]
fn reset_complete_follows_the_reset_phase() {
    let t0 = ts("2026-09-28T10:00:00Z");
    let t1 = ts("2026-09-28T10:01:00Z");
    let mut waiting = draft("Ready", "");
    waiting.reset = reset(serde_json::json!({"id": "1b7c", "phase": "Waiting", "detail": "router is not scaled to 0"}));
    let w = finish(waiting.clone(), None, &ApplyOutcome::Applied, t0);
    let c = cond(&w, "ResetComplete");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("False", "Waiting", "reset 1b7c is waiting: router is not scaled to 0")
    );
    let mut done = waiting;
    done.reset = reset(serde_json::json!({"id": "1b7c", "phase": "Done"}));
    let d = finish(done, Some(&w), &ApplyOutcome::Applied, t1);
    let c = cond(&d, "ResetComplete");
    assert_eq!((c.status.as_str(), c.reason.as_str(), c.message.as_str()), ("True", "Done", "reset 1b7c is done"));
    assert_eq!(c.last_transition_time, "2026-09-28T10:01:00Z");
    let mut malformed = draft("Ready", "");
    malformed.reset = reset(serde_json::json!({"id": "", "phase": "Refused", "detail": "the annotation is not JSON"}));
    let m = finish(malformed, None, &ApplyOutcome::Applied, t0);
    let c = cond(&m, "ResetComplete");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("False", "Refused", "the reset request is refused: the annotation is not JSON")
    );
}

/// The reset driver's own status writes, in the middle of a reconcile: a condition left from the
/// request before never says True beside a request under way.
#[test]
fn reset_complete_is_brought_in_line_with_a_new_request() {
    let (t0, t1, t2) = (ts("2026-09-28T10:00:00Z"), ts("2026-09-28T10:01:00Z"), ts("2026-09-28T10:02:00Z"));
    let mut s = draft("Ready", "");
    s.reset = reset(serde_json::json!({"id": "old", "phase": "Done"}));
    let mut s = finish(s, None, &ApplyOutcome::Applied, t0);
    assert_eq!(cond(&s, "ResetComplete").status, "True");
    s.reset = reset(serde_json::json!({"id": "new", "phase": "Resetting"}));
    sync_reset_complete(&mut s, t1);
    let c = cond(&s, "ResetComplete");
    assert_eq!((c.status.as_str(), c.message.as_str()), ("False", "reset new is resetting"));
    assert_eq!(c.last_transition_time, "2026-09-28T10:01:00Z");
    assert_eq!(s.conditions.iter().filter(|c| c.type_ == "ResetComplete").count(), 1);
    // Still under way a minute later: the time it became False is kept.
    sync_reset_complete(&mut s, t2);
    assert_eq!(cond(&s, "ResetComplete").last_transition_time, "2026-09-28T10:01:00Z");
    // A status without the condition yet gets it.
    let mut fresh = draft("Ready", "");
    fresh.reset = reset(serde_json::json!({"id": "new", "phase": "Resetting"}));
    sync_reset_complete(&mut fresh, t2);
    assert_eq!(cond(&fresh, "ResetComplete").status, "False");
}

#[test]
fn reasons_are_camel_case_words() {
    assert_eq!(camel("Waiting"), "Waiting");
    assert_eq!(camel("not parsed"), "Unknown");
    assert_eq!(camel(""), "Unknown");
}

#[test]
fn a_ledger_condition_put_in_is_kept_after_the_computed_ones() {
    let t0 = ts("2026-09-28T10:00:00Z");
    let mut draft = draft("Ready", "");
    draft.conditions.push(ledger_condition("cannot write the reset ledger in /l: No space left on device", Some(4)));
    let s = finish(draft, None, &ApplyOutcome::Applied, t0);
    let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Ready", "Applied", "ResetLedger"]);
    let c = &s.conditions[2];
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "LedgerUnavailable"));
    assert!(c.message.starts_with("cannot write the reset ledger in /l: No space left on device; resets go on"));
    assert_eq!(c.last_transition_time, "2026-09-28T10:00:00Z");
    // Without one, none: the condition is there only while the ledger cannot be used.
    let again = finish(s.clone(), Some(&s), &ApplyOutcome::Applied, t0);
    assert_eq!(again.conditions.len(), 3, "kept while the caller keeps putting it in");
    let mut cleared = s.clone();
    cleared.conditions.clear();
    assert_eq!(finish(cleared, Some(&s), &ApplyOutcome::Applied, t0).conditions.len(), 2);
}
