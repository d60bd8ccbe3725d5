//! The reset's guarantees (docs/reset.md, "Guarantees") as invariants, checked on the world's log of facts.
//!
//! Each check reads only what the world recorded (commits Kafka applied, events, done writes) and
//! the requests as written; none asks the machine what it thinks. Each returns every violation it
//! finds, worded so that a failing history reads as a bug report.

use std::collections::{BTreeMap, BTreeSet};

use flow_core::reset::HISTORY_LEN;

use crate::world::{AppliedCommit, Committer, EventRecord, Fact, Marker, Streamlet, World, marker};

/// Distinct wait situations of one request: each of its (at most two) targets runs, lingers
/// (scaled to 0, pod still there) or is stopped, and at least one is not stopped: 3 × 3 − 1.
pub const WAIT_SITUATIONS: usize = 8;

/// Issues of the machine and its driver that the model found, fixed since (docs/ledger-tests.md,
/// "What the model found", items 3 and 4): a test that runs the old behaviour accepts one to show
/// that the model still catches it. A check told to accept one accepts exactly the history that
/// shows it, and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnownIssue {
    /// The operator stops between a group's persisted intent and its reset commit; the streamlet runs
    /// and commits before the operator is back. Resolving the intent by the markers cannot tell this
    /// from case D1 (the reset
    /// landed, then the consumer read again) and reports the group reset, though its reset commit
    /// never landed. Accepted: a reset reported for a group of a request that persisted an intent
    /// for it, after which a consumer committed on the group.
    SettleAmbiguity,
    /// The driver persists a group's outcome to the ledger only (not to the status), so a ledger
    /// lost before the request is done forgets an outcome whose event was recorded; the group is
    /// then decided again, and may get a second, different outcome event. Accepted: a second outcome
    /// event name for a group after an outcome of that group was persisted and then the ledger lost.
    OutcomeOnlyInLedger,
}

/// `<request id>/<group>`: the key of a group's outcome event.
pub fn outcome_key(id: &str, s: Streamlet) -> String {
    format!("{id}/{}", s.group())
}

impl World {
    fn operator_commits(&self) -> impl Iterator<Item = (usize, &AppliedCommit)> {
        self.facts.iter().enumerate().filter_map(|(i, f)| match f {
            Fact::Commit(c) if c.by == Committer::Operator => Some((i, c)),
            _ => None,
        })
    }

    fn events(&self) -> impl Iterator<Item = (usize, &EventRecord)> {
        self.facts.iter().enumerate().filter_map(|(i, f)| match f {
            Fact::Event(e) => Some((i, e)),
            _ => None,
        })
    }

    /// Index of the reset commit of request `id` that landed on `s`'s group, if one did.
    pub fn landed_reset(&self, id: &str, s: Streamlet) -> Option<usize> {
        self.operator_commits()
            .find(|(_, c)| c.group == s && marker(&c.metadata) == Some(Marker::Reset(id.to_string())))
            .map(|(i, _)| i)
    }

    /// Whether, before fact `until`, request `id` persisted an intent for `s`'s group and a consumer
    /// committed on that group after it (the history of [`KnownIssue::SettleAmbiguity`]).
    pub fn consumer_ran_after_intent(&self, id: &str, s: Streamlet, until: usize) -> bool {
        let Some(intent) = self.facts[..until]
            .iter()
            .position(|f| matches!(f, Fact::Intent { id: i, group } if i == id && *group == s))
        else {
            return false;
        };
        self.facts[intent..until]
            .iter()
            .any(|f| matches!(f, Fact::Commit(c) if c.by == Committer::Consumer && c.group == s))
    }

    /// Whether, before fact `until`, an outcome of request `id` for `s`'s group was persisted and the
    /// ledger was lost after it (the history of [`KnownIssue::OutcomeOnlyInLedger`]).
    pub fn outcome_lost_with_ledger(&self, id: &str, s: Streamlet, until: usize) -> bool {
        let Some(outcome) = self.facts[..until]
            .iter()
            .position(|f| matches!(f, Fact::Outcome { id: i, group } if i == id && *group == s))
        else {
            return false;
        };
        self.facts[outcome..until].iter().any(|f| matches!(f, Fact::LedgerLost))
    }

