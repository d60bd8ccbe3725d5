//! The status projection: what `status.reset` shows of a machine, and the durable progress that a
//! status holds, read back when the ledger lost it.

use std::collections::BTreeMap;

use super::group::GroupPhase;
use super::machine::{Done, ResetMachine, State};
use super::retry::Retry;
use super::summary::group_status;
use super::vocabulary::{Committed, GroupOutcome, GroupProgress, Intent, Timestamp};
use crate::events::fit_note;
use crate::names::GroupId;
use crate::resource::{Approval, GroupStage, GroupStatus, RequestPhase, ResetStatus};
use crate::targets::RunningProblem;

/// When a request was written, when the operator first saw it, who requested it, how it was
/// approved, and when it finished: kept across reconciles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamps {
    pub uid: String,
    pub written_at: Option<String>,
    pub requested_at: String,
    pub requested_by: Option<String>,
    pub approval: Option<Approval>,
    pub finished_at: Option<String>,
}

impl Stamps {
    /// `r` with the stamps; a finished request is stamped finished at `now` the first time.
    pub fn apply(&mut self, mut r: ResetStatus, now: Timestamp) -> ResetStatus {
        r.uid = Some(self.uid.clone());
        r.written_at.clone_from(&self.written_at);
        r.requested_at = Some(self.requested_at.clone());
        r.requested_by.clone_from(&self.requested_by);
        r.approval.clone_from(&self.approval);
        if r.phase.finished() {
            r.finished_at = Some(self.finished_at.get_or_insert_with(|| now.rfc3339()).clone());
        }
        r
    }
}

impl ResetMachine {
    /// The request's status, as written to `status.reset` of the resource (without its stamps).
    /// Groups with an intent carry its offsets, so that the status can stand in for a lost ledger
    /// (see [`progress_from_status`]).
    pub fn status(&self) -> ResetStatus {
        let mut status = self.unbounded_status();
        status.detail = fit_note(&status.detail);
        status.to = self.rules.destination.describe();
        status.dry_run = self.rules.dry_run;
        status
    }

    /// The status of each group that `listed` names, in detail or summed up by their number.
    fn groups(&self, listed: Vec<(&GroupId, String, GroupPhase)>) -> Vec<GroupStatus> {
        let (n, request_to) = (listed.len(), self.rules.destination.describe());
        listed
            .into_iter()
            .map(|(group, topic, phase)| {
                // Each group says where it goes when that is not where the request says (in a
                // rebuild from streamlets, a group downstream of them goes to the end).
                let to = match &phase {
                    GroupPhase::Finished(GroupOutcome::Reset { to, .. } | GroupOutcome::Planned { to, .. }) => {
                        to.clone()
                    }
                    _ => self.rules.describe(group),
                };
                let mut g = group_status(group, &topic, &phase, n, self.rules.dry_run, to.as_deref());
                if to != request_to {
                    g.to = to;
                }
                g
            })
            .collect()
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
                groups: self.groups(self.progress.values().filter_map(|r| self.progress_phase(r)).collect()),
                ..Default::default()
            },
            State::Resetting(r) => ResetStatus {
                id,
                phase: RequestPhase::Resetting,
                groups: self.groups(
                    r.groups.values().map(|g| (&g.target.group, g.target.topic.clone(), g.phase.clone())).collect(),
                ),
                ..Default::default()
            },
            // What the progress says: a status whose final write was lost is rebuilt from it.
            State::Done(Done::AlreadyDone { .. }) => ResetStatus {
                id,
                phase: RequestPhase::Done,
                groups: self.groups(self.progress.values().filter_map(|r| self.progress_phase(r)).collect()),
                ..Default::default()
            },
            State::Done(Done::Refused { why, .. }) => {
                ResetStatus { id, phase: RequestPhase::Refused, detail: why.clone(), ..Default::default() }
            }
            State::Done(Done::Completed { groups, .. }) => ResetStatus {
                id,
                phase: RequestPhase::Done,
                groups: self.groups(
                    groups
                        .values()
                        .map(|(t, o)| (&t.group, t.topic.clone(), GroupPhase::Finished(o.clone())))
                        .collect(),
                ),
                ..Default::default()
            },
        }
    }

    /// The phase of a group known from its durable progress alone, with its topic; `None` when it
    /// holds nothing.
    fn progress_phase<'a>(&self, r: &'a GroupProgress) -> Option<(&'a GroupId, String, GroupPhase)> {
        let phase = match (&r.outcome, &r.intent) {
            (Some(o), _) => GroupPhase::Finished(o.clone()),
            (None, Some(intent)) => {
                GroupPhase::Committing { retry: Retry::default(), intent: intent.clone(), settled: false }
            }
            (None, None) => return None,
        };
        let topic = match &r.outcome {
            Some(o) => o.topic().to_string(),
            None => self.topics.get(&r.group).cloned().unwrap_or_default(),
        };
        Some((&r.group, topic, phase))
    }
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
            }
            .with_skip(g.records_to_skip);
            match g.outcome {
                // A group recovering, or verifying after its settle, has an intent and no outcome yet,
                // as one committing.
                GroupStage::Committing | GroupStage::Recovering | GroupStage::Verifying => {
                    Some(GroupProgress { group, intent: Some(intent), outcome: None })
                }
                GroupStage::Reset => {
                    let mut outcome = intent.into_reset(&g.topic, g.added_partitions.clone());
                    // Where it went, when the status says so of it alone.
                    if let GroupOutcome::Reset { to, .. } = &mut outcome {
                        to.clone_from(&g.to);
                    }
                    Some(GroupProgress { group, intent: None, outcome: Some(outcome) })
                }
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
