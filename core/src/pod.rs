//! Pod settings of a pipeline's streamlets: what a platform team sets on the pods the operator
//! renders (resources, pull secrets, scheduling, labels and annotations, user and group ids),
//! from deploy-time configuration (`flow.pod`, `flow.streamlets.<name>.pod`) into the resource
//! (`spec.pod`, `spec.streamlets[].pod`); docs/blueprint.md, "Pod settings".
//!
//! Built from an allow-list: only the fields below exist, so nothing else of a pod spec can reach a
//! rendered pod. The ones that Pod Security `restricted` decides about are either fixed by the
//! operator (`runAsNonRoot: true`, `allowPrivilegeEscalation: false`, every capability dropped) or
//! checked against the profile ([`check`]): no UID 0, seccomp `RuntimeDefault` or `Localhost`
//! (Kubernetes documentation, "Pod Security Standards").
//!
//! A streamlet's own settings are laid over the pipeline's as the `--conf` files are laid over each
//! other: objects key by key, anything else (a list, a value) replaced ([`PodSettings::overlay`]).

use std::collections::BTreeMap;

use k8s_openapi::DeepMerge;
use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod check;
pub mod quantity;

pub use check::{Problem, Scope, check_pipeline, unknown_setting};

/// Settings of a streamlet's pods. Every field is optional; unset, the operator renders what
/// docs/rendering.md describes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSettings {
    /// Labels of the pods, besides the operator's own (which cannot be set here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the pods, besides the operator's own (which cannot be set here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Secrets of the pipeline's namespace that hold registry credentials for the images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<PullSecret>,
    /// The node labels a node must have to run the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pods tolerate, as in a pod spec.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "tolerations_schema")]
    pub tolerations: Vec<Toleration>,
    /// Node and pod affinity, as in a pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "affinity_schema")]
    pub affinity: Option<Affinity>,
    /// The PriorityClass of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// User and group ids and the seccomp profile of the pods, within Pod Security `restricted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurity>,
    /// Per container (`sidecar`, `process`): resources and ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Containers>,
}

/// A Secret named in `imagePullSecrets`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct PullSecret {
    /// The Secret's name, in the pipeline's namespace.
    pub name: String,
}

/// The pod-level security settings a pipeline may choose; the operator sets `runAsNonRoot: true`
/// whatever they say.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurity {
    /// The UID the containers run as (not 0); unset, the image's user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The primary GID of the containers' processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    /// The group that owns the pods' volumes (the mounted Secrets included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group: Option<i64>,
    /// `OnRootMismatch` or `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_group_change_policy: Option<String>,
    /// More GIDs of the containers' processes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplemental_groups: Vec<i64>,
    /// `RuntimeDefault` (the default) or `Localhost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<Seccomp>,
}

/// A seccomp profile: `RuntimeDefault`, or `Localhost` with the profile's path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Seccomp {
    /// `RuntimeDefault` or `Localhost`.
    #[serde(rename = "type")]
    pub type_: String,
    /// For `Localhost`: the profile's path, relative to the kubelet's seccomp directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localhost_profile: Option<String>,
}

/// The settings of each of a pod's containers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Containers {
    /// The platform's sidecar (every pod has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sidecar: Option<ContainerSettings>,
    /// The streamlet's own process (a built-in streamlet has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ContainerSettings>,
}

/// What may be set on one container.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSettings {
    /// Requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The container's own ids, replacing the pod's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<ContainerSecurity>,
}

/// A container's requests and limits, by resource name (`cpu`, `memory`, `ephemeral-storage`, ...).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// What the scheduler reserves, and what a ResourceQuota on requests counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "quantities_schema")]
    pub requests: BTreeMap<String, Quantity>,
    /// What the container may use at most, and what a ResourceQuota on limits counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "quantities_schema")]
    pub limits: BTreeMap<String, Quantity>,
}

/// A container's own ids.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSecurity {
    /// The UID the container runs as (not 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The primary GID of its processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
}

/// Lays `over` onto `base`: `over`'s settings win, objects merge key by key.
trait Overlay {
    fn overlay(&mut self, over: &Self);
}

impl<T: Overlay + Clone> Overlay for Option<T> {
    fn overlay(&mut self, over: &Self) {
        match (self.as_mut(), over) {
            (_, None) => {}
            (None, Some(o)) => *self = Some(o.clone()),
            (Some(b), Some(o)) => b.overlay(o),
        }
    }
}