    /// Whether, before fact `until`, the resource was created again and request `id` was then
    /// refused (`<id>/refused`) for having been taken up for the earlier object: its done annotation
    /// on the new object settles it without its groups finishing there.
    pub fn refused_for_an_earlier_object(&self, id: &str, until: usize) -> bool {
        let Some(recreated) = self.facts[..until].iter().position(|f| matches!(f, Fact::Recreated { .. })) else {
            return false;
        };
        self.facts[recreated..until].iter().any(|f| {
            matches!(f, Fact::Event(e) if e.reason == "ResetRefused" && e.key == format!("{id}/refused")
                && e.note.contains("taken up for an earlier AnkkaFlow"))
        })
    }

    /// Whether the shared-group rule refused request `id` before fact `until`.
    pub fn refused_for_a_shared_group(&self, id: &str, until: usize) -> bool {
        self.facts[..until].iter().any(|f| matches!(f, Fact::SharedRefused { id: refused } if refused == id))
    }

    fn reported_reset_is_true(&self, id: &str, s: Streamlet, at: usize, accepted: &[KnownIssue]) -> bool {
        self.landed_reset(id, s).is_some_and(|j| j < at)
            || accepted.contains(&KnownIssue::SettleAmbiguity) && self.consumer_ran_after_intent(id, s, at)
    }

