//! The reset machine: one request's states, from the parsed annotation to `Done`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::destination::Destination;
use super::group::{self, Cx, Group, GroupInput, GroupPhase, Rules, Survey};
use super::retry::DEFAULT_RETRY_FOR;
use super::survey;
use super::vocabulary::{Effect, GroupOutcome, GroupProgress, Input, Timestamp};
use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::request::ResetRequest;
use crate::resource::AnkkaFlowSpec;
use crate::targets::{self, InletTarget, RunningProblem};

/// Looks at a group with members one drive makes before it stops and the request is looked at again
/// later (see [`ResetMachine::waits_for_members`]).
pub const MEMBERS_IN_DRIVE: u32 = 3;

/// How often a waiting request is looked at again.
pub const WAIT_RECHECK: Duration = Duration::from_secs(5);
/// How long the machine waits, by default, after a group's commit reads back at its targets before
/// reading the group's offsets again, to catch a consumer that overwrote the reset. Long enough for a
/// consumer that was closing during the reset to commit its position, short enough not to delay a
/// request noticeably.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(1);

/// Waiting: some target still runs. Holds only what is valid while waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The request.
    pub request: ResetRequest,
    /// Why it waits.
    pub reasons: Vec<RunningProblem>,
    /// When to look again.
    pub next_look: Timestamp,
}

/// Resetting: every target stopped; groups under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resetting {
    /// The request.
    pub request: ResetRequest,
    /// Every target group.
    pub groups: BTreeMap<GroupId, Group>,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// Its id was already in the done annotation when the machine was built.
    AlreadyDone {
        /// The request id.
        id: String,
    },
    /// Refused as a whole (unknown streamlets, nothing to reset); done so it is not retried.
    Refused {
        /// The request id.
        id: String,
        /// The refusal note.
        why: String,
    },
    /// Every group finished.
    Completed {
        /// The request id.
        id: String,
        /// Per group: its target and outcome.
        groups: BTreeMap<GroupId, (InletTarget, GroupOutcome)>,
    },
}

/// The machine's state: one struct per phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Parsed, not yet checked against the resource.
    Requested(ResetRequest),
    /// A target still runs.
    Waiting(Waiting),
    /// Groups being reset.
    Resetting(Resetting),
    /// Finished; nothing more will happen for this id.
    Done(Done),
}

impl State {
    /// The request id.
    pub fn id(&self) -> &str {
        match self {
            State::Requested(r) => &r.id,
            State::Waiting(w) => &w.request.id,
            State::Resetting(r) => &r.request.id,
            State::Done(Done::AlreadyDone { id } | Done::Refused { id, .. } | Done::Completed { id, .. }) => id,
        }
    }
}

/// One reset request's machine. See the module documentation for the drive contract.
#[derive(Debug)]
pub struct ResetMachine {
    pub(super) state: State,
    /// The durable progress this machine was built from, per group.
    pub(super) progress: BTreeMap<GroupId, GroupProgress>,
    /// The topic of each target group, from the last observation (for the status while waiting).
    pub(super) topics: BTreeMap<GroupId, String>,
    effects: VecDeque<Effect>,
    /// The settle delay, the retry time, where the groups go, and whether it is a dry run.
    pub(super) rules: Rules,
    /// Per group, when its transient failures began, as an earlier drive's status says.
    failing_since: BTreeMap<GroupId, Timestamp>,
}

impl ResetMachine {
    /// Builds the machine for `request`, given the done annotation and the durable progress of this
    /// request's groups (progress of other requests must not be passed).
    pub fn new(request: ResetRequest, done_id: Option<&str>, progress: Vec<GroupProgress>) -> Self {
        let (destination, dry_run) = (Destination::of(&request), request.dry_run);
        // Outcomes known from durable progress say where they went (a status that stood in for a
        // lost ledger does not keep it).
        let mut progress = progress;
        for p in &mut progress {
            if let Some(GroupOutcome::Reset { to: to @ None, .. } | GroupOutcome::Planned { to: to @ None, .. }) =
                &mut p.outcome
            {
                *to = destination.describe();
            }
        }
        let state = if done_id == Some(request.id.as_str()) {
            State::Done(Done::AlreadyDone { id: request.id })
        } else {
            State::Requested(request)
        };
        ResetMachine {
            state,
            progress: progress.into_iter().map(|r| (r.group.clone(), r)).collect(),
            topics: BTreeMap::new(),
            effects: VecDeque::new(),
            rules: Rules {
                settle: DEFAULT_SETTLE,
                retry_for: DEFAULT_RETRY_FOR,
                destination,
                dry_run,
                closure: None,
                survey: None,
                running: Default::default(),
                stopped: BTreeMap::new(),
            },
            failing_since: BTreeMap::new(),
        }
    }

