//! The request intake: from what the driver read of a resource (fresh, not from a cache) to either
//! an answer that needs no Kafka, or a [`Drive`] of the request, built from its durable progress.
//!
//! In order: no annotation means nothing to do; an annotation that does not parse is refused once
//! (an event keyed by its text, a `Refused` status); a new request supersedes an unfinished one (an
//! event, and the old id in the history); a request already done whose status says so is left as it
//! is; otherwise the durable progress of the request, the ledger's merged with the status's, rebuilds
//! its machine.

use super::destination::Destination;
use super::drive::{Drive, DriveOptions};
use super::machine::{ResetMachine, State};
use super::status::{merge_progress, progress_from_status};
use super::vocabulary::{GroupProgress, Timestamp};
use crate::events::{Event, EventType};
use crate::request::{MalformedRequest, ResetRequest};
use crate::resource::{RequestPhase, ResetHistoryEntry, ResetStatus};

/// How many earlier requests `status.resetHistory` keeps.
pub const HISTORY_LEN: usize = 10;

/// What the driver read of one resource, fresh from the API server.
#[derive(Clone, Copy, Debug)]
pub struct Fresh<'a> {
    /// The request annotation's text.
    pub request: Option<&'a str>,
    /// The done annotation.
    pub done: Option<&'a str>,
    /// `status.reset` as it stands.
    pub reset: Option<&'a ResetStatus>,
    /// `status.resetHistory` as it stands.
    pub history: &'a [ResetHistoryEntry],
}

/// What the request needs, decided from a fresh read alone.
#[derive(Debug)]
pub enum Intake {
    /// No request annotation: nothing to do, the status keeps what it holds.
    Idle,
    /// Answered without Kafka.
    Answered(Answer),
    /// The request may run: read its durable progress from the ledger, then [`Admitted::start`].
    Admitted(Admitted),
}

/// A request answered without Kafka: the status to write and the events to record.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// `status.reset`.
    pub reset: ResetStatus,
    /// `status.resetHistory`.
    pub history: Vec<ResetHistoryEntry>,
    /// Events to record (a failure to record one is logged, not fatal).
    pub events: Vec<Event>,
}

/// A well-formed request that is not known to be done yet.
#[derive(Debug)]
pub struct Admitted {
    request: ResetRequest,
    annotation: String,
    done: Option<String>,
    events: Vec<Event>,
    history: Vec<ResetHistoryEntry>,
    stamps: Stamps,
    from_status: Vec<GroupProgress>,
    destination: Option<Destination>,
}

/// How [`Admitted::start`] went.
#[derive(Debug)]
pub enum Started {
    /// The request is done by its progress (the status missed its final write): nothing is redone.
    Answered(Answer),
    /// The request runs.
    Drive(Box<Drive>),
}

/// When the operator first saw a request, and when it finished: kept across reconciles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamps {
    pub requested_at: String,
    pub finished_at: Option<String>,
}

impl Stamps {
    /// `r` with the stamps; a finished request is stamped finished at `now` the first time.
    pub fn apply(&mut self, mut r: ResetStatus, now: Timestamp) -> ResetStatus {
        r.requested_at = Some(self.requested_at.clone());
        if r.phase.finished() {
            r.finished_at = Some(self.finished_at.get_or_insert_with(|| now.rfc3339()).clone());
        }
        r
    }
}

/// Decides what the request of `fresh` needs, at `now`.
pub fn intake(fresh: &Fresh<'_>, now: Timestamp) -> Intake {
    let Some(raw) = fresh.request else { return Intake::Idle };
    let previous = fresh.reset;
    let request = match ResetRequest::parse(raw) {
        Ok(r) => r,
        Err(why) => {
            return Intake::Answered(Answer {
                reset: ResetStatus {
                    id: String::new(),
                    phase: RequestPhase::Refused,
                    detail: why.to_string(),
                    ..Default::default()
                },
                history: history(fresh.history, previous, ""),
                events: vec![malformed_event(raw, &why)],
            });
        }
    };
    let events: Vec<Event> = superseded_event(previous, &request.id).into_iter().collect();
    let history = history(fresh.history, previous, &request.id);
    let same = previous.filter(|p| p.id == request.id);
    // The fresh read holds the status the finishing reconcile wrote (a cache may not yet).
    if fresh.done == Some(request.id.as_str())
        && let Some(kept) = same.filter(|p| matches!(p.phase, RequestPhase::Done | RequestPhase::Refused))
    {
        return Intake::Answered(Answer { reset: kept.clone(), history, events });
    }
    Intake::Admitted(Admitted {
        stamps: Stamps {
            requested_at: same.and_then(|p| p.requested_at.clone()).unwrap_or_else(|| now.rfc3339()),
            finished_at: same.and_then(|p| p.finished_at.clone()),
        },
        from_status: same.map(progress_from_status).unwrap_or_default(),
        annotation: raw.to_string(),
        done: fresh.done.map(str::to_string),
        destination: None,
        request,
        events,
        history,
    })
}

