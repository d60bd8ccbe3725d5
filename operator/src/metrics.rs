//! Prometheus metrics of the operator, served with `/healthz` and `/readyz` on `--metrics-address`.
//!
//! Series and their labels (cardinality is bounded by what the cluster holds, never by requests;
//! docs/observe.md lists them for users):
//! - `ankka_flow_consumer_group_lag{namespace, pipeline, consumergroup, topic}`: records an inlet's
//!   consumer group has still to read, summed over the topic's partitions, for every inlet of every
//!   pipeline the operator watches; `namespace` and `pipeline` are the AnkkaFlow's, `consumergroup`
//!   the group `<pipeline>.<streamlet>.<inlet>` (the label name of kafka_exporter, so that rules
//!   written for it join ours; docs/observe.md says why), `topic` the Kafka topic name. One series
//!   per inlet; series of inlets that went away, or whose sample failed, are dropped at the next
//!   sample (the sampling metrics below say when that happens).
//! - `ankka_flow_consumer_group_lag_seconds{namespace, pipeline, consumergroup, topic}`: how long ago
//!   the oldest record the group has still to read was appended, estimated from the log end
//!   offsets seen at earlier samples (`flow_core::lag::LogEndHistory`); the largest over the
//!   partitions.
//! - `ankka_flow_consumer_group_partition_lag{..., partition}`,
//!   `ankka_flow_consumer_group_partition_lag_seconds{..., partition}`: the same per partition, only
//!   with `--lag-per-partition` (a series per partition can be far more than a scrape takes).
//! - `ankka_flow_consumer_group_rebuilding{namespace, pipeline, consumergroup}`: 1 while the group is
//!   under an intentional reset or rebuild (`flow_core::lag::rebuilding`), 0 otherwise; one series per
//!   inlet.
//! - `ankka_flow_lag_sample_errors_total{cluster}`, `ankka_flow_lag_last_success_timestamp_seconds{cluster}`:
//!   per Kafka connection (the cluster's name, or the bootstrap servers of a topic that names them
//!   itself), inlets whose lag could not be sampled, and when a sample over it last succeeded for
//!   at least one inlet (the connection works; one missing topic does not stop the clock).
//! - `ankka_flow_reconciles_total{outcome}`, `ankka_flow_reconcile_duration_seconds{outcome}`:
//!   reconciles by outcome, `success` or the error category (`KubernetesApiFailed`, ...), a handful
//!   of series.
//! - `ankka_flow_reset_groups_total{outcome}`: consumer groups finished by reset requests, `outcome`
//!   is `reset` or `failed` (two series).
//! - `ankka_flow_reset_catch_up_started_timestamp_seconds{namespace, pipeline, consumergroup}`: when a
//!   done reset finished, for each consumer group it moved that has not caught up yet (its lag not
//!   yet seen at 0); a group's series goes once it catches up. At most one series per inlet.
//! - `ankka_flow_reset_duration_seconds`: histogram, from when the operator first saw a request to
//!   when it finished.
//! - `ankka_flow_reset_requests_pending`: requests written and not yet done, over all pipelines.
//! - `ankka_flow_kafka_requests_total{request}`: requests the operator's group clients (the reset
//!   driver's and the lag sampler's) sent to the Kafka brokers, by request type (`Metadata`,
//!   `ListOffsets`, `OffsetFetch`, ...), as librdkafka counts them (its statistics, at most 1 s
//!   old); about fifteen series at most, one per request type used.
//! - `ankka_flow_leader`: 1 while this instance holds the Lease (or runs without leader election)
//!   and reconciles, 0 while it waits for the Lease.
//! - `ankka_flow_ledger_available`, `ankka_flow_ledger_errors_total{operation}`: whether the Lease
//!   holder can use its reset ledger, and its failed uses (`open`, `read`, `write`, `lost`); see
//!   `crate::ledger`.
//! - `ankka_flow_build_info{version, commit}`: always 1; the version and git commit of the binary.
//! - `process_*`: CPU seconds, resident and virtual memory, open and maximum file descriptors, start
//!   time, read from `/proc/self` at each scrape (Linux).
//!
//! `/healthz` answers as long as the process serves (liveness). `/readyz` answers 200 only while the
//! API server has answered this instance recently and it holds the Lease (or runs without leader
//! election); a replica that waits for the Lease is alive but not ready. Both bodies say when the
//! Lease holder cannot use its reset ledger, which changes neither answer: resets go on without it.
//!
//! The endpoint is served from the start, before the Lease is held, so that probes see a waiting
//! instance as alive. This module is the registry and the HTTP endpoint only: the lag is measured by
//! the sampler in `crate::lag`, which runs only in the Lease holder.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a consumer group's lag series. The encoder escapes label values (`\\`, `"`, line
/// breaks), so any name is safe in them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct LagLabels {
    /// Namespace of the AnkkaFlow.
    pub namespace: String,
    /// The AnkkaFlow's name.
    pub pipeline: String,
    /// `<pipeline>.<streamlet>.<inlet>`: the consumer group.
    pub consumergroup: String,
    /// Kafka topic name.
    pub topic: String,
}

