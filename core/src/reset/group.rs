//! One group's way through a reset: its phases, and the transitions between them. Each transition
//! takes the phase it leaves by value and returns the phase it enters, emitting effects on the way.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::destination::Destination;
use super::retry::Retry;
use super::vocabulary::{
    Committed, Effect, GroupOutcome, Inspection, Intent, KafkaFailure, Positions, Timestamp, fence_marker, reset_marker,
};
use crate::events::{Event, EventType};
use crate::targets::InletTarget;

/// Most partitions one message names; the rest are counted.
pub const NAMED_PARTITIONS: usize = 20;

/// Per-group progress while resetting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPhase {
    /// Waiting for its next attempt (`retry.next`) after a transient failure.
    Pending {
        /// Failures so far.
        retry: Retry,
    },
    /// Inspection under way.
    Inspecting {
        /// Failures so far.
        retry: Retry,
    },
    /// Fence under way; the intent is not durable yet.
    Fencing {
        /// Failures so far.
        retry: Retry,
        /// The intent, made durable once the fence holds.
        intent: Intent,
    },
    /// Intent durable, commit under way.
    Committing {
        /// Failures so far.
        retry: Retry,
        /// The intent.
        intent: Intent,
    },
    /// Whether the commit of an intent landed is unknown (the machine was rebuilt from an intent
    /// without outcome, or the commit's answer was an error): reading what Kafka holds, with the
    /// markers, to learn it. `retry.next` is when to read again after a failed read.
    Recovering {
        /// Failures so far.
        retry: Retry,
        /// The intent found.
        intent: Intent,
    },
    /// The commit landed (read back at its targets); waiting the settle delay (`retry.next`), then
    /// reading the group's positions again to verify that no consumer overwrote them.
    Verifying {
        /// Failed reads so far, and when to read.
        retry: Retry,
        /// The intent committed.
        intent: Intent,
    },
    /// The commit failed for good (or landed on only some partitions): reading what the group holds
    /// now, partition by partition, to report it with the failure.
    Reporting {
        /// Why the group fails.
        reason: String,
        /// The intent whose commit failed.
        intent: Intent,
    },
    /// Finished.
    Finished(GroupOutcome),
}

impl GroupPhase {
    /// A group that starts now: its inspection is under way.
    pub fn start() -> GroupPhase {
        GroupPhase::Inspecting { retry: Retry::default() }
    }

    /// When this group is next due, if it waits for anything.
    pub fn next(&self) -> Option<Timestamp> {
        match self {
            GroupPhase::Pending { retry }
            | GroupPhase::Recovering { retry, .. }
            | GroupPhase::Verifying { retry, .. } => retry.next,
            _ => None,
        }
    }
}

/// A Kafka result about one group.
#[derive(Clone, Debug)]
pub enum GroupInput {
    /// See [`super::Input::Inspected`].
    Inspected(Result<Inspection, KafkaFailure>),
    /// See [`super::Input::Fenced`].
    Fenced(Result<(), KafkaFailure>),
    /// See [`super::Input::ReadBack`].
    ReadBack(Result<Committed, KafkaFailure>),
    /// See [`super::Input::Read`].
    Read(Result<Positions, KafkaFailure>),
}

/// What a transition needs besides the group: the request, the instant, the settle delay, and
/// where its effects go.
pub(super) struct Cx<'a> {
    pub id: &'a str,
    pub now: Timestamp,
    pub settle: Duration,
    pub retry_for: Duration,
    pub effects: &'a mut VecDeque<Effect>,
    pub destination: &'a Destination,
    /// A dry run: groups are planned, never fenced or committed.
    pub dry_run: bool,
}

impl Cx<'_> {
    fn emit(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }
}

/// The phase after `input` arrived in `phase`. A result that answers no call under way (a late or
/// repeated one) leaves the phase as it is.
pub(super) fn advance(target: &InletTarget, phase: GroupPhase, input: GroupInput, cx: &mut Cx<'_>) -> GroupPhase {
    use GroupInput as In;
    use GroupPhase as P;
    match (phase, input) {
        (P::Inspecting { retry }, In::Inspected(result)) => inspected(target, retry, result, cx),
        (P::Fencing { retry, intent }, In::Fenced(result)) => fenced(target, retry, intent, result, cx),
        (P::Committing { retry, intent }, In::ReadBack(result)) => read_back(target, retry, intent, result, cx),
        (P::Recovering { retry, intent }, In::Read(result)) if retry.next.is_none() => {
            recovered(target, retry, intent, result, cx)
        }
        (P::Verifying { retry, intent }, In::Read(result)) if retry.next.is_none() => {
            verified(target, retry, intent, result, cx)
        }
        (P::Reporting { reason, intent }, In::Read(result)) => {
            let held = match result {
                Ok(read) => format!("; Kafka holds now: {}", holdings(&intent, &read, cx.id)),
                Err(f) => format!("; what the group holds now could not be read: {}", f.reason),
            };
            finish(target, failure(target, reason + &held), cx)
        }
        (phase, _) => phase,
    }
}