impl Admitted {
    /// The request id: the ledger's progress of this request is what [`Admitted::start`] needs.
    pub fn id(&self) -> &str {
        &self.request.id
    }

    /// The request.
    pub fn request(&self) -> &ResetRequest {
        &self.request
    }

    /// Where the groups go, when the request needs offsets the driver reads (an undo's, from the
    /// ledger): see [`Destination`].
    #[must_use]
    pub fn with_destination(mut self, destination: Destination) -> Self {
        self.destination = Some(destination);
        self
    }

    /// Builds the request's machine from its durable progress: the ledger's (`None` when the ledger
    /// cannot be read) merged with the status's.
    pub fn start(self, ledger: Option<Vec<GroupProgress>>, options: DriveOptions, now: Timestamp) -> Started {
        let Admitted { request, annotation, done, events, history, mut stamps, from_status, destination } = self;
        let progress = merge_progress(ledger.unwrap_or_default(), from_status);
        let mut machine = ResetMachine::new(request, done.as_deref(), progress)
            .with_settle(options.settle)
            .with_retry_for(options.retry_for);
        if let Some(destination) = destination {
            machine = machine.with_destination(destination);
        }
        if matches!(machine.state(), State::Done(_)) {
            // Done, but the status missed the final write (it failed, or the operator stopped just
            // before): rebuilt from the recorded outcomes, with nothing redone.
            let reset = stamps.apply(machine.status(), now);
            return Started::Answered(Answer { reset, history, events });
        }
        Started::Drive(Box::new(Drive::new(machine, annotation, history, stamps, events, options)))
    }
}

/// When the request in the annotation (`current_id`) differs from the one the status last described
/// (`previous`) and that one had not finished, it was superseded (`flow reset --replace`): the event
/// that says so.
pub fn superseded_event(previous: Option<&ResetStatus>, current_id: &str) -> Option<Event> {
    let p = previous.filter(|p| !p.id.is_empty() && p.id != current_id && !p.phase.finished())?;
    Some(Event::new(
        EventType::Warning,
        "ResetSuperseded",
        format!("reset {} was superseded by reset {current_id} before it finished ({})", p.id, p.phase),
        format!("{}/superseded", p.id),
    ))
}

/// The history after the status moves from `previous` to request `current_id`: `previous` is added
/// first (as `Superseded` when it had not finished), newest first, at most [`HISTORY_LEN`] entries.
pub fn history(old: &[ResetHistoryEntry], previous: Option<&ResetStatus>, current_id: &str) -> Vec<ResetHistoryEntry> {
    let mut out = Vec::with_capacity(HISTORY_LEN);
    if let Some(p) = previous.filter(|p| !p.id.is_empty() && p.id != current_id) {
        let phase = if p.phase.finished() { p.phase } else { RequestPhase::Superseded };
        out.push(ResetHistoryEntry { id: p.id.clone(), phase });
    }
    let added = out.first().map(|e| e.id.clone());
    out.extend(old.iter().filter(|e| e.id != current_id && Some(&e.id) != added.as_ref()).cloned());
    out.truncate(HISTORY_LEN);
    out
}

/// The `ResetRefused` event for a request annotation that does not parse. Keyed by the annotation's
/// text, so the same bad text is reported once, and a corrected one again.
pub fn malformed_event(raw: &str, why: &MalformedRequest) -> Event {
    Event::new(
        EventType::Warning,
        "ResetRefused",
        format!(
            "reset request refused, nothing was reset: the annotation {} {why}; write a new request with flow reset",
            crate::names::ANNOTATION_RESET
        ),
        format!("malformed/{raw}"),
    )
}
