//! The status projection: what `status.reset` shows of a machine, and the durable progress that a
//! status holds, read back when the ledger lost it.

use std::collections::BTreeMap;

use super::group::GroupPhase;
use super::machine::{Done, ResetMachine, State};
use super::retry::Retry;
use super::vocabulary::{Committed, GroupOutcome, GroupProgress, Intent, Timestamp};
use super::wording::{self, NAMED_PARTITIONS, join, offsets_map};
use crate::events::fit_note;
use crate::names::GroupId;
use crate::resource::{GroupStage, GroupStatus, RequestPhase, ResetStatus};
use crate::targets::RunningProblem;

impl ResetMachine {
    /// The request's status, as written to `status.reset` of the resource (without its stamps).
    /// Groups with an intent carry its offsets, so that the status can stand in for a lost ledger
    /// (see [`progress_from_status`]).
    pub fn status(&self) -> ResetStatus {
        let mut status = self.unbounded_status();
        status.detail = fit_note(&status.detail);
        status.to = self.rules.destination.describe();
        if status.to.is_some() {
            // Not to the earliest offsets: a group verifying reads back at its new offsets.
            for g in &mut status.groups {
                g.message = g.message.replace("read back at the log start offsets", "read back at its new offsets");
            }
        }
        status.dry_run = self.rules.dry_run;
        status
    }

    fn unbounded_status(&self) -> ResetStatus {
        let id = self.id().to_string();
        match &self.state {
            State::Requested(_) => ResetStatus { id, phase: RequestPhase::Requested, ..Default::default() },
            // A waiting request keeps the progress of its groups from an earlier run (an intent whose
            // commit may have landed, an outcome): written over, the status could no longer stand in
            // for a lost ledger, and a group whose reset landed would be reset again.
            State::Waiting(w) => ResetStatus {
                id,
                phase: RequestPhase::Waiting,
                detail: w.reasons.iter().map(RunningProblem::operator_text).collect::<Vec<_>>().join("; "),
                groups: self.progress.values().filter_map(|r| self.progress_status(r)).collect(),
                ..Default::default()
            },
            State::Resetting(r) => ResetStatus {
                id,
                phase: RequestPhase::Resetting,
                groups: r.groups.values().map(|g| group_status(&g.target.group, &g.target.topic, &g.phase)).collect(),
                ..Default::default()
            },
            // What the progress says: a status whose final write was lost is rebuilt from it.
            State::Done(Done::AlreadyDone { .. }) => ResetStatus {
                id,
                phase: RequestPhase::Done,
                groups: self.progress.values().filter_map(|r| self.progress_status(r)).collect(),
                ..Default::default()
            },
            State::Done(Done::Refused { why, .. }) => {
                ResetStatus { id, phase: RequestPhase::Refused, detail: why.clone(), ..Default::default() }
            }
            State::Done(Done::Completed { groups, .. }) => ResetStatus {
                id,
                phase: RequestPhase::Done,
                groups: groups
                    .values()
                    .map(|(t, o)| group_status(&t.group, &t.topic, &GroupPhase::Finished(o.clone())))
                    .collect(),
                ..Default::default()
            },
        }
    }

    /// The status of a group known from its durable progress alone; `None` when it holds nothing.
    fn progress_status(&self, r: &GroupProgress) -> Option<GroupStatus> {
        let phase = match (&r.outcome, &r.intent) {
            (Some(o), _) => GroupPhase::Finished(o.clone()),
            (None, Some(intent)) => GroupPhase::Committing { retry: Retry::default(), intent: intent.clone() },
            (None, None) => return None,
        };
        let topic = match &r.outcome {
            Some(o) => o.topic().to_string(),
            None => self.topics.get(&r.group).cloned().unwrap_or_default(),
        };
        Some(group_status(&r.group, &topic, &phase))
    }
}

/// Most partitions a group may have for the status to list its offsets before and after the reset,
/// partition by partition. Beyond it, the status keeps a summary of the group (its partitions,
/// records, outcome and message), so that its size never depends on the partitions of the topics;
/// the ledger keeps every offset, and Kafka keeps the markers that recover a group without them.
pub const LISTED_OFFSETS: u32 = 16;

/// The most bytes of a group's message, and of the request's detail, the status keeps: as many as an
/// event's note.
pub const MESSAGE_LIMIT: usize = crate::events::NOTE_LIMIT;

