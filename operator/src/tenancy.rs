//! The operator's side of the tenancy rules, which live in `flow_core::connection` and
//! `flow_core::tenancy`: it observes (the cluster Secrets, every `AnkkaFlow` it watches, and each
//! Kafka cluster's id, asked from the cluster itself) and applies (events, status); it decides
//! nothing itself.

use flow_adapters::kafka;
use flow_core::connection::{Clusters, KafkaConnection};
use flow_core::names::GroupId;
use flow_core::resource::AnkkaFlow;
use flow_core::tenancy::{self, ClusterId, FlowRef, Pipeline, SharedGroup, Verdict};
use kube::ResourceExt;

use crate::api::{Error, timed};
use crate::context::Context;

/// Asks Kafka for the cluster id over each of `conns` not known yet, all at once, each in its
/// connection's bulkhead and within twice the request deadline (a client's first metadata, then
/// the id), over the pooled group client of lane 0 (with `home` as its home group when it is new:
/// one of the groups the check is about, which every connection involved serves). A connection
/// that does not answer in time is remembered as unknown, with why; the check then decides nothing
/// from it.
pub async fn learn(ctx: &Context, conns: Vec<KafkaConnection>, home: &GroupId) -> Vec<(KafkaConnection, ClusterId)> {
    let known = ctx.cluster_ids.known();
    let asked = conns.into_iter().filter(|c| !known.iter().any(|(k, _)| k == c)).map(|conn| async move {
        let bound = ctx.kafka_deadline() * 2;
        let id = match tokio::time::timeout(bound, ask(ctx, &conn, home)).await {
            Ok(Ok(id)) => ClusterId::Known(id),
            Ok(Err(f)) => ClusterId::Unknown(f.reason),
            Err(_) => ClusterId::Unknown(format!("no answer within {} s", bound.as_secs())),
        };
        tracing::debug!(brokers = %conn.bootstrap_servers, ?id, "Kafka cluster id");
        ctx.cluster_ids.remember(conn, id);
    });
    futures::future::join_all(asked).await;
    ctx.cluster_ids.known()
}

/// The cluster id over `conn`, in its turn of the connection's bulkhead.
async fn ask(ctx: &Context, conn: &KafkaConnection, home: &GroupId) -> Result<String, flow_core::reset::KafkaFailure> {
    let client = ctx.kafka.group_client(conn, 0, || Ok(home.clone()))?;
    let gate = ctx.kafka.gate(conn);
    // Moved into the call: a blocking call outlives a dropped wait, and keeps its turn until it ends.
    let call = async move {
        let _turn = gate.enter().await?;
        kafka::cluster_id(client).await
    };
    tokio::spawn(call).await.unwrap_or_else(|e| Err(flow_core::reset::KafkaFailure::unavailable(e.to_string())))
}

/// `flow` and every `AnkkaFlow` of `all` of its pipeline id, as the check sees them, with the
/// cluster Secrets, calling `f` with them.
fn with_pipelines<T>(flow: &AnkkaFlow, all: &[&AnkkaFlow], f: impl FnOnce(Pipeline<'_>, &[Pipeline<'_>]) -> T) -> T {
    let ns = flow.namespace().unwrap_or_default();
    let name = flow.name_any();
    let me = Pipeline { namespace: &ns, name: &name, spec: &flow.spec };
    // Only a resource of the same pipeline id can map to the same groups.
    let same: Vec<&AnkkaFlow> = all.iter().copied().filter(|f| f.spec.pipeline == flow.spec.pipeline).collect();
    let keys: Vec<(String, String)> = same.iter().map(|f| (f.namespace().unwrap_or_default(), f.name_any())).collect();
    let others: Vec<Pipeline<'_>> =
        same.iter().zip(&keys).map(|(f, (namespace, name))| Pipeline { namespace, name, spec: &f.spec }).collect();
    f(me, &others)
}

