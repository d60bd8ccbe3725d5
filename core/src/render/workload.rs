//! The Deployment of one streamlet, and the per-pipeline ServiceAccount, Role and RoleBinding its
//! pods run with.
//!
//! A pod runs two containers: `sidecar` (the platform's runtime: it owns every Kafka client, reads
//! `/etc/flow/config`, serves metrics on port 2050, and talks to the process on 127.0.0.1:9010) and
//! `process` (the streamlet's own image, which only answers the sidecar and is given nothing else: no
//! ports, probes, mounts or credentials). A built-in streamlet runs inside the sidecar, so its pod
//! has the sidecar alone, with the built-in's Neo4j Secret mounted.
//!
//! The pod's ServiceAccount `flow-<pipeline>` may only create events (the sidecar's
//! `PartitionStalled`); its token is mounted into the sidecar alone, as a projected volume, because
//! the pod turns the automatic mount off.
//!
//! Every pod passes Pod Security `restricted` (Kubernetes documentation, "Pod Security Standards"):
//! `runAsNonRoot: true` and a `RuntimeDefault` seccomp profile on the pod and each container, and
//! on each container `allowPrivilegeEscalation: false` with every capability dropped. The pipeline's
//! [`PodSettings`] add what a platform team chooses (resources, pull secrets, scheduling, labels,
//! annotations, ids), checked by [`crate::pod::check_pipeline`] before anything is rendered.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapProjection, Container, ContainerPort, DownwardAPIProjection, DownwardAPIVolumeFile, EnvVar,
    EnvVarSource, ExecAction, KeyToPath, Lifecycle, LifecycleHandler, LocalObjectReference, ObjectFieldSelector,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ProjectedVolumeSource, ResourceRequirements, SeccompProfile,
    SecretVolumeSource, SecurityContext, ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Owner;
use super::conf::NEO4J_CREDENTIALS_DIR;
// The annotations are named below render, where the check of pod settings (`crate::pod`) reads
// them too; re-exported here, where the pod template gets them.
pub use crate::names::objects::{ANNOTATION_CONFIG_HASH, RESERVED_ANNOTATIONS};
use crate::names::objects::{
    pipeline_labels, pipeline_object_name, selector_labels, streamlet_labels, streamlet_object_name,
};
use crate::pod::{ContainerSettings, PodSettings};

/// Name of the sidecar container.
pub const SIDECAR_CONTAINER: &str = "sidecar";
/// Name of the streamlet's own container.
pub const PROCESS_CONTAINER: &str = "process";
/// Port of the sidecar's Prometheus metrics.
pub const METRICS_PORT: i32 = 2050;
/// The seccomp profile type of every pod unless its settings choose `Localhost`.
pub const SECCOMP_DEFAULT: &str = "RuntimeDefault";
/// Port the process listens on, on the pod's loopback.
pub const PROCESS_PORT: i32 = 9010;
/// Where the sidecar reads `descriptor.json` and `streamlet.conf`.
pub const CONFIG_DIR: &str = "/etc/flow/config";
/// The sidecar's state directory (its `ready` and `alive` files).
pub const STATE_DIR: &str = "/tmp/flow";
/// Where the ServiceAccount token is mounted, the path Kubernetes clients look in.
pub const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Lifetime asked of the projected token: the value Kubernetes itself uses for its own projected
/// tokens, which clients refresh long before it ends.
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// Mode of the mounted Neo4j Secret files (`0440`: owner and group may read).
pub const NEO4J_SECRET_MODE: i32 = 0o440;

/// What the Deployment of one streamlet is made of.
#[derive(Clone, Copy, Debug)]
pub struct DeploymentParts<'a> {
    /// Pipeline id.
    pub pipeline: &'a str,
    /// Streamlet name.
    pub streamlet: &'a str,
    /// The resource's replicas.
    pub replicas: i32,
    /// The operator's sidecar image.
    pub sidecar_image: &'a str,
    /// The streamlet's image; `None` for a built-in (no `process` container).
    pub process_image: Option<&'a str>,
    /// For a built-in: the Neo4j Secret its `secret` parameter names.
    pub stage_secret: Option<&'a str>,
    /// The config hash of its Secret.
    pub config_hash: &'a str,
    /// Its pod settings: the pipeline's with its own laid over them, checked.
    pub pod: &'a PodSettings,
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..EnvVar::default() }
}

fn env_field(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: field_path.into(), ..ObjectFieldSelector::default() }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn exec(command: &[&str]) -> Option<ExecAction> {
    Some(ExecAction { command: Some(command.iter().map(|c| c.to_string()).collect()) })
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), read_only: Some(true), ..VolumeMount::default() }
}

