//! A [`Run`]: one reconcile of a resource's reset request, from the fresh read to its end, as one
//! sans-IO loop. It owns every decision of the reconcile, in order: the intake ([`super::intake`]),
//! where an undo's offsets come from ([`Admitted::undo_from`]), the request's durable progress
//! ([`Admitted::start`]), the shared-group rule, the [`Drive`] of its machine, and whether a newer
//! request superseded it while it slept. The operator (`operator/src/reset.rs`) and the model tests
//! (`ledger-tests/src/driver.rs`) each give it I/O, and nothing else.
//!
//! # Run loop
//! Build it with [`Run::new`] from the fresh read, then, until it is finished:
//! 1. take [`Run::poll`] at the current instant, and do what it says:
//!    - [`Next::Start`]: start the [`Work`], unless it acts ([`Work::acts`]) and the driver no longer
//!      holds its Lease with a margin: then report [`Report::NotStarted`]. A done write that fails is
//!      [`Report::Failed`], reported before the next poll;
//!    - [`Next::Need`]: read the fact it names and report it;
//!    - [`Next::Wait`]: wait for a completion of work in flight and report it, or until the instant
//!      given, if any, and report [`Report::Tick`];
//!    - [`Next::Sleep`]: nothing is in flight; sleep until the instant, then report [`Report::Tick`];
//!    - [`Next::Finished`]: stop; the [`End`] says what to show and when to look again.
//! 2. report every completion when it arrives ([`Report::Kafka`], [`Report::Persisted`], ...), in
//!    any order, and go back to 1.
//!
//! The ordering of the work (persists batched, commits, events and the done write after the
//! persists they depend on, the done write after the events, a refusal's status before its done
//! write) is the [`Drive`]'s, and an answer's follows the same rules (see [`super::drive`]). A drive
//! that stops early hands out nothing more and finishes only once nothing is in flight.
//!
//! # The decisions it owns besides the drive
//! - An undo puts back what the ledger recorded of the request it undoes, else what the status
//!   still lists of it ([`Admitted::undo_from`]).
//! - The shared-group rule: before anything touches Kafka, a request whose groups (those not
//!   finished) another resource maps to on the same cluster is refused: its events, then its status
//!   (`Refused`, saying why; a resumed request keeps the groups it did), then the done write. When
//!   the cluster cannot be told apart yet it waits (`Waiting`, saying why), and looks again after
//!   [`WAIT_RECHECK`]. The verdict is the driver's input ([`Report::Shared`]), decided by
//!   [`crate::tenancy::reset_verdict`] from what the driver observed.
//! - The supersede check: after each sleep the request annotation must still be the one the run was
//!   built for. The driver's cached read is asked first and a fresh read only when the cache shows
//!   another (or none), so that a cache behind a broken watch never stops a run; a fresh read
//!   showing another ends the run ([`Ended::Superseded`]), and the next reconcile takes the new one.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::drive::{Drive, DriveOptions, Idle, Persist, Work};
use super::group::GroupPhase;
use super::intake::{Admitted, Answer, Fresh, Intake, Started, intake, superseded_event};
use super::machine::{State, WAIT_RECHECK};
use super::vocabulary::{Input, LedgerEntry, Timestamp};
use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::resource::{AnkkaFlowSpec, RequestPhase, ResetHistoryEntry, ResetStatus};
use crate::tenancy::Verdict;

/// What the driver does next (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Next {
    /// Start this work, and report how it ended.
    Start(Work),
    /// Read this fact and report it.
    Need(Need),
    /// Wait for work in flight to end; at this instant, if given, report [`Report::Tick`].
    Wait(Option<Timestamp>),
    /// Nothing is in flight: sleep until this instant, then report [`Report::Tick`].
    Sleep(Timestamp),
    /// The run is over.
    Finished(End),
}

/// A fact the run needs from the world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// The ledger's entries of this request, for whichever object: [`Report::Ledger`].
    Ledger(String),
    /// The running pods of the pipeline the fresh read names, and when the driver saw each target
    /// streamlet stopped: [`Report::Pods`].
    Pods,
    /// What the shared-group rule says of these groups of the request: [`Report::Shared`].
    Shared(Vec<GroupId>),
    /// The request annotation as it stands now: from the driver's cache (`fresh: false`), or read
    /// from the API server (`fresh: true`): [`Report::Requested`].
    Requested {
        /// Read from the API server.
        fresh: bool,
    },
}

