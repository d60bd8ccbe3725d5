//! What every reconcile shares, passed in: the API server's room (the client, whether this instance
//! may act, the event recorder; see `crate::api`), Kafka's, the ledger, the caches, the settings and
//! the metrics.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use flow_core::resource::AnkkaFlow;
use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::api::{MayAct, Recorder};
use crate::connections::{Kafka, Parts};
use crate::metrics::Metrics;
use crate::settings::Settings;

/// An `AnkkaFlow` as the operator watches and lists them: one that cannot be read as an `AnkkaFlow`
/// (a field of another type than the CRD's version says, say) is kept as such, with its metadata,
/// so that it never fails a watch or a list of the others (see `crate::controller`).
pub type Guarded = kube::core::DeserializeGuard<AnkkaFlow>;

/// Shared state of all reconciles.
pub struct Context {
    /// The Kubernetes client of every call but the watches (each answers within
    /// [`crate::api::API_TIMEOUT`]).
    pub client: Client,
    /// Whether this instance may act now (it holds the Lease with a margin, or runs without leader
    /// election): checked before every commit, event, status write and done write.
    pub may_act: MayAct,
    /// The one event recorder.
    pub events: Recorder,
    /// The Kafka cluster Secrets, through their cache (see `crate::clusters`).
    pub clusters: crate::clusters::ClusterSecrets,
    /// The reset ledger (a cache: see `crate::ledger`).
    pub ledger: crate::ledger::Ledger,
    /// The operator's settings.
    pub settings: Settings,
    /// The OAuth token endpoints an administrator allows topics with their own brokers to use
    /// (`--oauth-token-endpoints`).
    pub token_endpoints: flow_core::connection::TokenEndpoints,
    /// Kafka: the operator's one pool of clients, kept between reconciles, and topic administration
    /// over it (see `crate::connections`).
    pub kafka: Kafka,
    /// Failed reconciles in a row, per resource: the retry backoff's exponent.
    pub failures: Mutex<HashMap<ObjectRef<Guarded>, u32>>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// The controllers' caches of the `AnkkaFlow`s this instance reconciles (one per watched
    /// namespace, or one of every namespace), as last seen: what the lag sampler reads, and the other
    /// resources a consumer group may be shared with.
    pub flows: Vec<kube::runtime::reflector::Store<Guarded>>,
    /// The controllers' caches of the Deployments the operator manages (slimmed, see
    /// `crate::observe::slim_deployment`), one per watched namespace or one of every namespace.
    pub deployments: Vec<kube::runtime::reflector::Store<k8s_openapi::api::apps::v1::Deployment>>,
    /// When each resource's catch-up lag was last measured: status writes trigger reconciles, and
    /// the lag is measured at most once per lag interval whatever triggers them.
    pub lag_measured: Mutex<HashMap<ObjectRef<AnkkaFlow>, std::time::Instant>>,
    /// The shared reconcile slots (`FLOW_OPERATOR_MAX_CONCURRENT_RECONCILES`): held while a
    /// reconcile works with the API server, never while it waits for Kafka (see `crate::slots`).
    pub slots: crate::slots::Slots,
    /// The Kafka cluster ids learned so far, per connection (`crate::tenancy` asks for them).
    pub cluster_ids: crate::cluster_ids::ClusterIds,
    /// SIGTERM or SIGINT: a reset that sleeps until its next attempt ends its run then, instead of
    /// holding the operator's shutdown until its retries are over (`crate::reset`).
    pub stop: crate::leader::Stop,
}

impl Context {
    /// The deadline of each Kafka request (`FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS`).
    pub fn kafka_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settings.kafka_request_timeout_seconds)
    }

    /// Whether each of the controllers' caches of `AnkkaFlow`s has listed its namespaces once.
    pub fn flows_listed(&self) -> bool {
        !self.flows.is_empty() && self.flows.iter().all(crate::api::listed)
    }

    /// `flow` as the controllers' caches hold it now, when they have listed their namespaces once
    /// and hold it (the same object: same uid) as an `AnkkaFlow`.
    pub fn cached(&self, flow: &AnkkaFlow) -> Option<AnkkaFlow> {
        let key = guarded_ref(flow);
        self.flows_listed()
            .then(|| self.flows.iter().find_map(|s| s.get(&key)))
            .flatten()
            .filter(|f| kube::ResourceExt::uid(f.as_ref()) == kube::ResourceExt::uid(flow))
            .and_then(|f| f.0.as_ref().ok().cloned())
    }

    /// Every `AnkkaFlow` in the controllers' caches, as last seen (those that could not be read as
    /// one too: `.0` is an error for them).
    pub fn cached_flows(&self) -> Vec<Arc<Guarded>> {
        self.flows.iter().flat_map(kube::runtime::reflector::Store::state).collect()
    }
}

/// The wall clock, as the reset's machine takes it (milliseconds since the Unix epoch).
pub fn now() -> flow_core::reset::Timestamp {
    // The mocked-API tests move the wall clock with tokio's paused clock (`crate::clock`).
    #[cfg(test)]
    if let Some(now) = crate::clock::now() {
        return now;
    }
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    flow_core::reset::Timestamp(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The key of `flow` in the controllers' caches.
pub fn guarded_ref(flow: &AnkkaFlow) -> ObjectRef<Guarded> {
    let key = ObjectRef::new(&kube::ResourceExt::name_any(flow));
    match flow.metadata.namespace.as_deref() {
        Some(ns) => key.within(ns),
        None => key,
    }
}

impl<'a> From<&'a Context> for Parts<'a> {
    fn from(ctx: &'a Context) -> Self {
        Parts { clusters: &ctx.clusters, kafka: &ctx.kafka, token_endpoints: &ctx.token_endpoints }
    }
}
