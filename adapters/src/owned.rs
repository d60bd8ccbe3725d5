//! The Kubernetes objects a pipeline owns: server-side apply with the operator's field manager,
//! listing, deletion, the resource's finalizer, and the keys of the Secrets built-in streamlets name.
//!
//! Every object is applied whole by server-side apply with field manager `ankka-flow-operator`,
//! forcing conflicts: the operator's fields win over any other manager's (a `kubectl scale` of a
//! streamlet's Deployment is reverted), while fields the operator never sets stay with whoever set
//! them. The finalizer is added and removed by a JSON merge patch conditional on the resource's
//! `resourceVersion`, not by an apply: the done annotation is applied by the same field manager,
//! and an apply that omits a field its manager applied before removes that field.

use std::collections::BTreeSet;
use std::fmt::Debug;

use flow_core::names::{LABEL_MANAGED_BY, LABEL_PIPELINE, MANAGED_BY, OPERATOR_FIELD_MANAGER};
use flow_core::resource::AnkkaFlow;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Server-side applies `obj` in namespace `ns` with the operator's field manager, forcing
/// conflicts, and returns the object as the API server stored it.
///
/// # Errors
/// The API server's refusal: validation, an admission webhook, a quota, RBAC.
pub async fn apply<K>(client: &Client, ns: &str, obj: &K) -> Result<K, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    api.patch(&obj.name_any(), &PatchParams::apply(OPERATOR_FIELD_MANAGER).force(), &Patch::Apply(obj)).await
}

/// Objects of kind `K` in `ns` that carry the pipeline's labels (managed by `ankka-flow`, pipeline
/// `pipeline`) and whose owner references name the resource of uid `owner_uid`. Listed from the API
/// server, never from a cache.
///
/// # Errors
/// The API call's error.
pub async fn list_owned<K>(client: &Client, ns: &str, pipeline: &str, owner_uid: &str) -> Result<Vec<K>, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_PIPELINE}={pipeline}");
    let listed = api.list(&ListParams::default().labels(&selector)).await?;
    Ok(listed.items.into_iter().filter(|o| o.owner_references().iter().any(|r| r.uid == owner_uid)).collect())
}

/// Deletes object `name` of kind `K` in `ns`; its dependents (a Deployment's ReplicaSets and pods)
/// are removed by the garbage collector. Returns `false` when there was no such object.
///
/// # Errors
/// The API call's error other than 404.
pub async fn delete<K>(client: &Client, ns: &str, name: &str) -> Result<bool, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Adds `finalizer` to the resource unless it is there. Conditional on the resource version the
/// operator read: a concurrent change makes it fail with 409 Conflict (and the next reconcile reads
/// afresh).
///
/// # Errors
/// The API call's error.
pub async fn add_finalizer(client: &Client, flow: &AnkkaFlow, finalizer: &str) -> Result<(), kube::Error> {
    let mut finalizers = flow.finalizers().to_vec();
    if finalizers.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    finalizers.push(finalizer.to_string());
    write_finalizers(client, flow, finalizers).await
}

/// Removes `finalizer` from the resource if it is there; conditional as [`add_finalizer`].
///
/// # Errors
/// The API call's error.
pub async fn remove_finalizer(client: &Client, flow: &AnkkaFlow, finalizer: &str) -> Result<(), kube::Error> {
    let finalizers: Vec<String> = flow.finalizers().iter().filter(|f| *f != finalizer).cloned().collect();
    if finalizers.len() == flow.finalizers().len() {
        return Ok(());
    }
    write_finalizers(client, flow, finalizers).await
}

async fn write_finalizers(client: &Client, flow: &AnkkaFlow, finalizers: Vec<String>) -> Result<(), kube::Error> {
    let ns = flow.namespace().unwrap_or_default();
    let api: Api<AnkkaFlow> = Api::namespaced(client.clone(), &ns);
    let patch = serde_json::json!({
        "metadata": { "finalizers": finalizers, "resourceVersion": flow.resource_version() }
    });
    let pp = PatchParams { field_manager: Some(OPERATOR_FIELD_MANAGER.into()), ..Default::default() };
    api.patch(&flow.name_any(), &pp, &Patch::Merge(&patch)).await?;
    Ok(())
}

/// What the operator may know of a Secret a built-in streamlet names: its keys and its
/// `resourceVersion`, never its values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretKeys {
    /// The keys of its `data` and `stringData`.
    pub keys: BTreeSet<String>,
    /// Its `resourceVersion`.
    pub resource_version: String,
}

/// The keys and `resourceVersion` of Secret `name` in `ns`, or `None` when there is none. The
/// values are dropped here and never returned, logged or kept.
///
/// # Errors
/// The API call's error other than 404 (for example 403).
pub async fn secret_keys(client: &Client, ns: &str, name: &str) -> Result<Option<SecretKeys>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let Some(secret) = api.get_opt(name).await? else {
        return Ok(None);
    };
    let mut keys: BTreeSet<String> = secret.data.unwrap_or_default().into_keys().collect();
    keys.extend(secret.string_data.unwrap_or_default().into_keys());
    Ok(Some(SecretKeys { keys, resource_version: secret.metadata.resource_version.unwrap_or_default() }))
}
