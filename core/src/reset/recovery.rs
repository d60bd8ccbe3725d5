//! The reads after a commit: recovering an intent whose commit may or may not have landed, by the
//! markers Kafka holds (see the module documentation of `reset`, "Why a group is never reset
//! twice"), and verifying a commit after the settle delay.

use std::collections::BTreeMap;

use std::time::Duration;

use super::retry::Retry;
use super::vocabulary::{
    GroupOutcome, Intent, KafkaFailure, Position, Positions, Timestamp, fence_marker, reset_marker,
};
use super::wording::{join, named};
use crate::targets::InletTarget;

/// Which read of a group after its commit.
#[derive(Clone, Copy, Debug)]
pub(super) enum Reread {
    /// The read that learns whether the commit of an intent landed (`GroupPhase::Recovering`).
    Recovering,
    /// The read after the settle delay (`GroupPhase::Verifying`).
    Verifying,
}

/// What a read after a commit found; the group's transitions (`super::group`) take it from there.
/// Kept apart from the phases, so that this module decides from the read alone.
#[derive(Debug)]
pub(super) enum Found {
    /// The read failed and may be tried again after the backoff.
    Again(Retry, Intent),
    /// The commit never landed: the group starts over.
    NeverLanded(Retry),
    /// The commit landed and nothing moved since: the settle, then the verifying read (`added`:
    /// partitions beyond the intent).
    Landed(Intent, Vec<i32>),
    /// The group ends with this outcome.
    Ends(GroupOutcome),
}

/// What a read goes by: the request, the instant, how long a group retries, and whether the
/// request moves groups to offsets of its own rather than to the log start offsets.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reading<'a> {
    pub id: &'a str,
    pub now: Timestamp,
    pub retry_for: Duration,
    pub own_offsets: bool,
}

fn failure(target: &InletTarget, reason: String) -> Found {
    Found::Ends(GroupOutcome::Failed { topic: target.topic.clone(), reason })
}

/// The answer to a read of a group after its commit. A read that failed is read again after the
/// backoff (as every retry waits: a short outage must not use up every read at once) while the
/// failure allows; else the group fails. Reading never commits, so retrying it is always safe.
pub(super) fn reread(
    which: Reread,
    target: &InletTarget,
    retry: Retry,
    intent: Intent,
    result: Result<Positions, KafkaFailure>,
    cx: Reading<'_>,
) -> Found {
    let f = match (result, which) {
        (Ok(read), Reread::Recovering) => return recovered(target, retry, intent, &read, cx),
        (Ok(read), Reread::Verifying) => return verified(target, intent, &read),
        (Err(f), _) => f,
    };
    let reason = match retry.fail(f, cx.now, cx.retry_for) {
        Ok(retry) => return Found::Again(retry, intent),
        Err(reason) => reason,
    };
    let reason = match which {
        Reread::Recovering => format!("could not learn whether an earlier commit landed: {reason}"),
        // The reset landed and read back once, but whether it held is unknown: never a success.
        Reread::Verifying => {
            let at = if cx.own_offsets { "its new offsets" } else { "the log start offsets" };
            format!(
                "the reset was committed and read back at {at}, but reading the offsets again after the settle \
                 failed: {reason}; check that a consumer did not move them (kafka-consumer-groups --describe \
                 --group {}) and request a new reset if one did",
                target.group
            )
        }
    };
    failure(target, reason)
}