/// The phase after time passed to `now`: a retry or a read that is due starts.
pub(super) fn tick(target: &InletTarget, phase: GroupPhase, cx: &mut Cx<'_>) -> GroupPhase {
    match phase {
        GroupPhase::Pending { retry } if retry.due(cx.now) => {
            cx.emit(Effect::InspectGroup(target.clone()));
            GroupPhase::Inspecting { retry: retry.started() }
        }
        GroupPhase::Recovering { retry, intent } if retry.due(cx.now) => {
            cx.emit(Effect::ReadCommitted(target.clone()));
            GroupPhase::Recovering { retry: retry.started(), intent }
        }
        GroupPhase::Verifying { retry, intent } if retry.due(cx.now) => {
            cx.emit(Effect::ReadCommitted(target.clone()));
            GroupPhase::Verifying { retry: retry.started(), intent }
        }
        phase => phase,
    }
}

/// A group rebuilt from its durable progress: finished, recovering an intent, or starting.
pub(super) fn resume(
    target: &InletTarget,
    intent: Option<Intent>,
    outcome: Option<GroupOutcome>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    match (outcome, intent) {
        (Some(outcome), _) => {
            // Its event may not have been recorded before the driver stopped: record it again (a
            // duplicate is refused by name). The outcome may be known from the ledger alone, which
            // can be lost: it is made durable again first, so that its event is never recorded
            // unless the status holds it too (else a lost ledger would let the group be decided
            // again, with a second, different event).
            finish(target, outcome, cx)
        }
        (None, Some(intent)) => {
            cx.emit(Effect::ReadCommitted(target.clone()));
            GroupPhase::Recovering { retry: Retry::default(), intent }
        }
        (None, None) => {
            cx.emit(Effect::InspectGroup(target.clone()));
            GroupPhase::start()
        }
    }
}

fn inspected(
    target: &InletTarget,
    retry: Retry,
    result: Result<Inspection, KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let seen = match result {
        Err(f) => return failed(target, retry, f, cx),
        Ok(seen) => seen,
    };
    if cx.dry_run {
        return plan(target, seen, cx);
    }
    if seen.members > 0 {
        let reason = format!(
            "consumer group [{}] has {} active member(s) (state {}): a consumer still reads it; the reset waits \
             until it leaves (its streamlet is stopped, so it runs elsewhere, or its pods are still stopping)",
            target.group, seen.members, seen.state
        );
        return failed(target, retry, KafkaFailure::members_present(reason), cx);
    }
    if seen.log_start.is_empty() {
        let reason = format!("topic '{}' has no partitions", target.topic);
        return failed(target, retry, KafkaFailure::unknown_topic(reason), cx);
    }
    // Where the group goes; a group whose offsets moved since an undone request is refused, once
    // and for all.
    let intent = match cx.destination.intent(target, &seen) {
        Ok(intent) => intent,
        Err(reason) => return finish(target, failure(target, reason), cx),
    };
    let offsets = intent.before.iter().filter_map(|(p, o)| o.map(|o| (*p, o))).collect();
    cx.emit(Effect::Fence { target: target.clone(), offsets, metadata: fence_marker(cx.id) });
    GroupPhase::Fencing { retry, intent }
}

/// A dry run's group: planned from what the inspection saw (a running streamlet included, with a
/// warning), and finished at once; nothing is fenced or committed.
fn plan(target: &InletTarget, seen: Inspection, cx: &mut Cx<'_>) -> GroupPhase {
    if seen.log_start.is_empty() {
        let reason = format!("topic '{}' has no partitions", target.topic);
        return finish(target, failure(target, reason), cx);
    }
    let intent = match cx.destination.intent(target, &seen) {
        Ok(intent) => intent,
        Err(reason) => return finish(target, failure(target, reason), cx),
    };
    let warnings = super::plan::warnings(&target.topic, &seen);
    let outcome = GroupOutcome::Planned {
        topic: target.topic.clone(),
        high_watermark: seen.high_watermark,
        intent,
        warnings,
        to: None,
    };
    finish(target, outcome, cx)
}