fn sidecar(p: &DeploymentParts<'_>) -> Container {
    let builtin = p.process_image.is_none();
    let mut env_vars = Vec::new();
    if !builtin {
        env_vars.push(env("FLOW_PROCESS_ADDRESS", format!("127.0.0.1:{PROCESS_PORT}")));
    }
    env_vars.extend([
        env("FLOW_CONFIG_DIR", CONFIG_DIR),
        env("FLOW_STATE_DIR", STATE_DIR),
        env("FLOW_METRICS_PORT", METRICS_PORT.to_string()),
        env_field("FLOW_POD_NAME", "metadata.name"),
        env_field("FLOW_POD_NAMESPACE", "metadata.namespace"),
    ]);
    let mut mounts = vec![mount("config", CONFIG_DIR), mount("api-token", TOKEN_DIR)];
    if builtin {
        mounts.push(mount("neo4j", NEO4J_CREDENTIALS_DIR));
    }
    Container {
        name: SIDECAR_CONTAINER.into(),
        image: Some(p.sidecar_image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        env: Some(env_vars),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".into()),
            container_port: METRICS_PORT,
            // Set although it is the default: server-side apply keys container ports by port and
            // protocol.
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        volume_mounts: Some(mounts),
        readiness_probe: Some(Probe {
            exec: exec(&["test", "-f", "/tmp/flow/ready"]),
            period_seconds: Some(5),
            ..Probe::default()
        }),
        liveness_probe: Some(Probe {
            exec: exec(&["sh", "-c", "test $(( $(date +%s) - $(stat -c %Y /tmp/flow/alive) )) -lt 15"]),
            initial_delay_seconds: Some(20),
            period_seconds: Some(10),
            ..Probe::default()
        }),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler { exec: exec(&["sleep", "2"]), ..LifecycleHandler::default() }),
            ..Lifecycle::default()
        }),
        resources: resources(p.pod.container(false)),
        security_context: Some(container_security(p.pod, p.pod.container(false))),
        ..Container::default()
    }
}

fn process(image: &str, pod: &PodSettings) -> Container {
    Container {
        name: PROCESS_CONTAINER.into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        env: Some(vec![env("FLOW_PROCESS_PORT", PROCESS_PORT.to_string())]),
        resources: resources(pod.container(true)),
        security_context: Some(container_security(pod, pod.container(true))),
        ..Container::default()
    }
}

/// The seccomp profile of the pod and its containers: the one the settings choose (checked to be
/// `RuntimeDefault` or `Localhost`), else `RuntimeDefault`.
fn seccomp(pod: &PodSettings) -> SeccompProfile {
    match pod.security_context.as_ref().and_then(|s| s.seccomp_profile.as_ref()) {
        Some(p) => SeccompProfile { type_: p.type_.clone(), localhost_profile: p.localhost_profile.clone() },
        None => SeccompProfile { type_: SECCOMP_DEFAULT.into(), localhost_profile: None },
    }
}

/// The pod's security context: non-root and the seccomp profile always, the ids its settings give.
fn pod_security(pod: &PodSettings) -> PodSecurityContext {
    let s = pod.security_context.clone().unwrap_or_default();
    PodSecurityContext {
        run_as_non_root: Some(true),
        seccomp_profile: Some(seccomp(pod)),
        run_as_user: s.run_as_user,
        run_as_group: s.run_as_group,
        fs_group: s.fs_group,
        fs_group_change_policy: s.fs_group_change_policy,
        supplemental_groups: (!s.supplemental_groups.is_empty()).then_some(s.supplemental_groups),
        ..PodSecurityContext::default()
    }
}

/// A container's security context: what Pod Security `restricted` asks of each container, and
/// the container's own ids when its settings give them.
fn container_security(pod: &PodSettings, c: Option<&ContainerSettings>) -> SecurityContext {
    let ids = c.and_then(|c| c.security_context.clone()).unwrap_or_default();
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        run_as_non_root: Some(true),
        seccomp_profile: Some(seccomp(pod)),
        run_as_user: ids.run_as_user,
        run_as_group: ids.run_as_group,
        ..SecurityContext::default()
    }
}

/// A container's requests and limits; none unless its settings give them.
fn resources(c: Option<&ContainerSettings>) -> Option<ResourceRequirements> {
    let r = c.and_then(|c| c.resources.as_ref())?;
    Some(ResourceRequirements {
        requests: (!r.requests.is_empty()).then(|| r.requests.clone()),
        limits: (!r.limits.is_empty()).then(|| r.limits.clone()),
        ..ResourceRequirements::default()
    })
}