/// Something that happened, reported to [`Run::handle`].
#[derive(Clone, Debug)]
pub enum Report {
    /// A Kafka call handed out ended with this result.
    Kafka(Input),
    /// A Kafka call handed out ended without a result (its task failed): nothing more starts.
    KafkaLost,
    /// The [`Persist`] with this token is durable.
    Persisted(u64),
    /// The [`Persist`] with this token failed: nothing more starts.
    PersistFailed(u64),
    /// Work handed out was not started, because it acts and the driver no longer holds its Lease
    /// with a margin: nothing more starts.
    NotStarted(Work),
    /// Work handed out failed (a done write): nothing more starts.
    Failed,
    /// The instant of a [`Next::Wait`] or a [`Next::Sleep`] came.
    Tick,
    /// [`Need::Ledger`]: the entries, or `None` when the ledger cannot be read.
    Ledger(Option<Vec<LedgerEntry>>),
    /// [`Need::Pods`]: pods per streamlet label value, and when each target streamlet was seen
    /// stopped (see [`Drive::seen_stopped`]).
    Pods {
        /// Running pods per streamlet.
        pods: BTreeMap<String, u32>,
        /// When the driver saw each streamlet stopped, by its own watch.
        stopped: BTreeMap<String, Timestamp>,
    },
    /// [`Need::Shared`]: the verdict, `None` when nothing holds the request back.
    Shared(Option<Verdict>),
    /// [`Need::Requested`]: the request annotation's text, as read.
    Requested {
        /// The annotation.
        annotation: Option<String>,
        /// Whether it was read from the API server.
        fresh: bool,
    },
}

/// How a run ended, and what the reconcile's status write shows of it.
#[derive(Clone, Debug, PartialEq)]
pub struct End {
    /// How.
    pub how: Ended,
    /// `status.reset`; `None`: as the status holds it (or as the run's last persist wrote it).
    pub reset: Option<ResetStatus>,
    /// `status.resetHistory`; `None`: as the status holds it.
    pub history: Option<Vec<ResetHistoryEntry>>,
    /// When to look at the request again though nothing about it changes; `None`: at the next
    /// change (or the controller's resync).
    pub recheck: Option<Duration>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// No request annotation.
    NoRequest,
    /// The annotation does not parse: refused (an event, the status), nothing else.
    Malformed,
    /// Answered without Kafka (awaiting approval, denied or expired, taken up for another object,
    /// already done by its progress); `done` when this run wrote the done annotation.
    Answered {
        /// The done annotation was written.
        done: bool,
    },
    /// Refused by the shared-group rule: status, then the done write.
    SharedRefused,
    /// Held back by the shared-group rule until clusters can be told apart.
    SharedWaits,
    /// A target still runs.
    Waiting,
    /// Every group not finished waits for members to leave it.
    Members,
    /// A newer request replaced this one while it slept.
    Superseded,
    /// The request is done (its done annotation written), or was already.
    Done,
    /// Resetting with nothing scheduled (never expected): the next reconcile starts over.
    Stalled,
    /// Stopped early (a write failed, the Lease was lost, a call's task failed); the next run
    /// starts from durable state.
    Abandoned,
}

/// An answer being carried out: its events, then, when it settles the request, its status and,
/// once that is durable, the done write.
#[derive(Debug)]
struct Answering {
    events: VecDeque<Event>,
    /// The status to make durable before the done write, and the request id to write done.
    settle: Option<(Persist, String)>,
    /// Whether the status write is under way, and whether it is durable.
    writing: bool,
    durable: bool,
    end: End,
    abandoned: bool,
}

impl Answering {
    fn new(events: Vec<Event>, settle: Option<(Persist, String)>, end: End) -> Self {
        Answering { events: events.into(), settle, writing: false, durable: false, end, abandoned: false }
    }

    /// The answer of intake or of the start, carried out at `now`.
    fn answer(answer: Answer, malformed: bool, now: Timestamp) -> Self {
        let Answer { reset, history, events, done, recheck_at } = answer;
        let how = match &done {
            _ if malformed => Ended::Malformed,
            Some(_) => Ended::Answered { done: true },
            None => Ended::Answered { done: false },
        };
        // A request awaiting approval expires without anything written: looked at again then (a
        // little after, so that the expiry has passed by the driver's clock too).
        let recheck = recheck_at.map(|at| now.until(at) + Duration::from_secs(1));
        let settle = done.map(|id| (persist(reset.clone(), history.clone()), id));
        Answering::new(events, settle, End { how, reset: Some(reset), history: Some(history), recheck })
    }
}

/// A status write without progress: an answer's, before its done write.
fn persist(reset: ResetStatus, history: Vec<ResetHistoryEntry>) -> Persist {
    Persist { token: 1, writes: Vec::new(), reset, history }
}