/// Labels of a consumer group's lag series per partition (`--lag-per-partition`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PartitionLagLabels {
    /// The group's labels.
    #[prometheus(flatten)]
    pub group: LagLabels,
    /// Partition number.
    pub partition: String,
}

/// Labels of a series per consumer group of a pipeline.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct GroupLabels {
    /// Namespace of the AnkkaFlow.
    pub namespace: String,
    /// The AnkkaFlow's name.
    pub pipeline: String,
    /// `<pipeline>.<streamlet>.<inlet>`: the consumer group (as in [`LagLabels`]).
    pub consumergroup: String,
}

/// Label of the per-connection sampling series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ClusterLabels {
    /// The Kafka cluster's name (its Secret `kafka-cluster-<name>`), or the bootstrap servers of a
    /// topic that names them itself.
    pub cluster: String,
}

/// Label of the reconcile series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `success`, or the error category.
    pub outcome: String,
}

/// Labels of `ankka_flow_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The crate version.
    pub version: String,
    /// The git commit the binary was built from (`unknown` outside a git checkout).
    pub commit: String,
}

/// The version of this binary.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit this binary was built from; set by build.rs.
pub const GIT_COMMIT: &str = env!("FLOW_GIT_COMMIT");

/// Label of the ledger error counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LedgerLabels {
    /// `open`, `read`, `write`, or `lost` (its directory was removed).
    pub operation: String,
}

/// Label of the reset outcome counter and of the object applies counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `reset` or `failed` (reset groups); `applied`, `unchanged` or `failed` (object applies).
    pub outcome: String,
}

/// Label of the reset request counter: what kind of identity requested it (never who).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequesterLabels {
    /// `user`, `serviceaccount` or `unknown` ([`flow_core::reset::requester_kind`]).
    pub requester: String,
}

