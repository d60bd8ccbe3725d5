//! What every reconcile shares: the clients, the ledger, the settings and the metrics, and the one
//! error type a reconcile returns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use flow_core::resource::AnkkaFlow;
use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::connections::{Kafka, Parts};
use crate::metrics::Metrics;
use crate::settings::Settings;

/// Why a reconcile failed. Each is retried with backoff, and shows in the resource's `Applied`
/// condition and in a Warning event whose reason is its [`Error::category`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {}", kube_reason(.0))]
    Kube(#[from] kube::Error),
    /// A step of the plan was rejected (by the API server: a quota, an admission webhook,
    /// validation, RBAC; or by Kafka); the steps after it were not carried out. Already reported
    /// (event and condition) when it is returned.
    #[error("{0}")]
    Apply(String),
    /// A managed topic could not be deleted while the resource is deleted (`onDelete.managedTopics:
    /// Delete`); the finalizer stays until it can.
    #[error("{0}")]
    TopicDelete(String),
    /// A task of the reset (a Kafka call, a status write) stopped without a result (it panicked);
    /// the request is rebuilt from durable state on the retry.
    #[error("a task of the reset stopped without a result: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The resource lacks a field the API server always sets.
    #[error("the resource has no {0}")]
    Incomplete(&'static str),
    /// This instance no longer holds the Lease with a margin: it must not act (see `crate::leader`).
    #[error("this operator no longer holds the Lease with a margin, so it does not act")]
    LeaseLost,
}

/// The API server's own words for a refused call (its status message and code), else the client's
/// error.
pub fn kube_reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

impl From<flow_core::render::plan::Incomplete> for Error {
    fn from(e: flow_core::render::plan::Incomplete) -> Self {
        Error::Incomplete(e.0)
    }
}

impl Error {
    /// A stable CamelCase category: the reason of the Warning event a failed reconcile records, and
    /// the value of the `error` label of the reconcile metrics. Never holds a value, so its
    /// cardinality is the number of variants.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "KubernetesApiFailed",
            Error::Apply(_) => flow_core::render::plan::REASON_APPLY_FAILED,
            Error::TopicDelete(_) => "TopicDeleteFailed",
            Error::Task(_) => "TaskFailed",
            Error::Incomplete(_) => "ResourceIncomplete",
            Error::LeaseLost => "LeaseLost",
        }
    }
}

/// Shared state of all reconciles.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
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
    pub failures: Mutex<HashMap<ObjectRef<AnkkaFlow>, u32>>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// The controllers' caches of the `AnkkaFlow`s this instance reconciles (one per watched
    /// namespace, or one of every namespace), as last seen: what the lag sampler reads, and the other
    /// resources a consumer group may be shared with.
    pub flows: Vec<kube::runtime::reflector::Store<AnkkaFlow>>,
    /// The controllers' caches of the Deployments the operator manages (slimmed, see
    /// `crate::observe::slim_deployment`), one per watched namespace or one of every namespace.
    pub deployments: Vec<kube::runtime::reflector::Store<k8s_openapi::api::apps::v1::Deployment>>,
    /// When each refusal or shared-group event (by namespace and event name) was last recorded or
    /// found recorded: reconciles repeat them, and asking the API server again each time would
    /// cost a request per event per reconcile.
    pub recorded: Mutex<HashMap<String, std::time::Instant>>,
    /// When each resource's catch-up lag was last measured: status writes trigger reconciles, and
    /// the lag is measured at most once per lag interval whatever triggers them.
    pub lag_measured: Mutex<HashMap<ObjectRef<AnkkaFlow>, std::time::Instant>>,
    /// The shared reconcile slots (`FLOW_OPERATOR_MAX_CONCURRENT_RECONCILES`): held while a
    /// reconcile works with the API server, never while it waits for Kafka (see `crate::slots`).
    pub slots: crate::slots::Slots,
    /// The Kafka cluster ids learned so far, per connection (see `crate::tenancy`).
    pub cluster_ids: crate::tenancy::ClusterIds,
}

impl Context {
    /// The deadline of each Kafka request (`FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS`).
    pub fn kafka_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settings.kafka_request_timeout_seconds)
    }

    /// Whether each of the controllers' caches of `AnkkaFlow`s has listed its namespaces once.
    pub fn flows_listed(&self) -> bool {
        !self.flows.is_empty() && self.flows.iter().all(listed)
    }

    /// `flow` as the controllers' caches hold it now, when they have listed their namespaces once
    /// and hold it (the same object: same uid).
    pub fn cached(&self, flow: &AnkkaFlow) -> Option<Arc<AnkkaFlow>> {
        let key = ObjectRef::from_obj(flow);
        self.flows_listed()
            .then(|| self.flows.iter().find_map(|s| s.get(&key)))
            .flatten()
            .filter(|f| kube::ResourceExt::uid(f.as_ref()) == kube::ResourceExt::uid(flow))
    }
}

/// Whether the watch behind `store` has listed its objects once (asked without waiting): until then
/// the operator reads from the API server instead.
pub fn listed<K>(store: &kube::runtime::reflector::Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    futures::FutureExt::now_or_never(store.wait_until_ready()).is_some_and(|r| r.is_ok())
}

impl<'a> From<&'a Context> for Parts<'a> {
    fn from(ctx: &'a Context) -> Self {
        Parts { clusters: &ctx.clusters, kafka: &ctx.kafka, token_endpoints: &ctx.token_endpoints }
    }
}
