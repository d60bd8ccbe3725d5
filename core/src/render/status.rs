//! The status of a pipeline: its phase, a detail per streamlet and per topic, and the conditions.
//!
//! # Phase
//! A streamlet is *rolled out* when its Deployment exists, carries the config hash just rendered and
//! the resource's image, and its rollout has finished (`observedGeneration >= generation`,
//! `updatedReplicas >= replicas`). Its detail is `rolling out` until then, then
//! `<ready> of <desired> ready` while fewer replicas are ready than desired, then empty. While its
//! Deployment's `ReplicaFailure` condition holds, the detail is `its pods cannot be created: ` and
//! the condition's message, and the phase is `Degraded`.
//!
//! A topic that exists in Kafka shows `exists: true`. A managed topic that does not exist (or whose
//! Kafka could not be reached) is created by this reconcile, so it shows `exists: true` with
//! `created by the operator`. An unmanaged topic that is missing shows `exists: false` with
//! `topic '<kafka-name>' does not exist`, or `Kafka unreachable: <reason>`.
//!
//! The phase is `Degraded` when a topic does not exist or a streamlet's pods cannot be created; else
//! `Ready` when every streamlet is rolled
//! out with all its replicas ready; else `Pending` while a streamlet is not rolled out; else `Degraded`. A
//! refused resource is `Failed`. The detail joins the missing topics' details and the streamlets'
//! `<name>: <detail>` with `; `.
//!
//! # Conditions
//! Per the Kubernetes API conventions: `Ready` (True when the phase is `Ready`; its reason is the
//! phase), `Applied` (whether the last reconcile applied everything), and `ResetComplete` once a
//! reset was requested. A condition's `lastTransitionTime` changes only when its `status` does; the
//! status's own `lastTransitionTime` only when the phase does.
//!
//! # Order of use
//! The plan gives a status without conditions or reset ([`super::plan::Plan::status`]); the reset
//! driver fills `reset` and `resetHistory`; [`finish`] then adds the times and the conditions, and
//! [`needs_write`] says whether it differs from the stored status.

use k8s_openapi::jiff::Timestamp;

use crate::resource::{AnkkaFlowStatus, Condition, StreamletSpec, StreamletStatus, TopicStatus};

/// The phase of a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// A streamlet is rolling out.
    Pending,
    /// Every streamlet rolled out with all its replicas ready, and every topic exists.
    Ready,
    /// A topic does not exist, or a streamlet has fewer ready replicas than desired.
    Degraded,
    /// The resource was refused: nothing was applied.
    Failed,
}

impl Phase {
    /// The status's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Ready => "Ready",
            Phase::Degraded => "Degraded",
            Phase::Failed => "Failed",
        }
    }
}

