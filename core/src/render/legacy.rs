//! The Deployment and status the operator used before it rendered through [`super::plan`]: only the
//! `process` container, no sidecar, no Secret, no topics. Kept until the operator's reconcile moves
//! to the plan, then removed.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::streamlet_labels;
use crate::names::{LABEL_PIPELINE, LABEL_STREAMLET, streamlet_object_name};
use crate::resource::{AnkkaFlowSpec, AnkkaFlowStatus, StreamletSpec, StreamletStatus};

/// The Deployment of one streamlet, owned by the resource (`owner` is its controller reference).
pub fn deployment(spec: &AnkkaFlowSpec, s: &StreamletSpec, namespace: &str, owner: OwnerReference) -> Deployment {
    let labels = streamlet_labels(&spec.pipeline, &s.name);
    let selector = BTreeMap::from([
        (LABEL_PIPELINE.to_string(), spec.pipeline.clone()),
        (LABEL_STREAMLET.to_string(), s.name.clone()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(streamlet_object_name(&spec.pipeline, &s.name)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(s.replicas),
            selector: LabelSelector { match_labels: Some(selector), ..Default::default() },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    automount_service_account_token: Some(false),
                    termination_grace_period_seconds: Some(30),
                    containers: vec![Container {
                        name: "process".into(),
                        image: Some(s.image.clone()),
                        image_pull_policy: Some("IfNotPresent".into()),
                        env: Some(vec![EnvVar {
                            name: "FLOW_PROCESS_PORT".into(),
                            value: Some("9010".into()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// What was observed of one streamlet's Deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentView {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.updatedReplicas`.
    pub updated: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
}

/// The status of the pipeline from its Deployments (reference.md §8.7, topics left out in this
/// version): `Ready` when every streamlet rolled out with all replicas ready, `Pending` while one
/// rolls out, `Degraded` when one has fewer ready replicas than desired. `reset` and `resetHistory`
/// are left empty: the reset driver fills them.
pub fn status(
    spec: &AnkkaFlowSpec,
    generation: Option<i64>,
    deployments: &BTreeMap<String, DeploymentView>,
) -> AnkkaFlowStatus {
    let mut streamlets = Vec::new();
    let (mut settled_all, mut ready_all) = (true, true);
    let mut details = Vec::new();
    let mut sorted: Vec<&StreamletSpec> = spec.streamlets.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for s in sorted {
        let view = deployments.get(&s.name);
        let settled = view.is_some_and(|d| d.observed_generation >= d.generation && d.updated >= s.replicas);
        let ready = view.map_or(0, |d| d.ready);
        let detail = if !settled {
            "rolling out".to_string()
        } else if ready < s.replicas {
            format!("{ready} of {} ready", s.replicas)
        } else {
            String::new()
        };
        settled_all &= settled;
        ready_all &= ready >= s.replicas;
        if !detail.is_empty() {
            details.push(format!("{}: {detail}", s.name));
        }
        streamlets.push(StreamletStatus { name: s.name.clone(), desired: s.replicas, ready, detail });
    }
    let phase = if settled_all && ready_all {
        "Ready"
    } else if !settled_all {
        "Pending"
    } else {
        "Degraded"
    };
    AnkkaFlowStatus {
        observed_generation: generation,
        phase: Some(phase.into()),
        detail: details.join("; "),
        streamlets,
        ..AnkkaFlowStatus::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{LABEL_MANAGED_BY, LABEL_NAME};
    use crate::targets::tests::cart;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "flow.ankka.thinkmorestupidless.com/v1alpha1".into(),
            kind: "AnkkaFlow".into(),
            name: "cart".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn deployment_carries_name_replicas_labels_and_owner() {
        let spec = cart(0);
        let d = deployment(&spec, spec.streamlet("router").unwrap(), "shop", owner());
        assert_eq!(d.metadata.name.as_deref(), Some("flow-cart-router"));
        let ds = d.spec.unwrap();
        assert_eq!(ds.replicas, Some(0));
        let labels = ds.template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[LABEL_PIPELINE], "cart");
        assert_eq!(labels[LABEL_STREAMLET], "router");
        assert_eq!(labels[LABEL_MANAGED_BY], "ankka-flow");
        assert_eq!(labels[LABEL_NAME], "cart-router");
        assert_eq!(ds.selector.match_labels.unwrap().len(), 2);
        assert_eq!(d.metadata.owner_references.unwrap()[0].controller, Some(true));
    }

    #[test]
    fn phases() {
        let spec = cart(0);
        let view = |ready| DeploymentView { generation: 1, observed_generation: 1, updated: 1, ready };
        let all: BTreeMap<_, _> = ["router", "sink", "source"].iter().map(|n| (n.to_string(), view(1))).collect();
        assert_eq!(status(&spec, Some(3), &all).phase.as_deref(), Some("Ready"));
        let mut degraded = all.clone();
        degraded.insert("sink".into(), view(0));
        let s = status(&spec, Some(3), &degraded);
        assert_eq!(s.phase.as_deref(), Some("Degraded"));
        assert_eq!(s.detail, "sink: 0 of 1 ready");
        let mut pending = all;
        pending.remove("router");
        assert_eq!(status(&spec, Some(3), &pending).phase.as_deref(), Some("Pending"));
    }
}