/// The read that learns whether the commit of an intent landed.
fn recovered(target: &InletTarget, retry: Retry, intent: Intent, read: &Positions, cx: Reading<'_>) -> Found {
    if intent.is_summary() {
        return recovered_by_markers(target, retry, intent, read, cx);
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
        let held = holdings(&intent, read, cx.id);
        failure(target, format!("{reason}; Kafka holds now: {held}; request a new reset"))
    } else if fenced && !landed_untouched {
        Found::NeverLanded(retry)
    } else if landed_untouched {
        // Landed, and no consumer committed since: wait the settle and read again, as after a
        // read-back.
        let added = added_partitions(&intent, read);
        // When the commit was sent is not known here: the full settle.
        Found::Landed(intent, added)
    } else if behind_before {
        // Landed; a consumer committed since (it ran after the reset), which is its progress to keep.
        let added = added_partitions(&intent, read);
        Found::Ends(intent.into_reset(&target.topic, added))
    } else {
        // A consumer committed after the fence, at or beyond where the group was: the streamlet ran,
        // but from the reset or from where it was, Kafka cannot tell. Never reset again (that could
        // rewind a finished rebuild), never claim success.
        let reason = "cannot tell whether the reset landed: the operator stopped during the reset, and a consumer \
                      has committed since at or beyond the offsets the group had before; if the streamlet did not \
                      read its input again, request a new reset";
        failure(target, reason.to_string())
    }
}

/// What the group holds on each partition of `intent`, and whose commit it is (at most
/// [`NAMED_PARTITIONS`] named, the rest counted): `partition 0 at 0 (this reset)`, `partition 1 at
/// 20 (its fence)`, `partition 2 at 7 (another commit)`, `partition 3 has no offset`.
pub(super) fn holdings(intent: &Intent, read: &Positions, id: &str) -> String {
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
    cx: Reading<'_>,
) -> Found {
    let (fence, reset) = (fence_marker(cx.id), reset_marker(cx.id));
    let marked = |p: &Option<Position>, m: &str| p.as_ref().is_none_or(|x| x.metadata == m);
    let landed: BTreeMap<i32, i64> = read
        .iter()
        .filter_map(|(p, pos)| pos.as_ref().filter(|x| x.metadata == reset).map(|x| (*p, x.offset)))
        .collect();
    if landed.is_empty() && read.values().all(|p| marked(p, &fence)) {
        return Found::NeverLanded(retry);
    }
    let covered = u32::try_from(landed.len()).unwrap_or(u32::MAX);
    if covered < intent.partitions && read.values().all(|p| marked(p, &fence) || marked(p, &reset)) {
        let held = holdings(&intent, read, cx.id);
        let reason =
            format!("the reset commit landed on some partitions only; Kafka holds now: {held}; request a new reset");
        return failure(target, reason);
    }
    if covered >= intent.partitions && read.values().all(|p| marked(p, &reset)) {
        let added = read.keys().filter(|p| !landed.contains_key(p)).copied().collect();
        let found = Intent { target: landed, ..intent };
        return Found::Landed(found, added);
    }
    let reason = "cannot tell whether the reset landed: the operator stopped during the reset, a consumer has \
                  committed since, and the offsets the group had before were kept only in the lost ledger; if the \
                  streamlet did not read its input again, request a new reset";
    failure(target, reason.to_string())
}

/// The read after the settle delay: the group is reset only if every partition of its intent is
/// still at its target.
fn verified(target: &InletTarget, intent: Intent, read: &Positions) -> Found {
    let moved: Vec<String> = intent
        .target
        .iter()
        .filter_map(|(p, o)| match read.get(p).cloned().flatten() {
            Some(pos) if pos.offset == *o => None,
            Some(pos) => Some(format!("partition {p} is at {} (reset to {o})", pos.offset)),
            None => Some(format!("partition {p} has no offset (reset to {o})")),
        })
        .collect();
    let added = added_partitions(&intent, read);
    if moved.is_empty() {
        return Found::Ends(intent.into_reset(&target.topic, added));
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
    failure(target, reason)
}

/// Partitions in `read` (the topic's partitions now) that `intent` did not cover.
pub(super) fn added_partitions<V>(intent: &Intent, read: &BTreeMap<i32, V>) -> Vec<i32> {
    read.keys().filter(|p| !intent.target.contains_key(p)).copied().collect()
}