fn volumes(p: &DeploymentParts<'_>) -> Vec<Volume> {
    let mut v = vec![
        Volume {
            name: "config".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(streamlet_object_name(p.pipeline, p.streamlet)),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "api-token".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                            ..ServiceAccountTokenProjection::default()
                        }),
                        ..VolumeProjection::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: "kube-root-ca.crt".into(),
                            items: Some(vec![KeyToPath {
                                key: "ca.crt".into(),
                                path: "ca.crt".into(),
                                ..KeyToPath::default()
                            }]),
                            ..ConfigMapProjection::default()
                        }),
                        ..VolumeProjection::default()
                    },
                    VolumeProjection {
                        downward_api: Some(DownwardAPIProjection {
                            items: Some(vec![DownwardAPIVolumeFile {
                                path: "namespace".into(),
                                field_ref: Some(ObjectFieldSelector {
                                    field_path: "metadata.namespace".into(),
                                    ..ObjectFieldSelector::default()
                                }),
                                ..DownwardAPIVolumeFile::default()
                            }]),
                        }),
                        ..VolumeProjection::default()
                    },
                ]),
                ..ProjectedVolumeSource::default()
            }),
            ..Volume::default()
        },
    ];
    if let Some(secret) = p.stage_secret {
        v.push(Volume {
            name: "neo4j".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.into()),
                default_mode: Some(NEO4J_SECRET_MODE),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    v
}

/// The Deployment of one streamlet.
pub fn deployment(p: &DeploymentParts<'_>, owner: &Owner) -> Deployment {
    let labels = streamlet_labels(p.pipeline, p.streamlet);
    // The settings' labels and annotations first: the operator's own are laid over them (and
    // the check refuses settings that name one).
    let mut pod_labels = p.pod.labels.clone();
    pod_labels.extend(labels.clone());
    let mut annotations = p.pod.annotations.clone();
    annotations.insert(ANNOTATION_CONFIG_HASH.to_string(), p.config_hash.to_string());
    annotations.extend(RESERVED_ANNOTATIONS.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let mut containers = vec![sidecar(p)];
    if let Some(image) = p.process_image {
        containers.push(process(image, p.pod));
    }
    let pod = p.pod;
    Deployment {
        metadata: ObjectMeta {
            name: Some(streamlet_object_name(p.pipeline, p.streamlet)),
            namespace: Some(owner.namespace.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner.reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(p.replicas),
            // Owned by the operator's apply, so that a rollout paused by hand (`kubectl rollout
            // pause`) is resumed at the reconcile its change of generation wakes: a paused
            // Deployment would otherwise hold back every new config or image applied to it, with
            // its status saying only that it is rolling out.
            paused: Some(false),
            selector: LabelSelector {
                match_labels: Some(selector_labels(p.pipeline, p.streamlet)),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(pipeline_object_name(p.pipeline)),
                    automount_service_account_token: Some(false),
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(pod_security(pod)),
                    containers,
                    volumes: Some(volumes(p)),
                    image_pull_secrets: (!pod.image_pull_secrets.is_empty()).then(|| {
                        pod.image_pull_secrets.iter().map(|s| LocalObjectReference { name: s.name.clone() }).collect()
                    }),
                    node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
                    tolerations: (!pod.tolerations.is_empty()).then(|| pod.tolerations.clone()),
                    affinity: pod.affinity.clone(),
                    priority_class_name: pod.priority_class_name.clone(),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn pipeline_meta(pipeline: &str, owner: &Owner) -> ObjectMeta {
    ObjectMeta {
        name: Some(pipeline_object_name(pipeline)),
        namespace: Some(owner.namespace.clone()),
        labels: Some(pipeline_labels(pipeline)),
        owner_references: Some(vec![owner.reference()]),
        ..ObjectMeta::default()
    }
}

/// The pipeline's ServiceAccount `flow-<pipeline>`; its token is not mounted automatically.
pub fn service_account(pipeline: &str, owner: &Owner) -> ServiceAccount {
    ServiceAccount {
        metadata: pipeline_meta(pipeline, owner),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// The pipeline's Role `flow-<pipeline>`: create `events.k8s.io` events, nothing else.
pub fn role(pipeline: &str, owner: &Owner) -> Role {
    Role {
        metadata: pipeline_meta(pipeline, owner),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["events.k8s.io".into()]),
            resources: Some(vec!["events".into()]),
            verbs: vec!["create".into()],
            ..PolicyRule::default()
        }]),
    }
}

/// The pipeline's RoleBinding `flow-<pipeline>`: its Role to its ServiceAccount.
pub fn role_binding(pipeline: &str, owner: &Owner) -> RoleBinding {
    RoleBinding {
        metadata: pipeline_meta(pipeline, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: pipeline_object_name(pipeline),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: pipeline_object_name(pipeline),
            namespace: Some(owner.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_port_annotation_names_the_metrics_port() {
        assert!(RESERVED_ANNOTATIONS.contains(&("prometheus.io/port", METRICS_PORT.to_string().as_str())));
    }
}
