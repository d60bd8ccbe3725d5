//! Kubernetes side: reading resources and pods, writing annotations, status and events.
//!
//! Writes touch only the fields they own: the operator uses server-side apply with its field manager
//! (`ankka-flow-operator`) for the done annotation, the status and rendered objects; the CLI writes its
//! request annotation with a JSON merge patch of that one key. No call replaces a whole object.

use std::collections::BTreeMap;

use flow_core::connection::{CLUSTER_SECRET_PREFIX, Cluster, Clusters};
use flow_core::events::Event as FlowEvent;
use flow_core::names::{
    ANNOTATION_RESET, ANNOTATION_RESET_DONE, LABEL_PIPELINE, LABEL_STREAMLET, OPERATOR_FIELD_MANAGER,
    REPORTING_CONTROLLER,
};
use flow_core::resource::AnkkaFlow;
use flow_core::targets::pod_counts;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};

/// Counts, per value of the streamlet label, the pods of `pipeline` in `namespace` that can still run
/// (see [`flow_core::targets::pod_counts`]). Lists from the API server, never from a cache, so "no
/// pods" is never concluded from a cache that has not synced (case F2).
///
/// # Errors
/// The API call's error.
pub async fn running_pods(
    client: &Client,
    namespace: &str,
    pipeline: &str,
) -> Result<BTreeMap<String, u32>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods.list(&ListParams::default().labels(&format!("{LABEL_PIPELINE}={pipeline}"))).await?;
    let mut counts = BTreeMap::new();
    for pod in list.items {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if !pod_counts(phase) {
            continue;
        }
        let streamlet = pod.labels().get(LABEL_STREAMLET).cloned().unwrap_or_default();
        *counts.entry(streamlet).or_insert(0) += 1;
    }
    Ok(counts)
}

/// Reads the cluster Secrets (`kafka-cluster-<name>`) of `namespace`, keyed by cluster name: each
/// one's decoded data (`data` and `stringData`) and annotations. What is wrong with a Secret is one of
/// its cluster's [`Cluster::problems`], reported for the topics that use it.
///
/// # Errors
/// The API call's error (for example no right to list Secrets there).
pub async fn clusters(client: &Client, namespace: &str) -> Result<Clusters, kube::Error> {
    Ok(cluster_secrets(client, namespace).await?.into_iter().map(|s| (s.cluster, s.content)).collect())
}

/// A cluster Secret as [`cluster_secrets`] read it.
pub struct ClusterSecret {
    /// The Secret's name (`kafka-cluster-<cluster>`).
    pub name: String,
    /// Its `resourceVersion`.
    pub resource_version: String,
    /// The cluster's name.
    pub cluster: String,
    /// The cluster it describes.
    pub content: Cluster,
}

/// [`clusters`], with each Secret's name and `resourceVersion`.
///
/// # Errors
/// The API call's error (for example no right to list Secrets there).
pub async fn cluster_secrets(client: &Client, namespace: &str) -> Result<Vec<ClusterSecret>, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(secrets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|s| {
            let (name, resource_version) = (s.name_any(), s.resource_version().unwrap_or_default());
            cluster_of(s).map(|(cluster, content)| ClusterSecret { name, resource_version, cluster, content })
        })
        .collect())
}

/// The cluster a cluster Secret describes, with its name; `None` for any other Secret.
fn cluster_of(s: Secret) -> Option<(String, Cluster)> {
    let name = s.name_any();
    let cluster = name.strip_prefix(CLUSTER_SECRET_PREFIX)?;
    let annotations = s.metadata.annotations.clone().unwrap_or_default();
    let mut data: BTreeMap<String, String> =
        s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
    data.extend(s.string_data.unwrap_or_default());
    Some((cluster.to_string(), Cluster::from_secret(cluster, &data, &annotations)))
}

/// Sets the request annotation of `AnkkaFlow` `name`, touching no other field (JSON merge patch).
/// With `resource_version`, the write is conditional: the API server answers 409 Conflict when the
/// resource changed since that version.
///
/// # Errors
/// The API call's error.
pub async fn write_request(
    api: &Api<AnkkaFlow>,
    name: &str,
    value: &str,
    resource_version: Option<&str>,
    manager: &str,
    requested_by: Option<&str>,
) -> Result<(), kube::Error> {
    let annotations = [(ANNOTATION_RESET, Some(value)), (flow_core::names::ANNOTATION_REQUESTED_BY, requested_by)];
    patch_annotations(api, name, &annotations, resource_version, manager).await
}

/// Writes a decision about a reset request (`approved <id>` or `denied <id>`, see
/// `flow_core::reset::Decision`), and who decided, `decided_by`, by a merge patch of those two
/// annotations, on `resource_version` only when given. The admission policies shipped check that
/// `decided_by` is the user the API server authenticated (docs/governance.md).
///
/// # Errors
/// The API call's error (403 when admission refuses the decision).
pub async fn write_decision(
    api: &Api<AnkkaFlow>,
    name: &str,
    decision: &str,
    decided_by: Option<&str>,
    resource_version: Option<&str>,
    manager: &str,
) -> Result<(), kube::Error> {
    let annotations = [
        (flow_core::names::ANNOTATION_DECISION, Some(decision)),
        (flow_core::names::ANNOTATION_DECIDED_BY, decided_by),
    ];
    patch_annotations(api, name, &annotations, resource_version, manager).await
}

