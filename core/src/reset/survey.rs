//! A rebuild from streamlets (see [`crate::closure`]) in the reset machine: where each of its groups
//! goes, and the *survey* that comes before anything of it moves.
//!
//! # Where each group goes
//! A named streamlet's group goes where the request sends it (the start, a time, a plan's offsets);
//! a group downstream of it goes to the end of its topic as the inspection saw it, which the reset
//! takes only once every streamlet of the closure has stopped (the request waits for their pods to go
//! first), so once every writer of the topic has: it will read exactly what the replay writes. Its
//! intent counts the records of the topic it skips.
//!
//! # The survey
//! Once every streamlet of the closure is stopped, and before any group is fenced, every group of
//! the request is inspected, then the groups put at the end of their topic are inspected a second
//! time, the settle delay later. Only if the end of every such topic held still in between (nothing
//! outside the pipeline writes it), every group could be looked at, and every group of a plan is
//! still where the plan saw it, do the groups move; else the whole request is refused, naming each
//! problem, and nothing is reset. A settle delay of 0 skips the second look.
//!
//! The survey only reads, and runs again whole if the operator stops in the middle of it. A request
//! that already moved some group (one rebuilt from durable progress) does not survey again: its
//! remaining groups move as they are inspected, to the end of their topic as it stands then, which
//! no streamlet of the closure has written to since (they stay stopped until the request is done).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::destination::Destination;
use super::group::{Group, GroupPhase, Rules, Survey};
use super::retry::Retry;
use super::vocabulary::{Effect, Inspection, Intent, Timestamp};
use super::wording::named;
use crate::closure::{Place, end_text};
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::AnkkaFlowSpec;
use crate::targets::{InletTarget, Target};

/// What a survey decided.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Not every group has been looked at yet (or the second look is still to come).
    Waits,
    /// Nothing may move: why.
    Refused(String),
    /// Every group may move.
    Passed,
}

impl Rules {
    /// Where `group` goes in a rebuild from streamlets (`None` outside one).
    fn place(&self, group: &GroupId) -> Option<&Place> {
        self.closure.as_ref().and_then(|c| c.place(group))
    }

    /// The intent of `target`'s group from what its inspection saw: where the destination sends it,
    /// except that a group a rebuild from streamlets puts at the end of its topic goes to the end
    /// as seen (unless the request gives its offsets: a plan's); such a group's intent counts the
    /// records it skips.
    ///
    /// # Errors
    /// The reason a group with given offsets is refused (see [`Destination::intent`]).
    pub(super) fn intent(&self, target: &InletTarget, seen: &Inspection) -> Result<Intent, String> {
        let Some(Place::End { .. }) = self.place(&target.group) else {
            return self.destination.intent(target, seen);
        };
        let intent = match &self.destination {
            Destination::Given(_) => self.destination.intent(target, seen)?,
            _ => {
                let end = |p: &i32, start: &i64| seen.high_watermark.get(p).copied().unwrap_or(*start).max(*start);
                let goal = seen.log_start.iter().map(|(p, start)| (*p, end(p, start))).collect();
                Intent::new(seen.committed.clone(), goal, 0)
            }
        };
        let skipped = intent
            .target
            .iter()
            .map(|(p, to)| {
                let start = seen.log_start.get(p).copied().unwrap_or(0);
                let from = seen.committed.get(p).copied().flatten().unwrap_or(start).max(start);
                (to - from).max(0)
            })
            .sum();
        Ok(intent.with_skip(skipped))
    }

    /// Where `group` goes, as its events and the status say it: the destination's words, or for a
    /// group a rebuild from streamlets puts at the end of its topic, [`end_text`] (unless a plan
    /// gives its offsets). `None` for the earliest offsets.
    pub(super) fn describe(&self, group: &GroupId) -> Option<String> {
        match (self.place(group), &self.destination) {
            (Some(Place::End { writers }), Destination::Earliest | Destination::Time(_)) => Some(end_text(writers)),
            _ => self.destination.describe(),
        }
    }