/// What was observed of a streamlet's Deployment (one owned by the resource).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedDeployment {
    /// `metadata.uid`.
    pub uid: String,
    /// Its pod template's config-hash annotation.
    pub config_hash: Option<String>,
    /// The image of its `process` container; `None` when it has none (a built-in).
    pub process_image: Option<String>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.updatedReplicas`.
    pub updated_replicas: i32,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
    /// While its `ReplicaFailure` condition is `True` (its ReplicaSet cannot create pods): the
    /// condition's message.
    pub replica_failure: Option<String>,
}

/// Where a streamlet's rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rollout {
    /// Its Deployment has the config hash and image just rendered, and its rollout finished.
    Done,
    /// Not yet.
    Rolling,
    /// Its ReplicaSet cannot create pods (a ResourceQuota, Pod Security admission, a missing
    /// ServiceAccount): waiting will not help until someone acts.
    Failing,
}

/// The start of a streamlet's detail while its pods cannot be created; the Deployment's
/// `ReplicaFailure` message (the API server's refusal) follows.
pub const PODS_NOT_CREATED: &str = "its pods cannot be created: ";

/// A streamlet's status, and where its rollout stands.
pub(crate) fn streamlet_status(
    s: &StreamletSpec,
    rendered_hash: &str,
    observed: Option<&ObservedDeployment>,
) -> (StreamletStatus, Rollout) {
    let wanted_image = (!s.builtin).then_some(s.image.as_str());
    let rolled_out = observed.is_some_and(|d| {
        d.config_hash.as_deref() == Some(rendered_hash)
            && d.process_image.as_deref() == wanted_image
            && d.observed_generation >= d.generation
            && d.updated_replicas >= s.replicas
    });
    let ready = observed.map_or(0, |d| d.ready_replicas);
    let failure = observed.and_then(|d| d.replica_failure.as_deref());
    let (detail, rollout) = match failure {
        Some(why) => (format!("{PODS_NOT_CREATED}{why}"), Rollout::Failing),
        None if !rolled_out => ("rolling out".to_string(), Rollout::Rolling),
        None if ready < s.replicas => (format!("{ready} of {} ready", s.replicas), Rollout::Done),
        None => (String::new(), Rollout::Done),
    };
    (StreamletStatus { name: s.name.clone(), desired: s.replicas, ready, detail }, rollout)
}

/// Phase and detail from the streamlets (with where each rollout stands) and the topics.
pub(crate) fn phase(streamlets: &[(StreamletStatus, Rollout)], topics: &[TopicStatus]) -> (Phase, String) {
    let mut details: Vec<String> = topics.iter().filter(|t| !t.exists).map(|t| t.detail.clone()).collect();
    details.extend(
        streamlets.iter().filter(|(s, _)| !s.detail.is_empty()).map(|(s, _)| format!("{}: {}", s.name, s.detail)),
    );
    let phase = if topics.iter().any(|t| !t.exists) || streamlets.iter().any(|(_, r)| *r == Rollout::Failing) {
        Phase::Degraded
    } else if streamlets.iter().all(|(s, r)| *r == Rollout::Done && s.ready >= s.desired) {
        Phase::Ready
    } else if streamlets.iter().any(|(_, r)| *r == Rollout::Rolling) {
        Phase::Pending
    } else {
        Phase::Degraded
    };
    (phase, details.join("; "))
}

/// How the last reconcile ended, for the `Applied` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Everything of the plan was applied.
    Applied,
    /// The resource was refused; nothing was applied. `reason` is the refusal events' reason
    /// (`Refused` or `SidecarImageMissing`).
    Refused {
        /// Event reason.
        reason: String,
    },
    /// A step was rejected (by Kafka, or by the API server: a quota, an admission webhook,
    /// validation); the steps after it were not carried out.
    Failed {
        /// What failed and why, as [`super::plan::apply_failed`] words it.
        message: String,
    },
}

/// Condition type: the pipeline is ready.
pub const CONDITION_READY: &str = "Ready";
/// Condition type: the last reconcile applied everything.
pub const CONDITION_APPLIED: &str = "Applied";
/// Condition type: the latest reset request is done.
pub const CONDITION_RESET_COMPLETE: &str = "ResetComplete";
/// Condition type: the operator's reset ledger cannot be used. Present (status `False`) only while
/// that lasts; resets go on, their progress held by the status alone (docs/reset.md).
pub const CONDITION_RESET_LEDGER: &str = "ResetLedger";

/// The [`CONDITION_RESET_LEDGER`] condition for a ledger that cannot be used because of `problem`.
/// Put into a status before [`finish`], which keeps it.
pub fn ledger_condition(problem: &str, generation: Option<i64>) -> Condition {
    let message = format!(
        "{problem}; resets go on, their progress held by the status alone (a large group's offsets per \
         partition are not kept, Kafka's commit markers stand in for them)"
    );
    condition(CONDITION_RESET_LEDGER, false, "LedgerUnavailable", crate::events::fit_note(&message), generation)
}

/// `now` as a Kubernetes API time: RFC 3339 in UTC, whole seconds.
pub fn api_time(now: Timestamp) -> String {
    // Whole seconds, as the API's own times; a Timestamp always formats.
    Timestamp::from_second(now.as_second()).map_or_else(|_| now.to_string(), |t| t.to_string())
}

fn condition(type_: &str, status: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: String::new(),
        observed_generation: generation,
    }
}

/// A CamelCase reason from a phase string written by someone else (the reset driver): the string
/// itself when it is one, else `Unknown`.
fn camel(s: &str) -> &str {
    let ok = s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().all(|c| c.is_ascii_alphanumeric());
    if ok { s } else { "Unknown" }
}

/// Completes a status: `lastTransitionTime` (kept from `previous` while the phase is the same) and
/// the conditions (each keeping its `lastTransitionTime` from `previous` while its status is the
/// same). Call it last, once the reset driver filled `reset`. Conditions of other types already in
/// `status` (the [`ledger_condition`]) are kept, after the computed ones.
pub fn finish(
    mut status: AnkkaFlowStatus,
    previous: Option<&AnkkaFlowStatus>,
    outcome: &ApplyOutcome,
    now: Timestamp,
) -> AnkkaFlowStatus {
    let now = api_time(now);
    let computed = [CONDITION_READY, CONDITION_APPLIED, CONDITION_RESET_COMPLETE];
    let added: Vec<Condition> =
        std::mem::take(&mut status.conditions).into_iter().filter(|c| !computed.contains(&c.type_.as_str())).collect();
    status.last_transition_time = match previous {
        Some(p) if p.phase == status.phase && p.last_transition_time.is_some() => p.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    let generation = status.observed_generation;
    let phase = status.phase.clone().unwrap_or_default();
    let mut conditions = vec![condition(
        CONDITION_READY,
        phase == Phase::Ready.as_str(),
        camel(&phase),
        status.detail.clone(),
        generation,
    )];
    conditions.push(match outcome {
        ApplyOutcome::Applied => condition(CONDITION_APPLIED, true, "Applied", String::new(), generation),
        ApplyOutcome::Refused { reason } => {
            condition(CONDITION_APPLIED, false, camel(reason), status.detail.clone(), generation)
        }
        ApplyOutcome::Failed { message } => {
            condition(CONDITION_APPLIED, false, "ApplyFailed", message.clone(), generation)
        }
    });
    conditions.extend(status.reset.as_ref().map(|r| reset_complete(r, generation)));
    conditions.extend(added);
    for c in &mut conditions {
        let before = previous.and_then(|p| p.conditions.iter().find(|b| b.type_ == c.type_));
        c.last_transition_time = match before {
            Some(b) if b.status == c.status && !b.last_transition_time.is_empty() => b.last_transition_time.clone(),
            _ => now.clone(),
        };
    }
    status.conditions = conditions;
    status
}

/// The `ResetComplete` condition of `reset`: `True` exactly when the request is `Done` (which the
/// reset driver writes only once the done annotation holds its id, see `flow_core::reset::Drive`).
fn reset_complete(reset: &crate::resource::ResetStatus, generation: Option<i64>) -> Condition {
    let phase = reset.phase.as_str();
    let done = reset.phase == crate::resource::RequestPhase::Done;
    let who = if reset.id.is_empty() { "the reset request".to_string() } else { format!("reset {}", reset.id) };
    let mut message = format!("{who} is {}", phase.to_ascii_lowercase());
    if !reset.detail.is_empty() {
        message.push_str(": ");
        message.push_str(&reset.detail);
    }
    condition(CONDITION_RESET_COMPLETE, done, camel(phase), message, generation)
}

/// Brings the `ResetComplete` condition of `status` in line with its `reset`, as [`finish`] computes
/// it (its `lastTransitionTime` kept while its status is the same): for the status writes the reset
/// driver makes in the middle of a reconcile, so that a condition left from an earlier request never
/// says `True` beside a request still under way.
pub fn sync_reset_complete(status: &mut AnkkaFlowStatus, now: Timestamp) {
    let Some(reset) = &status.reset else { return };
    let mut c = reset_complete(reset, status.observed_generation);
    let at = status.conditions.iter().position(|b| b.type_ == CONDITION_RESET_COMPLETE);
    c.last_transition_time = match at.map(|i| &status.conditions[i]) {
        Some(b) if b.status == c.status && !b.last_transition_time.is_empty() => b.last_transition_time.clone(),
        _ => api_time(now),
    };
    match at {
        Some(i) => status.conditions[i] = c,
        None => status.conditions.push(c),
    }
}

/// Whether `new` must be written over `current`: they differ in anything but the transition times.
pub fn needs_write(current: Option<&AnkkaFlowStatus>, new: &AnkkaFlowStatus) -> bool {
    fn without_times(s: &AnkkaFlowStatus) -> AnkkaFlowStatus {
        let mut s = s.clone();
        s.last_transition_time = None;
        for c in &mut s.conditions {
            c.last_transition_time.clear();
        }
        s
    }
    current.is_none_or(|c| without_times(c) != without_times(new))
}

#[cfg(test)]
mod tests;