/// A merge patch of the `annotations` given a value (those without one are left as they are), on
/// `resource_version` only when given.
async fn patch_annotations(
    api: &Api<AnkkaFlow>,
    name: &str,
    annotations: &[(&str, Option<&str>)],
    resource_version: Option<&str>,
    manager: &str,
) -> Result<(), kube::Error> {
    let set: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .filter_map(|(key, value)| Some(((*key).to_string(), serde_json::Value::String((*value)?.to_string()))))
        .collect();
    let mut patch = serde_json::json!({ "metadata": { "annotations": set } });
    if let Some(v) = resource_version {
        patch["metadata"]["resourceVersion"] = serde_json::Value::String(v.to_string());
    }
    api.patch(name, &PatchParams { field_manager: Some(manager.into()), ..Default::default() }, &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The user the API server authenticates the client as (a `SelfSubjectReview`,
/// `authentication.k8s.io/v1`), or `None` when the server does not say.
///
/// # Errors
/// The API call's error.
pub async fn whoami(client: &Client) -> Result<Option<String>, kube::Error> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api.create(&PostParams::default(), &SelfSubjectReview::default()).await?;
    Ok(review.status.and_then(|s| s.user_info).and_then(|u| u.username).filter(|u| !u.is_empty()))
}

/// Sets the done annotation by server-side apply of that key alone, with the operator's field manager,
/// on the object of `uid` only: the apply carries the uid, so that the API server refuses it (422, or
/// 409 when no object is left) if the object was deleted and another created under the name. Returns
/// the object's resourceVersion after the write.
///
/// # Errors
/// The API call's error.
pub async fn write_done(api: &Api<AnkkaFlow>, name: &str, uid: &str, id: &str) -> Result<Option<String>, kube::Error> {
    let patch = serde_json::json!({
        "apiVersion": AnkkaFlow::api_version(&()),
        "kind": AnkkaFlow::kind(&()),
        "metadata": { "name": name, "uid": uid, "annotations": { ANNOTATION_RESET_DONE: id } }
    });
    let written = api.patch(name, &PatchParams::apply(OPERATOR_FIELD_MANAGER).force(), &Patch::Apply(&patch)).await?;
    Ok(written.resource_version())
}

/// Applies `status` to the status subresource with the operator's field manager. With
/// `resource_version`, only on that version of the object (the API server answers 409 otherwise):
/// the status subresource ignores a uid in the body, and a resourceVersion read from one object
/// never matches another. Returns the object's resourceVersion after the write.
///
/// # Errors
/// The API call's error.
pub async fn write_status(
    api: &Api<AnkkaFlow>,
    name: &str,
    status: &flow_core::resource::AnkkaFlowStatus,
    resource_version: Option<&str>,
) -> Result<Option<String>, kube::Error> {
    let mut patch = serde_json::json!({
        "apiVersion": AnkkaFlow::api_version(&()),
        "kind": AnkkaFlow::kind(&()),
        "status": status
    });
    if let Some(v) = resource_version {
        patch["metadata"] = serde_json::json!({ "name": name, "resourceVersion": v });
    }
    let pp = PatchParams::apply(OPERATOR_FIELD_MANAGER).force();
    let written = api.patch_status(name, &pp, &Patch::Apply(&patch)).await?;
    Ok(written.resource_version())
}

/// Removes `status.applied`, the record of the last apply of the pipeline's objects, with a JSON
/// merge patch that touches nothing else of the status; returns the resourceVersion written.
///
/// # Errors
/// The API call's error.
pub async fn clear_applied(api: &Api<AnkkaFlow>, name: &str) -> Result<Option<String>, kube::Error> {
    let pp = PatchParams { field_manager: Some(OPERATOR_FIELD_MANAGER.into()), ..PatchParams::default() };
    let patch = serde_json::json!({ "status": { "applied": null } });
    let written = api.patch_status(name, &pp, &Patch::Merge(&patch)).await?;
    Ok(written.resource_version())
}

/// The request annotation and the done annotation of a resource.
pub fn reset_annotations(flow: &AnkkaFlow) -> (Option<&str>, Option<&str>) {
    let a = flow.annotations();
    (a.get(ANNOTATION_RESET).map(String::as_str), a.get(ANNOTATION_RESET_DONE).map(String::as_str))
}

/// When the reset request annotation was last written, as the API server recorded it: the `time` of
/// the `metadata.managedFields` entry that owns the annotation (the field manager that wrote it, such
/// as `flow-cli` or `kubectl-annotate`), in RFC 3339 to the second; the latest one when several own
/// it. `None` when no entry says (a read without managed fields, as the watch caches hold them).
///
/// The API server stamps an entry with the time of each write that changes a field the entry owns
/// (the Kubernetes API concepts, "Server-Side Apply", managed fields): a new request is a new value,
/// so it is the time the request was written.
pub fn request_written_at(flow: &AnkkaFlow) -> Option<String> {
    let key = format!("f:{ANNOTATION_RESET}");
    flow.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.subresource.as_deref().is_none_or(str::is_empty))
        .filter(|e| e.fields_v1.as_ref().is_some_and(|f| f.0["f:metadata"]["f:annotations"].get(&key).is_some()))
        .filter_map(|e| e.time.as_ref().map(|t| t.0))
        .max()
        .map(|t| t.to_string())
}

/// Records `event` about `flow` as an `events.k8s.io/v1` Event named by [`FlowEvent::name_for`].
///
/// Returns `Ok(false)` when an event of that name exists already: the same fact was recorded before,
/// so nothing is added (a retry does not add another event).
///
/// # Errors
/// The API call's error other than 409 (for example 403 without RBAC for events).
pub async fn record_event<K: kube::Resource<DynamicType = ()>>(
    client: &Client,
    flow: &K,
    event: &FlowEvent,
    instance: &str,
) -> Result<bool, kube::Error> {
    let ns = flow.namespace().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &ns);
    let obj = Event {
        metadata: ObjectMeta {
            name: Some(event.name_for(&flow.name_any())),
            namespace: Some(ns.clone()),
            // who requested the reset the event is about (docs/governance.md); the note stays as it is
            annotations: event.requested_by.as_ref().map(|user| {
                [(flow_core::names::ANNOTATION_REQUESTED_BY.to_string(), user.clone())].into_iter().collect()
            }),
            ..Default::default()
        },
        action: Some("Reconcile".into()),
        event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        note: Some(event.note.clone()),
        reason: Some(event.reason.clone()),
        regarding: Some(ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(flow.name_any()),
            namespace: Some(ns),
            uid: flow.uid(),
            ..Default::default()
        }),
        reporting_controller: Some(REPORTING_CONTROLLER.into()),
        reporting_instance: Some(instance.chars().take(128).collect()),
        type_: Some(event.type_.as_str().into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `AnkkaFlow` with these `metadata.managedFields`.
    fn with_managed_fields(entries: serde_json::Value) -> AnkkaFlow {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1",
            "kind": "AnkkaFlow",
            "metadata": { "name": "cart", "namespace": "shop", "managedFields": entries },
            "spec": { "pipeline": "cart", "streamlets": [], "topics": [] }
        }))
        .expect("an AnkkaFlow")
    }

    fn owning(manager: &str, time: &str, annotations: &[&str], subresource: Option<&str>) -> serde_json::Value {
        let owned: serde_json::Map<String, serde_json::Value> =
            annotations.iter().map(|a| (format!("f:{a}"), serde_json::json!({}))).collect();
        let mut e = serde_json::json!({
            "manager": manager, "operation": "Update", "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1",
            "time": time, "fieldsType": "FieldsV1",
            "fieldsV1": { "f:metadata": { "f:annotations": owned } }
        });
        if let Some(s) = subresource {
            e["subresource"] = serde_json::json!(s);
        }
        e
    }

    #[test]
    fn the_request_was_written_when_the_entry_that_owns_it_says() {
        let flow = with_managed_fields(serde_json::json!([
            owning(
                "kubectl-client-side-apply",
                "2026-11-29T16:00:00Z",
                &["kubectl.kubernetes.io/last-applied-configuration"],
                None
            ),
            owning("flow-cli", "2026-11-29T16:21:40Z", &[ANNOTATION_RESET], None),
            owning("ankka-flow-operator", "2026-11-29T16:21:42Z", &[ANNOTATION_RESET_DONE], None),
            owning("ankka-flow-operator", "2026-11-29T16:21:43Z", &[], Some("status")),
        ]));
        assert_eq!(request_written_at(&flow).as_deref(), Some("2026-11-29T16:21:40Z"));
        // Written by hand later, with kubectl annotate: the latest writer's time.
        let flow = with_managed_fields(serde_json::json!([
            owning("flow-cli", "2026-11-29T16:21:40Z", &[ANNOTATION_RESET], None),
            owning("kubectl-annotate", "2026-11-29T17:00:05Z", &[ANNOTATION_RESET, "x"], None),
        ]));
        assert_eq!(request_written_at(&flow).as_deref(), Some("2026-11-29T17:00:05Z"));
        // Nobody owns it (a read from a cache, which drops the managed fields).
        assert_eq!(request_written_at(&with_managed_fields(serde_json::json!([]))), None);
        let flow = with_managed_fields(serde_json::json!([owning("x", "2026-11-29T16:00:00Z", &["y"], None)]));
        assert_eq!(request_written_at(&flow), None);
    }
}
