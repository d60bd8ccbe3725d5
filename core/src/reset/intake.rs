//! The request intake: from what the driver read of a resource (fresh, not from a cache) to either
//! an answer that needs no Kafka, or a [`Drive`] of the request, built from its durable progress.
//!
//! In order: no annotation means nothing to do; an annotation that does not parse is refused once
//! (an event keyed by its text, a `Refused` status); a new request supersedes an unfinished one (an
//! event, and the old id in the history); a request already done whose status says so is left as it
//! is; otherwise the durable progress of the request, the ledger's merged with the status's, rebuilds
//! its machine.
//!
//! A request belongs to the object it was taken up for (its `metadata.uid`): the status records the
//! uid, and so does every ledger entry. Progress recorded for another uid (an object of the same name
//! that was deleted, and this one created in its place with the same request annotation) is never
//! merged: such a request is refused and marked done, so that none of its groups is reset a second
//! time for it.

use std::collections::BTreeMap;

use super::approval::{Asked, Gate, gate};
use super::destination::{Destination, undo};
use super::drive::{Drive, DriveOptions};
use super::machine::{ResetMachine, State};
use super::status::{Stamps, failing_since, merge_progress, progress_from_status};
use super::vocabulary::{GroupProgress, LedgerEntry, Timestamp};
use crate::events::{Event, EventType, fit_note};
use crate::names::GroupId;
use crate::request::{MalformedRequest, ResetRequest, To, parse_instant};
use crate::resource::{Approval, ApprovalDecision, RequestPhase, ResetHistoryEntry, ResetStatus};

/// How many earlier requests `status.resetHistory` keeps, and as many dry runs besides.
pub const HISTORY_LEN: usize = 10;

/// What the driver read of one resource, fresh from the API server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fresh<'a> {
    /// The object's `metadata.uid`.
    pub uid: &'a str,
    /// The request annotation's text.
    pub request: Option<&'a str>,
    /// The done annotation.
    pub done: Option<&'a str>,
    /// When the request annotation was written, as the API server recorded it (RFC 3339), if it
    /// says: shown as the request's `writtenAt`.
    pub written: Option<&'a str>,
    /// `status.reset` as it stands.
    pub reset: Option<&'a ResetStatus>,
    /// `status.resetHistory` as it stands.
    pub history: &'a [ResetHistoryEntry],
    /// Who requested it (the annotation `reset-requested-by`, stamped at admission).
    pub requested_by: Option<&'a str>,
    /// The decision annotation's text (`approved <id>`, `denied <id>`).
    pub decision: Option<&'a str>,
    /// Who wrote the decision (the annotation `reset-decided-by`, stamped at admission).
    pub decided_by: Option<&'a str>,
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
    /// The request id to write to the done annotation (after the status and the events): the answer
    /// settles the request for good.
    pub done: Option<String>,
    /// When to look at the request again though nothing about it changed: the moment a request
    /// awaiting approval expires.
    pub recheck_at: Option<Timestamp>,
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
    failing_since: BTreeMap<GroupId, Timestamp>,
    destination: Option<Destination>,
    decision: Option<String>,
    decided_by: Option<String>,
    /// For an undo: what the status still lists of the request it undoes (boxed: few requests are
    /// undos).
    undo: Option<Box<Undo>>,
}

/// An undo's request, and what the fresh status lists of it: the latest request only, recorded for
/// this object, with the offsets of its small groups (see [`progress_from_status`]).
#[derive(Debug)]
struct Undo {
    undone: String,
    from_status: Vec<GroupProgress>,
}

