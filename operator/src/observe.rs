//! The reconcile's fetch steps: what the operator reads from Kubernetes and Kafka before `flow-core`
//! decides. Nothing here decides anything; each function returns what it saw.

use std::collections::{BTreeMap, BTreeSet};

use flow_adapters::owned;
use flow_core::connection::ResolvedTopic;
use flow_core::connection::{Clusters, KafkaConnection};
use flow_core::names::{LABEL_PIPELINE, LABEL_STREAMLET, streamlet_object_name};
use flow_core::render::plan::{StageSecret, stage_secrets_to_read};
use flow_core::render::status::ObservedDeployment;
use flow_core::render::topics::KafkaTopic;
use flow_core::render::workload::{ANNOTATION_CONFIG_HASH, PROCESS_CONTAINER};
use flow_core::resource::AnkkaFlow;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Secret};
use kube::{Api, ResourceExt};

use crate::api::Error;
use crate::context::Context;

/// What the operator read from Kubernetes before deciding (needs a client).
pub struct Fetched {
    /// The Kafka cluster Secrets, by cluster name.
    pub clusters: Clusters,
    /// The Secrets the built-ins name, by name: keys and `resourceVersion` only.
    pub stage_secrets: BTreeMap<String, StageSecret>,
}

/// Reads the cluster Secrets and the built-ins' Secrets (needs a client).
///
/// # Errors
/// The cluster Secrets cannot be listed. A built-in's Secret that cannot be read is no error: it is
/// [`StageSecret::Unreadable`], which the decision refuses with the reason.
pub async fn fetch(ctx: &Context, flow: &AnkkaFlow) -> Result<Fetched, kube::Error> {
    let clusters = ctx.clusters.get().await?;
    let ns = flow.namespace().unwrap_or_default();
    let mut stage_secrets = BTreeMap::new();
    for name in stage_secrets_to_read(flow) {
        let seen = match owned::secret_keys(&ctx.client, &ns, &name).await {
            Ok(None) => StageSecret::Missing,
            Ok(Some(s)) => StageSecret::Found { keys: s.keys, resource_version: s.resource_version },
            Err(e) => StageSecret::Unreadable(e.to_string()),
        };
        stage_secrets.insert(name, seen);
    }
    Ok(Fetched { clusters, stage_secrets })
}

/// One connection's share of a describe: Kafka name -> configuration keys to read, and the (id, Kafka
/// name) of its topics.
type PerConnection = (KafkaConnection, BTreeMap<String, BTreeSet<String>>, Vec<(String, String)>);

/// Describes every topic of `topics` (a valid pipeline's, or those of a resource being deleted that
/// the record names) in Kafka over its own connection (needs Kafka): one request per connection for
/// all its topics, the connections asked concurrently. Returns what Kafka said of each, by topic id.
pub async fn describe_topics<'a>(
    ctx: &Context,
    topics: impl IntoIterator<Item = &'a ResolvedTopic>,
) -> BTreeMap<String, KafkaTopic> {
    let mut out = BTreeMap::new();
    // Per connection: Kafka name -> the configuration keys to read, and the ids of its topics.
    let mut per_conn: Vec<PerConnection> = Vec::new();
    for t in topics {
        let conn = t.kafka_connection();
        let keys: BTreeSet<String> = if t.managed { t.topic_config.keys().cloned().collect() } else { BTreeSet::new() };
        let slot = match per_conn.iter().position(|(c, _, _)| c == conn) {
            Some(i) => i,
            None => {
                per_conn.push((conn.clone(), BTreeMap::new(), Vec::new()));
                per_conn.len() - 1
            }
        };
        let (_, wanted, ids) = &mut per_conn[slot];
        wanted.entry(t.name.clone()).or_default().extend(keys);
        ids.push((t.id.clone(), t.name.clone()));
    }
    let answers = futures::stream::iter(per_conn.into_iter().map(|(conn, wanted, ids)| async move {
        let described = ctx.kafka.describe(&conn, wanted).await;
        (ids, described)
    }))
    .buffer_unordered(4)
    .collect::<Vec<_>>()
    .await;
    for (ids, described) in answers {
        for (id, name) in ids {
            let state = described
                .get(&name)
                .cloned()
                .unwrap_or_else(|| KafkaTopic::Unreachable("Kafka gave no answer for the topic".into()));
            out.insert(id, state);
        }
    }
    out
}

/// The pipeline's objects in Kubernetes (needs a client): its Deployments owned by the resource,
/// by streamlet label; and of the per-streamlet Secrets whose streamlet left the resource, those that
/// exist and are owned by it.
pub struct Owned {
    /// Deployments, by streamlet label.
    pub deployments: BTreeMap<String, ObservedDeployment>,
    /// Streamlet labels of the owned per-streamlet Secrets found.
    pub secrets: BTreeSet<String>,
}