fn fenced(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<(), KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    if let Err(f) = result {
        return failed(target, retry, f, cx);
    }
    cx.emit(Effect::PersistIntent { id: cx.id.to_string(), group: target.group.clone(), intent: intent.clone() });
    cx.emit(Effect::CommitOffsets {
        target: target.clone(),
        offsets: intent.target.clone(),
        metadata: reset_marker(cx.id),
    });
    GroupPhase::Committing { retry, intent }
}

fn read_back(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<Committed, KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    match result {
        // A final answer (authorization, unknown topic, a commit refused on some partitions): the
        // group fails, with what Kafka holds now, which a partial commit may have changed.
        Err(f) if !f.transient() => report(target, f.reason, intent, cx),
        // Transient: a timeout may hide a commit that landed, and a refusal (members joined) may
        // follow one that did; learn from Kafka before anything else.
        Err(f) => {
            cx.emit(Effect::ReadCommitted(target.clone()));
            GroupPhase::Recovering { retry: retry.count(f, cx.now), intent }
        }
        Ok(read) => {
            let wrong: Vec<String> = intent
                .target
                .iter()
                .filter(|(p, o)| read.get(p).copied().flatten() != Some(**o))
                .map(|(p, o)| match read.get(p).copied().flatten() {
                    Some(got) => format!("partition {p} reads back {got}, not {o}"),
                    None => format!("partition {p} reads back no offset, not {o}"),
                })
                .collect();
            if wrong.is_empty() {
                // This read-back covers the committed partitions only: it cannot see added ones.
                landed(target, intent, vec![], cx)
            } else {
                let reason = format!("the commit did not hold: {}", named(&wrong));
                finish(target, failure(target, reason), cx)
            }
        }
    }
}

/// The read that learns whether the commit of an intent landed.
fn recovered(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<Positions, KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let read = match result {
        Ok(read) => read,
        // Read again after the backoff, as every retry waits (a short outage must not use up every
        // read at once); recovering never commits, so retrying it is always safe.
        Err(f) => {
            return match retry.fail(f, cx.now, cx.retry_for) {
                Ok(retry) => GroupPhase::Recovering { retry, intent },
                Err(reason) => {
                    let reason = format!("could not learn whether an earlier commit landed: {reason}");
                    finish(target, failure(target, reason), cx)
                }
            };
        }
    };
    if intent.is_summary() {
        return recovered_by_markers(target, retry, intent, &read, cx);
    }
    let (fence, reset) = (fence_marker(cx.id), reset_marker(cx.id));
    let at = |p: &i32| read.get(p).cloned().flatten();
    // Every partition still as the fence left it: the reset commit never landed.
    let fenced = intent.target.keys().all(|p| match (intent.before.get(p).copied().flatten(), at(p)) {
        (Some(o), Some(pos)) => pos.offset == o && pos.metadata == fence,
        (None, None) => true,
        _ => false,
    });
    let landed_untouched =
        intent.target.iter().all(|(p, o)| at(p).is_some_and(|pos| pos.offset == *o && pos.metadata == reset));
    // A consumer behind where the group was before can only have started from the reset.
    let behind_before = intent
        .target
        .keys()
        .any(|p| matches!((intent.before.get(p).copied().flatten(), at(p)), (Some(b), Some(pos)) if pos.offset < b));
    // Only the operator's commits since the fence: each partition at its target under the reset
    // marker, or as the fence left it, and some of each: the commit landed on some partitions only.
    let ours = |p: &i32, o: &i64| match (at(p), intent.before.get(p).copied().flatten()) {
        (Some(pos), _) if pos.offset == *o && pos.metadata == reset => Some(true),
        (Some(pos), Some(b)) if pos.offset == b && pos.metadata == fence => Some(false),
        (None, None) => Some(false),
        _ => None,
    };
    let marks: Option<Vec<bool>> = intent.target.iter().map(|(p, o)| ours(p, o)).collect();
    let partial = marks.is_some_and(|m| m.contains(&true) && m.contains(&false));
    if partial {
        let reason = "the reset commit landed on some partitions only".to_string();
        let held = holdings(&intent, &read, cx.id);
        finish(target, failure(target, format!("{reason}; Kafka holds now: {held}; request a new reset")), cx)
    } else if fenced && !landed_untouched {
        never_landed(target, retry, cx)
    } else if landed_untouched {
        // Landed, and no consumer committed since: wait the settle and read again, as after a
        // read-back.
        let added = added_partitions(&intent, &read);
        landed(target, intent, added, cx)
    } else if behind_before {
        // Landed; a consumer committed since (it ran after the reset), which is its progress to keep.
        let added = added_partitions(&intent, &read);
        finish(target, intent.into_reset(&target.topic, added), cx)
    } else {
        // A consumer committed after the fence, at or beyond where the group was: the streamlet ran,
        // but from the reset or from where it was, Kafka cannot tell. Never reset again (that could
        // rewind a finished rebuild), never claim success.
        let reason = "cannot tell whether the reset landed: the operator stopped during the reset, and a consumer \
                      has committed since at or beyond the offsets the group had before; if the streamlet did not \
                      read its input again, request a new reset";
        finish(target, failure(target, reason.to_string()), cx)
    }
}

