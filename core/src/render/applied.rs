//! Whether a reconcile applies the pipeline's objects, or leaves them as they are.
//!
//! The objects are the ServiceAccount, Role and RoleBinding `flow-<pipeline>` and each streamlet's
//! Secret and Deployment. A server-side apply that changes nothing still costs the API server a
//! merge of the whole object, and a reconcile runs for every change of a pipeline's Deployments (a pod
//! that became ready) and for every pipeline when the operator starts. So a reconcile leaves them
//! alone when all of these hold (docs/rendering.md, "Applied objects"):
//!
//! - what is rendered now has the hash recorded in `status.applied`, the operator's last apply of
//!   all of them;
//! - that apply was less than the reapply interval ago (`FLOW_OPERATOR_RESYNC_SECONDS`): the objects
//!   the operator does not watch are applied again at least that often, so a change made to one of
//!   them by hand is undone within that time, also across a restart of the operator;
//! - every streamlet's Deployment is observed, owned by the resource, the same object (`metadata.uid`)
//!   at the `metadata.generation` the apply left it at, and without a `ReplicaFailure` condition. The
//!   API server raises a Deployment's generation at every change of its spec, whoever makes it
//!   (Kubernetes API conventions, "Metadata": `generation`), so a Deployment scaled or edited by hand
//!   is applied again at the reconcile its change wakes; one whose ReplicaSet cannot create pods
//!   too.
//!
//! An apply that did not end in every object applied records nothing, so the next reconcile applies
//! them all again. An apply of other objects than recorded clears the record first
//! ([`ObjectsStep::clears_record_first`]): were the operator to stop between its first apply and the
//! status write, and the resource to go back to what was recorded, the record would otherwise match
//! objects that are part one rendering and part the other.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::status::{ObservedDeployment, api_time};
use crate::resource::{AppliedDeployment, AppliedObjects};

/// What a reconcile does with the pipeline's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectsStep {
    /// Apply every one of them; once all are applied, the status records `hash`.
    Apply {
        /// The hash of what is rendered.
        hash: String,
    },
    /// Leave them as they are, and apply them all again after `reapply_in` at the latest.
    Unchanged {
        /// Until the recorded apply is as old as the reapply interval.
        reapply_in: Duration,
    },
}

/// Lowercase hex SHA-256 of the rendered objects: the per-pipeline ones, then each streamlet's Secret
/// and Deployment, in their order. A Secret is hashed without its
/// values: they count through the config hash in its Deployment's pod template, so that no hash of a
/// credential is written anywhere the config hash is not already.
pub(crate) fn objects_hash<P: Serialize>(pipeline_objects: &P, streamlets: &[(&Secret, &Deployment)]) -> String {
    let without_values = |s: &Secret| {
        let mut s = s.clone();
        if let Some(values) = s.string_data.as_mut() {
            values.values_mut().for_each(String::clear);
        }
        if let Some(data) = s.data.as_mut() {
            data.values_mut().for_each(|v| v.0.clear());
        }
        s
    };
    let streamlets: Vec<_> =
        streamlets.iter().map(|(secret, deployment)| (without_values(secret), deployment)).collect();
    // Plain data: serialising it cannot fail, and its maps are sorted, so the bytes are stable.
    let bytes = serde_json::to_vec(&(pipeline_objects, &streamlets)).unwrap_or_default();
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What the reconcile does with the objects rendered with `hash` for `streamlets`, given what the
/// status recorded of the last apply, the Deployments observed (by streamlet), the time and the
/// reapply interval. `rolls` says whether a streamlet's observed Deployment runs another config or
/// image than rendered (then they are applied, whatever the record says).
pub fn objects_step<'s>(
    hash: String,
    streamlets: impl IntoIterator<Item = &'s str>,
    recorded: Option<&AppliedObjects>,
    deployments: &BTreeMap<String, ObservedDeployment>,
    rolls: bool,
    now: Timestamp,
    reapply_after: Duration,
) -> ObjectsStep {
    let unchanged = || -> Option<Duration> {
        let recorded = recorded.filter(|r| r.hash == hash && !rolls)?;
        let applied: Timestamp = recorded.time.parse().ok()?;
        // A time ahead of this clock (another node's, or written by hand) proves nothing.
        let age = Duration::try_from(now.duration_since(applied)).ok()?;
        let reapply_in = reapply_after.checked_sub(age).filter(|d| !d.is_zero())?;
        let mut names = 0;
        for name in streamlets {
            names += 1;
            let seen = deployments.get(name).filter(|d| d.replica_failure.is_none())?;
            let applied = recorded.deployments.get(name)?;
            (applied.uid == seen.uid && applied.generation == seen.generation).then_some(())?;
        }
        (names == recorded.deployments.len()).then_some(reapply_in)
    };
    match unchanged() {
        Some(reapply_in) => ObjectsStep::Unchanged { reapply_in },
        None => ObjectsStep::Apply { hash },
    }
}

impl ObjectsStep {
    /// The record for the status once the step was carried out: for an apply of every object, its
    /// hash, `now` and the Deployments as their applies returned them (by streamlet); for objects
    /// left alone, the `stored` record; `None` when `deployments` is `None`, for an apply that failed
    /// part-way, after which nothing is known of the objects.
    pub fn record(
        &self,
        deployments: Option<BTreeMap<String, AppliedDeployment>>,
        stored: Option<&AppliedObjects>,
        now: Timestamp,
    ) -> Option<AppliedObjects> {
        let deployments = deployments?;
        match self {
            ObjectsStep::Apply { hash } => {
                Some(AppliedObjects { hash: hash.clone(), time: api_time(now), deployments })
            }
            ObjectsStep::Unchanged { .. } => stored.cloned(),
        }
    }

    /// Whether the `stored` record must be cleared from the status before the objects are applied:
    /// when they are applied with another hash than it records. An apply of the recorded hash (the
    /// interval ended, a Deployment changed) puts back what the record says, so the record holds
    /// even for an apply that stops part-way.
    pub fn clears_record_first(&self, stored: Option<&AppliedObjects>) -> bool {
        matches!((self, stored), (ObjectsStep::Apply { hash }, Some(r)) if r.hash != *hash)
    }

    /// Whether the objects are applied.
    pub fn applies(&self) -> bool {
        matches!(self, ObjectsStep::Apply { .. })
    }

    /// How long until the objects must be applied again, when they are left alone now.
    pub fn reapply_in(&self) -> Option<Duration> {
        match self {
            ObjectsStep::Apply { .. } => None,
            ObjectsStep::Unchanged { reapply_in } => Some(*reapply_in),
        }
    }
}

#[cfg(test)]
mod tests;
