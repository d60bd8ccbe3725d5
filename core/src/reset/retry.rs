//! How a group retries: one record of its failures, carried from phase to phase.

use std::time::Duration;

use super::vocabulary::{FailureKind, KafkaFailure, Timestamp};

/// How long, by default, a group retries transient failures (a broker restarting, a coordinator
/// moving, no answer in time) from its first one before its last failure becomes final: long enough
/// to ride out a broker restart of several minutes.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(300);
/// Delay before the second attempt; doubled for each further one, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest delay between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Delay before attempt `attempt + 1`, after `attempt` (1-based) failed attempts.
pub fn backoff(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

/// The failures of one group so far: how many, since when, the last one's reason, and when the next
/// attempt is due. Every phase that can fail carries one, so that a group's failures add up across phases
/// (a fence that fails after an inspection that failed is the second failure, not the first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retry {
    /// Failed attempts so far.
    pub failures: u32,
    /// The last failure's reason.
    pub last_error: Option<String>,
    /// When the next attempt is due; `None` while an attempt is under way (or none is scheduled).
    pub next: Option<Timestamp>,
    /// When the first of the transient failures came (members in the group aside); they are
    /// retried for `retry_for` from it. Kept in the status (`failingSince`), so that a group rebuilt
    /// by a new drive goes on from it instead of starting the clock again.
    pub since: Option<Timestamp>,
    /// Whether the last failure was members in the group ([`FailureKind::MembersPresent`]): the
    /// group waits for them to leave.
    pub members: bool,
    /// Whether members were found in the group at any attempt so far: a consumer ran later than
    /// its streamlet's pods, so the settle cannot count from when those went (see
    /// [`super::ResetMachine::with_stopped`]).
    pub members_seen: bool,
}

impl Retry {
    /// Counts `failure`; the retry it allows, due after the backoff, or the reason that is final.
    /// Members in the group are waited for as long as they stay ([`FailureKind::MembersPresent`]);
    /// other transient failures are retried until `retry_for` has passed since the first failure.
    pub fn fail(mut self, failure: KafkaFailure, now: Timestamp, retry_for: Duration) -> Result<Retry, String> {
        self.failures += 1;
        let waits = failure.kind == FailureKind::MembersPresent;
        self.members = waits;
        self.members_seen |= waits;
        // Waiting for members is no failure of Kafka: it neither starts nor spends the retry time.
        let within = if waits {
            self.since = None;
            true
        } else {
            self.since.get_or_insert(now).until(now) < retry_for
        };
        if waits || failure.transient() && within {
            self.next = Some(now.after(backoff(self.failures)));
            self.last_error = Some(failure.reason);
            Ok(self)
        } else {
            Err(failure.reason)
        }
    }

    /// Counts `failure` without deciding anything yet: the step that follows learns more first.
    pub fn count(mut self, failure: KafkaFailure, now: Timestamp) -> Retry {
        self.failures += 1;
        self.members = failure.kind == FailureKind::MembersPresent;
        self.members_seen |= self.members;
        if self.members {
            self.since = None;
        } else {
            self.since.get_or_insert(now);
        }
        self.last_error = Some(failure.reason);
        self.next = None;
        self
    }

    /// A group that starts again with its transient failures under way since `since` (from the
    /// status of an earlier drive), or none.
    pub fn since(since: Option<Timestamp>) -> Retry {
        Retry { since, ..Retry::default() }
    }

    /// Due at `at`, with no failure counted (the wait of the settle).
    pub fn at(at: Timestamp) -> Retry {
        Retry { next: Some(at), ..Retry::default() }
    }

    /// The same failures, due after the backoff they call for.
    pub fn after_backoff(mut self, now: Timestamp) -> Retry {
        self.next = Some(now.after(backoff(self.failures.max(1))));
        self
    }

    /// Whether the next attempt is due at `now`; an attempt under way is never due.
    pub fn due(&self, now: Timestamp) -> bool {
        self.next.is_some_and(|t| t <= now)
    }

    /// The same failures with the attempt under way.
    pub fn started(mut self) -> Retry {
        self.next = None;
        self
    }
}
