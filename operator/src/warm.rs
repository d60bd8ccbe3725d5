//! Kafka clients built ahead of a reset, so that the first reset after a start does not pay for
//! them on its critical path (a new client's bootstrap, metadata and coordinator connection: 60-120
//! ms on the test bed, more over TLS; docs/performance.md, "Clients built ahead").
//!
//! When a pipeline with a stopped streamlet (0 replicas in its spec: a reset may follow, as on the
//! page's path, which stops the streamlets first) is reconciled with no reset pending, the clients
//! a reset of all its groups would
//! use (one per group, in the lane the reset driver gives it, at most `LANES`) are built in a task of
//! their own, and each reads its group's committed offsets once: that connects it to the brokers and
//! to the group's coordinator. The reconcile never waits for it; a failure is logged at debug level
//! only (the reset, or the reconcile's own topic checks, report it with its reason).
//!
//! Only topics on a cluster Secret's connection are warmed (no `bootstrapServers` or
//! `connectionConfig` of their own): the administrator's clusters are few, while a tenant could
//! name a new connection in every topic, and each would cost threads and sockets for nothing. Each
//! pipeline is warmed at most once per `AGAIN`, which is shorter than the time after which the pool
//! closes an unused client, so that clients stay connected while the pipeline is reconciled.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use flow_adapters::kafka;
use flow_core::resource::AnkkaFlow;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::ResourceExt;

use crate::connections::{Connections, LANES};
use crate::context::Context;

/// How often a pipeline's clients are built or touched again at most: half the pool's idle time.
const AGAIN: Duration = Duration::from_secs(300);

/// When each pipeline (by uid) was last warmed.
static WARMED: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Whether pipeline `uid` is due to be warmed at `now`; if so, marks it warmed then. Forgets the
/// pipelines warmed longer than [`AGAIN`] ago, so that the map holds the recent ones only.
fn due(uid: &str, now: Instant) -> bool {
    let mut warmed = WARMED.lock().unwrap_or_else(|p| p.into_inner());
    warmed.retain(|_, at| now.duration_since(*at) < AGAIN);
    if warmed.contains_key(uid) {
        return false;
    }
    warmed.insert(uid.to_string(), now);
    true
}

/// Builds, in the background, the clients a reset of `flow` would use (see the module
/// documentation), unless none of its streamlets is stopped (a thousand running pipelines cost no
/// Kafka call at a start), a reset is pending (its drive builds them itself) or they were built
/// within [`AGAIN`].
pub fn ahead(ctx: &Arc<Context>, flow: &Arc<AnkkaFlow>) {
    let (request, done) = flow_adapters::kube::reset_annotations(flow);
    let stopped = flow.spec.streamlets.iter().any(|s| s.replicas == 0);
    if !stopped || flow_core::request::pending(request, done) || flow.metadata.deletion_timestamp.is_some() {
        return;
    }
    let Some(uid) = flow.uid() else { return };
    if !due(&uid, Instant::now()) {
        return;
    }
    let (ctx, flow) = (Arc::clone(ctx), Arc::clone(flow));
    tokio::spawn(async move {
        let started = Instant::now();
        let mut connections = Connections::new(ctx.as_ref());
        // In the reset driver's order: a request for every group gives each its place as its lane.
        let inlets = flow_core::targets::select(&flow.spec, &[]).unwrap_or_default().into_iter().flat_map(|t| t.inlets);
        let mut reads = FuturesUnordered::new();
        for (lane, inlet) in inlets.enumerate().take(LANES) {
            let own = flow.spec.topic(&inlet.topic_id).is_none_or(|t| {
                t.bootstrap_servers.as_deref().is_some_and(|s| !s.trim().is_empty()) || !t.connection_config.is_empty()
            });
            if own {
                continue;
            }
            if let Ok(client) = connections.client_in(&flow, &inlet.topic_id, lane).await {
                reads.push(kafka::read_committed(client, inlet));
            }
        }
        let (mut built, mut failed) = (0, 0);
        while let Some(read) = reads.next().await {
            match read {
                Ok(_) => built += 1,
                Err(_) => failed += 1,
            }
        }
        tracing::debug!(
            namespace = flow.namespace().unwrap_or_default(),
            name = %flow.name_any(),
            built,
            failed,
            ms = started.elapsed().as_millis(),
            "Kafka clients built ahead of a reset"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipeline_is_warmed_once_per_period() {
        let t0 = Instant::now();
        assert!(due("warm-test-uid", t0));
        assert!(!due("warm-test-uid", t0 + Duration::from_secs(10)), "warmed already");
        assert!(due("warm-test-other", t0 + Duration::from_secs(10)), "another pipeline");
        assert!(due("warm-test-uid", t0 + AGAIN), "again after the period");
    }
}