/// The group fails for `reason`, once what it holds now has been read and added to it.
fn report(target: &InletTarget, reason: String, intent: Intent, cx: &mut Cx<'_>) -> GroupPhase {
    cx.emit(Effect::ReadCommitted(target.clone()));
    GroupPhase::Reporting { reason, intent }
}

/// What the group holds on each partition of `intent`, and whose commit it is (at most
/// [`NAMED_PARTITIONS`] named, the rest counted): `partition 0 at 0 (this reset)`, `partition 1 at
/// 20 (its fence)`, `partition 2 at 7 (another commit)`, `partition 3 has no offset`.
fn holdings(intent: &Intent, read: &Positions, id: &str) -> String {
    let (fence, reset) = (fence_marker(id), reset_marker(id));
    let mut partitions: Vec<i32> = intent.target.keys().copied().collect();
    if partitions.is_empty() {
        partitions = read.keys().copied().collect();
    }
    let items: Vec<String> = partitions
        .iter()
        .map(|p| match read.get(p).cloned().flatten() {
            Some(pos) if pos.metadata == reset => format!("partition {p} at {} (this reset)", pos.offset),
            Some(pos) if pos.metadata == fence => format!("partition {p} at {} (its fence)", pos.offset),
            Some(pos) => format!("partition {p} at {} (another commit)", pos.offset),
            None => format!("partition {p} has no offset"),
        })
        .collect();
    named(&items)
}

/// The commit of an intent never landed: the group starts again from inspection; after a failed
/// commit or read (for example Kafka refusing the commit because consumers are active), once the
/// backoff has passed, with Kafka's reason shown meanwhile.
fn never_landed(target: &InletTarget, retry: Retry, cx: &mut Cx<'_>) -> GroupPhase {
    if retry.last_error.is_some() {
        GroupPhase::Pending { retry: retry.after_backoff(cx.now) }
    } else {
        cx.emit(Effect::InspectGroup(target.clone()));
        GroupPhase::Inspecting { retry }
    }
}

/// Recovers an intent known only by its summary ([`Intent::summary`]): without the offsets each
/// partition had before, the markers alone decide. The fence marker (or no offset) everywhere: the
/// commit never landed. The reset marker on as many partitions as the intent covered, and no other
/// commit since: it landed, and the offsets found are its targets. Anything else means a consumer
/// committed since, and whether it started from the reset cannot be told: the group fails, never
/// committed again.
fn recovered_by_markers(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    read: &Positions,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let (fence, reset) = (fence_marker(cx.id), reset_marker(cx.id));
    let marked = |p: &Option<super::vocabulary::Position>, m: &str| p.as_ref().is_none_or(|x| x.metadata == m);
    let landed: BTreeMap<i32, i64> = read
        .iter()
        .filter_map(|(p, pos)| pos.as_ref().filter(|x| x.metadata == reset).map(|x| (*p, x.offset)))
        .collect();
    if landed.is_empty() && read.values().all(|p| marked(p, &fence)) {
        return never_landed(target, retry, cx);
    }
    let covered = u32::try_from(landed.len()).unwrap_or(u32::MAX);
    if covered < intent.partitions && read.values().all(|p| marked(p, &fence) || marked(p, &reset)) {
        let held = holdings(&intent, read, cx.id);
        let reason =
            format!("the reset commit landed on some partitions only; Kafka holds now: {held}; request a new reset");
        return finish(target, failure(target, reason), cx);
    }
    if covered >= intent.partitions && read.values().all(|p| marked(p, &reset)) {
        let added = read.keys().filter(|p| !landed.contains_key(p)).copied().collect();
        let found = Intent { target: landed, ..intent };
        return self::landed(target, found, added, cx);
    }
    let reason = "cannot tell whether the reset landed: the operator stopped during the reset, a consumer has \
                  committed since, and the offsets the group had before were kept only in the lost ledger; if the \
                  streamlet did not read its input again, request a new reset";
    finish(target, failure(target, reason.to_string()), cx)
}

