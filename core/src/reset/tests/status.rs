//! The status: what `status.reset` shows, and the progress it holds for a lost ledger.

use std::collections::BTreeMap;

use super::*;

#[test]
fn the_status_stands_in_for_a_lost_ledger() {
    // Mid-reset: the group's intent is in the status.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    let status = m.status();
    assert_eq!(status.groups[0].outcome, GroupStage::Committing);
    let recovered = progress_from_status(&status);
    assert_eq!(recovered, vec![GroupProgress { group: router(), intent: Some(intent()), outcome: None }]);
    // Rebuilt from the status alone, the machine recovers the intent rather than committing again.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_progress(vec![], recovered));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]));

    // Done: the outcome round-trips too.
    let read = intent().target.iter().map(|(p, o)| (*p, Some(*o))).collect();
    m.handle(Input::ReadBack { group: router(), result: Ok(read) }, T0);
    settle_from(&mut m, T0);
    m.handle(Input::Read { group: router(), result: Ok(landed_read()) }, T0.after(DEFAULT_SETTLE));
    drain(&mut m);
    let done = progress_from_status(&m.status());
    assert!(matches!(&done[0].outcome, Some(GroupOutcome::Reset { before, .. }) if *before == intent().before));
}

#[test]
fn a_waiting_status_keeps_the_progress_that_stands_in_for_a_lost_ledger() {
    // Found by ledger-tests: a restart that found a target running again wrote a Waiting status without
    // the groups, so after the ledger was lost too, a group whose reset had landed was reset again.
    let sink = GroupId::new("cart", "sink", "in");
    let progress = vec![
        GroupProgress { group: router(), intent: Some(intent()), outcome: None },
        GroupProgress {
            group: sink.clone(),
            intent: None,
            outcome: Some(GroupOutcome::Failed { topic: "cart.valid-carts".into(), reason: "r".into() }),
        },
    ];
    let mut m = ResetMachine::new(request(&[]), None, progress.clone());
    m.handle(Input::Observed { spec: cart(1), pods: BTreeMap::from([("router".into(), 1)]) }, T0);
    assert!(matches!(m.state(), State::Waiting(_)));
    let status = m.status();
    assert_eq!(status.phase, RequestPhase::Waiting);
    let groups: Vec<_> = status.groups.iter().map(|g| (g.group.as_str(), g.topic.as_str(), g.outcome)).collect();
    assert_eq!(
        groups,
        [
            ("cart.router.in", "shop.cart-events.v1", GroupStage::Committing),
            ("cart.sink.in", "cart.valid-carts", GroupStage::Failed)
        ]
    );
    assert_eq!(progress_from_status(&status), progress);
}

#[test]
fn merged_progress_prefers_outcomes() {
    let with_intent = GroupProgress { group: router(), intent: Some(intent()), outcome: None };
    let failed = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(GroupOutcome::Failed { topic: "t".into(), reason: "r".into() }),
    };
    assert_eq!(merge_progress(vec![with_intent.clone()], vec![failed.clone()]), vec![failed.clone()]);
    assert_eq!(merge_progress(vec![failed.clone()], vec![with_intent.clone()]), vec![failed]);
    assert_eq!(merge_progress(vec![], vec![with_intent.clone()]), vec![with_intent]);
}

#[test]
fn an_unfinished_request_replaced_by_a_new_one_is_superseded_and_kept_in_history() {
    let waiting = ResetStatus { id: "old".into(), phase: RequestPhase::Waiting, ..Default::default() };
    let ev = superseded_event(Some(&waiting), ID).expect("an event");
    assert_eq!(ev.reason, "ResetSuperseded");
    assert_eq!(ev.note, format!("reset old was superseded by reset {ID} before it finished (Waiting)"));
    let h = history(
        &[ResetHistoryEntry { id: "older".into(), phase: RequestPhase::Done, dry_run: false }],
        Some(&waiting),
        ID,
    );
    assert_eq!(
        h.iter().map(|e| (e.id.as_str(), e.phase)).collect::<Vec<_>>(),
        [("old", RequestPhase::Superseded), ("older", RequestPhase::Done)]
    );

    let done = ResetStatus { id: "old".into(), phase: RequestPhase::Done, ..Default::default() };
    assert_eq!(superseded_event(Some(&done), ID), None);
    assert_eq!(history(&[], Some(&done), ID)[0].phase, RequestPhase::Done);
    // The same request again changes nothing; the history stays bounded.
    assert_eq!(superseded_event(Some(&waiting), "old"), None);
    let long: Vec<ResetHistoryEntry> =
        (0..20).map(|i| ResetHistoryEntry { id: format!("r{i}"), phase: RequestPhase::Done, dry_run: false }).collect();
    assert_eq!(history(&long, Some(&done), ID).len(), HISTORY_LEN);
}