    /// Sets where the groups go (by default what the request names by itself, see
    /// [`Destination::of`]): the driver gives the offsets of an undo, which it reads from the
    /// ledger. Outcomes known from durable progress say where they went.
    #[must_use]
    pub fn with_destination(mut self, destination: Destination) -> Self {
        for p in self.progress.values_mut() {
            if let Some(GroupOutcome::Reset { to, .. } | GroupOutcome::Planned { to, .. }) = &mut p.outcome {
                *to = destination.describe();
            }
        }
        self.rules.destination = destination;
        self
    }

    /// Whether the request is a dry run (groups are planned, nothing is committed).
    pub fn dry_run(&self) -> bool {
        self.rules.dry_run
    }

    /// Where the groups go.
    pub fn destination(&self) -> &Destination {
        &self.rules.destination
    }

    /// Sets the settle delay: how long after a group's commit reads back at its targets the machine
    /// reads the group's positions again (default [`DEFAULT_SETTLE`]). `Duration::ZERO` skips the
    /// second read: the group is reset as soon as its commit reads back, and neither a consumer that
    /// overwrites the reset nor a partition added during it is noticed (except by the read of a
    /// machine rebuilt from an intent without outcome, which reads every partition anyway).
    #[must_use]
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.rules.settle = settle;
        self
    }

    /// Sets when the operator saw each streamlet stopped (its last pod gone; the request waits for
    /// replicas 0 besides), by its own watch (never from what a tenant can write), in this process. A group whose commit is
    /// handed out at least the settle after its streamlet stopped is read again at once after its
    /// read-back, not after a second settle: a commit still in flight from the streamlet's consumers
    /// landed before the reset's (docs/reset.md, "The settle"). A streamlet that is not in `stopped`
    /// (never seen running, or stopped before the operator started) waits the full settle.
    #[must_use]
    pub fn with_stopped(mut self, stopped: BTreeMap<String, Timestamp>) -> Self {
        self.rules.stopped = stopped;
        self
    }

    /// Sets how long a group retries transient Kafka failures from its first one before its last
    /// failure becomes final (default [`DEFAULT_RETRY_FOR`]). Members in a group are waited for
    /// however long they stay.
    #[must_use]
    pub fn with_retry_for(mut self, retry_for: Duration) -> Self {
        self.rules.retry_for = retry_for;
        self
    }

    /// Sets, per group, when its transient failures began in an earlier drive (see
    /// [`super::failing_since`]): its retry time goes on from then, so that retries stay bounded by
    /// time however often the drive is rebuilt.
    #[must_use]
    pub fn with_failing_since(mut self, failing_since: BTreeMap<GroupId, Timestamp>) -> Self {
        self.failing_since = failing_since;
        self
    }

    /// The current state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The request id.
    pub fn id(&self) -> &str {
        self.state.id()
    }

    /// Whether it was built from durable progress (some group had an intent or an outcome): the
    /// request ran before, and Kafka may hold its commits.
    pub fn resumed(&self) -> bool {
        self.progress.values().any(|p| p.intent.is_some() || p.outcome.is_some())
    }

    /// The next effect to carry out, in order; `None` when there is none left.
    #[must_use]
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When the driver should come back: feed [`Input::Tick`] (Resetting) or look again from a fresh
    /// observation (Waiting). `None`: nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        match &self.state {
            State::Waiting(w) => Some(w.next_look),
            State::Resetting(r) => {
                let survey = self.rules.survey.as_ref().and_then(Survey::next);
                r.groups.values().filter_map(|g| g.phase.next()).chain(survey).min()
            }
            State::Requested(_) | State::Done(_) => None,
        }
    }

    /// Whether the request is resetting and every group not finished waits, with nothing under way,
    /// for members to leave it ([`super::FailureKind::MembersPresent`]), and has found them
    /// [`MEMBERS_IN_DRIVE`] times: how long they stay is up to them, so the driver looks again later
    /// from a fresh read, as for a target that runs. (The first looks, 1 s and 2 s apart, stay in
    /// the drive: a member that is just leaving costs no round trip, and Kafka's own reason for a
    /// refused commit stays in the status meanwhile.)
    #[must_use]
    pub fn waits_for_members(&self) -> bool {
        let State::Resetting(r) = &self.state else { return false };
        // A group of a survey that was looked at waits for the others, not for members.
        let mut waiting = r
            .groups
            .values()
            .filter(|g| !matches!(g.phase, GroupPhase::Finished(_) | GroupPhase::Surveyed { .. }))
            .peekable();
        waiting.peek().is_some()
            && waiting.all(|g| {
                matches!(&g.phase, GroupPhase::Pending { retry } if retry.members && retry.failures >= MEMBERS_IN_DRIVE)
            })
    }

    /// Feeds one input observed at `now`.
    pub fn handle(&mut self, input: Input, now: Timestamp) {
        match input {
            Input::Observed { spec, pods } => self.observed(&spec, &pods, now),
            Input::Inspected { group, result } => self.step(&group, GroupInput::Inspected(result), now),
            Input::Fenced { group, result } => self.step(&group, GroupInput::Fenced(result), now),
            Input::ReadBack { group, result } => self.step(&group, GroupInput::ReadBack(result), now),
            Input::Read { group, result } => self.step(&group, GroupInput::Read(result), now),
            Input::Tick => self.tick(now),
        }
    }

    fn observed(&mut self, spec: &AnkkaFlowSpec, pods: &BTreeMap<String, u32>, now: Timestamp) {
        let request = match std::mem::replace(&mut self.state, State::Done(Done::AlreadyDone { id: String::new() })) {
            State::Requested(r) => r,
            State::Waiting(w) => w.request,
            // Once resetting, the decision is taken; a group with members is refused by Kafka itself.
            other @ (State::Resetting(_) | State::Done(_)) => {
                self.state = other;
                return;
            }
        };
        let id = request.id.clone();
        let chosen = if request.from.is_empty() {
            targets::select(spec, &request.streamlets).map_err(|err| targets::operator_selection_note(&id, &err))
        } else {
            // A rebuild from streamlets: they and every streamlet downstream of them.
            survey::select(spec, &request, &mut self.rules)
        };
        let selected = match chosen {
            Ok(_) if let Destination::Unavailable(why) = &self.rules.destination => {
                Err(format!("reset {id} refused: {why}"))
            }
            Ok(mut t) => {
                // A request with given offsets touches only the groups they list.
                for target in &mut t {
                    target.inlets.retain(|i| self.rules.destination.covers(&i.group));
                }
                t.retain(|target| !target.inlets.is_empty());
                if t.is_empty() {
                    Err(format!(
                        "reset {id} refused: none of the consumer groups it would move is a target of the pipeline now"
                    ))
                } else {
                    Ok(t)
                }
            }
            Err(why) => Err(why),
        };
        let selected = match selected {
            Ok(t) => t,
            Err(why) => return self.refuse(id, why),
        };
        self.topics = selected.iter().flat_map(|t| &t.inlets).map(|i| (i.group.clone(), i.topic.clone())).collect();
        // Every group already finished (its done write failed, and the user started the streamlets
        // since): nothing more touches Kafka, so the request completes whatever runs now.
        let finished = selected
            .iter()
            .flat_map(|t| &t.inlets)
            .all(|i| self.progress.get(&i.group).is_some_and(|r| r.outcome.is_some()));
        // A dry run commits nothing either, so its targets may run (its plan warns that their
        // offsets move).
        let mut reasons = if finished || self.rules.dry_run { vec![] } else { targets::running(spec, &selected, pods) };
        // A rebuild's targets are held at 0 replicas by the operator's rendering, not by the
        // resource's spec (which it leaves alone): only their pods count.
        if request.rebuild {
            reasons.retain(|r| matches!(r, RunningProblem::HasPods(..)));
        }
        // The plan of a rebuild from streamlets warns of those that still write what it reads.
        if self.rules.dry_run && self.rules.closure.is_some() {
            let running = targets::running(spec, &selected, pods);
            self.rules.running = running.iter().map(|r| r.streamlet().to_string()).collect();
        }
        if !reasons.is_empty() {
            let texts: Vec<String> = reasons.iter().map(RunningProblem::operator_text).collect();
            let note = format!("reset {id} waits: {}", texts.join("; "));
            self.emit(Effect::Record(Event::new(EventType::Warning, "ResetRefused", note.clone(), note)));
            self.state = State::Waiting(Waiting { request, reasons, next_look: now.after(WAIT_RECHECK) });
            return;
        }
        // Nothing of a rebuild from streamlets moves before its survey, unless something already
        // moved (see [`super::survey`]).
        if self.rules.closure.is_some() && !self.rules.dry_run && !self.resumed() {
            self.rules.survey = Some(Survey::default());
        }
        let mut groups = BTreeMap::new();
        let mut cx = Cx::new(&id, now, &self.rules, &mut self.effects);
        for target in selected.into_iter().flat_map(|t| t.inlets) {
            let progress = self.progress.get(&target.group);
            let (intent, outcome) = (progress.and_then(|r| r.intent.clone()), progress.and_then(|r| r.outcome.clone()));
            let since = self.failing_since.get(&target.group).copied();
            let phase = group::resume(&target, intent, outcome, since, &mut cx);
            groups.insert(target.group.clone(), Group { target, phase });
        }
        self.state = State::Resetting(Resetting { request, groups });
        self.maybe_done();
    }

    /// Refuses the request as a whole with `why`: an event, and the done write.
    fn refuse(&mut self, id: String, why: String) {
        let key = format!("{id}/refused");
        self.emit(Effect::Record(Event::new(EventType::Warning, "ResetRefused", why.clone(), key)));
        self.emit(Effect::WriteDone { id: id.clone() });
        self.state = State::Done(Done::Refused { id, why });
    }

    /// The survey of a rebuild from streamlets, once a group's inspection came in: the groups move
    /// once it passed, and nothing does if it refused the request.
    fn survey_step(&mut self, now: Timestamp) {
        let State::Resetting(r) = &self.state else { return };
        if self.rules.survey.is_none() {
            return;
        }
        let id = r.request.id.clone();
        match survey::verdict(&r.groups, &mut self.rules, &id, now) {
            survey::Verdict::Waits => {}
            survey::Verdict::Refused(why) => self.refuse(id, why),
            survey::Verdict::Passed => {
                self.rules.survey = None;
                self.with_groups(now, |groups, cx| {
                    for g in groups.values_mut() {
                        if let GroupPhase::Surveyed { seen: Ok(seen) } = &g.phase {
                            let seen = seen.clone();
                            g.phase = group::proceed(&g.target, super::retry::Retry::default(), &seen, cx);
                        }
                    }
                });
            }
        }
    }

    /// Feeds a Kafka result to its group.
    fn step(&mut self, group: &GroupId, input: GroupInput, now: Timestamp) {
        self.with_groups(now, |groups, cx| {
            if let Some(g) = groups.get_mut(group) {
                let phase = std::mem::replace(&mut g.phase, GroupPhase::start());
                g.phase = group::advance(&g.target, phase, input, cx);
            }
        });
        self.survey_step(now);
        self.maybe_done();
    }

    fn tick(&mut self, now: Timestamp) {
        self.with_groups(now, |groups, cx| {
            for g in groups.values_mut() {
                let phase = std::mem::replace(&mut g.phase, GroupPhase::start());
                g.phase = group::tick(&g.target, phase, cx);
            }
        });
        if let State::Resetting(r) = &mut self.state {
            survey::tick(&mut r.groups, &mut self.rules, now, &mut self.effects);
        }
    }

    /// Runs `f` on the groups of a resetting request, with what their transitions need at `now`.
    fn with_groups(&mut self, now: Timestamp, f: impl FnOnce(&mut BTreeMap<GroupId, Group>, &mut Cx<'_>)) {
        let State::Resetting(Resetting { request, groups }) = &mut self.state else { return };
        let mut cx = Cx::new(&request.id, now, &self.rules, &mut self.effects);
        f(groups, &mut cx);
    }

    /// Once every group finished: the done write, and the request is `Done`.
    fn maybe_done(&mut self) {
        let State::Resetting(r) = &self.state else { return };
        if !r.groups.values().all(|g| matches!(g.phase, GroupPhase::Finished(_))) {
            return;
        }
        let State::Resetting(r) =
            std::mem::replace(&mut self.state, State::Done(Done::AlreadyDone { id: String::new() }))
        else {
            return;
        };
        let id = r.request.id;
        let groups = r
            .groups
            .into_iter()
            .filter_map(|(g, Group { target, phase })| match phase {
                GroupPhase::Finished(o) => Some((g, (target, o))),
                _ => None,
            })
            .collect();
        self.emit(Effect::WriteDone { id: id.clone() });
        self.state = State::Done(Done::Completed { id, groups });
    }

    fn emit(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }
}
