//! What `status.reset` holds of each group: in detail for a small request, a bounded summary
//! otherwise, and the full text of a group's message either way ([`group_message`]).
//!
//! A group is shown **in detail** when it has at most [`LISTED_OFFSETS`] partitions and the request at
//! most [`LISTED_GROUPS`] groups (a dry run's groups are always, for its plan): its offsets before
//! and after, partition by partition, and its message in full. Otherwise the status keeps a
//! **summary**: its stage, topic, partitions, records, and of its message only what the rest does not
//! tell (Kafka's last error while it retries, a failure's reason, a reset's notes). The summary's size
//! depends on neither the partitions nor the wording, so a request of 200 groups over 1,000 partitions
//! keeps the resource small; the ledger keeps every offset, and Kafka the markers that recover a group
//! without them (docs/reset.md, "The resource stays small").

use std::collections::BTreeMap;

use super::group::GroupPhase;
use super::vocabulary::{Committed, GroupOutcome, Timestamp};
use super::wording::{self, NAMED_PARTITIONS, join, offsets_map};
use crate::events::fit_note;
use crate::names::GroupId;
use crate::resource::{GroupStage, GroupStatus, ResetStatus};

/// Most partitions a group may have to be shown in detail.
pub const LISTED_OFFSETS: u32 = 16;

/// Most groups a request may have for its groups to be shown in detail (a dry run's are, whatever
/// their number, for its plan).
pub const LISTED_GROUPS: usize = 16;

/// The most bytes of a group's message, and of the request's detail, the status keeps: as many as an
/// event's note.
pub const MESSAGE_LIMIT: usize = crate::events::NOTE_LIMIT;

/// Whether a group of `partitions` partitions, in a request of `groups` groups, is shown in detail.
fn detailed(groups: usize, partitions: u32, dry_run: bool) -> bool {
    partitions <= LISTED_OFFSETS && (dry_run || groups <= LISTED_GROUPS)
}

/// The text of a group's message as `flow reset status` shows it: the status's own for a group shown
/// in detail, spelled out from the group's stage and figures for a summary.
pub fn group_message(reset: &ResetStatus, g: &GroupStatus) -> String {
    if detailed(reset.groups.len(), g.partitions, reset.dry_run) {
        return g.message.clone();
    }
    let to = g.to.as_deref().or(reset.to.as_deref());
    let spelled = match g.outcome {
        GroupStage::Reset => {
            // A status of an operator before summaries held the whole text.
            if g.message.starts_with(&went(g.partitions, &g.topic, to, "")) {
                return g.message.clone();
            }
            let skipped = wording::skipped(g.records_to_skip);
            let notes: Vec<&str> =
                [skipped.trim_start_matches("; "), g.message.as_str()].into_iter().filter(|n| !n.is_empty()).collect();
            went(g.partitions, &g.topic, to, &notes.join("; ")) + &added(&g.added_partitions)
        }
        GroupStage::Planned => {
            let planned =
                planned(g.partitions, &g.topic, to, g.records_to_reprocess, g.warnings.len(), g.records_to_skip);
            if g.message.starts_with(&planned) {
                return g.message.clone();
            }
            planned
        }
        stage => spell(stage, &g.message, to.is_some()),
    };
    fit_note(&spelled)
}

/// The message of a stage without an outcome, from the status's own part of it (`own`: Kafka's last
/// error, or why the commit failed).
fn spell(stage: GroupStage, own: &str, to: bool) -> String {
    let error = (!own.is_empty()).then_some(own);
    match stage {
        GroupStage::Recovering => {
            let why = "whether the reset commit landed is unknown (the operator stopped during the reset, or the \
                       commit's answer was lost)";
            match error {
                None => format!("{why}: reading the committed offsets and their markers to learn it"),
                Some(e) => format!("{why}: reading the committed offsets and their markers failed, retrying: {e}"),
            }
        }
        GroupStage::Verifying => {
            let at = if to { "its new offsets" } else { "the log start offsets" };
            match error {
                None => format!(
                    "read back at {at}; reading them again after the settle delay, to check that no consumer \
                     overwrote the reset"
                ),
                Some(e) => format!("read back at {at}; reading them again failed, retrying: {e}"),
            }
        }
        _ => own.to_string(),
    }
}

/// `<n> partition(s) of '<topic>' to <where>`, then the notes.
fn went(n: u32, topic: &str, to: Option<&str>, notes: &str) -> String {
    let mut text = format!("{n} partition(s) of '{topic}' to {}", to.unwrap_or("earliest"));
    if !notes.is_empty() {
        text.push_str("; ");
        text.push_str(notes);
    }
    text
}

fn added(partitions: &[i32]) -> String {
    if partitions.is_empty() {
        return String::new();
    }
    format!("; partition(s) {} were added during the reset and were not reset", join(partitions))
}