/// How [`Admitted::start`] went.
#[derive(Debug)]
pub enum Started {
    /// The request is done by its progress (the status missed its final write): nothing is redone.
    Answered(Box<Answer>),
    /// The request runs.
    Drive(Box<Drive>),
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
                    uid: Some(fresh.uid.to_string()),
                    phase: RequestPhase::Refused,
                    detail: why.to_string(),
                    ..Default::default()
                },
                history: history(fresh.history, previous, ""),
                events: vec![malformed_event(raw, &why)],
                done: None,
                recheck_at: None,
            });
        }
    };
    let events: Vec<Event> = superseded_event(previous, &request.id).into_iter().collect();
    let history = history(fresh.history, previous, &request.id);
    let same = previous.filter(|p| p.id == request.id);
    let requested_by = fresh.requested_by.map(str::trim).filter(|u| !u.is_empty()).map(str::to_string);
    // The time written as first seen: a later write of another field by the same writer moves its
    // managed-fields time, not the request's.
    let stamps = |same: Option<&ResetStatus>| Stamps {
        uid: fresh.uid.to_string(),
        written_at: same.and_then(|p| p.written_at.clone()).or_else(|| fresh.written.map(str::to_string)),
        requested_at: same.and_then(|p| p.requested_at.clone()).unwrap_or_else(|| now.rfc3339()),
        requested_by: requested_by.clone(),
        approval: same.and_then(|p| p.approval.clone()),
        finished_at: same.and_then(|p| p.finished_at.clone()),
    };
    // A status of this request for another object (restored from a backup with its status) with
    // progress in it: the request was carried out, in part or whole, for that object.
    if let Some(theirs) = same.filter(|p| p.uid.as_deref().is_some_and(|u| u != fresh.uid))
        && !progress_from_status(theirs).is_empty()
    {
        let other = theirs.uid.clone().unwrap_or_default();
        return Intake::Answered(taken_up_elsewhere(&request.id, &other, stamps(None), history, events, now));
    }
    let same = same.filter(|p| p.uid.as_deref().is_none_or(|u| u == fresh.uid));
    let undo = match &request.to {
        Some(To::Undo(undone)) => Some(Box::new(Undo {
            undone: undone.clone(),
            from_status: previous
                .filter(|p| p.id == *undone && p.uid.as_deref().is_none_or(|u| u == fresh.uid))
                .map(progress_from_status)
                .unwrap_or_default(),
        })),
        _ => None,
    };
    // The fresh read holds the status the finishing reconcile wrote (a cache may not yet).
    if fresh.done == Some(request.id.as_str())
        && let Some(kept) = same.filter(|p| p.phase.finished())
    {
        return Intake::Answered(Answer { reset: kept.clone(), history, events, done: None, recheck_at: None });
    }
    Intake::Admitted(Admitted {
        stamps: stamps(same),
        from_status: same.map(progress_from_status).unwrap_or_default(),
        failing_since: same.map(failing_since).unwrap_or_default(),
        annotation: raw.to_string(),
        done: fresh.done.map(str::to_string),
        destination: None,
        decision: fresh.decision.map(str::to_string),
        decided_by: fresh.decided_by.map(str::to_string),
        undo,
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

    /// Where the groups go, when the request needs offsets the driver reads: see [`Destination`].
    #[must_use]
    pub fn with_destination(mut self, destination: Destination) -> Self {
        self.destination = Some(destination);
        self
    }

    /// For an undo, the request it undoes: [`Admitted::undo_from`] needs the ledger's entries of it.
    pub fn undone(&self) -> Option<&str> {
        self.undo.as_ref().map(|u| u.undone.as_str())
    }

    /// An undo puts back what the ledger recorded of the request it undoes (`ledger`, its entries;
    /// `None` when the ledger cannot be read), only what was recorded for this object: another's
    /// progress is never taken as its own. When the ledger holds nothing of it for this object
    /// (lost, unreadable), what the status still lists of it stands in: the latest request only,
    /// and its small groups' offsets. Any other request is left as it is.
    #[must_use]
    pub fn undo_from(mut self, ledger: Option<Vec<LedgerEntry>>) -> Self {
        let Some(u) = self.undo.take() else { return self };
        let uid = &self.stamps.uid;
        let mut recorded: Vec<GroupProgress> =
            ledger.unwrap_or_default().into_iter().filter(|e| e.belongs_to(uid)).map(|e| e.progress).collect();
        if recorded.is_empty() {
            recorded = u.from_status;
        }
        let destination = undo(&u.undone, self.request.force, &recorded);
        self.with_destination(destination)
    }

    /// Builds the request's machine from its durable progress: the ledger's entries of this request
    /// (`None` when the ledger cannot be read) merged with the status's. Entries recorded for another
    /// object (see the module documentation) refuse the request instead.
    pub fn start(self, ledger: Option<Vec<LedgerEntry>>, options: DriveOptions, now: Timestamp) -> Started {
        let Admitted {
            request,
            annotation,
            done,
            events,
            history,
            mut stamps,
            from_status,
            failing_since,
            destination,
            decision,
            decided_by,
            undo: _,
        } = self;
        let (own, other): (Vec<LedgerEntry>, Vec<LedgerEntry>) =
            ledger.unwrap_or_default().into_iter().partition(|e| e.belongs_to(&stamps.uid));
        if let Some(e) = other.iter().find(|e| e.progress.intent.is_some() || e.progress.outcome.is_some()) {
            let other = e.uid.clone().unwrap_or_default();
            let answer = taken_up_elsewhere(&request.id, &other, stamps, history, events, now);
            return Started::Answered(Box::new(answer));
        }
        let own = own.into_iter().map(|e| e.progress).collect();
        let progress = merge_progress(own, from_status);
        let started = progress.iter().any(|p| p.intent.is_some() || p.outcome.is_some());
        let requested_by = stamps.requested_by.clone();
        let mut events = events;
        // The approval gate, for a request that has touched nothing yet (see `super::approval`).
        if done.as_deref() != Some(request.id.as_str()) {
            let asked = Asked {
                request: &request,
                requested_by: requested_by.as_deref(),
                decision: decision.as_deref(),
                decided_by: decided_by.as_deref(),
                requested_at: parse_instant(&stamps.requested_at).map_or(now, Timestamp),
            };
            match gate(&options.approval, &asked, now) {
                Gate::Open(approval) => {
                    if let Some(a) = approval.filter(|_| !started) {
                        events.push(approved_event(&request.id, &a));
                        stamps.approval = Some(a);
                    }
                }
                Gate::Awaiting(..) | Gate::Closed(_) if started => {}
                Gate::Awaiting(why, expires) => {
                    let event = Event::new(
                        EventType::Normal,
                        "ResetAwaitingApproval",
                        why.clone(),
                        format!("{}/awaiting", request.id),
                    );
                    events.push(event);
                    let reset = ResetStatus {
                        id: request.id.clone(),
                        phase: RequestPhase::AwaitingApproval,
                        detail: why,
                        dry_run: request.dry_run,
                        ..Default::default()
                    };
                    let events = stamp_events(events, requested_by.as_deref());
                    let answer = Answer {
                        reset: stamps.apply(reset, now),
                        history,
                        events,
                        done: None,
                        recheck_at: Some(expires),
                    };
                    return Started::Answered(Box::new(answer));
                }
                Gate::Closed(approval) => {
                    let (phase, reason, why) = match approval.decision {
                        ApprovalDecision::Denied => (
                            RequestPhase::Denied,
                            "ResetDenied",
                            format!(
                                "reset {} was denied by {}; nothing was reset",
                                request.id,
                                approval.by.as_deref().unwrap_or("an approver")
                            ),
                        ),
                        _ => (
                            RequestPhase::Expired,
                            "ResetExpired",
                            format!("reset {} was not approved in time and expired; nothing was reset", request.id),
                        ),
                    };
                    events.push(Event::new(
                        EventType::Warning,
                        reason,
                        why.clone(),
                        format!("{}/{reason}", request.id),
                    ));
                    stamps.approval = Some(approval);
                    let reset = ResetStatus {
                        id: request.id.clone(),
                        phase,
                        detail: why,
                        dry_run: request.dry_run,
                        ..Default::default()
                    };
                    let events = stamp_events(events, requested_by.as_deref());
                    let answer = Answer {
                        reset: stamps.apply(reset, now),
                        history,
                        events,
                        done: Some(request.id),
                        recheck_at: None,
                    };
                    return Started::Answered(Box::new(answer));
                }
            }
        }
        let events = stamp_events(events, requested_by.as_deref());
        let mut machine = ResetMachine::new(request, done.as_deref(), progress)
            .with_settle(options.settle)
            .with_retry_for(options.retry_for)
            .with_failing_since(failing_since);
        if let Some(destination) = destination {
            machine = machine.with_destination(destination);
        }
        if matches!(machine.state(), State::Done(_)) {
            // Done, but the status missed the final write (it failed, or the operator stopped just
            // before): rebuilt from the recorded outcomes, with nothing redone.
            let reset = stamps.apply(machine.status(), now);
            return Started::Answered(Box::new(Answer { reset, history, events, done: None, recheck_at: None }));
        }
        Started::Drive(Box::new(Drive::new(machine, annotation, history, stamps, events, options)))
    }
}

/// `events`, marked as events of a request `requested_by` requested.
fn stamp_events(events: Vec<Event>, requested_by: Option<&str>) -> Vec<Event> {
    events.into_iter().map(|e| e.requested_by(requested_by)).collect()
}

/// `ResetApproved`: who or which policy approved request `id`.
fn approved_event(id: &str, a: &Approval) -> Event {
    let how = match (&a.by, &a.policy) {
        (Some(by), _) => format!("by {by}"),
        (None, Some(policy)) => format!("by the administrator's policy {policy}"),
        (None, None) => "by an approver".to_string(),
    };
    Event::new(EventType::Normal, "ResetApproved", format!("reset {id} was approved {how}"), format!("{id}/approved"))
}

/// The answer to request `id` when it was taken up for another object, of uid `other`: refused, with
/// an event, and marked done, so that it is never carried out for this one (none of its groups is
/// reset twice for it, whichever object asks).
fn taken_up_elsewhere(
    id: &str,
    other: &str,
    mut stamps: Stamps,
    history: Vec<ResetHistoryEntry>,
    mut events: Vec<Event>,
    now: Timestamp,
) -> Answer {
    let why = format!(
        "reset {id} refused: it was taken up for an earlier AnkkaFlow of this name (uid {other}), deleted since, \
         and a request is carried out for one object only, so that no group is reset twice for it; to reset this \
         pipeline's groups, write a new request with flow reset"
    );
    let why = fit_note(&why);
    events.push(Event::new(EventType::Warning, "ResetRefused", why.clone(), format!("{id}/refused")));
    let reset = ResetStatus { id: id.to_string(), phase: RequestPhase::Refused, detail: why, ..Default::default() };
    Answer { reset: stamps.apply(reset, now), history, events, done: Some(id.to_string()), recheck_at: None }
}

/// When the request in the annotation (`current_id`) differs from the one the status last described
/// (`previous`) and that one had not finished, it was superseded (`flow reset --replace`): the event
/// that says so.
pub fn superseded_event(previous: Option<&ResetStatus>, current_id: &str) -> Option<Event> {
    let p = previous.filter(|p| !p.id.is_empty() && p.id != current_id && ended(p).is_none())?;
    Some(Event::new(
        EventType::Warning,
        "ResetSuperseded",
        format!("reset {} was superseded by reset {current_id} before it finished ({})", p.id, p.phase),
        format!("{}/superseded", p.id),
    ))
}

/// The history after the status moves from `previous` to request `current_id`: `previous` is added
/// first (as `Superseded` when it had not finished), newest first: at most [`HISTORY_LEN`] requests,
/// and at most as many dry runs among them, so that plans never push out a reset to undo.
pub fn history(old: &[ResetHistoryEntry], previous: Option<&ResetStatus>, current_id: &str) -> Vec<ResetHistoryEntry> {
    let mut all = Vec::with_capacity(old.len() + 1);
    if let Some(p) = previous.filter(|p| !p.id.is_empty() && p.id != current_id) {
        let phase = ended(p).unwrap_or(RequestPhase::Superseded);
        all.push(ResetHistoryEntry { id: p.id.clone(), phase, dry_run: p.dry_run });
    }
    let added = all.first().map(|e| e.id.clone());
    all.extend(old.iter().filter(|e| e.id != current_id && Some(&e.id) != added.as_ref()).cloned());
    // The requests and the dry runs are counted apart, newest first.
    let (mut requests, mut dry_runs) = (0, 0);
    all.retain(|e| {
        let kept = if e.dry_run { &mut dry_runs } else { &mut requests };
        *kept += 1;
        *kept <= HISTORY_LEN
    });
    all
}

/// How request status `p` ended, if it did: its phase when finished, or `Done` when every one of its
/// groups has its outcome though the status does not say Done yet (a completed request's status says
/// Done only after its done write, and the operator may have stopped just before that write).
fn ended(p: &ResetStatus) -> Option<RequestPhase> {
    if p.phase.finished() {
        return Some(p.phase);
    }
    let finished = |g: &crate::resource::GroupStatus| {
        use crate::resource::GroupStage;
        matches!(g.outcome, GroupStage::Reset | GroupStage::Failed | GroupStage::Planned)
    };
    (p.phase == RequestPhase::Resetting && !p.groups.is_empty() && p.groups.iter().all(finished))
        .then_some(RequestPhase::Done)
}

/// The `ResetRefused` event for a request annotation that does not parse. Keyed by the annotation's
/// text, so the same bad text is reported once, and a corrected one again.
pub fn malformed_event(raw: &str, why: &MalformedRequest) -> Event {
    Event::new(
        EventType::Warning,
        "ResetRefused",
        format!(
            "reset request refused, nothing was reset: the annotation {}: {why}; write a new request with flow reset",
            crate::names::ANNOTATION_RESET
        ),
        format!("malformed/{raw}"),
    )
}