/// A group's commit landed and read back at its targets: it is read again after the settle delay,
/// or, without one, reset now (`added`: partitions a read found beyond the intent).
fn landed(target: &InletTarget, intent: Intent, added: Vec<i32>, cx: &mut Cx<'_>) -> GroupPhase {
    if cx.settle.is_zero() {
        finish(target, intent.into_reset(&target.topic, added), cx)
    } else {
        GroupPhase::Verifying { retry: Retry::at(cx.now.after(cx.settle)), intent }
    }
}

/// The read after the settle delay: the group is reset only if every partition of its intent is
/// still at its target.
fn verified(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<Positions, KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let read = match result {
        Ok(read) => read,
        // Reading never commits, so retrying it is always safe.
        Err(f) => {
            return match retry.fail(f, cx.now, cx.retry_for) {
                Ok(retry) => GroupPhase::Verifying { retry, intent },
                Err(reason) => {
                    // The reset landed and read back once, but whether it held is unknown: never a
                    // success.
                    let at =
                        if cx.destination.describe().is_some() { "its new offsets" } else { "the log start offsets" };
                    let reason = format!(
                        "the reset was committed and read back at {at}, but reading the offsets again after the \
                         settle failed: {reason}; check that a consumer did not move them (kafka-consumer-groups \
                         --describe --group {}) and request a new reset if one did",
                        target.group
                    );
                    finish(target, failure(target, reason), cx)
                }
            };
        }
    };
    let moved: Vec<String> = intent
        .target
        .iter()
        .filter_map(|(p, o)| match read.get(p).cloned().flatten() {
            Some(pos) if pos.offset == *o => None,
            Some(pos) => Some(format!("partition {p} is at {} (reset to {o})", pos.offset)),
            None => Some(format!("partition {p} has no offset (reset to {o})")),
        })
        .collect();
    let added = added_partitions(&intent, &read);
    if moved.is_empty() {
        return finish(target, intent.into_reset(&target.topic, added), cx);
    }
    let mut reason = format!(
        "a consumer overwrote the reset after it was read back: {}; stop every consumer of the group (a pod still \
         stopping, a consumer outside Kubernetes) and request a new reset",
        named(&moved)
    );
    if !added.is_empty() {
        reason += &format!(
            "; partition(s) {} were added to the topic during the reset and were not reset either",
            join(&added)
        );
    }
    finish(target, failure(target, reason), cx)
}

/// A failure of a step: retried after the backoff while it is transient and its time allows (members
/// in the group: as long as they stay), else final.
fn failed(target: &InletTarget, retry: Retry, failure: KafkaFailure, cx: &mut Cx<'_>) -> GroupPhase {
    match retry.fail(failure, cx.now, cx.retry_for) {
        Ok(retry) => GroupPhase::Pending { retry },
        Err(reason) => finish(target, self::failure(target, reason), cx),
    }
}

fn failure(target: &InletTarget, reason: String) -> GroupOutcome {
    GroupOutcome::Failed { topic: target.topic.clone(), reason }
}

/// The group ends with `outcome`: made durable, then reported.
fn finish(target: &InletTarget, mut outcome: GroupOutcome, cx: &mut Cx<'_>) -> GroupPhase {
    if let GroupOutcome::Reset { to: to @ None, .. } | GroupOutcome::Planned { to: to @ None, .. } = &mut outcome {
        *to = cx.destination.describe();
    }
    // The outcome is persisted before its event is recorded, so that an outcome with an event is
    // never decided again: a driver that stops between the two rebuilds the machine from the
    // persisted outcome, which records the same event again (refused by the API server as a
    // duplicate). Recording first would let a rebuilt machine retry a group reported failed and
    // record a second, different outcome for it.
    cx.emit(Effect::PersistOutcome { id: cx.id.to_string(), group: target.group.clone(), outcome: outcome.clone() });
    for event in outcome_events(cx.id, target, &outcome) {
        cx.emit(Effect::Record(event));
    }
    GroupPhase::Finished(outcome)
}

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
    let GroupOutcome::Reset { topic, to, notes, .. } = outcome else { return String::new() };
    let n = outcome.partitions();
    let mut text = format!("{n} partition(s) of '{topic}' to {}", to.as_deref().unwrap_or("earliest"));
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

/// Partitions in `read` (the topic's partitions now) that `intent` did not cover.
fn added_partitions(intent: &Intent, read: &Positions) -> Vec<i32> {
    read.keys().filter(|p| !intent.target.contains_key(p)).copied().collect()
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
