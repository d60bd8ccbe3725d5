//! One group's way through a reset: its phases, and the transitions between them. Each transition
//! takes the phase it leaves by value and returns the phase it enters, emitting effects on the way.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::destination::Destination;
use super::recovery::{self, Found, Reading, Reread};
use super::retry::Retry;
use super::vocabulary::{
    Committed, Effect, GroupOutcome, Inspection, Intent, KafkaFailure, Positions, Timestamp, fence_marker, reset_marker,
};
use super::wording::{named, outcome_events, waiting_event};
use crate::names::GroupId;
use crate::targets::InletTarget;

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
    /// A rebuild from streamlets, before anything of it moves: the group was looked at (`seen`; why
    /// it could not be, for good, as `Err`), and waits until every group of the request has been
    /// and the ends of the topics the rebuild writes again have held still (see [`super::survey`]).
    Surveyed {
        /// What the inspection saw.
        seen: Result<Inspection, String>,
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
        /// Whether the settle had already passed, when the commit was handed out, since the
        /// operator saw the group's streamlet stopped ([`Rules::settled`]): its read-back is then the
        /// last read, and no settle follows.
        settled: bool,
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

/// One group being reset: what it reads, and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group and its topic.
    pub target: InletTarget,
    /// Its phase.
    pub phase: GroupPhase,
}

/// Where the survey of a rebuild from streamlets stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// The end of the topic of each group put there, as the first look saw it; `None` until every
    /// group has been looked at once.
    pub(super) first: Option<BTreeMap<GroupId, BTreeMap<i32, i64>>>,
    /// When the second look is due, until it starts.
    pub(super) next: Option<Timestamp>,
}

impl Survey {
    /// When the survey is next due, if it waits for the second look.
    pub fn next(&self) -> Option<Timestamp> {
        self.next
    }
}

/// What a request's transitions go by, the same for each of its groups.
#[derive(Debug)]
pub(super) struct Rules {
    /// Wait between a commit's read-back and the second read.
    pub settle: Duration,
    /// How long a group retries transient failures from its first one.
    pub retry_for: Duration,
    /// Where the groups go.
    pub destination: Destination,
    /// A dry run: groups are planned, never fenced or committed.
    pub dry_run: bool,
    /// A rebuild from streamlets: where each of its groups goes (see [`crate::closure`]).
    pub closure: Option<crate::closure::Closure>,
    /// A rebuild from streamlets before anything of it moves: the survey under way, while it is.
    pub survey: Option<Survey>,
    /// In the plan of a rebuild from streamlets: the streamlets of it that run (their topics' ends
    /// move until the rebuild stops them).
    pub running: std::collections::BTreeSet<String>,
    /// When the operator saw each target streamlet's last pod go, by its own watch, as the driver
    /// gives it; a streamlet it never saw running is not in it.
    pub stopped: BTreeMap<String, Timestamp>,
}

impl Rules {
    /// Whether a commit handed out at `now` for `target` comes at least the settle after the operator
    /// saw its streamlet stopped: any commit still in flight from the streamlet's consumers landed
    /// before it then, and the settle need not be waited again (docs/reset.md, "The settle"). A
    /// streamlet not known stopped (never seen running, or an operator restarted since) waits the
    /// full settle.
    pub fn settled(&self, target: &InletTarget, now: Timestamp) -> bool {
        self.stopped.get(&target.streamlet).is_some_and(|stopped| now >= stopped.after(self.settle))
    }
}

/// What a transition needs besides the group: the request, the instant, the request's rules, and
/// where its effects go.
pub(super) struct Cx<'a> {
    pub id: &'a str,
    pub now: Timestamp,
    pub rules: &'a Rules,
    pub effects: &'a mut VecDeque<Effect>,
}

impl<'a> Cx<'a> {
    pub fn new(id: &'a str, now: Timestamp, rules: &'a Rules, effects: &'a mut VecDeque<Effect>) -> Self {
        Cx { id, now, rules, effects }
    }

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
        (P::Committing { retry, intent, settled }, In::ReadBack(result)) => {
            read_back(target, retry, intent, settled, result, cx)
        }
        (P::Recovering { retry, intent }, In::Read(result)) if retry.next.is_none() => {
            reread(Reread::Recovering, target, retry, intent, result, cx)
        }
        (P::Verifying { retry, intent }, In::Read(result)) if retry.next.is_none() => {
            reread(Reread::Verifying, target, retry, intent, result, cx)
        }
        (P::Reporting { reason, intent }, In::Read(result)) => {
            let held = match result {
                Ok(read) => format!("; Kafka holds now: {}", recovery::holdings(&intent, &read, cx.id)),
                Err(f) => format!("; what the group holds now could not be read: {}", f.reason),
            };
            finish(target, failure(target, reason + &held), cx)
        }
        (phase, _) => phase,
    }
}