fn planned(n: u32, topic: &str, to: Option<&str>, records: i64, warnings: usize, skip: i64) -> String {
    let mut text = format!(
        "would move {n} partition(s) of '{topic}' to {}, {records} record(s) to reprocess",
        to.unwrap_or("earliest")
    );
    text.push_str(&wording::to_skip(skip));
    if warnings > 0 {
        text += &format!("; {warnings} warning(s)");
    }
    text
}

/// A group's status in a request of `groups` groups (see the module documentation); `to` is where
/// the request goes (`None`: the earliest offsets).
pub(super) fn group_status(
    group: &GroupId,
    topic: &str,
    phase: &GroupPhase,
    groups: usize,
    dry_run: bool,
    to: Option<&str>,
) -> GroupStatus {
    let mut g = GroupStatus { group: group.to_string(), topic: topic.to_string(), ..Default::default() };
    let mut detail = false;
    let mut with_intent = |g: &mut GroupStatus, before: &Committed, target: &BTreeMap<i32, i64>, records: i64, n| {
        detail = detailed(groups, n, dry_run);
        if detail {
            g.offsets_before = offsets_map(before.iter().map(|(p, o)| (p, o.as_ref())));
            g.offsets_after = offsets_map(target.iter().map(|(p, o)| (p, Some(o))));
        }
        g.partitions = n;
        g.records_to_reprocess = records;
    };
    match phase {
        GroupPhase::Committing { intent, .. }
        | GroupPhase::Recovering { intent, .. }
        | GroupPhase::Verifying { intent, .. }
        | GroupPhase::Reporting { intent, .. }
        | GroupPhase::Finished(GroupOutcome::Planned { intent, .. }) => g.records_to_skip = intent.records_to_skip,
        GroupPhase::Finished(GroupOutcome::Reset { records_to_skip, .. }) => g.records_to_skip = *records_to_skip,
        _ => {}
    }
    if let GroupPhase::Pending { retry }
    | GroupPhase::Inspecting { retry }
    | GroupPhase::Fencing { retry, .. }
    | GroupPhase::Committing { retry, .. }
    | GroupPhase::Recovering { retry, .. }
    | GroupPhase::Verifying { retry, .. } = phase
    {
        g.failing_since = retry.since.map(Timestamp::rfc3339);
        g.message = retry.last_error.clone().unwrap_or_default();
    }
    match phase {
        GroupPhase::Pending { .. } | GroupPhase::Inspecting { .. } | GroupPhase::Fencing { .. } => {}
        GroupPhase::Surveyed { seen: Ok(_) } => {
            g.message = "looked at; nothing of the rebuild moves before every group of it has been, and the end of \
                         each topic it writes again has held still"
                .into();
        }
        GroupPhase::Surveyed { seen: Err(reason) } => g.message.clone_from(reason),
        GroupPhase::Committing { intent, .. } => {
            g.outcome = GroupStage::Committing;
            // Kafka's reason for a commit that failed is kept by the recovery that follows.
            g.message.clear();
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Recovering { intent, .. } | GroupPhase::Verifying { intent, .. } => {
            g.outcome = if matches!(phase, GroupPhase::Verifying { .. }) {
                GroupStage::Verifying
            } else {
                GroupStage::Recovering
            };
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
            if detail {
                g.message = spell(g.outcome, &g.message, to.is_some());
            }
        }
        GroupPhase::Reporting { reason, intent } => {
            g.outcome = GroupStage::Committing;
            g.message = format!("{reason}; reading what the group holds now");
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Finished(
            outcome @ GroupOutcome::Reset { before, offsets, records_to_reprocess, added: more, notes, .. },
        ) => {
            g.outcome = GroupStage::Reset;
            with_intent(&mut g, before, offsets, *records_to_reprocess, outcome.partitions());
            g.message = if detail { wording::went(outcome) + &added(more) } else { notes.join("; ") };
            g.added_partitions = more.iter().take(NAMED_PARTITIONS).copied().collect();
        }
        GroupPhase::Finished(outcome @ GroupOutcome::Planned { intent, high_watermark, warnings, .. }) => {
            g.outcome = GroupStage::Planned;
            let n = outcome.partitions();
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, n);
            if detail {
                g.high_watermarks = offsets_map(high_watermark.iter().map(|(p, o)| (p, Some(o))));
                g.message = wording::planned(outcome);
            }
            g.warnings = warnings.iter().map(|w| fit_note(w)).collect();
        }
        GroupPhase::Finished(GroupOutcome::Failed { reason, .. }) => {
            g.outcome = GroupStage::Failed;
            g.message = reason.clone();
        }
    }
    g.message = fit_note(&g.message);
    g
}
