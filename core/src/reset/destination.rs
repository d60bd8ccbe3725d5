//! Where a request moves each consumer group, and what must hold before it moves one.
//!
//! A reset goes to each partition's log start offset ([`Destination::Earliest`]), to the first
//! offset at or after an instant ([`Destination::Time`]), or to offsets given per group: the ones a
//! group had before an earlier request, which an undo puts back ([`Destination::Given`]). Given
//! offsets are compare-and-set: a group moves only while its committed offsets are still the ones
//! the undone request left.
//!
//! The destination only decides the intent of a group from its inspection
//! ([`Destination::intent`]); everything after (the fence, the durable intent, the commit with its
//! marker, the read-back, the settle and the recovery) is the same for every destination.

use std::collections::BTreeMap;

use super::vocabulary::{Committed, GroupOutcome, GroupProgress, Inspection, Intent, Timestamp};
use super::wording::named;
use crate::names::GroupId;
use crate::request::{ResetRequest, To};
use crate::targets::InletTarget;

/// Where the request's groups go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Each partition's log start offset.
    Earliest,
    /// Each partition's first offset whose record's timestamp is at or after this instant (the
    /// ListOffsets lookup by timestamp of KIP-79); a partition without such a record goes to its
    /// log end, as Kafka's own tool does.
    Time(Timestamp),
    /// Offsets given per group.
    Given(Given),
    /// What the request needs cannot be had (an undo of a request whose offsets were not
    /// recorded): the request is refused with this reason.
    Unavailable(String),
}

/// Offsets given per group, and where they come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    /// Where they come from.
    pub source: Source,
    /// Per group: what it must hold now, and where it goes. A target group not listed is not
    /// touched by the request.
    pub groups: BTreeMap<GroupId, GivenOffsets>,
    /// Move a group even when its offsets are not the expected ones (`flow reset undo --force`).
    pub force: bool,
}

/// Where given offsets come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The plan of dry run `<id>`.
    Plan(String),
    /// The offsets recorded before request `<id>`.
    Undo(String),
}

/// One group's given offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenOffsets {
    /// The committed offsets the group must still have (compare-and-set); `None` where it must have
    /// none. Partitions not listed are not compared.
    pub expected: Committed,
    /// Where each partition goes; `None`: to its log start offset (the group had no committed
    /// offset there, and a group without one starts at the log start). Partitions not listed are
    /// not moved.
    pub target: Committed,
}

/// The destination of an undo of request `id`, from the durable progress of that request (its
/// ledger records): each group it reset goes back to the offsets it had before (to its log start
/// where it had none), while it still has the offsets the request left, or with `force` whatever it
/// has. Unavailable when no group of it is recorded as reset.
pub fn undo(id: &str, force: bool, progress: &[GroupProgress]) -> Destination {
    let groups: BTreeMap<GroupId, GivenOffsets> = progress
        .iter()
        .filter_map(|p| match &p.outcome {
            // An outcome known only by its summary has no offsets to put back.
            Some(GroupOutcome::Reset { before, offsets, .. }) if !offsets.is_empty() => Some((
                p.group.clone(),
                GivenOffsets {
                    expected: offsets.iter().map(|(p, o)| (*p, Some(*o))).collect(),
                    target: offsets.keys().map(|p| (*p, before.get(p).copied().flatten())).collect(),
                },
            )),
            _ => None,
        })
        .collect();
    if groups.is_empty() {
        return Destination::Unavailable(format!(
            "the operator's reset ledger holds no consumer group that reset {id} moved, so there are no offsets to put \
             back"
        ));
    }
    Destination::Given(Given { source: Source::Undo(id.to_string()), groups, force })
}

impl Destination {
    /// The destination a request names by itself: `Earliest` or `Time`. An undo needs offsets the
    /// driver reads from the ledger: until it gives them ([`undo`]), it is unavailable.
    pub fn of(request: &ResetRequest) -> Destination {
        match &request.to {
            None => Destination::Earliest,
            Some(To::Datetime(_)) => match request.datetime_millis() {
                Some(ms) => Destination::Time(Timestamp(ms)),
                None => Destination::Unavailable("its time is not an RFC 3339 instant".into()),
            },
            Some(To::Undo(id)) => Destination::Unavailable(format!("the offsets before reset {id} were not read")),
            Some(To::Plan(plan)) => Destination::Given(Given {
                source: Source::Plan(plan.id.clone()),
                groups: plan
                    .groups
                    .iter()
                    .map(|(group, partitions)| {
                        let offsets = GivenOffsets {
                            expected: partitions.iter().map(|(p, (expected, _))| (*p, *expected)).collect(),
                            target: partitions.iter().map(|(p, (_, new))| (*p, Some(*new))).collect(),
                        };
                        (GroupId::from_raw(group), offsets)
                    })
                    .collect(),
                force: false,
            }),
        }
    }

    /// The instant to look up offsets for, when the inspection needs one.
    pub fn time(&self) -> Option<Timestamp> {
        match self {
            Destination::Time(t) => Some(*t),
            _ => None,
        }
    }