/// Label of the approval decision counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `approved` (by a person or the administrator's policy), `denied` or `expired`.
    pub decision: String,
}

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    /// Records left to read per consumer group.
    pub lag: Family<LagLabels, Gauge>,
    /// Estimated age of the oldest record left to read, per consumer group, in seconds.
    pub lag_seconds: Family<LagLabels, Gauge<f64, AtomicU64>>,
    /// Records left to read per partition (`--lag-per-partition`).
    pub partition_lag: Family<PartitionLagLabels, Gauge>,
    /// Estimated age of the oldest record left to read per partition (`--lag-per-partition`).
    pub partition_lag_seconds: Family<PartitionLagLabels, Gauge<f64, AtomicU64>>,
    /// 1 while a group is under an intentional reset or rebuild.
    pub rebuilding: Family<GroupLabels, Gauge>,
    /// Groups finished by reset requests.
    pub reset_groups: Family<OutcomeLabels, Counter>,
    /// Reset requests taken up, by the kind of identity that requested them.
    pub reset_requests: Family<RequesterLabels, Counter>,
    /// Decisions about reset requests that needed approval.
    pub reset_decisions: Family<DecisionLabels, Counter>,
    /// When the catch-up of each reset group not yet caught up started (Unix seconds).
    pub catch_up_started: Family<GroupLabels, Gauge<f64, AtomicU64>>,
    /// Request durations in seconds.
    pub reset_duration: Histogram,
    /// Requests not yet done.
    pub pending: Gauge,
    /// 1 while this instance reconciles.
    pub leader: Gauge,
    /// 1 while the reset ledger can be used.
    pub ledger_available: Gauge,
    /// Failed uses of the reset ledger, by operation.
    pub ledger_errors: Family<LedgerLabels, Counter>,
    /// Inlets whose lag could not be sampled, per connection.
    pub lag_sample_errors: Family<ClusterLabels, Counter>,
    /// When a lag sample over a connection last succeeded (Unix seconds).
    pub lag_last_success: Family<ClusterLabels, Gauge<f64, AtomicU64>>,
    /// Reconciles by outcome.
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// Reconciles that applied a pipeline's objects, left them as they were, or failed to apply.
    object_applies: Family<OutcomeLabels, Counter>,
    /// Reconcile durations by outcome.
    pub reconcile_duration: Family<ReconcileLabels, Histogram, fn() -> Histogram>,
    /// When the API server last answered this instance (Unix milliseconds; 0: never).
    apiserver_answered_ms: AtomicU64,
    /// Where `ankka_flow_kafka_requests_total` comes from, once the Kafka clients exist.
    kafka_requests: Arc<OnceLock<RequestSource>>,
}

/// The requests sent to Kafka so far, by request type.
pub type RequestSource = Box<dyn Fn() -> BTreeMap<String, u64> + Send + Sync>;

/// How recently the API server must have answered for `/readyz` to say ready.
const APISERVER_FRESH: Duration = Duration::from_secs(30);

fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