/// Finds the resource's Deployments, and looks up the Secrets of streamlets that are no longer in
/// the resource: those of its Deployments, and those its last status listed (a Secret whose
/// Deployment was deleted by hand is found that way). The operator never lists Secrets: it reads
/// these by name, metadata only.
///
/// The Deployments come from the controllers' watch of the Deployments the operator manages, once
/// it has listed them (a change of one wakes its resource's reconcile after the cache has it), and
/// from the API server before that. A cache a few milliseconds behind the operator's own last apply
/// costs at most that apply again and its `StreamletRolled` event again; a roll-out's progress is
/// seen at the reconcile its Deployment's change wakes.
///
/// # Errors
/// The API calls' errors.
pub async fn owned(ctx: &Context, flow: &AnkkaFlow) -> Result<Owned, Error> {
    let ns = flow.namespace().ok_or(Error::Incomplete("namespace"))?;
    let uid = flow.uid().ok_or(Error::Incomplete("uid"))?;
    let pipeline = &flow.spec.pipeline;
    let observed = |d: &Deployment| Some((d.labels().get(LABEL_STREAMLET)?.clone(), observed_deployment(d)));
    let cached = ctx.deployments.iter().all(crate::api::listed);
    let deployments: BTreeMap<String, ObservedDeployment> = if cached && !ctx.deployments.is_empty() {
        ctx.deployments
            .iter()
            .flat_map(|s| {
                s.state_filter(|d| {
                    d.namespace().as_deref() == Some(ns.as_str())
                        && d.labels().get(LABEL_PIPELINE) == Some(pipeline)
                        && d.owner_references().iter().any(|r| r.uid == uid)
                })
            })
            .filter_map(|d| observed(&d))
            .collect()
    } else {
        let listed: Vec<Deployment> = owned::list_owned(&ctx.client, &ns, pipeline, &uid).await?;
        listed.iter().filter_map(observed).collect()
    };
    let wanted: BTreeSet<&str> = flow.spec.streamlets.iter().map(|s| s.name.as_str()).collect();
    let reported = flow.status.iter().flat_map(|s| s.streamlets.iter().map(|s| s.name.as_str()));
    let candidates: BTreeSet<&str> =
        deployments.keys().map(String::as_str).chain(reported).filter(|s| !wanted.contains(s)).collect();
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let mut secrets = BTreeSet::new();
    for streamlet in candidates {
        if let Some(meta) = api.get_metadata_opt(&streamlet_object_name(pipeline, streamlet)).await?
            && meta.owner_references().iter().any(|o| o.uid == uid)
        {
            secrets.insert(streamlet.to_string());
        }
    }
    Ok(Owned { deployments, secrets })
}

/// Keeps of a watched Deployment only what [`owned`] reads (labels, owner references, the
/// template's annotations, each container's name and image, uid, generation, replica counts and a
/// `ReplicaFailure` condition), so that the cache of every managed Deployment stays small.
pub fn slim_deployment(d: &mut Deployment) {
    d.managed_fields_mut().clear();
    d.annotations_mut().clear();
    if let Some(pod) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        let containers = pod
            .containers
            .iter()
            .map(|c| Container { name: c.name.clone(), image: c.image.clone(), ..Container::default() })
            .collect();
        *pod = PodSpec { containers, ..PodSpec::default() };
    }
    if let Some(status) = d.status.as_mut() {
        status.conditions = status
            .conditions
            .take()
            .map(|c| c.into_iter().filter(|c| c.type_ == REPLICA_FAILURE).collect::<Vec<_>>())
            .filter(|c| !c.is_empty());
    }
}

/// What the status and the roll-out decision need of a Deployment.
pub fn observed_deployment(d: &Deployment) -> ObservedDeployment {
    let spec = d.spec.as_ref();
    let template = spec.map(|s| &s.template);
    let config_hash = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_CONFIG_HASH))
        .cloned();
    let process_image = template
        .and_then(|t| t.spec.as_ref())
        .and_then(|p| p.containers.iter().find(|c| c.name == PROCESS_CONTAINER))
        .and_then(|c| c.image.clone());
    let status = d.status.clone().unwrap_or_default();
    let replica_failure = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == REPLICA_FAILURE && c.status == "True")
        .map(|c| c.message.clone().unwrap_or_default());
    ObservedDeployment {
        uid: d.metadata.uid.clone().unwrap_or_default(),
        config_hash,
        process_image,
        generation: d.metadata.generation.unwrap_or(0),
        observed_generation: status.observed_generation.unwrap_or(0),
        updated_replicas: status.updated_replicas.unwrap_or(0),
        ready_replicas: status.ready_replicas.unwrap_or(0),
        replica_failure,
    }
}