    fn reads_of(&self, s: Streamlet) -> impl Iterator<Item = usize> + '_ {
        self.facts.iter().enumerate().filter_map(move |(i, f)| match f {
            Fact::Recover { group } | Fact::Verify { group } if *group == s => Some(i),
            _ => None,
        })
    }

    /// Each `ResetOffsets` event with the reset commit of its request and group that landed before it:
    /// (event index, event, request id, group, commit index, commit).
    fn reported_resets(&self) -> Vec<(usize, &EventRecord, &str, Streamlet, usize, &AppliedCommit)> {
        let mut out = vec![];
        for (i, e) in self.events().filter(|(_, e)| e.reason == "ResetOffsets") {
            let Some((id, group)) = e.key.split_once('/') else { continue };
            let Some(s) = Streamlet::ALL.into_iter().find(|s| s.group().as_str() == group) else { continue };
            let Some(j) = self.landed_reset(id, s).filter(|j| *j < i) else { continue };
            let Fact::Commit(c) = &self.facts[j] else { continue };
            out.push((i, e, id, s, j, c));
        }
        out
    }

    /// Case F1: a reset that a consumer overwrote is not reported as a reset once the operator has
    /// read the group after the overwrite. (Without a read after it, which a settle of 0 skips, the
    /// operator cannot know.) An overwrite is a commit by a consumer that is no member (a closing pod),
    /// after the reset commit landed, that moved a partition off its reset offset.
    pub fn check_overwrites_are_not_reported_as_resets(&self) -> Vec<String> {
        let mut out = vec![];
        for (i, e, id, s, j, reset) in self.reported_resets() {
            for (k, f) in self.facts.iter().enumerate().take(i).skip(j + 1) {
                let Fact::Commit(c) = f else { continue };
                if c.by != Committer::Stray || c.group != s {
                    continue;
                }
                let moved: Vec<String> = reset
                    .offsets
                    .iter()
                    .filter_map(|(p, o)| {
                        c.offsets.get(p).filter(|x| *x != o).map(|x| format!("partition {p} {o} -> {x}"))
                    })
                    .collect();
                if moved.is_empty() {
                    continue;
                }
                if let Some(r) = self.reads_of(s).find(|r| *r > k && *r < i) {
                    out.push(format!(
                        "fact {i}: ResetOffsets recorded for {id} on {}, but a consumer overwrote the reset at fact {k} \
                         ({}) and the operator read the group after that, at fact {r} (note: {})",
                        s.group(),
                        moved.join(", "),
                        e.note
                    ));
                }
            }
        }
        out
    }

    /// Case B5: a `ResetOffsets` event counts the partitions its reset commit covered; a partition added
    /// to the topic that the commit did not cover, seen by a read of the group before the event, is
    /// named in that request's `ResetPartitionsAdded` event for the group before done is written,
    /// unless that done refuses the request on a newer object of the name.
    pub fn check_added_partitions_are_named(&self) -> Vec<String> {
        let mut out = vec![];
        for (i, e, id, s, _, reset) in self.reported_resets() {
            let count = e.note.split(": ").nth(1).and_then(|n| n.split(' ').next()).and_then(|n| n.parse().ok());
            if count != Some(reset.offsets.len()) {
                out.push(format!(
                    "fact {i}: ResetOffsets for {id} on {} counts {count:?} partitions, but its reset commit covered {} \
                     (note: {})",
                    s.group(),
                    reset.offsets.len(),
                    e.note
                ));
            }
            // The done that ends the run which reported the reset: a request refused on an object
            // before it made progress there (a shared group) runs again on the object created again.
            let Some(done) =
                (i + 1..self.facts.len()).find(|j| matches!(&self.facts[*j], Fact::Done { id: d } if d == id))
            else {
                continue;
            };
            // A done written on a newer object of the name, refusing the request, settles it without
            // the object that ran the reset (deleted since) reporting on its groups.
            if self.refused_for_an_earlier_object(id, done) {
                continue;
            }
            let named: BTreeSet<i32> = self
                .events()
                .filter(|(x, w)| {
                    *x < done && w.reason == "ResetPartitionsAdded" && w.key == format!("{}/added", outcome_key(id, s))
                })
                .flat_map(|(_, w)| partitions_named(&w.note))
                .collect();
            for (a, f) in self.facts.iter().enumerate().take(i) {
                let Fact::PartitionAdded { group, partition } = f else { continue };
                if *group != s || reset.offsets.contains_key(partition) || named.contains(partition) {
                    continue;
                }
                if let Some(r) = self.reads_of(s).find(|r| *r > a && *r < i) {
                    out.push(format!(
                        "request {id}: partition {partition} of {:?}'s topic was added at fact {a}, read at fact {r}, \
                         not reset, and not named in a ResetPartitionsAdded event before done (fact {done})",
                        s.group()
                    ));
                }
            }
        }
        out
    }

    /// Every operator commit carries a marker of a request that was written.
    pub fn check_commits_are_marked(&self) -> Vec<String> {
        self.operator_commits()
            .filter_map(|(i, c)| match marker(&c.metadata) {
                None => Some(format!("fact {i}: an operator commit without a fence or reset marker: {c:?}")),
                Some(m) if !self.requests.contains_key(m.id()) => {
                    Some(format!("fact {i}: an operator commit for request {}, never written: {c:?}", m.id()))
                }
                Some(_) => None,
            })
            .collect()
    }

    /// A request whose id equals the done id is never acted on: no commit for it once done names it.
    pub fn check_done_is_never_acted_on(&self) -> Vec<String> {
        self.operator_commits()
            .filter_map(|(i, c)| {
                let m = marker(&c.metadata)?;
                (c.done.as_deref() == Some(m.id())).then(|| {
                    format!("fact {i}: request {} committed on {:?} although done already named it", m.id(), c.group)
                })
            })
            .collect()
    }

    /// No commit is applied while a target of the request runs or the group has members; a refused
    /// request commits nothing.
    pub fn check_no_commit_while_running(&self) -> Vec<String> {
        let mut out = vec![];
        for (i, c) in self.operator_commits() {
            let Some(m) = marker(&c.metadata) else { continue };
            let Some(ask) = self.requests.get(m.id()) else { continue };
            match ask.targets() {
                None => out.push(format!("fact {i}: refused request {} ({ask:?}) committed: {c:?}", m.id())),
                Some(targets) => {
                    let running: Vec<_> = targets.iter().filter(|t| c.running.contains(t)).collect();
                    if !running.is_empty() || c.members > 0 {
                        out.push(format!(
                            "fact {i}: request {} committed on {:?} while targets {running:?} ran and the group had \
                             {} member(s)",
                            m.id(),
                            c.group,
                            c.members
                        ));
                    }
                }
            }
        }
        out
    }

    /// After a reset commit for (id, group) has landed, no further reset commit for (id, group) is
    /// ever applied.
    pub fn check_reset_at_most_once(&self) -> Vec<String> {
        let mut seen: BTreeMap<(String, Streamlet), usize> = BTreeMap::new();
        let mut out = vec![];
        for (i, c) in self.operator_commits() {
            if let Some(Marker::Reset(id)) = marker(&c.metadata) {
                if let Some(first) = seen.get(&(id.clone(), c.group)) {
                    out.push(format!(
                        "fact {i}: request {id} reset {:?} a second time (its first reset landed at fact {first}): {c:?}",
                        c.group
                    ));
                } else {
                    seen.insert((id, c.group), i);
                }
            }
        }
        out
    }

    /// A fence re-commits the group's own offsets: it never moves a position. One the broker held
    /// and carried out late re-commits them as they were when the operator read them, over whatever
    /// a consumer that is no member (a closing pod) committed since; the other checks hold it to the
    /// rest: it never lands after its own request's reset, nor after a later request's.
    pub fn check_fence_moves_nothing(&self) -> Vec<String> {
        self.operator_commits()
            .filter(|(_, c)| !c.late && matches!(marker(&c.metadata), Some(Marker::Fence(_))))
            .filter(|(_, c)| c.offsets.iter().any(|(p, o)| c.before.get(p).copied().flatten() != Some(*o)))
            .map(|(i, c)| {
                format!("fact {i}: a fence moved a position of {:?}: {:?} -> {:?}", c.group, c.before, c.offsets)
            })
            .collect()
    }

    /// Once the reset commit of (id, group) has landed, no fence of that request is applied to the
    /// group: a late fence (a call of an abandoned drive that ran on) would put the offsets from
    /// before the reset back, under a reset that was, or will be, reported.
    pub fn check_no_fence_after_reset(&self) -> Vec<String> {
        let mut landed: BTreeMap<(String, Streamlet), usize> = BTreeMap::new();
        let mut out = vec![];
        for (i, c) in self.operator_commits() {
            match marker(&c.metadata) {
                Some(Marker::Reset(id)) => {
                    landed.entry((id, c.group)).or_insert(i);
                }
                Some(Marker::Fence(id)) => {
                    if let Some(r) = landed.get(&(id.clone(), c.group)) {
                        out.push(format!(
                            "fact {i}: a fence of request {id} landed on {:?} after its reset commit (fact {r}): {c:?}",
                            c.group
                        ));
                    }
                }
                None => {}
            }
        }
        out
    }

    /// A call that lands late never undoes a later request: once the reset commit of a request has
    /// landed on a group, no commit (fence or reset) of an earlier request lands on it. Request ids
    /// are written in increasing order ([`crate::world::request_id`]).
    pub fn check_no_earlier_request_lands_after_a_reset(&self) -> Vec<String> {
        let mut newest: BTreeMap<Streamlet, (String, usize)> = BTreeMap::new();
        let mut out = vec![];
        for (i, c) in self.operator_commits() {
            let Some(m) = marker(&c.metadata) else { continue };
            if let Some((r, at)) = newest.get(&c.group)
                && m.id() < r.as_str()
            {
                out.push(format!(
                    "fact {i}: a commit of request {} landed on {:?}{} after the reset of the later request {r} \
                     (fact {at}): {c:?}",
                    m.id(),
                    c.group,
                    if c.late { " late" } else { "" },
                ));
            }
            if let Marker::Reset(id) = m
                && newest.get(&c.group).is_none_or(|(r, _)| id.as_str() > r.as_str())
            {
                newest.insert(c.group, (id, i));
            }
        }
        out
    }

    /// The offsets a group holds are the latest reported reset's: after the reset commit of the
    /// latest request with a `ResetOffsets` event for the group, unless a consumer or a later request
    /// committed since, the group still holds that commit's offsets.
    pub fn check_offsets_are_the_latest_requests(&self) -> Vec<String> {
        let mut out = vec![];
        for s in Streamlet::ALL {
            let Some((id, j)) = self
                .reported_resets()
                .into_iter()
                .filter(|(_, _, _, g, _, _)| *g == s)
                .map(|(_, _, id, _, j, _)| (id.to_string(), j))
                .max()
            else {
                continue;
            };
            let Fact::Commit(reset) = &self.facts[j] else { continue };
            let moved_since = self.facts[j + 1..].iter().any(|f| match f {
                Fact::Commit(c) if c.group == s => {
                    c.by != Committer::Operator || marker(&c.metadata).is_some_and(|m| m.id() > id.as_str())
                }
                _ => false,
            });
            if moved_since {
                continue;
            }
            let holds = &self.kafka.committed[&s];
            let wrong: Vec<String> = reset
                .offsets
                .iter()
                .filter(|(p, o)| holds.get(p).map(|x| (x.offset, x.metadata.as_str())) != Some((**o, &reset.metadata)))
                .map(|(p, o)| format!("partition {p} holds {:?}, not {o}", holds.get(p)))
                .collect();
            if !wrong.is_empty() {
                out.push(format!(
                    "{:?} was reported reset by request {id} (fact {j}), and nothing committed since but the \
                     operator for that request or earlier ones, yet {}",
                    s.group(),
                    wrong.join(", ")
                ));
            }
        }
        out
    }

    /// `status.reset` says `Done` only together with the done annotation (docs/reset.md, "States").
    pub fn check_status_never_runs_ahead(&self) -> Vec<String> {
        self.facts
            .iter()
            .enumerate()
            .filter_map(|(i, f)| match f {
                Fact::StatusAhead { id } => {
                    Some(format!("fact {i}: the status said request {id} is Done before the done annotation did"))
                }
                _ => None,
            })
            .collect()
    }

    /// A consumer's progress after a landed reset is never rewound by that request (case D1): once the
    /// reset of (id, group) landed, no commit of that request moves a partition of the group back.
    pub fn check_no_rewind_after_reset(&self) -> Vec<String> {
        let mut landed: BTreeSet<(String, Streamlet)> = BTreeSet::new();
        let mut out = vec![];
        for (i, c) in self.operator_commits() {
            let Some(m) = marker(&c.metadata) else { continue };
            let key = (m.id().to_string(), c.group);
            if landed.contains(&key) {
                let back: Vec<String> = c
                    .offsets
                    .iter()
                    .filter_map(|(p, o)| {
                        let was = c.before.get(p).copied().flatten()?;
                        (*o < was).then(|| format!("partition {p} {was} -> {o}"))
                    })
                    .collect();
                if !back.is_empty() {
                    out.push(format!(
                        "fact {i}: request {} rewound {:?} after its reset had landed: {}",
                        m.id(),
                        c.group,
                        back.join(", ")
                    ));
                }
            }
            if matches!(m, Marker::Reset(_)) {
                landed.insert(key);
            }
        }
        out
    }

    /// Done is written only after every target group finished: reset (the reset commit landed) or
    /// failed finally (its failure event recorded). A refused request is reported before done.
    pub fn check_done_after_every_group(&self, accepted: &[KnownIssue]) -> Vec<String> {
        let mut out = vec![];
        for (i, f) in self.facts.iter().enumerate() {
            let Fact::Done { id } = f else { continue };
            let Some(ask) = self.requests.get(id) else {
                out.push(format!("fact {i}: done written for {id}, a request never written"));
                continue;
            };
            let before =
                |reason: &str, key: &str| self.events().any(|(j, e)| j < i && e.reason == reason && e.key == key);
            match ask.targets() {
                None => {
                    if !before("ResetRefused", &format!("{id}/refused")) {
                        out.push(format!("fact {i}: refused request {id} marked done without a ResetRefused event"));
                    }
                }
                Some(_) if self.refused_for_an_earlier_object(id, i) => {}
                // Refused for a shared group, reported first: its groups not finished are never
                // reset for it. (A refusal cut short before its event is no refusal: the request
                // may finish later like any other.)
                Some(_)
                    if self.refused_for_a_shared_group(id, i) && before("ResetRefused", &format!("{id}/refused")) => {}
                Some(targets) => {
                    for s in targets {
                        let reset = self.reported_reset_is_true(id, s, i, accepted);
                        let failed = before("ResetOffsetsFailed", &outcome_key(id, s));
                        if !reset && !failed {
                            out.push(format!(
                                "fact {i}: done written for {id} while {:?} was neither reset nor failed",
                                s.group()
                            ));
                        }
                    }
                }
            }
        }
        out
    }

    /// A group reported reset (event `ResetOffsets`) was reset: that request's reset commit landed.
    pub fn check_reset_events_are_true(&self, accepted: &[KnownIssue]) -> Vec<String> {
        let mut out = vec![];
        for (i, e) in self.events() {
            if e.reason != "ResetOffsets" {
                continue;
            }
            let Some((id, group)) = e.key.split_once('/') else { continue };
            let Some(s) = Streamlet::ALL.into_iter().find(|s| s.group().as_str() == group) else { continue };
            if !self.reported_reset_is_true(id, s, i, accepted) {
                out.push(format!(
                    "fact {i}: ResetOffsets recorded for {id} on {group}, but no reset commit of {id} ever landed \
                     there (note: {})",
                    e.note
                ));
            }
        }
        out
    }

    /// Every finished group has exactly one outcome event per request id, by name; events are not
    /// spammed: the distinct names per request stay within its groups, its wait situations, one
    /// refusal and one for the request it superseded.
    pub fn check_events(&self, accepted: &[KnownIssue]) -> Vec<String> {
        let mut out = vec![];
        let done: BTreeSet<&str> = self
            .facts
            .iter()
            .filter_map(|f| if let Fact::Done { id } = f { Some(id.as_str()) } else { None })
            .collect();
        for (id, ask) in &self.requests {
            for s in ask.targets().unwrap_or_default() {
                let key = outcome_key(id, s);
                let outcomes: Vec<(usize, &str)> = self
                    .events()
                    .filter(|(_, e)| e.key == key && matches!(e.reason.as_str(), "ResetOffsets" | "ResetOffsetsFailed"))
                    .map(|(i, e)| (i, e.name.as_str()))
                    .collect();
                let names: BTreeSet<&str> = outcomes.iter().map(|(_, n)| *n).collect();
                // Where a second name first appears.
                let second =
                    outcomes.iter().find(|(_, n)| Some(n) != outcomes.first().map(|(_, f)| f)).map(|(i, _)| *i);
                let accepted_second = second.is_some_and(|i| {
                    accepted.contains(&KnownIssue::OutcomeOnlyInLedger) && self.outcome_lost_with_ledger(id, s, i)
                });
                if names.len() > 1 && !accepted_second {
                    out.push(format!("request {id}: {} outcome events for {}: {names:?}", names.len(), s.group()));
                }
                if done.contains(id.as_str())
                    && names.is_empty()
                    && !self.refused_for_an_earlier_object(id, self.facts.len())
                    && !self.refused_for_a_shared_group(id, self.facts.len())
                {
                    out.push(format!("request {id} is done, but {} has no outcome event", s.group()));
                }
            }
            let names: BTreeSet<&str> =
                self.events().filter(|(_, e)| e.request.as_deref() == Some(id)).map(|(_, e)| e.name.as_str()).collect();
            // Per group an outcome event, a ResetPartitionsAdded one and a ResetWaiting one.
            let bound = 3 * ask.targets().map_or(0, |t| t.len()) + WAIT_SITUATIONS + 2;
            if names.len() > bound {
                out.push(format!("request {id}: {} distinct events, more than {bound}: {names:?}", names.len()));
            }
        }
        out
    }

    /// `status.resetHistory` stays bounded, names each earlier request once, and never the current.
    pub fn check_status_history(&self) -> Vec<String> {
        let h = &self.kube.status_history;
        let ids: BTreeSet<&str> = h.iter().map(|e| e.id.as_str()).collect();
        let current = self.kube.status_reset.as_ref().map(|s| s.id.as_str()).filter(|id| !id.is_empty());
        let mut out = vec![];
        if h.len() > HISTORY_LEN || ids.len() != h.len() || current.is_some_and(|c| ids.contains(c)) {
            out.push(format!("status.resetHistory is not a bounded list of earlier requests: {h:?}"));
        }
        out
    }

    /// Every invariant, accepting the histories of the `accepted` known issues only; empty when all
    /// hold.
    pub fn violations(&self, accepted: &[KnownIssue]) -> Vec<String> {
        [
            self.check_commits_are_marked(),
            self.check_done_is_never_acted_on(),
            self.check_no_commit_while_running(),
            self.check_reset_at_most_once(),
            self.check_fence_moves_nothing(),
            self.check_no_fence_after_reset(),
            self.check_no_rewind_after_reset(),
            self.check_no_earlier_request_lands_after_a_reset(),
            self.check_offsets_are_the_latest_requests(),
            self.check_status_never_runs_ahead(),
            self.check_done_after_every_group(accepted),
            self.check_reset_events_are_true(accepted),
            self.check_events(accepted),
            self.check_status_history(),
            self.check_overwrites_are_not_reported_as_resets(),
            self.check_added_partitions_are_named(),
        ]
        .concat()
    }
}

/// The partitions a `ResetPartitionsAdded` note names: `<group>: partition(s) 3, 4 of '<topic>' ...`.
pub fn partitions_named(note: &str) -> Vec<i32> {
    note.split_once("partition(s) ")
        .and_then(|(_, rest)| rest.split_once(" of '"))
        .map(|(list, _)| list.split(", ").filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}