#[derive(Debug)]
enum Phase {
    /// Admitted; the ledger's entries of the request an undo undoes are due.
    Undo(Box<Admitted>),
    /// Admitted; the ledger's entries of the request are due.
    Progress(Box<Admitted>),
    /// The drive is built; the pods are due.
    Pods(Box<Drive>),
    /// The shared-group verdict on these groups is due.
    Shared(Box<Drive>, Vec<GroupId>),
    /// The drive runs.
    Driving(Box<Drive>),
    /// The drive slept; whether the request annotation still names it is due (`fresh`: from the
    /// API server).
    Woken(Box<Drive>, bool),
    /// An answer is carried out.
    Answering(Box<Answering>),
    /// Over.
    Ended(Box<End>, Option<Box<Drive>>),
    /// Between two phases (never seen outside a transition).
    Moving,
}

/// One reconcile of a resource's reset request. See the module documentation.
#[derive(Debug)]
pub struct Run {
    phase: Phase,
    id: Option<String>,
    spec: AnkkaFlowSpec,
    options: DriveOptions,
    /// The event saying the request the status named before was superseded by this one.
    superseded: Option<Event>,
    taken_up: bool,
    /// The drive sleeps: the next tick wakes it.
    slept: bool,
}

impl Run {
    /// A run of the request of `fresh` (a read of the resource straight from the API server, never
    /// a cache), whose spec is `spec`, at `now`.
    pub fn new(fresh: &Fresh<'_>, spec: AnkkaFlowSpec, options: DriveOptions, now: Timestamp) -> Run {
        let mut run =
            Run { phase: Phase::Moving, id: None, spec, options, superseded: None, taken_up: false, slept: false };
        run.phase = match intake(fresh, now) {
            Intake::Idle => Phase::Ended(Box::new(End::of(Ended::NoRequest, None, None)), None),
            Intake::Answered(answer) => {
                let malformed = answer.reset.id.is_empty();
                run.id = (!malformed).then(|| answer.reset.id.clone());
                Phase::Answering(Box::new(Answering::answer(answer, malformed, now)))
            }
            Intake::Admitted(admitted) => {
                // Before its first status write, the status names another request.
                run.taken_up = fresh.reset.is_none_or(|r| r.id != admitted.id());
                run.superseded = superseded_event(fresh.reset, admitted.id());
                run.id = Some(admitted.id().to_string());
                match admitted.undone() {
                    Some(_) => Phase::Undo(Box::new(admitted)),
                    None => Phase::Progress(Box::new(admitted)),
                }
            }
        };
        run
    }

    /// The request id, once it parsed.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Whether this run takes the request up for the first time (the status named another): the
    /// moment a request is counted.
    pub fn taken_up(&self) -> bool {
        self.taken_up
    }

    /// The drive, once it is built.
    pub fn drive(&self) -> Option<&Drive> {
        match &self.phase {
            Phase::Pods(d) | Phase::Shared(d, _) | Phase::Driving(d) | Phase::Woken(d, _) => Some(d),
            Phase::Ended(_, d) => d.as_deref(),
            _ => None,
        }
    }

    /// The drive, once it is built (its status stamps the instant a request finished).
    pub fn drive_mut(&mut self) -> Option<&mut Drive> {
        match &mut self.phase {
            Phase::Pods(d) | Phase::Shared(d, _) | Phase::Driving(d) | Phase::Woken(d, _) => Some(d),
            Phase::Ended(_, d) => d.as_deref_mut(),
            _ => None,
        }
    }

    /// Work handed out and not reported yet.
    pub fn in_flight(&self) -> usize {
        match &self.phase {
            Phase::Driving(d) => d.in_flight(),
            Phase::Answering(a) => usize::from(a.writing),
            _ => 0,
        }
    }