fn unix_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let lag = Family::<LagLabels, Gauge>::default();
        let reset_groups = Family::<OutcomeLabels, Counter>::default();
        // Both outcomes are served from the start, at 0, so that an alert on the rate of failed groups
        // has a series to read before the first reset (a counter never incremented is not served).
        for outcome in ["reset", "failed"] {
            let _ = reset_groups.get_or_create(&OutcomeLabels { outcome: outcome.into() });
        }
        let reset_requests = Family::<RequesterLabels, Counter>::default();
        for requester in ["user", "serviceaccount", "unknown"] {
            let _ = reset_requests.get_or_create(&RequesterLabels { requester: requester.into() });
        }
        registry.register(
            "ankka_flow_reset_requests",
            "Reset requests taken up, by the kind of identity the API server stamped as their requester (docs/governance.md)",
            reset_requests.clone(),
        );
        let reset_decisions = Family::<DecisionLabels, Counter>::default();
        for decision in ["approved", "denied", "expired"] {
            let _ = reset_decisions.get_or_create(&DecisionLabels { decision: decision.into() });
        }
        registry.register(
            "ankka_flow_reset_decisions",
            "Decisions about reset requests that needed approval: approved, denied, or expired undecided",
            reset_decisions.clone(),
        );
        let reset_duration = Histogram::new(exponential_buckets(0.1, 2.0, 14));
        let pending = Gauge::default();
        let leader = Gauge::default();
        registry.register(
            "ankka_flow_consumer_group_lag",
            "Records an inlet's consumer group has still to read, summed over the topic's partitions",
            lag.clone(),
        );
        let lag_seconds = Family::<LagLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "ankka_flow_consumer_group_lag_seconds",
            "How long ago the oldest record an inlet's consumer group has still to read was appended, estimated from the log end offsets seen over time; the largest over the partitions",
            lag_seconds.clone(),
        );
        let partition_lag = Family::<PartitionLagLabels, Gauge>::default();
        registry.register(
            "ankka_flow_consumer_group_partition_lag",
            "Records an inlet's consumer group has still to read, per partition (served with --lag-per-partition)",
            partition_lag.clone(),
        );
        let partition_lag_seconds = Family::<PartitionLagLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "ankka_flow_consumer_group_partition_lag_seconds",
            "How long ago the oldest record an inlet's consumer group has still to read on the partition was appended, estimated (served with --lag-per-partition)",
            partition_lag_seconds.clone(),
        );
        let rebuilding = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "ankka_flow_consumer_group_rebuilding",
            "1 while an inlet's consumer group is under an intentional reset or rebuild: from the reset request until the group caught up after it; 0 otherwise",
            rebuilding.clone(),
        );
        registry.register(
            "ankka_flow_reset_groups",
            "Consumer groups finished by reset requests",
            reset_groups.clone(),
        );
        registry.register(
            "ankka_flow_reset_duration_seconds",
            "Time from when the operator first saw a reset request to when it finished",
            reset_duration.clone(),
        );
        registry.register(
            "ankka_flow_reset_requests_pending",
            "Reset requests written and not yet done",
            pending.clone(),
        );
        registry.register(
            "ankka_flow_leader",
            "1 while this instance holds the Lease and reconciles, 0 while it waits for it",
            leader.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&BuildLabels { version: VERSION.to_string(), commit: GIT_COMMIT.to_string() }).set(1);
        registry.register(
            "ankka_flow_build_info",
            "Always 1: the version and git commit of the running operator",
            build_info,
        );
        let lag_sample_errors = Family::<ClusterLabels, Counter>::default();
        registry.register(
            "ankka_flow_lag_sample_errors",
            "Inlets whose consumer group lag could not be sampled, per Kafka connection",
            lag_sample_errors.clone(),
        );
        let lag_last_success = Family::<ClusterLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "ankka_flow_lag_last_success_timestamp_seconds",
            "When a lag sample over the Kafka connection last succeeded, in Unix seconds",
            lag_last_success.clone(),
        );
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("ankka_flow_reconciles", "Reconciles of AnkkaFlows by outcome", reconciles.clone());
        let object_applies = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "ankka_flow_object_applies",
            "Reconciles by what they did with the pipeline's ServiceAccount, Role, RoleBinding, Secrets and Deployments: applied, unchanged (left as last applied), failed",
            object_applies.clone(),
        );
        let reconcile_duration =
            Family::<ReconcileLabels, Histogram, fn() -> Histogram>::new_with_constructor(reconcile_histogram);
        registry.register(
            "ankka_flow_reconcile_duration_seconds",
            "How long reconciles of AnkkaFlows took, by outcome",
            reconcile_duration.clone(),
        );
        let ledger_available = Gauge::default();
        registry.register(
            "ankka_flow_ledger_available",
            "1 while the Lease holder can use its reset ledger; 0 while resets keep their progress in the status alone",
            ledger_available.clone(),
        );
        let ledger_errors = Family::<LedgerLabels, Counter>::default();
        for operation in ["open", "read", "write", "lost"] {
            let _ = ledger_errors.get_or_create(&LedgerLabels { operation: operation.into() });
        }
        registry.register(
            "ankka_flow_ledger_errors",
            "Failed uses of the reset ledger, by operation (lost: its directory was removed)",
            ledger_errors.clone(),
        );
        let catch_up_started = Family::<GroupLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "ankka_flow_reset_catch_up_started_timestamp_seconds",
            "When the reset of a consumer group that has not caught up yet finished, in Unix seconds",
            catch_up_started.clone(),
        );
        registry.register_collector(Box::new(ProcessCollector));
        let kafka_requests = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(KafkaRequestsCollector(Arc::clone(&kafka_requests))));
        Metrics {
            registry,
            lag,
            lag_seconds,
            partition_lag,
            partition_lag_seconds,
            rebuilding,
            reset_groups,
            reset_requests,
            reset_decisions,
            catch_up_started,
            reset_duration,
            pending,
            leader,
            ledger_available,
            ledger_errors,
            lag_sample_errors,
            lag_last_success,
            reconciles,
            object_applies,
            reconcile_duration,
            apiserver_answered_ms: AtomicU64::new(0),
            kafka_requests,
        }
    }
}