    /// Where the groups went, as events and the status say it: the instant (RFC 3339, UTC), or `the
    /// offsets before reset <id>`. `None` for `Earliest`.
    pub fn describe(&self) -> Option<String> {
        match self {
            Destination::Earliest | Destination::Unavailable(_) => None,
            Destination::Time(t) => Some(t.rfc3339()),
            Destination::Given(g) => Some(match &g.source {
                Source::Plan(id) => format!("the offsets of plan {id}"),
                Source::Undo(id) => format!("the offsets before reset {id}"),
            }),
        }
    }

    /// Whether the request touches `group` (a request with given offsets touches only the groups
    /// they list).
    pub fn covers(&self, group: &GroupId) -> bool {
        match self {
            Destination::Given(g) => g.groups.contains_key(group),
            _ => true,
        }
    }

    /// The intent of `target`'s group, from what its inspection saw; `Err` with the reason when the
    /// group must not move (its offsets moved since the undone request). A refusal is final: the
    /// group is not retried.
    ///
    /// # Errors
    /// The reason a group with given offsets is refused, without the group's name.
    pub fn intent(&self, target: &InletTarget, seen: &Inspection) -> Result<Intent, String> {
        let high = |p: &i32| seen.high_watermark.get(p).copied();
        let (goal, notes): (BTreeMap<i32, i64>, Vec<String>) = match self {
            Destination::Earliest | Destination::Unavailable(_) => (seen.log_start.clone(), vec![]),
            Destination::Given(given) => given.intent(target, seen)?,
            Destination::Time(t) => {
                let mut ends = Vec::new();
                let goal = seen
                    .log_start
                    .iter()
                    .map(|(p, start)| match seen.at_time.get(p).copied().flatten() {
                        Some(o) => (*p, o.max(*start)),
                        None => {
                            ends.push(p.to_string());
                            (*p, high(p).unwrap_or(*start))
                        }
                    })
                    .collect();
                let notes = if ends.is_empty() {
                    vec![]
                } else {
                    vec![format!(
                        "partition(s) {} have no record at or after {} and went to the log end",
                        named(&ends),
                        t.rfc3339()
                    )]
                };
                (goal, notes)
            }
        };
        let records_to_reprocess = goal.iter().map(|(p, at)| high(p).map_or(0, |high| (high - at).max(0))).sum();
        Ok(Intent::new(seen.committed.clone(), goal, records_to_reprocess).with_notes(notes))
    }
}

impl Given {
    fn intent(&self, target: &InletTarget, seen: &Inspection) -> Result<(BTreeMap<i32, i64>, Vec<String>), String> {
        let what = match &self.source {
            Source::Plan(id) => format!("plan {id}"),
            Source::Undo(id) => format!("reset {id}"),
        };
        let Some(given) = self.groups.get(&target.group) else {
            return Err(format!("{what} has no offsets for this group"));
        };
        if !self.force {
            let moved: Vec<String> = given
                .expected
                .iter()
                .filter_map(|(p, want)| {
                    let now = seen.committed.get(p).copied().flatten();
                    (now != *want).then(|| {
                        let now = now.map_or_else(|| "has no offset".to_string(), |o| format!("is at {o}"));
                        let want = want.map_or_else(|| "none".to_string(), |o| o.to_string());
                        format!("partition {p} {now} (expected {want})")
                    })
                })
                .collect();
            if !moved.is_empty() {
                let why = match &self.source {
                    Source::Plan(_) => "make a new plan with flow reset --dry-run",
                    Source::Undo(_) => {
                        "the streamlet consumed since; to put the offsets back anyway, use flow reset undo --force"
                    }
                };
                return Err(format!(
                    "its committed offsets moved since {what}: {}; nothing was committed for it ({why})",
                    named(&moved)
                ));
            }
        }
        let (mut goal, mut from_start, mut clamped, mut gone) = (BTreeMap::new(), vec![], vec![], vec![]);
        for (p, want) in &given.target {
            let Some(start) = seen.log_start.get(p).copied() else {
                gone.push(p.to_string());
                continue;
            };
            let high = seen.high_watermark.get(p).copied().unwrap_or(start);
            match want {
                None => {
                    from_start.push(p.to_string());
                    goal.insert(*p, start);
                }
                Some(o) if *o < start || *o > high => {
                    let at = (*o).clamp(start, high);
                    clamped.push(format!("partition {p} to {at} (not {o})"));
                    goal.insert(*p, at);
                }
                Some(o) => {
                    goal.insert(*p, *o);
                }
            }
        }
        if goal.is_empty() {
            return Err(format!("{what} lists no partition that the topic has now"));
        }
        let mut notes = vec![];
        if !from_start.is_empty() {
            notes
                .push(format!("partition(s) {} had no committed offset and went to the log start", named(&from_start)));
        }
        if !clamped.is_empty() {
            notes.push(format!("outside the log now, so moved to its nearest end: {}", named(&clamped)));
        }
        if !gone.is_empty() {
            notes.push(format!("partition(s) {} are no longer in the topic", named(&gone)));
        }
        let left: Vec<String> =
            seen.log_start.keys().filter(|p| !given.target.contains_key(p)).map(i32::to_string).collect();
        if !left.is_empty() {
            notes.push(format!("partition(s) {} are not in {what} and were left as they are", named(&left)));
        }
        Ok((goal, notes))
    }
}