/// The groups of `flow` (of `groups`, when given) that another `AnkkaFlow` in `all` maps to on the
/// same Kafka cluster, or on one whose id could not be learned: the ids it needs are asked from
/// Kafka first (none in the common case, where no other resource has the pipeline's id).
async fn shared_groups(
    ctx: &Context,
    flow: &AnkkaFlow,
    all: &[&AnkkaFlow],
    clusters: &Clusters,
    groups: Option<&[GroupId]>,
) -> Vec<SharedGroup> {
    let needed =
        with_pipelines(flow, all, |me, others| tenancy::undecided(me, others, clusters, &ctx.token_endpoints, groups));
    let home = groups
        .and_then(|g| g.first().cloned())
        .or_else(|| flow_core::targets::select(&flow.spec, &[]).ok()?.first()?.inlets.first().map(|i| i.group.clone()));
    let known = match home {
        Some(home) if !needed.is_empty() => learn(ctx, needed, &home).await,
        _ => ctx.cluster_ids.known(),
    };
    let ids = |c: &KafkaConnection| known.iter().find(|(k, _)| k == c).map(|(_, id)| id.clone());
    with_pipelines(flow, all, |me, others| tenancy::shared_groups(me, others, clusters, &ctx.token_endpoints, &ids))
}

/// Records a `ConsumerGroupShared` Warning on `flow` and on each other `AnkkaFlow` that shares one
/// of its consumer groups on the same Kafka cluster (from the operator's caches of the `AnkkaFlow`s
/// it watches: with `FLOW_WATCH_NAMESPACE`, those of the watched namespaces only), so that both
/// sides learn it from whichever reconcile sees it first. Events already recorded are not repeated.
/// The cluster ids it needs are asked from Kafka (the caller holds no reconcile slot meanwhile).
pub async fn warn_shared_groups(ctx: &Context, flow: &AnkkaFlow, clusters: &Clusters) {
    // Right after the start, the caches may not have listed every resource yet.
    let ready = futures::future::join_all(ctx.flows.iter().map(|store| store.wait_until_ready()));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ready).await;
    let cached = ctx.cached_flows();
    let all: Vec<&AnkkaFlow> = cached.iter().filter_map(|f| f.0.as_ref().ok()).collect();
    let shared = shared_groups(ctx, flow, &all, clusters, None).await;
    if shared.is_empty() {
        return;
    }
    let me = FlowRef { namespace: flow.namespace().unwrap_or_default(), name: flow.name_any() };
    for s in shared {
        for other in &s.others {
            ctx.events.record_once(flow, &tenancy::shared_group_event(&s.group, other, s.allowed)).await;
            let found =
                all.iter().find(|f| f.namespace().as_deref() == Some(&other.namespace) && f.name_any() == other.name);
            if let Some(o) = found {
                ctx.events.record_once(*o, &tenancy::shared_group_event(&s.group, &me, s.allowed)).await;
            }
        }
    }
}

/// What the shared-group rule says of reset request `id` of `flow`, targeting `groups`: refused
/// when another `AnkkaFlow` maps to one of them on the same cluster, waiting when its cluster could
/// not be told apart, in every namespace the operator watches. Asked at every drive of a request,
/// resumed ones too: nothing of the status decides it. The `AnkkaFlow`s come from the controllers'
/// caches once they have listed their namespaces (the watch keeps them within milliseconds of the
/// API server, as close as a fresh list would be by the time it is used), and are listed from the
/// API server before that, so that a cache that has not synced never lets one through. Reading them
/// is bounded by the API timeout; asking Kafka for cluster ids by the Kafka deadlines.
///
/// # Errors
/// The `AnkkaFlow`s or the cluster Secrets could not be read.
pub async fn shared_reset_verdict(
    ctx: &Context,
    flow: &AnkkaFlow,
    id: &str,
    groups: &[GroupId],
) -> Result<Option<Verdict>, Error> {
    if groups.is_empty() {
        return Ok(None);
    }
    let read = async {
        let all = match ctx.flows_listed() {
            true => ctx.cached_flows(),
            false => crate::scope::Scope::of(&ctx.settings).list_flows(&ctx.client).await?,
        };
        Ok::<_, kube::Error>((all, ctx.clusters.get().await?))
    };
    // Its API calls answer within the client's timeout; this bounds the whole read.
    let (all, clusters) = timed(read).await?;
    let all: Vec<&AnkkaFlow> = all.iter().filter_map(|f| f.0.as_ref().ok()).collect();
    let shared = shared_groups(ctx, flow, &all, &clusters, Some(groups)).await;
    Ok(tenancy::reset_verdict(id, groups, &shared, flow_core::reset::WAIT_RECHECK))
}
