//! The words of a group's outcome: its events, and the text the status shows of it.

use std::collections::BTreeMap;

use super::vocabulary::GroupOutcome;
use crate::events::{Event, EventType};
use crate::targets::InletTarget;

/// Most partitions one message names; the rest are counted.
pub const NAMED_PARTITIONS: usize = 20;

/// The event of a group's outcome, keyed `<request id>/<group>`: one per request and group.
pub fn outcome_event(id: &str, target: &InletTarget, outcome: &GroupOutcome) -> Event {
    match outcome {
        GroupOutcome::Reset { .. } => Event::new(
            EventType::Normal,
            "ResetOffsets",
            format!("{}: {}", target.group, went(outcome)),
            format!("{id}/{}", target.group),
        ),
        GroupOutcome::Planned { .. } => Event::new(
            EventType::Normal,
            "ResetPlanned",
            format!("{}: {}", target.group, planned(outcome)),
            format!("{id}/{}", target.group),
        ),
        GroupOutcome::Failed { reason, .. } => Event::new(
            EventType::Warning,
            "ResetOffsetsFailed",
            format!("{}: {reason}", target.group),
            format!("{id}/{}", target.group),
        ),
    }
}

/// Where a reset group went, as its event and status say it: `<n> partition(s) of '<topic>' to
/// earliest` (exact, as the platform always wrote it), or to the instant, the plan or the offsets
/// before an undone request, followed by the intent's notes. Empty for a failed group.
pub fn went(outcome: &GroupOutcome) -> String {
    let GroupOutcome::Reset { topic, to, notes, records_to_skip, .. } = outcome else { return String::new() };
    let n = outcome.partitions();
    let mut text = format!("{n} partition(s) of '{topic}' to {}", to.as_deref().unwrap_or("earliest"));
    text.push_str(&skipped(*records_to_skip));
    for note in notes {
        text.push_str("; ");
        text.push_str(note);
    }
    text
}

/// What a dry run planned for a group, as its event and status say it: `would move <n>
/// partition(s) of '<topic>' to <where>, <r> record(s) to reprocess`, and how many warnings it has.
/// Empty for other outcomes.
pub fn planned(outcome: &GroupOutcome) -> String {
    let GroupOutcome::Planned { topic, intent, warnings, to, .. } = outcome else { return String::new() };
    let mut text = format!(
        "would move {} partition(s) of '{topic}' to {}, {} record(s) to reprocess",
        outcome.partitions(),
        to.as_deref().unwrap_or("earliest"),
        intent.records_to_reprocess
    );
    text.push_str(&to_skip(intent.records_to_skip));
    if !warnings.is_empty() {
        text += &format!("; {} warning(s)", warnings.len());
    }
    text
}

/// The events of a group's outcome: [`outcome_event`], and for a reset that did not cover partitions
/// added during it, a `ResetPartitionsAdded` warning naming them, keyed `<request id>/<group>/added`;
/// for a reset with notes (a partition with no record after the time went to its log end), a
/// `ResetOffsetsWarning` with the notes, keyed `<request id>/<group>/warning`.
pub fn outcome_events(id: &str, target: &InletTarget, outcome: &GroupOutcome) -> Vec<Event> {
    let mut events = vec![outcome_event(id, target, outcome)];
    if let GroupOutcome::Reset { topic, added, .. } = outcome
        && !added.is_empty()
    {
        events.push(Event::new(
            EventType::Warning,
            "ResetPartitionsAdded",
            format!(
                "{}: partition(s) {} of '{topic}' were added to the topic during the reset and were not reset (the \
                 {} partition(s) it had before were); before the streamlet starts, request a new reset, which \
                 covers every partition",
                target.group,
                join(added),
                outcome.partitions()
            ),
            format!("{id}/{}/added", target.group),
        ));
    }
    if let GroupOutcome::Reset { notes, .. } = outcome
        && !notes.is_empty()
    {
        events.push(Event::new(
            EventType::Warning,
            "ResetOffsetsWarning",
            format!("{}: {}", target.group, notes.join("; ")),
            format!("{id}/{}/warning", target.group),
        ));
    }
    events
}

/// How many records of its topic a group put at the end of it skips, as a reset says it (nothing
/// for none): `; 30 record(s) written before the rebuild are skipped`.
pub(super) fn skipped(records: i64) -> String {
    if records == 0 { String::new() } else { format!("; {records} record(s) written before the rebuild are skipped") }
}

/// The same, as a plan says it: `, 30 to skip`.
pub(super) fn to_skip(records: i64) -> String {
    if records == 0 { String::new() } else { format!(", {records} to skip") }
}

/// Partition numbers joined with `, `: the first [`NAMED_PARTITIONS`], and how many more there are.
pub(super) fn join(partitions: &[i32]) -> String {
    named(&partitions.iter().map(i32::to_string).collect::<Vec<_>>())
}

/// The first [`NAMED_PARTITIONS`] items joined with `, `, and how many more there are.
pub(crate) fn named(items: &[String]) -> String {
    let mut list = items.iter().take(NAMED_PARTITIONS).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > NAMED_PARTITIONS {
        list += &format!(" and {} more partition(s)", items.len() - NAMED_PARTITIONS);
    }
    list
}

/// Offsets keyed by partition number as text (the status's maps), leaving out partitions without one.
pub(super) fn offsets_map<'a>(it: impl IntoIterator<Item = (&'a i32, Option<&'a i64>)>) -> BTreeMap<String, i64> {
    it.into_iter().filter_map(|(p, o)| o.map(|o| (p.to_string(), *o))).collect()
}