    /// In the plan of a rebuild from streamlets: the warning of a group put at the end of a topic
    /// that streamlets of the rebuild still write.
    pub(super) fn closure_warning(&self, target: &InletTarget) -> Option<String> {
        let Some(Place::End { writers }) = self.place(&target.group) else { return None };
        let running: Vec<&str> = writers.iter().filter(|w| self.running.contains(*w)).map(String::as_str).collect();
        (!running.is_empty()).then(|| {
            format!(
                "{} still run{} and write{} '{}': the rebuild takes its end once they have stopped, so it skips what \
                 they write until then too, and more records than planned",
                running.join(", "),
                if running.len() == 1 { "s" } else { "" },
                if running.len() == 1 { "s" } else { "" },
                target.topic
            )
        })
    }
}

/// The targets of a rebuild from streamlets, `request.from`, in `spec`: the groups its closure
/// moves, which `rules` then places. A plan of it must move exactly those groups.
///
/// # Errors
/// The refusal note: the closure's problems (see [`crate::closure::of`]), or a plan that is not of
/// this rebuild.
pub(super) fn select(spec: &AnkkaFlowSpec, request: &ResetRequest, rules: &mut Rules) -> Result<Vec<Target>, String> {
    let id = &request.id;
    let closure = crate::closure::of(spec, &request.from)
        .map_err(|problems| crate::closure::operator_note(id, &request.from, &problems))?;
    let targets = closure.targets();
    if let Destination::Given(given) = &rules.destination {
        let moved: BTreeSet<&GroupId> = targets.iter().flat_map(|t| &t.inlets).map(|i| &i.group).collect();
        let missing: Vec<String> =
            moved.iter().filter(|g| !given.groups.contains_key(**g)).map(ToString::to_string).collect();
        let extra: Vec<String> = given.groups.keys().filter(|g| !moved.contains(g)).map(ToString::to_string).collect();
        if !missing.is_empty() || !extra.is_empty() {
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!("it has no offsets for {}", missing.join(", ")));
            }
            if !extra.is_empty() {
                why.push(format!("it has offsets for {}, which the rebuild does not move", extra.join(", ")));
            }
            return Err(format!(
                "reset {id} refused, nothing was reset: {} is not a plan of a rebuild from {}: {}; make a new plan \
                 with flow rebuild --from {} --dry-run",
                given.describe(),
                request.from.join(", "),
                why.join("; "),
                request.from.join(" --from ")
            ));
        }
    }
    rules.closure = Some(closure);
    Ok(targets)
}