    /// What to do next, at `now` (see the module documentation).
    pub fn poll(&mut self, now: Timestamp) -> Next {
        let end = match &mut self.phase {
            Phase::Undo(a) => return Next::Need(Need::Ledger(a.undone().unwrap_or_default().to_string())),
            Phase::Progress(a) => return Next::Need(Need::Ledger(a.id().to_string())),
            Phase::Pods(_) => return Next::Need(Need::Pods),
            Phase::Shared(_, groups) => return Next::Need(Need::Shared(groups.clone())),
            Phase::Woken(_, fresh) => return Next::Need(Need::Requested { fresh: *fresh }),
            Phase::Ended(end, _) => return Next::Finished((**end).clone()),
            Phase::Moving => return Next::Finished(End::of(Ended::Stalled, None, None)),
            Phase::Answering(a) => match a.poll() {
                Next::Finished(end) => end,
                next => return next,
            },
            Phase::Driving(drive) => {
                if let Some(work) = drive.poll_work(now) {
                    return Next::Start(work);
                }
                if drive.in_flight() > 0 {
                    return Next::Wait(drive.poll_timeout());
                }
                let shown = |drive: &mut Drive, recheck| {
                    let history = Some(drive.history().to_vec());
                    End { how: Ended::Done, reset: Some(drive.status(now)), history, recheck }
                };
                match drive.idle() {
                    Idle::Sleep(at) => {
                        self.slept = true;
                        return Next::Sleep(at);
                    }
                    Idle::Done => shown(drive, None),
                    Idle::Stalled => End { how: Ended::Stalled, ..shown(drive, None) },
                    Idle::Waiting(_) => End { how: Ended::Waiting, ..shown(drive, Some(WAIT_RECHECK)) },
                    Idle::Members => End { how: Ended::Members, ..shown(drive, Some(WAIT_RECHECK)) },
                    Idle::Abandoned => End::of(Ended::Abandoned, None, Some(drive.history().to_vec())),
                }
            }
        };
        self.finish(end.clone());
        Next::Finished(end)
    }

    /// Reports what happened, at `now`. A report that answers nothing the run asked for is ignored.
    pub fn handle(&mut self, report: Report, now: Timestamp) {
        match std::mem::replace(&mut self.phase, Phase::Moving) {
            Phase::Undo(admitted) => {
                self.phase = match report {
                    Report::Ledger(entries) => Phase::Progress(Box::new(admitted.undo_from(entries))),
                    _ => Phase::Undo(admitted),
                }
            }
            Phase::Progress(admitted) => match report {
                Report::Ledger(entries) => self.start(*admitted, entries, now),
                _ => self.phase = Phase::Progress(admitted),
            },
            Phase::Pods(mut drive) => match report {
                Report::Pods { pods, stopped } => {
                    // Before the pods, so that every commit of the drive goes by when they stopped.
                    drive.seen_stopped(stopped);
                    drive.observe(self.spec.clone(), pods, now);
                    self.phase = match unfinished(&drive) {
                        groups if groups.is_empty() => Phase::Driving(drive),
                        groups => Phase::Shared(drive, groups),
                    };
                }
                _ => self.phase = Phase::Pods(drive),
            },
            Phase::Shared(drive, groups) => match report {
                Report::Shared(verdict) => self.shared(drive, verdict, now),
                _ => self.phase = Phase::Shared(drive, groups),
            },
            Phase::Driving(mut drive) => {
                match report {
                    Report::Kafka(input) => drive.handle(input, now),
                    Report::KafkaLost => {
                        drive.abandon();
                        drive.call_lost();
                    }
                    Report::Persisted(token) => drive.persisted(token),
                    Report::PersistFailed(token) => {
                        drive.abandon();
                        drive.persisted(token);
                    }
                    Report::NotStarted(work) => {
                        drive.not_started(&work);
                        drive.abandon();
                    }
                    Report::Failed => drive.abandon(),
                    Report::Tick if std::mem::take(&mut self.slept) => {
                        // A newer request supersedes this one: asked before the drive goes on.
                        self.phase = Phase::Woken(drive, false);
                        return;
                    }
                    Report::Tick => drive.tick(now),
                    Report::Ledger(_) | Report::Pods { .. } | Report::Shared(_) | Report::Requested { .. } => {}
                }
                self.phase = Phase::Driving(drive);
            }
            Phase::Woken(mut drive, asked) => match report {
                Report::Requested { annotation, .. } if annotation.as_deref() == Some(drive.annotation()) => {
                    drive.tick(now);
                    self.phase = Phase::Driving(drive);
                }
                // The cache shows another request, or none: confirmed by a fresh read.
                Report::Requested { fresh: false, .. } => self.phase = Phase::Woken(drive, true),
                Report::Requested { fresh: true, .. } => {
                    let history = Some(drive.history().to_vec());
                    let reset = Some(drive.status(now));
                    let end = End { how: Ended::Superseded, reset, history, recheck: Some(Duration::ZERO) };
                    self.phase = Phase::Ended(Box::new(end), Some(drive));
                }
                _ => self.phase = Phase::Woken(drive, asked),
            },
            Phase::Answering(mut a) => {
                match report {
                    Report::Persisted(_) => {
                        a.writing = false;
                        a.durable = true;
                    }
                    Report::PersistFailed(_) => {
                        a.writing = false;
                        a.abandoned = true;
                    }
                    Report::NotStarted(Work::Persist(_)) => {
                        a.writing = false;
                        a.abandoned = true;
                    }
                    Report::NotStarted(_) | Report::Failed | Report::KafkaLost => a.abandoned = true,
                    _ => {}
                }
                self.phase = Phase::Answering(a);
            }
            ended @ (Phase::Ended(..) | Phase::Moving) => self.phase = ended,
        }
    }