impl<V: Clone> Overlay for BTreeMap<String, V> {
    fn overlay(&mut self, over: &Self) {
        self.extend(over.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// A list or a value set in `over` replaces `base`'s.
fn replace<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
    if over.is_some() {
        base.clone_from(over);
    }
}

fn replace_list<T: Clone>(base: &mut Vec<T>, over: &[T]) {
    if !over.is_empty() {
        *base = over.to_vec();
    }
}

impl Overlay for PodSettings {
    fn overlay(&mut self, over: &Self) {
        self.labels.overlay(&over.labels);
        self.annotations.overlay(&over.annotations);
        replace_list(&mut self.image_pull_secrets, &over.image_pull_secrets);
        self.node_selector.overlay(&over.node_selector);
        replace_list(&mut self.tolerations, &over.tolerations);
        // Kubernetes' own merge of its types: objects key by key, its lists (all atomic in an
        // Affinity) replaced.
        match (&mut self.affinity, &over.affinity) {
            (_, None) => {}
            (Some(base), Some(o)) => base.merge_from(o.clone()),
            (base, Some(o)) => *base = Some(o.clone()),
        }
        replace(&mut self.priority_class_name, &over.priority_class_name);
        self.security_context.overlay(&over.security_context);
        self.containers.overlay(&over.containers);
    }
}

impl Overlay for PodSecurity {
    fn overlay(&mut self, over: &Self) {
        replace(&mut self.run_as_user, &over.run_as_user);
        replace(&mut self.run_as_group, &over.run_as_group);
        replace(&mut self.fs_group, &over.fs_group);
        replace(&mut self.fs_group_change_policy, &over.fs_group_change_policy);
        replace_list(&mut self.supplemental_groups, &over.supplemental_groups);
        self.seccomp_profile.overlay(&over.seccomp_profile);
    }
}

impl Overlay for Seccomp {
    fn overlay(&mut self, over: &Self) {
        // A profile is one choice: another type takes its path (or none) with it.
        *self = over.clone();
    }
}

impl Overlay for Containers {
    fn overlay(&mut self, over: &Self) {
        self.sidecar.overlay(&over.sidecar);
        self.process.overlay(&over.process);
    }
}

impl Overlay for ContainerSettings {
    fn overlay(&mut self, over: &Self) {
        self.resources.overlay(&over.resources);
        self.security_context.overlay(&over.security_context);
    }
}

impl Overlay for Resources {
    fn overlay(&mut self, over: &Self) {
        self.requests.overlay(&over.requests);
        self.limits.overlay(&over.limits);
    }
}

impl Overlay for ContainerSecurity {
    fn overlay(&mut self, over: &Self) {
        replace(&mut self.run_as_user, &over.run_as_user);
        replace(&mut self.run_as_group, &over.run_as_group);
    }
}

impl PodSettings {
    /// What a streamlet's pods get: the pipeline's `defaults` with the streamlet's `own` settings
    /// laid over them. A built-in streamlet has no `process` container, so the defaults' settings
    /// for one do not apply to it (its own may not name one: [`check_pipeline`]).
    pub fn for_streamlet(defaults: Option<&PodSettings>, own: Option<&PodSettings>, builtin: bool) -> PodSettings {
        let mut merged = defaults.cloned().unwrap_or_default();
        if let Some(own) = own {
            merged.overlay(own);
        }
        if builtin && let Some(c) = merged.containers.as_mut() {
            c.process = None;
        }
        merged
    }

    /// The settings of container `process` (when `process`) or `sidecar`.
    pub fn container(&self, process: bool) -> Option<&ContainerSettings> {
        let c = self.containers.as_ref()?;
        if process { c.process.as_ref() } else { c.sidecar.as_ref() }
    }
}

/// The schema of a Kubernetes type as the CRD carries it: inlined, without its descriptions (the
/// Kubernetes API reference has them; the CRD stays small).
fn without_descriptions(mut schema: serde_json::Value) -> schemars::Schema {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("description");
                if let Some(serde_json::Value::Object(props)) = o.get_mut("properties") {
                    props.values_mut().for_each(strip);
                }
                for (k, child) in o.iter_mut() {
                    if k != "properties" {
                        strip(child);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut schema);
    schemars::Schema::try_from(schema).unwrap_or_default()
}

fn tolerations_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let item = generator.subschema_for::<Toleration>().to_value();
    without_descriptions(serde_json::json!({ "type": "array", "items": item }))
}

fn affinity_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    without_descriptions(generator.subschema_for::<Affinity>().to_value())
}

fn quantities_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-int-or-string": true }
    })
}

#[cfg(test)]
mod tests;
