//! The record of the topics the operator created for each `AnkkaFlow` (what it means and why it is
//! kept where it is: `flow_core::render::owners`): read before a reconcile decides, written while
//! the plan creates topics, deleted with the resource, and swept once its resource is gone.
//!
//! Every record is a ConfigMap in the operator's own namespace, written with JSON merge patches
//! of the keys that changed, so that an administrator's edit of another key is never overwritten.
//! The reconciles of one resource never run at once (kube's controller queues them), so one
//! resource's record has one writer.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use flow_core::names::{LABEL_MANAGED_BY, MANAGED_BY};
use flow_core::render::Owner;
use flow_core::render::owners::{self, ANNOTATION_OWNER, LABEL_OWNER_UID, Record};
use flow_core::resource::AnkkaFlow;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use crate::api::{Error, MayAct, timed};
use crate::context::Context;

/// A resource's record as read, and whether its ConfigMap exists.
#[derive(Clone, Debug, Default)]
pub struct Stored {
    /// The record; empty when there is none.
    pub record: Record,
    /// Whether the ConfigMap exists.
    pub exists: bool,
}

/// The records' API: ConfigMaps of the operator's namespace.
fn api(ctx: &Context) -> Api<ConfigMap> {
    Api::namespaced(ctx.client.clone(), ctx.settings.operator_namespace())
}

/// The owner of `flow`'s record.
fn owner(flow: &AnkkaFlow) -> Result<Owner, Error> {
    Owner::of(flow).ok_or(Error::Incomplete("uid"))
}

/// Reads the record of `flow` (needs a client). Tokens that prove nothing (an administrator's
/// typo) are logged and left out.
///
/// # Errors
/// The API server's, other than the record not existing.
pub async fn read(ctx: &Context, flow: &AnkkaFlow) -> Result<Stored, Error> {
    let owner = owner(flow)?;
    let name = owners::record_name(&owner.uid);
    let Some(cm) = timed(api(ctx).get_opt(&name)).await? else { return Ok(Stored::default()) };
    let (record, problems) = Record::from_data(&cm.data.unwrap_or_default());
    for problem in problems {
        tracing::warn!(
            namespace = %owner.namespace, name = %owner.name, record = %name, %problem,
            "the record of the topics the operator created has an entry that proves nothing; it is left out"
        );
    }
    Ok(Stored { record, exists: true })
}

/// Writes one resource's record through a reconcile's plan, keeping what it last wrote.
pub struct Writer {
    api: Api<ConfigMap>,
    owner: Owner,
    namespace: String,
    state: Mutex<Stored>,
    may_act: MayAct,
}

/// Attempts of the write that records a created topic's id: losing it costs the operator its proof
/// that it created the topic (it is then adopted read-only), so a failed call is tried again.
const RECORD_ATTEMPTS: u32 = 3;

impl Writer {
    /// A writer of `flow`'s record, which was `stored` when read.
    ///
    /// # Errors
    /// [`Error::Incomplete`] when the resource has no uid.
    pub fn new(ctx: &Context, flow: &AnkkaFlow, stored: Stored) -> Result<Writer, Error> {
        Ok(Writer {
            api: api(ctx),
            owner: owner(flow)?,
            namespace: ctx.settings.operator_namespace().to_string(),
            state: Mutex::new(stored),
            may_act: ctx.may_act.clone(),
        })
    }

