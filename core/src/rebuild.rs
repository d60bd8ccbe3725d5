//! A rebuild (`flow rebuild`, see docs/rebuild.md): a reset request marked `rebuild`, carried out by
//! the same machinery as any reset, during which the operator holds its target streamlets at 0
//! replicas by what it renders. Everything here is derived from the resource's annotations and
//! status alone, so that an operator that restarts in the middle holds the same streamlets.
//!
//! - [`held`]: the streamlets whose Deployments are rendered at 0 replicas now.
//! - [`conditions`]: `Rebuilding` (True while streamlets are held) and `CaughtUp` (True once the
//!   rebuild is done and every consumer group it reset has caught up), for `kubectl wait`.
//! - [`events`]: one event when the holding starts and one when it ends.

use std::collections::BTreeSet;

use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::{AnkkaFlowSpec, Condition, GroupStage, RequestPhase, ResetStatus};
use crate::targets;

/// Condition type: True while a rebuild holds streamlets at 0 replicas.
pub const CONDITION_REBUILDING: &str = "Rebuilding";
/// Condition type: True once the latest rebuild is done and every group it reset has caught up.
pub const CONDITION_CAUGHT_UP: &str = "CaughtUp";

/// The rebuild the request annotation holds (`request`), done or not; `None` for any other request,
/// the plan of a rebuild (`flow rebuild --dry-run`, which stops nothing), or an annotation that
/// does not parse (the reset driver reports that one).
pub fn request(request: Option<&str>) -> Option<ResetRequest> {
    request.and_then(|r| ResetRequest::parse(r).ok()).filter(|r| r.rebuild && !r.dry_run)
}