/// Where the survey stands once a group's inspection came in (`groups` are the request's).
pub(super) fn verdict(groups: &BTreeMap<GroupId, Group>, rules: &mut Rules, id: &str, now: Timestamp) -> Verdict {
    let Some(survey) = rules.survey.as_ref() else { return Verdict::Passed };
    if !groups.values().all(|g| matches!(g.phase, GroupPhase::Surveyed { .. })) {
        return Verdict::Waits;
    }
    let ends = |g: &Group| match (&g.phase, rules.place(&g.target.group)) {
        (GroupPhase::Surveyed { seen: Ok(seen) }, Some(Place::End { .. })) => Some(seen.high_watermark.clone()),
        _ => None,
    };
    let unseen = groups.values().any(|g| matches!(g.phase, GroupPhase::Surveyed { seen: Err(_) }));
    if survey.first.is_none() {
        let first: BTreeMap<GroupId, BTreeMap<i32, i64>> =
            groups.values().filter_map(|g| Some((g.target.group.clone(), ends(g)?))).collect();
        let look_again = !unseen && !first.is_empty() && !rules.settle.is_zero();
        let next = look_again.then(|| now.after(rules.settle));
        rules.survey = Some(Survey { first: Some(first), next });
        if look_again {
            return Verdict::Waits;
        }
    } else if survey.next.is_some() {
        return Verdict::Waits;
    }
    let first = rules.survey.as_ref().and_then(|s| s.first.clone()).unwrap_or_default();
    let mut problems: Vec<String> = Vec::new();
    let mut grown: BTreeMap<&str, (Vec<String>, Vec<&GroupId>)> = BTreeMap::new();
    for g in groups.values() {
        let GroupPhase::Surveyed { seen } = &g.phase else { continue };
        let group = &g.target.group;
        let seen = match seen {
            Ok(seen) => seen,
            Err(reason) => {
                problems.push(format!("{group} could not be looked at: {reason}"));
                continue;
            }
        };
        if let Some(before) = first.get(group) {
            let moved = moves(before, &seen.high_watermark);
            if !moved.is_empty() {
                let entry = grown.entry(g.target.topic.as_str()).or_default();
                if entry.0.is_empty() {
                    entry.0 = moved;
                }
                entry.1.push(group);
            }
        }
        match rules.intent(&g.target, seen) {
            Err(reason) => problems.push(format!("{group}: {reason}")),
            Ok(intent) => {
                if let (Some(Place::End { .. }), Destination::Given(given)) = (rules.place(group), &rules.destination) {
                    let ends: Vec<String> = intent
                        .target
                        .iter()
                        .filter(|(p, at)| seen.high_watermark.get(p).is_some_and(|h| h != *at))
                        .map(|(p, at)| format!("partition {p} at {at}, now {}", seen.high_watermark[p]))
                        .collect();
                    if !ends.is_empty() {
                        let plan = given.describe();
                        problems.push(format!(
                            "{group}: {plan} put it at the end of '{}' as it was then ({}): streamlets wrote to it since \
                             (make a new plan once they are stopped)",
                            g.target.topic,
                            named(&ends)
                        ));
                    }
                }
            }
        }
    }
    for (topic, (moved, readers)) in grown {
        problems.push(format!(
            "topic '{topic}' grew while every streamlet of the pipeline that writes it was stopped ({}): something \
             outside the pipeline writes it, and {} put at its end would skip what it writes until the streamlets \
             start; stop it and request again",
            named(&moved),
            readers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ));
    }
    if problems.is_empty() {
        return Verdict::Passed;
    }
    Verdict::Refused(format!("reset {id} refused, nothing was reset: {}", problems.join("; ")))
}

/// The partitions whose end moved from `before` to `now`, in words.
fn moves(before: &BTreeMap<i32, i64>, now: &BTreeMap<i32, i64>) -> Vec<String> {
    let mut moved: Vec<String> = now
        .iter()
        .filter(|(p, at)| before.get(p) != Some(at))
        .map(|(p, at)| match before.get(p) {
            Some(was) => format!("partition {p} from {was} to {at}"),
            None => format!("partition {p} added, at {at}"),
        })
        .collect();
    moved.extend(before.keys().filter(|p| !now.contains_key(p)).map(|p| format!("partition {p} gone")));
    moved
}

/// At a tick: once the second look is due, each group put at the end of its topic is inspected
/// again.
pub(super) fn tick(
    groups: &mut BTreeMap<GroupId, Group>,
    rules: &mut Rules,
    now: Timestamp,
    effects: &mut VecDeque<Effect>,
) {
    let Some(survey) = rules.survey.as_mut() else { return };
    if survey.next.is_none_or(|at| now < at) {
        return;
    }
    survey.next = None;
    let first = survey.first.clone().unwrap_or_default();
    for g in groups.values_mut().filter(|g| first.contains_key(&g.target.group)) {
        effects.push_back(Effect::InspectGroup(g.target.clone()));
        g.phase = GroupPhase::Inspecting { retry: Retry::default() };
    }
}

impl super::destination::Given {
    /// `plan <id>` or `reset <id>`, as messages name where given offsets come from.
    fn describe(&self) -> String {
        match &self.source {
            super::destination::Source::Plan(id) => format!("plan {id}"),
            super::destination::Source::Undo(id) => format!("reset {id}"),
        }
    }
}
