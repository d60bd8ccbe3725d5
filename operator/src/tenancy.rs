//! The operator's side of the tenancy rules, which live in `flow_core::connection` and
//! `flow_core::tenancy`: it observes (the cluster Secrets, every `AnkkaFlow` it watches) and applies
//! (events, status); it decides nothing itself.

use std::sync::Arc;

use flow_adapters::kube as k;
use flow_core::connection::Clusters;
use flow_core::events::Event;
use flow_core::resource::AnkkaFlow;
use flow_core::tenancy::{self, FlowRef, Pipeline, SharedGroup};
use kube::ResourceExt;

use crate::context::{Context, Error};

/// The groups of `flow` that another `AnkkaFlow` in `all` maps to on the same Kafka cluster.
pub fn shared_groups(flow: &AnkkaFlow, all: &[Arc<AnkkaFlow>], clusters: &Clusters) -> Vec<SharedGroup> {
    let ns = flow.namespace().unwrap_or_default();
    let name = flow.name_any();
    let me = Pipeline { namespace: &ns, name: &name, spec: &flow.spec };
    // Only a resource of the same pipeline id can map to the same groups.
    let same: Vec<&Arc<AnkkaFlow>> = all.iter().filter(|f| f.spec.pipeline == flow.spec.pipeline).collect();
    let keys: Vec<(String, String)> = same.iter().map(|f| (f.namespace().unwrap_or_default(), f.name_any())).collect();
    let others: Vec<Pipeline<'_>> =
        same.iter().zip(&keys).map(|(f, (namespace, name))| Pipeline { namespace, name, spec: &f.spec }).collect();
    tenancy::shared_groups(me, &others, clusters)
}

/// Records a `ConsumerGroupShared` Warning on `flow` and on each other `AnkkaFlow` that shares one
/// of its consumer groups (from the operator's caches of the `AnkkaFlow`s it watches: with
/// `FLOW_WATCH_NAMESPACE`, those of the watched namespaces only), so that both sides learn it from
/// whichever reconcile sees it first. Events already recorded are not repeated.
pub async fn warn_shared_groups(ctx: &Context, flow: &AnkkaFlow, clusters: &Clusters) {
    // Right after the start, the caches may not have listed every resource yet.
    let ready = futures::future::join_all(ctx.flows.iter().map(|store| store.wait_until_ready()));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ready).await;
    let all: Vec<Arc<AnkkaFlow>> = ctx.flows.iter().flat_map(|store| store.state()).collect();
    let shared = shared_groups(flow, &all, clusters);
    if shared.is_empty() {
        return;
    }
    let me = FlowRef { namespace: flow.namespace().unwrap_or_default(), name: flow.name_any() };
    for s in shared {
        for other in &s.others {
            record(ctx, flow, &tenancy::shared_group_event(&s.group, other, s.allowed)).await;
            let found =
                all.iter().find(|f| f.namespace().as_deref() == Some(&other.namespace) && f.name_any() == other.name);
            if let Some(o) = found {
                record(ctx, o, &tenancy::shared_group_event(&s.group, &me, s.allowed)).await;
            }
        }
    }
}

/// Why a fresh reset request `id` of `flow`, targeting `groups`, is refused because another
/// `AnkkaFlow` maps to one of them on the same cluster, in every namespace the operator watches.
/// The `AnkkaFlow`s come from the controllers' caches once they have listed their namespaces (the
/// watch keeps them within milliseconds of the API server, as close as a fresh list would be by the
/// time it is used), and are listed from the API server before that, so that a cache that has not
/// synced never lets one through.
///
/// # Errors
/// The `AnkkaFlow`s or the cluster Secrets could not be read.
pub async fn shared_reset_refusal(
    ctx: &Context,
    flow: &AnkkaFlow,
    id: &str,
    groups: &[flow_core::names::GroupId],
) -> Result<Option<String>, Error> {
    if groups.is_empty() {
        return Ok(None);
    }
    let all: Vec<Arc<AnkkaFlow>> = match ctx.flows_listed() {
        true => ctx.flows.iter().flat_map(kube::runtime::reflector::Store::state).collect(),
        false => {
            crate::scope::Scope::of(&ctx.settings).list_flows(&ctx.client).await?.into_iter().map(Arc::new).collect()
        }
    };
    let clusters = ctx.clusters.get().await?;
    let shared = shared_groups(flow, &all, &clusters);
    Ok(tenancy::reset_refusal(id, groups, &shared))
}

/// How long an event recorded by [`record`] is not asked for again.
const RECORDED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Records a Warning `event` about `flow`, and logs it the first time only: reconciles repeat these
/// events, the API server keeps one of each (see `flow_adapters::kube::record_event`), and this
/// instance does not ask again for [`RECORDED_FOR`] (events expire, so it asks again after that). A
/// failure to record (for example no RBAC grant for events) is logged with the event's text, never
/// fatal, and not retried sooner either.
async fn record(ctx: &Context, flow: &AnkkaFlow, event: &Event) {
    let ns = flow.namespace().unwrap_or_default();
    let name = flow.name_any();
    let key = format!("{ns}/{}", event.name_for(&name));
    let now = std::time::Instant::now();
    {
        let mut recorded = ctx.recorded.lock().unwrap_or_else(|p| p.into_inner());
        if recorded.get(&key).is_some_and(|at| now.duration_since(*at) < RECORDED_FOR) {
            return;
        }
        recorded.retain(|_, at| now.duration_since(*at) < RECORDED_FOR);
    }
    match k::record_event(&ctx.client, flow, event, &ctx.settings.instance).await {
        Ok(true) => tracing::warn!("{ns}/{name}: {}: {}", event.reason, event.note),
        Ok(false) => {}
        // Logged once, with what the event would have said; not asked again for a while either.
        Err(e) => {
            tracing::warn!(error = %e, "{ns}/{name}: {}: {} (not recorded as an event)", event.reason, event.note)
        }
    }
    ctx.recorded.lock().unwrap_or_else(|p| p.into_inner()).insert(key, now);
}