/// The streamlets a rebuild holds at 0 replicas now: the targets of a rebuild request whose id is
/// not in the done annotation (`done`); for a rebuild from streamlets, every streamlet of its
/// closure (the named ones and those downstream of them, see [`crate::closure`]). A selection the
/// reset driver refuses holds nothing (the driver marks such a request done at once).
pub fn held(spec: &AnkkaFlowSpec, annotation: Option<&str>, done: Option<&str>) -> BTreeSet<String> {
    let Some(r) = request(annotation).filter(|r| done != Some(r.id.as_str())) else { return BTreeSet::new() };
    if !r.from.is_empty() {
        return crate::closure::of(spec, &r.from).map(|c| c.streamlets()).unwrap_or_default();
    }
    match targets::select(spec, &r.streamlets) {
        Ok(t) => t.into_iter().map(|t| t.streamlet).collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// The groups of a done rebuild from streamlets that have not caught up, however low their lag, yet:
/// those put at the end of their topic while a group upstream of them (one of the streamlets that
/// write that topic) has not caught up at an earlier measurement (`reset`, as it stood before this
/// one). A group at the end reads what the replay writes: its lag is 0 right after the reset, and
/// it has read the whole replay only once its writers have read all of theirs.
pub fn catching_up_later(spec: &AnkkaFlowSpec, annotation: Option<&str>, reset: &ResetStatus) -> BTreeSet<String> {
    let Some(r) = request(annotation).filter(|r| r.id == reset.id && !r.from.is_empty()) else {
        return BTreeSet::new();
    };
    let Ok(closure) = crate::closure::of(spec, &r.from) else { return BTreeSet::new() };
    let caught_up = |g: &GroupId| reset.groups.iter().any(|s| s.group == g.as_str() && s.caught_up_at.is_some());
    closure
        .placements()
        .iter()
        .filter(|p| closure.upstream(&p.target.group).iter().any(|u| !caught_up(u)))
        .map(|p| p.target.group.to_string())
        .collect()
}

/// How far the rebuild's consumer groups have caught up: `Some((caught up, reset))` once its
/// request is done (`reset` is the status of the request `id`), `None` before.
fn catch_up(id: &str, reset: Option<&ResetStatus>) -> Option<(usize, usize)> {
    let r = reset.filter(|r| r.id == id && r.phase == RequestPhase::Done)?;
    if r.groups.iter().any(|g| g.outcome == GroupStage::Failed) {
        return Some((0, usize::MAX));
    }
    let groups: Vec<_> = r.groups.iter().filter(|g| g.outcome == GroupStage::Reset).collect();
    Some((groups.iter().filter(|g| g.caught_up_at.is_some()).count(), groups.len()))
}

/// The `Rebuilding` and `CaughtUp` conditions while the request annotation is a rebuild (none
/// otherwise). `held` is what [`held`] returned, `reset` the status of the latest request.
pub fn conditions(
    annotation: Option<&str>,
    held: &BTreeSet<String>,
    reset: Option<&ResetStatus>,
    generation: Option<i64>,
) -> Vec<Condition> {
    let Some(r) = request(annotation) else { return vec![] };
    let id = &r.id;
    let names = held.iter().cloned().collect::<Vec<_>>().join(", ");
    let stage = reset.filter(|s| s.id == *id).map(|s| {
        let mut t = format!("; the reset is {}", s.phase.as_str().to_ascii_lowercase());
        if !s.detail.is_empty() {
            t.push_str(": ");
            t.push_str(&s.detail);
        }
        t
    });
    let rebuilding = if held.is_empty() {
        let (reason, message) = match reset.filter(|s| s.id == *id).map(|s| &s.phase) {
            Some(RequestPhase::Done) => {
                ("Restored", format!("rebuild {id} is done; the streamlets run at the resource's replicas"))
            }
            Some(RequestPhase::Refused) => {
                ("Refused", format!("rebuild {id} was refused{}", stage.unwrap_or_default()))
            }
            _ => ("NotHeld", format!("rebuild {id} holds no streamlet")),
        };
        cond(CONDITION_REBUILDING, false, reason, message, generation)
    } else {
        let message = format!(
            "rebuild {id} holds {names} at 0 replicas (the resource's replicas are unchanged) until the \
             reset is done{}",
            stage.unwrap_or_default()
        );
        cond(CONDITION_REBUILDING, true, "HeldStopped", message, generation)
    };
    let caught_up = match catch_up(id, reset) {
        Some((n, of)) if n == of => cond(
            CONDITION_CAUGHT_UP,
            true,
            "CaughtUp",
            format!("every consumer group rebuild {id} reset has caught up ({of})"),
            generation,
        ),
        Some((_, usize::MAX)) => cond(
            CONDITION_CAUGHT_UP,
            false,
            "GroupsFailed",
            format!("rebuild {id} is done, but some consumer group failed to reset (see status.reset)"),
            generation,
        ),
        Some((n, of)) => cond(
            CONDITION_CAUGHT_UP,
            false,
            "CatchingUp",
            format!("{n} of {of} consumer group(s) rebuild {id} reset have caught up"),
            generation,
        ),
        None => cond(CONDITION_CAUGHT_UP, false, "Rebuilding", format!("rebuild {id} is not done yet"), generation),
    };
    vec![rebuilding, caught_up]
}

/// The events of the `Rebuilding` condition `now` computed, given the stored conditions (`before`):
/// one when the rebuild starts holding streamlets, one when it lets them go after its reset is done.
/// An event is due whenever the stored condition does not say the same of the same request yet (a
/// status written in the middle of a reset may not carry it); each is named by the request, so the
/// API server refuses a second one and an operator that restarts records neither twice.
pub fn events(annotation: Option<&str>, now: &[Condition], before: &[Condition]) -> Vec<Event> {
    let Some(r) = request(annotation) else { return vec![] };
    let find = |cs: &[Condition]| cs.iter().find(|c| c.type_ == CONDITION_REBUILDING).cloned();
    let Some(current) = find(now) else { return vec![] };
    let said = find(before).is_some_and(|b| b.status == current.status && b.message.contains(&r.id));
    if said {
        return vec![];
    }
    match (current.status.as_str(), current.reason.as_str()) {
        ("True", _) => vec![Event::new(EventType::Normal, "Rebuilding", current.message, format!("{}/held", r.id))],
        (_, "Restored") => {
            vec![Event::new(EventType::Normal, "RebuildRestored", current.message, format!("{}/restored", r.id))]
        }
        _ => vec![],
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: crate::events::fit_note(&message),
        last_transition_time: String::new(),
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::GroupStatus;
    use crate::targets::tests::cart;

    const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

    fn rebuild() -> String {
        ResetRequest { rebuild: true, ..ResetRequest::new(ID, vec![]) }.to_annotation()
    }

    fn done(caught_up: Option<&str>) -> ResetStatus {
        ResetStatus {
            id: ID.into(),
            phase: RequestPhase::Done,
            groups: vec![GroupStatus {
                group: "cart.router.in".into(),
                outcome: GroupStage::Reset,
                caught_up_at: caught_up.map(str::to_string),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_pending_rebuild_holds_its_targets_and_a_done_one_nothing() {
        let a = rebuild();
        assert_eq!(held(&cart(1), Some(&a), None), BTreeSet::from(["router".to_string(), "sink".to_string()]));
        let one = ResetRequest { rebuild: true, ..ResetRequest::new(ID, vec!["router".into()]) }.to_annotation();
        assert_eq!(held(&cart(1), Some(&one), None), BTreeSet::from(["router".to_string()]));
        assert!(held(&cart(1), Some(&a), Some(ID)).is_empty(), "done: the spec's replicas again");
        let plain = ResetRequest::new(ID, vec![]).to_annotation();
        assert!(held(&cart(1), Some(&plain), None).is_empty(), "a plain reset holds nothing");
        let unknown = ResetRequest { rebuild: true, ..ResetRequest::new(ID, vec!["nope".into()]) }.to_annotation();
        assert!(held(&cart(1), Some(&unknown), None).is_empty(), "a refused selection holds nothing");
        assert!(held(&cart(1), Some("not json"), None).is_empty());
    }

    #[test]
    fn a_rebuild_from_a_streamlet_holds_its_closure_and_its_plan_nothing() {
        let spec = crate::closure::tests::chain();
        let from = ResetRequest { rebuild: true, from: vec!["middle".into()], ..ResetRequest::new(ID, vec![]) };
        let held_now = held(&spec, Some(&from.to_annotation()), None);
        assert_eq!(held_now, BTreeSet::from(["middle".to_string(), "sink".to_string()]), "source runs on");
        let plan = ResetRequest { dry_run: true, ..from.clone() }.to_annotation();
        assert!(held(&spec, Some(&plan), None).is_empty(), "a plan stops nothing");
        assert!(conditions(Some(&plan), &BTreeSet::new(), None, None).is_empty(), "nor says it does");
        let refused = ResetRequest { from: vec!["nope".into()], ..from }.to_annotation();
        assert!(held(&spec, Some(&refused), None).is_empty(), "a refused rebuild holds nothing");
    }

    #[test]
    fn a_group_at_the_end_catches_up_only_after_its_writers() {
        let spec = crate::closure::tests::chain();
        let from = ResetRequest { rebuild: true, from: vec!["middle".into()], ..ResetRequest::new(ID, vec![]) };
        let annotation = from.to_annotation();
        let group = |g: &str, caught: bool| GroupStatus {
            group: g.into(),
            outcome: GroupStage::Reset,
            caught_up_at: caught.then(|| "2026-12-01T09:00:00Z".to_string()),
            ..Default::default()
        };
        let mut status = ResetStatus {
            id: ID.into(),
            phase: RequestPhase::Done,
            groups: vec![group("chain.middle.in", false), group("chain.sink.in", false)],
            ..Default::default()
        };
        let later = catching_up_later(&spec, Some(&annotation), &status);
        assert_eq!(later, BTreeSet::from(["chain.sink.in".to_string()]), "middle has not read the replay yet");
        status.groups[0] = group("chain.middle.in", true);
        assert!(catching_up_later(&spec, Some(&annotation), &status).is_empty());
        let whole = rebuild();
        assert!(catching_up_later(&cart(1), Some(&whole), &done(None)).is_empty(), "a rebuild of streamlets: none");
    }

    #[test]
    fn conditions_say_held_then_caught_up() {
        let a = rebuild();
        let h = held(&cart(1), Some(&a), None);
        let c = conditions(Some(&a), &h, None, Some(2));
        assert_eq!(
            (c[0].type_.as_str(), c[0].status.as_str(), c[0].reason.as_str()),
            ("Rebuilding", "True", "HeldStopped")
        );
        assert!(
            c[0].message.starts_with(&format!("rebuild {ID} holds router, sink at 0 replicas")),
            "{}",
            c[0].message
        );
        assert_eq!((c[1].type_.as_str(), c[1].status.as_str()), ("CaughtUp", "False"));
        let ev = events(Some(&a), &c, &[]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].reason, "Rebuilding");
        assert!(events(Some(&a), &c, &c).is_empty(), "no event without a change");

        let none = BTreeSet::new();
        let behind = conditions(Some(&a), &none, Some(&done(None)), Some(2));
        assert_eq!((behind[0].status.as_str(), behind[0].reason.as_str()), ("False", "Restored"));
        assert_eq!((behind[1].status.as_str(), behind[1].reason.as_str()), ("False", "CatchingUp"));
        assert_eq!(events(Some(&a), &behind, &c)[0].reason, "RebuildRestored");
        // A status written in the middle of the reset may have lost the condition: still once due.
        assert_eq!(events(Some(&a), &behind, &[])[0].reason, "RebuildRestored");
        assert!(events(Some(&a), &behind, &behind).is_empty());
        let up = conditions(Some(&a), &none, Some(&done(Some("2026-12-01T09:00:00Z"))), Some(2));
        assert_eq!((up[1].status.as_str(), up[1].reason.as_str()), ("True", "CaughtUp"));

        let plain = ResetRequest::new(ID, vec![]).to_annotation();
        assert!(conditions(Some(&plain), &none, Some(&done(None)), None).is_empty(), "only a rebuild has them");
    }
}