    fn finish(&mut self, end: End) {
        let drive = match std::mem::replace(&mut self.phase, Phase::Moving) {
            Phase::Pods(d) | Phase::Shared(d, _) | Phase::Driving(d) | Phase::Woken(d, _) => Some(d),
            Phase::Ended(_, d) => d,
            _ => None,
        };
        self.phase = Phase::Ended(Box::new(end), drive);
    }

    /// Builds the drive from the request's durable progress (`ledger`: its entries).
    fn start(&mut self, admitted: Admitted, ledger: Option<Vec<LedgerEntry>>, now: Timestamp) {
        self.phase = match admitted.start(ledger, self.options, now) {
            Started::Answered(answer) => Phase::Answering(Box::new(Answering::answer(*answer, false, now))),
            Started::Drive(drive) => Phase::Pods(drive),
        };
    }

    /// The shared-group rule's `verdict` on the groups of `drive`.
    fn shared(&mut self, mut drive: Box<Drive>, verdict: Option<Verdict>, now: Timestamp) {
        let id = drive.id().to_string();
        let history = drive.history().to_vec();
        let mut events: Vec<Event> = self.superseded.take().into_iter().collect();
        self.phase = match verdict {
            None => Phase::Driving(drive),
            Some(Verdict::Refused(why)) => {
                events.push(Event::new(EventType::Warning, "ResetRefused", why.clone(), format!("{id}/refused")));
                let mut refused = drive.status(now);
                refused.phase = RequestPhase::Refused;
                refused.detail = why;
                // A resumed request keeps what it did before (a group reset stays listed, for an undo).
                if !drive.machine().resumed() {
                    refused.groups.clear();
                }
                refused.finished_at = Some(now.rfc3339());
                let settle = Some((persist(refused.clone(), history.clone()), id));
                let end =
                    End { how: Ended::SharedRefused, reset: Some(refused), history: Some(history), recheck: None };
                Phase::Answering(Box::new(Answering::new(events, settle, end)))
            }
            Some(Verdict::Waits(why)) => {
                // Keyed by the reason: recorded once per distinct reason, as the waits for running
                // streamlets.
                events.push(Event::new(EventType::Warning, "ResetRefused", why.clone(), why.clone()));
                let mut waiting = drive.status(now);
                waiting.phase = RequestPhase::Waiting;
                waiting.detail = why;
                let end = End {
                    how: Ended::SharedWaits,
                    reset: Some(waiting),
                    history: Some(history),
                    recheck: Some(WAIT_RECHECK),
                };
                Phase::Answering(Box::new(Answering::new(events, None, end)))
            }
        };
    }
}

impl Answering {
    /// The next work of the answer, or its end.
    fn poll(&mut self) -> Next {
        if self.abandoned {
            if self.writing {
                return Next::Wait(None);
            }
            return Next::Finished(End::of(Ended::Abandoned, None, None));
        }
        if let Some(event) = self.events.pop_front() {
            return Next::Start(Work::Record(event));
        }
        match self.settle.take() {
            Some((status, id)) if !self.durable => {
                if self.writing {
                    self.settle = Some((status, id));
                    return Next::Wait(None);
                }
                self.writing = true;
                let work = Work::Persist(status.clone());
                self.settle = Some((status, id));
                Next::Start(work)
            }
            Some((_, id)) => Next::Start(Work::WriteDone(id)),
            None => Next::Finished(self.end.clone()),
        }
    }
}

/// The groups of `drive` not finished, while it resets.
fn unfinished(drive: &Drive) -> Vec<GroupId> {
    match drive.machine().state() {
        State::Resetting(r) => r
            .groups
            .iter()
            .filter(|(_, g)| !matches!(g.phase, GroupPhase::Finished(_)))
            .map(|(group, _)| group.clone())
            .collect(),
        _ => Vec::new(),
    }
}

impl End {
    /// An end that asks for no recheck.
    fn of(how: Ended, reset: Option<ResetStatus>, history: Option<Vec<ResetHistoryEntry>>) -> End {
        End { how, reset, history, recheck: None }
    }
}