    fn stored(&self) -> Stored {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Writes `record`: creates the ConfigMap the first time, else merge-patches the keys that
    /// changed since the last write or read.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when this instance may not act; the API server's refusal.
    pub async fn write(&self, record: &Record) -> Result<(), Error> {
        self.may_act.check()?;
        let stored = self.stored();
        if stored.exists {
            if let Some(patch) = record.patch(&stored.record) {
                let name = owners::record_name(&self.owner.uid);
                timed(self.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
            }
        } else {
            let cm = record.config_map(&self.owner, &self.namespace);
            match timed(self.api.create(&PostParams::default(), &cm)).await {
                Ok(_) => {}
                // Created meanwhile (by an administrator, say): the keys that differ, then.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let name = owners::record_name(&self.owner.uid);
                    let patch = serde_json::json!({ "data": record.data() });
                    timed(self.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Stored { record: record.clone(), exists: true };
        Ok(())
    }

    /// Records that the operator created topic `name`, of topic id `id` (tried
    /// [`RECORD_ATTEMPTS`] times).
    ///
    /// # Errors
    /// As [`Writer::write`], from the last attempt.
    pub async fn created(&self, name: &str, id: &str) -> Result<(), Error> {
        let mut record = self.stored().record;
        record.created(name, id);
        let mut attempt = 1;
        loop {
            match self.write(&record).await {
                Err(e) if attempt < RECORD_ATTEMPTS && !matches!(e, Error::LeaseLost) => {
                    tracing::warn!(topic = name, error = %e, attempt, "could not record a created topic; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    /// Drops the intent of topic `name`: its creation found it there already.
    ///
    /// # Errors
    /// As [`Writer::write`].
    pub async fn drop_intent(&self, name: &str) -> Result<(), Error> {
        let mut record = self.stored().record;
        record.drop_intent(name);
        self.write(&record).await
    }
}

/// Deletes the record of the resource of uid `uid` (one already gone is fine): its resource is
/// being deleted, and what it names is deleted or left in Kafka for good.
///
/// # Errors
/// [`Error::LeaseLost`] when this instance may not act; the API server's refusal.
pub async fn forget(ctx: &Context, uid: &str) -> Result<(), Error> {
    ctx.may_act.check()?;
    match timed(api(ctx).delete(&owners::record_name(uid), &DeleteParams::default())).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// How often the records of resources that are gone are looked for.
const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// Sweeps the records of resources that are gone, at start and then every [`SWEEP_INTERVAL`]: a
/// resource deleted with `onDelete.managedTopics: Keep` has no finalizer, so its deletion never
/// reaches a reconcile.
pub fn spawn_sweeper(ctx: std::sync::Arc<Context>) {
    tokio::spawn(async move {
        loop {
            match sweep(&ctx).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(records = n, "forgot the records of the topics created for resources that are gone")
                }
                Err(e) => tracing::warn!(error = %e, "could not sweep the records of the topics the operator created"),
            }
            tokio::time::sleep(SWEEP_INTERVAL).await;
        }
    });
}

/// One sweep (needs a client): every record labelled as the operator's is read back against the
/// resource its annotation names, by a fresh read of that resource; a record whose resource is gone
/// (or has another uid now) is deleted. A record the operator cannot place (no annotation), or whose
/// resource it cannot read, stays. Returns how many were deleted.
///
/// # Errors
/// The records cannot be listed.
pub async fn sweep(ctx: &Context) -> Result<usize, Error> {
    let selector = format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_OWNER_UID}");
    let listed = timed(api(ctx).list_metadata(&ListParams::default().labels(&selector))).await?;
    let mut forgotten = 0;
    for meta in listed.items {
        let Some(uid) = meta.labels().get(LABEL_OWNER_UID).cloned() else { continue };
        let annotations: &BTreeMap<String, String> = meta.annotations();
        let Some((ns, name)) = annotations.get(ANNOTATION_OWNER).and_then(|a| owners::owner_of(a)) else { continue };
        let flows: Api<AnkkaFlow> = Api::namespaced(ctx.client.clone(), ns);
        let found = match timed(flows.get_metadata_opt(name)).await {
            Ok(found) => found.and_then(|m| m.uid()),
            Err(e) => {
                tracing::debug!(namespace = ns, name, error = %e, "cannot read the owner of a record; it stays");
                continue;
            }
        };
        if owners::left_over(&uid, found.as_deref()) && meta.name_any() == owners::record_name(&uid) {
            forget(ctx, &uid).await?;
            forgotten += 1;
        }
    }
    Ok(forgotten)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::{Method, StatusCode};
    use serde_json::json;

    use super::*;
    use crate::connections::fake::FakeKafka;
    use crate::fixtures::{self, ApiServer};

    fn record_meta(uid: &str, owner: &str) -> serde_json::Value {
        json!({
            "metadata": {
                "name": format!("flow-topics-{uid}"),
                "namespace": "ankka-flow",
                "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_OWNER_UID: uid},
                "annotations": {ANNOTATION_OWNER: owner}
            }
        })
    }

    #[tokio::test]
    async fn a_sweep_forgets_only_the_records_whose_resource_is_gone() {
        let (ctx, handle) = fixtures::context(Arc::new(FakeKafka::default()));
        let server = tokio::spawn(async move {
            let mut api = ApiServer(handle);
            let list = api
                .expect(
                    Method::GET,
                    "/api/v1/namespaces/ankka-flow/configmaps",
                    StatusCode::OK,
                    json!({
                        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {},
                        "items": [
                            record_meta("uid-alive", "shop/cart"),
                            record_meta("uid-gone", "shop/old"),
                            record_meta("uid-replaced", "shop/again"),
                            record_meta("uid-unreadable", "team/secret"),
                        ]
                    }),
                )
                .await;
            assert!(list.uri.contains("labelSelector=app.kubernetes.io%2Fmanaged-by%3Dankka-flow%2Cflow.ankka.thinkmorestupidless.com%2Fowner-uid"), "{}", list.uri);
            let flow = |uid: &str| json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {"uid": uid}});
            let gone =
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
            let forbidden =
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403});
            let base = "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1/namespaces";
            // Alive: it stays.
            api.expect(Method::GET, &format!("{base}/shop/ankkaflows/cart"), StatusCode::OK, flow("uid-alive")).await;
            // Gone: forgotten.
            api.expect(Method::GET, &format!("{base}/shop/ankkaflows/old"), StatusCode::NOT_FOUND, gone.clone()).await;
            api.expect(
                Method::DELETE,
                "/api/v1/namespaces/ankka-flow/configmaps/flow-topics-uid-gone",
                StatusCode::OK,
                json!({}),
            )
            .await;
            // Another resource under the name: forgotten.
            api.expect(Method::GET, &format!("{base}/shop/ankkaflows/again"), StatusCode::OK, flow("uid-new")).await;
            api.expect(
                Method::DELETE,
                "/api/v1/namespaces/ankka-flow/configmaps/flow-topics-uid-replaced",
                StatusCode::OK,
                json!({}),
            )
            .await;
            // Cannot be read: it stays.
            api.expect(Method::GET, &format!("{base}/team/ankkaflows/secret"), StatusCode::FORBIDDEN, forbidden).await;
            api.done().await;
        });
        let forgotten = tokio::time::timeout(Duration::from_secs(10), sweep(&ctx)).await.expect("the sweep ends");
        server.await.expect("the scenario holds");
        assert_eq!(forgotten.expect("swept"), 2);
    }
}