/// The Deployment condition set while its ReplicaSet fails to create pods (Kubernetes
/// documentation, "Deployments": "Failed Deployment").
const REPLICA_FAILURE: &str = "ReplicaFailure";

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flow_core::names::{LABEL_MANAGED_BY, MANAGED_BY};
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::connections::fake::FakeKafka;
    use crate::fixtures::{self, ApiServer};

    /// A Deployment of streamlet `router` of pipeline `cart`, owned by the object of uid `owner`.
    fn deployment(owner: &str, hash: &str) -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "flow-cart-router",
                "namespace": "shop",
                "uid": "d-3",
                "generation": 3,
                "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_PIPELINE: "cart", LABEL_STREAMLET: "router"},
                "annotations": {"deployment.kubernetes.io/revision": "2"},
                "managedFields": [{"manager": "ankka-flow-operator", "operation": "Apply"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "AnkkaFlow", "name": "cart", "uid": owner}]
            },
            "spec": {
                "selector": {"matchLabels": {LABEL_STREAMLET: "router"}},
                "template": {
                    "metadata": {"annotations": {ANNOTATION_CONFIG_HASH: hash}},
                    "spec": {
                        "serviceAccountName": "flow-cart",
                        "volumes": [{"name": "conf", "secret": {"secretName": "flow-cart-router"}}],
                        "containers": [
                            {"name": "sidecar", "image": "sidecar:1", "args": ["--conf", "/conf"]},
                            {"name": PROCESS_CONTAINER, "image": "cart-router:1.2", "env": [{"name": "A", "value": "b"}]}
                        ]
                    }
                }
            },
            "status": {"observedGeneration": 3, "updatedReplicas": 1, "readyReplicas": 1,
                       "conditions": [{"type": "Available", "status": "True"}]}
        }))
        .expect("a Deployment")
    }

    #[test]
    fn a_slimmed_deployment_is_observed_as_the_whole_one() {
        let whole = deployment("5f0c1e2a-cart", "abc");
        let mut slim = whole.clone();
        slim_deployment(&mut slim);
        assert_eq!(observed_deployment(&slim), observed_deployment(&whole));
        assert_eq!(observed_deployment(&slim).process_image.as_deref(), Some("cart-router:1.2"));
        let pod = slim.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("a pod template");
        assert!(pod.volumes.is_none() && pod.containers.iter().all(|c| c.env.is_none() && c.args.is_none()));
        assert!(slim.metadata.managed_fields.as_ref().is_none_or(|m| m.is_empty()));
        assert_eq!(observed_deployment(&slim).uid, "d-3");
        assert!(observed_deployment(&slim).replica_failure.is_none());
        // A Deployment whose pods cannot be created keeps that condition, and only that one.
        let mut failing = whole.clone();
        let conditions = failing.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions");
        conditions
            .push(serde_json::from_value(json!({"type": "ReplicaFailure", "status": "True"})).expect("a condition"));
        let mut slim = failing.clone();
        slim_deployment(&mut slim);
        assert!(observed_deployment(&slim).replica_failure.is_some());
        assert_eq!(observed_deployment(&slim), observed_deployment(&failing));
        let kept = slim.status.and_then(|s| s.conditions).unwrap_or_default();
        assert_eq!(kept.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["ReplicaFailure"]);
    }

    #[tokio::test]
    async fn the_deployments_come_from_the_cache_once_it_has_listed() {
        let (ctx, handle) = fixtures::context(Arc::new(FakeKafka::default()));
        let mut ctx = Arc::into_inner(ctx).expect("the only reference");
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        // The second is another object's, of the same pipeline name, in another namespace.
        let mut elsewhere = deployment("another-object", "old");
        elsewhere.metadata.namespace = Some("elsewhere".into());
        for mut d in [deployment("5f0c1e2a-cart", "abc"), elsewhere] {
            slim_deployment(&mut d);
            writer.apply_watcher_event(&Event::InitApply(d));
        }
        writer.apply_watcher_event(&Event::InitDone);
        ctx.deployments = vec![store];
        // A call to the API server would never be answered.
        let found = tokio::time::timeout(std::time::Duration::from_secs(1), owned(&ctx, &fixtures::cart()))
            .await
            .expect("answered from the cache, with no call to the API server")
            .expect("read from the cache");
        assert_eq!(found.deployments.keys().collect::<Vec<_>>(), ["router"]);
        assert_eq!(found.deployments["router"].config_hash.as_deref(), Some("abc"));
        // Not one call to the API server.
        ApiServer(handle).done().await;
    }
}