fn group_status(group: &GroupId, topic: &str, phase: &GroupPhase) -> GroupStatus {
    let mut g = GroupStatus { group: group.to_string(), topic: topic.to_string(), ..Default::default() };
    let with_intent = |g: &mut GroupStatus, before: &Committed, target: &BTreeMap<i32, i64>, records: i64, n: u32| {
        if n <= LISTED_OFFSETS {
            g.offsets_before = offsets_map(before.iter().map(|(p, o)| (p, o.as_ref())));
            g.offsets_after = offsets_map(target.iter().map(|(p, o)| (p, Some(o))));
        }
        g.partitions = n;
        g.records_to_reprocess = records;
    };
    if let GroupPhase::Pending { retry }
    | GroupPhase::Inspecting { retry }
    | GroupPhase::Fencing { retry, .. }
    | GroupPhase::Committing { retry, .. }
    | GroupPhase::Recovering { retry, .. }
    | GroupPhase::Verifying { retry, .. } = phase
    {
        g.failing_since = retry.since.map(Timestamp::rfc3339);
    }
    match phase {
        GroupPhase::Pending { retry } | GroupPhase::Inspecting { retry } | GroupPhase::Fencing { retry, .. } => {
            g.message = retry.last_error.clone().unwrap_or_default();
        }
        GroupPhase::Committing { intent, .. } => {
            g.outcome = GroupStage::Committing;
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Recovering { intent, retry } => {
            g.outcome = GroupStage::Recovering;
            let why = "whether the reset commit landed is unknown (the operator stopped during the reset, or the \
                       commit's answer was lost)";
            g.message = match &retry.last_error {
                None => format!("{why}: reading the committed offsets and their markers to learn it"),
                Some(e) => format!("{why}: reading the committed offsets and their markers failed, retrying: {e}"),
            };
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Reporting { reason, intent } => {
            g.outcome = GroupStage::Committing;
            g.message = format!("{reason}; reading what the group holds now");
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Verifying { intent, retry } => {
            g.outcome = GroupStage::Verifying;
            g.message = match &retry.last_error {
                None => "read back at the log start offsets; reading them again after the settle delay, to check \
                         that no consumer overwrote the reset"
                    .into(),
                Some(e) => format!("read back at the log start offsets; reading them again failed, retrying: {e}"),
            };
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, intent.partition_count());
        }
        GroupPhase::Finished(outcome @ GroupOutcome::Reset { before, offsets, records_to_reprocess, added, .. }) => {
            g.outcome = GroupStage::Reset;
            g.message = wording::went(outcome);
            if !added.is_empty() {
                g.message += &format!("; partition(s) {} were added during the reset and were not reset", join(added));
            }
            with_intent(&mut g, before, offsets, *records_to_reprocess, outcome.partitions());
            g.added_partitions = added.iter().take(NAMED_PARTITIONS).copied().collect();
        }
        GroupPhase::Finished(outcome @ GroupOutcome::Planned { intent, high_watermark, warnings, .. }) => {
            g.outcome = GroupStage::Planned;
            let n = outcome.partitions();
            with_intent(&mut g, &intent.before, &intent.target, intent.records_to_reprocess, n);
            if n <= LISTED_OFFSETS {
                g.high_watermarks = offsets_map(high_watermark.iter().map(|(p, o)| (p, Some(o))));
            }
            g.warnings = warnings.iter().map(|w| fit_note(w)).collect();
            g.message = wording::planned(outcome);
        }
        GroupPhase::Finished(GroupOutcome::Failed { reason, .. }) => {
            g.outcome = GroupStage::Failed;
            g.message = reason.clone();
        }
    }
    g.message = fit_note(&g.message);
    g
}

/// The durable progress that a status written by [`ResetMachine::status`] holds: each group with an
/// intent or an outcome. Used when the ledger lost it (its directory was lost or replaced).
pub fn progress_from_status(status: &ResetStatus) -> Vec<GroupProgress> {
    status
        .groups
        .iter()
        .filter_map(|g| {
            let target: BTreeMap<i32, i64> =
                g.offsets_after.iter().filter_map(|(p, o)| Some((p.parse().ok()?, *o))).collect();
            let before: Committed =
                target.keys().map(|p| (*p, g.offsets_before.get(&p.to_string()).copied())).collect();
            let group = GroupId::from_raw(&g.group);
            let records_to_reprocess = g.records_to_reprocess;
            // A large group's offsets are not in the status: only its summary.
            let intent = if target.is_empty() {
                Intent::summary(g.partitions, records_to_reprocess)
            } else {
                Intent::new(before, target, records_to_reprocess)
            };
            match g.outcome {
                // A group recovering, or verifying after its settle, has an intent and no outcome yet,
                // as one committing.
                GroupStage::Committing | GroupStage::Recovering | GroupStage::Verifying => {
                    Some(GroupProgress { group, intent: Some(intent), outcome: None })
                }
                GroupStage::Reset => Some(GroupProgress {
                    group,
                    intent: None,
                    outcome: Some(intent.into_reset(&g.topic, g.added_partitions.clone())),
                }),
                GroupStage::Failed => Some(GroupProgress {
                    group,
                    intent: None,
                    outcome: Some(GroupOutcome::Failed { topic: g.topic.clone(), reason: g.message.clone() }),
                }),
                // A dry run's group is planned again: planning changes nothing.
                GroupStage::Pending | GroupStage::Planned => None,
            }
        })
        .collect()
}

/// Per group, when its transient failures began, as a status written by [`ResetMachine::status`]
/// says (`failingSince`): what [`ResetMachine::with_failing_since`] takes.
pub fn failing_since(status: &ResetStatus) -> BTreeMap<GroupId, Timestamp> {
    status
        .groups
        .iter()
        .filter_map(|g| {
            let at = crate::request::parse_instant(g.failing_since.as_deref()?)?;
            Some((GroupId::from_raw(&g.group), Timestamp(at)))
        })
        .collect()
}

/// Joins the ledger's progress and the status's: per group, progress with an outcome wins over
/// progress with only an intent.
pub fn merge_progress(ledger: Vec<GroupProgress>, status: Vec<GroupProgress>) -> Vec<GroupProgress> {
    let mut by_group: BTreeMap<GroupId, GroupProgress> = BTreeMap::new();
    for r in ledger.into_iter().chain(status) {
        match by_group.get(&r.group) {
            Some(have) if have.outcome.is_some() || r.outcome.is_none() && have.intent.is_some() => {}
            _ => {
                by_group.insert(r.group.clone(), r);
            }
        }
    }
    by_group.into_values().collect()
}

/// The groups of a finished request whose catch-up is still being followed, as indices into
/// `status.groups`: reset, and not yet seen with a lag of 0. The operator measures their lag until it
/// reaches 0.
pub fn catching_up(status: &ResetStatus) -> Vec<usize> {
    if status.phase != RequestPhase::Done {
        return vec![];
    }
    (0..status.groups.len())
        .filter(|i| status.groups[*i].outcome == GroupStage::Reset && status.groups[*i].caught_up_at.is_none())
        .collect()
}