/// A read after a commit (see [`recovery::reread`]), and the phase it leads to.
fn reread(
    which: Reread,
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<Positions, KafkaFailure>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let reading = Reading {
        id: cx.id,
        now: cx.now,
        retry_for: cx.rules.retry_for,
        own_offsets: cx.rules.destination.describe().is_some(),
    };
    match recovery::reread(which, target, retry, intent, result, reading) {
        Found::Again(retry, intent) => match which {
            Reread::Recovering => GroupPhase::Recovering { retry, intent },
            Reread::Verifying => GroupPhase::Verifying { retry, intent },
        },
        Found::NeverLanded(retry) => never_landed(target, retry, cx),
        Found::Landed(intent, added) => landed(target, intent, added, false, cx),
        Found::Ends(outcome) => finish(target, outcome, cx),
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

/// A group rebuilt from its durable progress: finished, recovering an intent, or starting; a group
/// whose transient failures came since `failing_since` (an earlier drive's) goes on retrying from then.
pub(super) fn resume(
    target: &InletTarget,
    intent: Option<Intent>,
    outcome: Option<GroupOutcome>,
    failing_since: Option<Timestamp>,
    cx: &mut Cx<'_>,
) -> GroupPhase {
    let retry = Retry::since(failing_since);
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
            GroupPhase::Recovering { retry, intent }
        }
        (None, None) => {
            cx.emit(Effect::InspectGroup(target.clone()));
            GroupPhase::Inspecting { retry }
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
    if cx.rules.dry_run {
        return plan(target, seen, cx);
    }
    if seen.members > 0 {
        // Said once per drive as the group starts waiting (and refused as a duplicate by name when
        // a later drive says it again).
        if !retry.members {
            cx.emit(Effect::Record(waiting_event(cx.id, target, seen.members, &seen.state, &seen.member_names)));
        }
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
    if cx.rules.survey.is_some() {
        return GroupPhase::Surveyed { seen: Ok(seen) };
    }
    proceed(target, retry, &seen, cx)
}

/// A group that may move, from what its inspection saw: its intent, and the fence.
pub(super) fn proceed(target: &InletTarget, retry: Retry, seen: &Inspection, cx: &mut Cx<'_>) -> GroupPhase {
    // Where the group goes; a group whose offsets moved since an undone request is refused, once
    // and for all.
    let intent = match cx.rules.intent(target, seen) {
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
    let intent = match cx.rules.intent(target, &seen) {
        Ok(intent) => intent,
        Err(reason) => return finish(target, failure(target, reason), cx),
    };
    let mut warnings = super::plan::warnings(&target.topic, &seen);
    warnings.extend(cx.rules.closure_warning(target));
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
    // Decided as the commit is handed out: it is sent no earlier (the driver holds it until the
    // intent is durable), so the settle has passed by the time it lands too. A group found with
    // members meanwhile had a consumer that ran after the pods went: it waits the full settle.
    let settled = !retry.members_seen && cx.rules.settled(target, cx.now);
    GroupPhase::Committing { retry, intent, settled }
}

fn read_back(
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    settled: bool,
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
                // The read-back covers every partition the topic has now: one the intent does not
                // cover was added since the inspection.
                let added = recovery::added_partitions(&intent, &read);
                landed(target, intent, added, settled, cx)
            } else {
                let reason = format!("the commit did not hold: {}", named(&wrong));
                finish(target, failure(target, reason), cx)
            }
        }
    }
}

/// The group fails for `reason`, once what it holds now has been read and added to it.
fn report(target: &InletTarget, reason: String, intent: Intent, cx: &mut Cx<'_>) -> GroupPhase {
    cx.emit(Effect::ReadCommitted(target.clone()));
    GroupPhase::Reporting { reason, intent }
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

/// A group's commit landed and read back at its targets: it is read again after the settle delay;
/// or reset now, without a settle, or when the settle had passed since its streamlet stopped before
/// the commit was handed out (`settled`, see [`Rules::settled`]): every commit its consumers had in
/// flight landed before the reset's, and the read-back was the read that follows it (`added`:
/// partitions a read found beyond the intent).
fn landed(target: &InletTarget, intent: Intent, added: Vec<i32>, settled: bool, cx: &mut Cx<'_>) -> GroupPhase {
    if cx.rules.settle.is_zero() || settled {
        finish(target, intent.into_reset(&target.topic, added), cx)
    } else {
        GroupPhase::Verifying { retry: Retry::at(cx.now.after(cx.rules.settle)), intent }
    }
}

/// A failure of a step: retried after the backoff while it is transient and its time allows (members
/// in the group: as long as they stay), else final.
fn failed(target: &InletTarget, retry: Retry, failure: KafkaFailure, cx: &mut Cx<'_>) -> GroupPhase {
    match retry.fail(failure, cx.now, cx.rules.retry_for) {
        Ok(retry) => GroupPhase::Pending { retry },
        // Before anything of a rebuild from streamlets moves, a group that cannot be looked at
        // refuses the whole request (see [`super::survey`]).
        Err(reason) if cx.rules.survey.is_some() => GroupPhase::Surveyed { seen: Err(reason) },
        Err(reason) => finish(target, self::failure(target, reason), cx),
    }
}

fn failure(target: &InletTarget, reason: String) -> GroupOutcome {
    GroupOutcome::Failed { topic: target.topic.clone(), reason }
}

/// The group ends with `outcome`: made durable, then reported.
fn finish(target: &InletTarget, mut outcome: GroupOutcome, cx: &mut Cx<'_>) -> GroupPhase {
    if let GroupOutcome::Reset { to: to @ None, .. } | GroupOutcome::Planned { to: to @ None, .. } = &mut outcome {
        *to = cx.rules.describe(&target.group);
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