impl Metrics {
    /// Records what one reconcile did with the pipeline's objects: `applied`, `unchanged` or
    /// `failed`.
    pub fn objects(&self, outcome: &str) {
        self.object_applies.get_or_create(&OutcomeLabels { outcome: outcome.to_string() }).inc();
    }

    /// Counts an event created just now with `reason`, where it is a decision about a request that
    /// needed approval (`ResetApproved`, `ResetDenied`, `ResetExpired`): events of a request are
    /// named by their key, so each decision is counted once, by whichever instance recorded it.
    pub fn event_created(&self, reason: &str) {
        let decision = match reason {
            "ResetApproved" => "approved",
            "ResetDenied" => "denied",
            "ResetExpired" => "expired",
            _ => return,
        };
        self.reset_decisions.get_or_create(&DecisionLabels { decision: decision.into() }).inc();
    }

    /// Records one reconcile: `outcome` is `success` or the error's category.
    pub fn reconciled(&self, outcome: &str, took: Duration) {
        let labels = ReconcileLabels { outcome: outcome.to_string() };
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Serves `ankka_flow_kafka_requests_total` from `source` (once; a second source is ignored).
    pub fn count_kafka_requests(&self, source: RequestSource) {
        let _ = self.kafka_requests.set(source);
    }

    /// Records that the API server answered this instance just now (see `crate::probe`).
    pub fn apiserver_answered(&self) {
        let ms = u64::try_from(unix_now().as_millis()).unwrap_or(u64::MAX);
        self.apiserver_answered_ms.store(ms, Ordering::Relaxed);
    }

    /// Whether this instance is ready, and why (the body of `/readyz`): the API server answered
    /// within [`APISERVER_FRESH`] and it holds the Lease.
    pub fn readiness(&self) -> (bool, String) {
        let answered = self.apiserver_answered_ms.load(Ordering::Relaxed);
        let age = (answered > 0).then(|| unix_now().saturating_sub(Duration::from_millis(answered)));
        let apiserver_ok = age.is_some_and(|a| a <= APISERVER_FRESH);
        let leading = self.leader.get() == 1;
        let apiserver = match age {
            None => "apiserver: not answered yet".to_string(),
            Some(a) if apiserver_ok => format!("apiserver: answered {} s ago", a.as_secs()),
            Some(a) => format!("apiserver: no answer for {} s", a.as_secs()),
        };
        let lease = if leading { "lease: held, this instance reconciles" } else { "lease: waiting for it" };
        (apiserver_ok && leading, format!("{apiserver}\n{lease}\n{}", self.ledger_problem()))
    }

    /// What `/healthz` answers: `ok` while the process serves; and, without changing the answer, a
    /// reset ledger that the Lease holder cannot use (resets then keep their progress in the status
    /// alone, which a restart would not cure).
    pub fn health(&self) -> String {
        format!("ok\n{}", self.ledger_problem())
    }

    /// A line saying that the Lease holder cannot use its reset ledger; empty while it can (or this
    /// instance does not hold the Lease).
    fn ledger_problem(&self) -> &'static str {
        if self.leader.get() == 1 && self.ledger_available.get() == 0 {
            "ledger: cannot be used; resets go on, their progress held by the status alone (see the ResetLedger \
             condition and the operator's log)\n"
        } else {
            ""
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` on it in the background until the
/// process ends. Logs the address it bound, which tests read when they ask for port 0, and returns it.
///
/// The operator calls it before it takes the Lease or reconciles anything: an instance that cannot
/// answer its probes would only be restarted by its liveness probe, again and again, so it stops at
/// start instead, saying why.
///
/// # Errors
/// When the address cannot be bound (taken by another process, not an address of this host, a port
/// it may not use).
pub async fn serve_in_background(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(address = %bound, "serving /metrics and /healthz");
    tokio::spawn(serve(listener, metrics));
    Ok(bound)
}

/// Answers connections to `listener` until the process ends.
async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "metrics connection failed");
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(respond(&req, &metrics)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                tracing::debug!(error = %e, "metrics connection closed");
            }
        });
    }
}

fn respond(req: &Request<hyper::body::Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match req.uri().path() {
        "/metrics" => (StatusCode::OK, "application/openmetrics-text; version=1.0.0; charset=utf-8", metrics.encode()),
        "/healthz" => (StatusCode::OK, "text/plain", metrics.health()),
        "/readyz" => match metrics.readiness() {
            (true, why) => (StatusCode::OK, "text/plain", why),
            (false, why) => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", why),
        },
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".to_string()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// The `process_*` series, read from `/proc/self` at each scrape. Written here because
/// prometheus-client has no process collector; the fields are those of proc(5).
#[derive(Debug)]
struct ProcessCollector;

/// What `/proc/self` says, or `None` off Linux.
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    start_time_seconds: f64,
    open_fds: f64,
    max_fds: Option<f64>,
}

fn process_stats() -> Option<ProcessStats> {
    // Clock ticks per second: 100 on every Linux architecture we build for (USER_HZ).
    const TICKS: f64 = 100.0;
    const PAGE: f64 = 4096.0;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // proc(5) numbers the fields from 1 (pid); after the name, field 3 (state) is index 0.
    let (utime, stime, starttime, vsize, rss) = (num(11)?, num(12)?, num(19)?, num(20)?, num(21)?);
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse::<f64>().ok()))?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as f64;
    let max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|l| {
        l.lines().find(|l| l.starts_with("Max open files")).and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
    });
    Some(ProcessStats {
        cpu_seconds: (utime + stime) / TICKS,
        resident_bytes: rss * PAGE,
        virtual_bytes: vsize,
        start_time_seconds: boot + starttime / TICKS,
        open_fds,
        max_fds,
    })
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(p) = process_stats() else { return Ok(()) };
        let cpu = ConstCounter::new(p.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            ("process_resident_memory_bytes", "Resident memory size in bytes", Some(p.resident_bytes)),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", Some(p.virtual_bytes)),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                Some(p.start_time_seconds),
            ),
            ("process_open_fds", "Open file descriptors", Some(p.open_fds)),
            ("process_max_fds", "Maximum number of open file descriptors", p.max_fds),
        ];
        for (name, help, value) in gauges {
            let Some(v) = value else { continue };
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}

/// `ankka_flow_kafka_requests_total{request}`, read from its source at each scrape.
struct KafkaRequestsCollector(Arc<OnceLock<RequestSource>>);

impl std::fmt::Debug for KafkaRequestsCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KafkaRequestsCollector")
    }
}

/// Label of `ankka_flow_kafka_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The Kafka request type, as librdkafka names it.
    request: String,
}

impl Collector for KafkaRequestsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(source) = self.0.get() else { return Ok(()) };
        let mut family = encoder.encode_descriptor(
            "ankka_flow_kafka_requests",
            "Requests the reset driver's and the lag sampler's Kafka clients sent to the brokers, by request type",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (request, n) in source() {
            let labels = RequestLabels { request };
            let counter = ConstCounter::new(n);
            counter.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_names_the_version_and_the_commit() {
        let text = Metrics::default().encode();
        let line = format!("ankka_flow_build_info{{version=\"{VERSION}\",commit=\"{GIT_COMMIT}\"}} 1");
        assert!(text.lines().any(|l| l == line), "{text}");
        assert!(!GIT_COMMIT.is_empty());
    }

    #[test]
    fn lag_labels_are_escaped_and_name_namespace_pipeline_and_consumergroup() {
        let m = Metrics::default();
        let labels = |ns: &str| LagLabels {
            namespace: ns.into(),
            pipeline: "cart".into(),
            consumergroup: "cart.router.in".into(),
            topic: "a\"b\\c\nd".into(),
        };
        m.lag.get_or_create(&labels("shop")).set(5);
        m.lag.get_or_create(&labels("shop-eu")).set(7);
        m.lag_seconds.get_or_create(&labels("shop")).set(1.5);
        m.partition_lag.get_or_create(&PartitionLagLabels { group: labels("shop"), partition: "0".into() }).set(5);
        let text = m.encode();
        let series: Vec<&str> = text.lines().filter(|l| l.starts_with("ankka_flow_consumer_group_lag{")).collect();
        assert_eq!(series.len(), 2, "the same pipeline in two namespaces never collides:\n{text}");
        let group = "namespace=\"shop\",pipeline=\"cart\",consumergroup=\"cart.router.in\",topic=\"a\\\"b\\\\c\\nd\"";
        for line in [
            format!("ankka_flow_consumer_group_lag{{{group}}} 5"),
            format!("ankka_flow_consumer_group_lag_seconds{{{group}}} 1.5"),
            format!("ankka_flow_consumer_group_partition_lag{{{group},partition=\"0\"}} 5"),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line}:\n{text}");
        }
        assert!(!text.contains("client_id"), "{text}");
    }

    #[test]
    fn reconciles_and_process_series_are_exposed() {
        let m = Metrics::default();
        m.reconciled("success", Duration::from_millis(20));
        m.reconciled("KubernetesApiFailed", Duration::from_millis(3));
        m.lag_sample_errors.get_or_create(&ClusterLabels { cluster: "shop".into() }).inc();
        m.count_kafka_requests(Box::new(|| BTreeMap::from([("OffsetFetch".to_string(), 7)])));
        let text = m.encode();
        for needle in [
            "ankka_flow_reconciles_total{outcome=\"success\"} 1",
            "ankka_flow_reconciles_total{outcome=\"KubernetesApiFailed\"} 1",
            "ankka_flow_reconcile_duration_seconds_count{outcome=\"success\"} 1",
            "ankka_flow_lag_sample_errors_total{cluster=\"shop\"} 1",
            "ankka_flow_kafka_requests_total{request=\"OffsetFetch\"} 7",
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(text.lines().any(|l| l.starts_with(needle)), "no {needle}:\n{text}");
        }
    }

    #[test]
    fn ready_only_with_a_recent_api_server_answer_and_the_lease() {
        let m = Metrics::default();
        assert_eq!(m.readiness(), (false, "apiserver: not answered yet\nlease: waiting for it\n".into()));
        m.apiserver_answered();
        assert!(!m.readiness().0, "waiting for the Lease: alive, not ready");
        m.leader.set(1);
        m.ledger_available.set(1);
        let (ready, why) = m.readiness();
        assert!(ready, "{why}");
        assert_eq!(m.health(), "ok\n");
        // A ledger that cannot be used is said, and changes neither answer.
        m.ledger_available.set(0);
        let (ready, why) = m.readiness();
        assert!(ready && why.ends_with("ledger: cannot be used; resets go on, their progress held by the status alone (see the ResetLedger condition and the operator's log)\n"), "{why}");
        assert!(m.health().starts_with("ok\nledger: cannot be used"), "{}", m.health());
        m.ledger_available.set(1);
        let stale = u64::try_from((unix_now() - Duration::from_secs(60)).as_millis()).unwrap();
        m.apiserver_answered_ms.store(stale, Ordering::Relaxed);
        assert_eq!(
            m.readiness(),
            (false, "apiserver: no answer for 60 s\nlease: held, this instance reconciles\n".into())
        );
    }

    #[tokio::test]
    async fn an_address_that_cannot_be_bound_is_an_error_and_a_bound_one_answers_at_once() {
        let bound = serve_in_background("127.0.0.1:0".parse().unwrap(), Arc::new(Metrics::default())).await.unwrap();
        assert_ne!(bound.port(), 0);
        // Bound when the call returns: a probe right after it is answered.
        let mut s = tokio::net::TcpStream::connect(bound).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut s, b"GET /healthz HTTP/1.0\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut s, &mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.0 200") && answer.ends_with("\r\n\r\nok\n"), "{answer}");
        // The same address again: taken.
        let e = serve_in_background(bound, Arc::new(Metrics::default())).await.expect_err("taken");
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    }
}