#[test]
fn dry_runs_never_push_a_reset_out_of_the_history() {
    // A reset, then as many dry runs as the history keeps requests, then one more: the reset stays,
    // the dry runs are counted apart (at most as many), newest first.
    let reset = ResetHistoryEntry { id: "reset".into(), phase: RequestPhase::Done, dry_run: false };
    let mut kept = vec![reset.clone()];
    for i in 0..=HISTORY_LEN {
        let plan =
            ResetStatus { id: format!("plan{i}"), phase: RequestPhase::Done, dry_run: true, ..Default::default() };
        kept = history(&kept, Some(&plan), "next");
    }
    assert!(kept.contains(&reset), "{kept:?}");
    let plans: Vec<&str> = kept.iter().filter(|e| e.dry_run).map(|e| e.id.as_str()).collect();
    let newest: Vec<String> = (1..=HISTORY_LEN).rev().map(|i| format!("plan{i}")).collect();
    assert_eq!(plans, newest, "the newest dry runs, newest first");
    assert_eq!(kept.len(), HISTORY_LEN + 1);
    // Requests are still bounded by themselves.
    for i in 0..=HISTORY_LEN {
        let r = ResetStatus { id: format!("r{i}"), phase: RequestPhase::Done, ..Default::default() };
        kept = history(&kept, Some(&r), "next");
    }
    assert_eq!(kept.iter().filter(|e| !e.dry_run).count(), HISTORY_LEN);
    assert!(!kept.contains(&reset), "the oldest request went");
    assert_eq!(kept.iter().filter(|e| e.dry_run).count(), HISTORY_LEN, "the dry runs stay");
}

#[test]
fn a_request_whose_groups_all_finished_before_its_done_write_is_done_not_superseded() {
    // The operator stopped after every group's outcome and before the done write: the status still
    // says Resetting (it says Done only after that write).
    let group = |outcome| GroupStatus { group: "g".into(), outcome, ..Default::default() };
    let finished = ResetStatus {
        id: "old".into(),
        phase: RequestPhase::Resetting,
        groups: vec![group(GroupStage::Reset), group(GroupStage::Failed)],
        ..Default::default()
    };
    assert_eq!(superseded_event(Some(&finished), ID), None);
    assert_eq!(history(&[], Some(&finished), ID)[0].phase, RequestPhase::Done);
    // One group still under way: superseded.
    let under_way = ResetStatus { groups: vec![group(GroupStage::Reset), group(GroupStage::Verifying)], ..finished };
    assert!(superseded_event(Some(&under_way), ID).is_some());
    assert_eq!(history(&[], Some(&under_way), ID)[0].phase, RequestPhase::Superseded);
}

#[test]
fn only_reset_groups_of_a_done_request_are_followed_until_caught_up() {
    let g = |outcome: GroupStage, caught_up: Option<&str>| GroupStatus {
        group: "g".into(),
        outcome,
        caught_up_at: caught_up.map(str::to_string),
        ..Default::default()
    };
    let mut st = ResetStatus {
        id: ID.into(),
        phase: RequestPhase::Done,
        groups: vec![
            g(GroupStage::Reset, None),
            g(GroupStage::Failed, None),
            g(GroupStage::Reset, Some("2026-11-29T16:00:00Z")),
        ],
        ..Default::default()
    };
    assert_eq!(catching_up(&st), [0]);
    st.phase = RequestPhase::Resetting;
    assert!(catching_up(&st).is_empty());
}

#[test]
fn an_already_done_request_reports_its_recorded_groups() {
    let progress = GroupProgress {
        group: router(),
        intent: None,
        outcome: Some(intent().into_reset("shop.cart-events.v1", vec![])),
    };
    let m = ResetMachine::new(request(&["router"]), Some(ID), vec![progress]);
    let st = m.status();
    assert_eq!(st.phase, RequestPhase::Done);
    assert_eq!(st.groups.len(), 1);
    assert_eq!(st.groups[0].outcome, GroupStage::Reset);
    assert_eq!(st.groups[0].records_to_reprocess, 220);
}

#[test]
fn a_group_recovering_by_the_markers_shows_recovering_and_its_status_stands_in_for_a_lost_ledger() {
    let m = resumed();
    let st = m.status();
    let g = &st.groups[0];
    assert_eq!(g.outcome, GroupStage::Recovering);
    assert!(g.message.ends_with("reading the committed offsets and their markers to learn it"), "{g:?}");
    assert_eq!((g.partitions, g.records_to_reprocess), (3, 220), "the intent is in the status: {g:?}");
    let from_ledger = vec![GroupProgress { group: router(), intent: Some(intent()), outcome: None }];
    assert_eq!(progress_from_status(&st), from_ledger, "read back as an intent without outcome");
    // Rebuilt from that status alone, it recovers again rather than committing.
    let mut again = ResetMachine::new(request(&["router"]), None, merge_progress(vec![], progress_from_status(&st)));
    again.handle(stopped_router(), T0);
    assert!(matches!(&drain(&mut again)[..], [Effect::ReadCommitted(_)]));

    // A commit whose answer was lost is recovered the same way, and shows it.
    let mut m = ResetMachine::new(request(&["router"]), None, vec![]);
    m.handle(stopped_router(), T0);
    drain(&mut m);
    inspect_and_fence(&mut m);
    m.handle(Input::ReadBack { group: router(), result: Err(timed_out()) }, T0);
    assert!(matches!(&drain(&mut m)[..], [Effect::ReadCommitted(_)]));
    assert_eq!(m.status().groups[0].outcome, GroupStage::Recovering);
    assert_eq!(progress_from_status(&m.status()), from_ledger);
}
