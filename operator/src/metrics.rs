//! Prometheus metrics of the operator, served with `/healthz` on `--metrics-address`.
//!
//! Series and their labels (cardinality is bounded by what the cluster holds, never by requests):
//! - `ankka_flow_consumer_group_lag{client_id, topic, partition}`: records an inlet's consumer group
//!   has still to read, for every inlet of every pipeline the operator watches; `client_id` is the
//!   group `<pipeline>.<streamlet>.<inlet>`, `topic` the Kafka topic name. One series per inlet
//!   partition; series of inlets that went away are dropped at the next sample.
//! - `ankka_flow_reset_groups_total{outcome}`: consumer groups finished by reset requests, `outcome`
//!   is `reset` or `failed` (two series).
//! - `ankka_flow_reset_duration_seconds`: histogram, from when the operator first saw a request to
//!   when it finished.
//! - `ankka_flow_reset_requests_pending`: requests written and not yet done, over all pipelines.
//! - `ankka_flow_leader`: 1 while this instance holds the Lease (or runs without leader election)
//!   and reconciles, 0 while it waits for the Lease.
//! - `ankka_flow_build_info{version, commit}`: always 1; the version and git commit of the binary
//!   (one series).
//!
//! The endpoint is served from the start, before the Lease is held, so that probes see a waiting
//! instance as alive. This module is the registry and the HTTP endpoint only: the lag is measured by
//! the sampler in `crate::lag`, which runs only in the Lease holder.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a lag series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct LagLabels {
    /// `<pipeline>.<streamlet>.<inlet>`.
    pub client_id: String,
    /// Kafka topic name.
    pub topic: String,
    /// Partition number.
    pub partition: String,
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

/// Label of the reset outcome counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `reset` or `failed`.
    pub outcome: String,
}

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    /// Lag per inlet partition.
    pub lag: Family<LagLabels, Gauge>,
    /// Groups finished by reset requests.
    pub reset_groups: Family<OutcomeLabels, Counter>,
    /// Request durations in seconds.
    pub reset_duration: Histogram,
    /// Requests not yet done.
    pub pending: Gauge,
    /// 1 while this instance reconciles.
    pub leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let lag = Family::<LagLabels, Gauge>::default();
        let reset_groups = Family::<OutcomeLabels, Counter>::default();
        let reset_duration = Histogram::new(exponential_buckets(0.1, 2.0, 14));
        let pending = Gauge::default();
        let leader = Gauge::default();
        registry.register(
            "ankka_flow_consumer_group_lag",
            "Records an inlet's consumer group has still to read, per partition",
            lag.clone(),
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
        Metrics { registry, lag, reset_groups, reset_duration, pending, leader }
    }
}

impl Metrics {
    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Serves `/metrics` and `/healthz` on `addr` in the background. A failure to bind is logged:
/// metrics are not worth stopping reconciles for.
pub fn serve_in_background(addr: SocketAddr, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        if let Err(e) = serve(addr, metrics).await {
            tracing::error!(%addr, error = %e, "cannot serve /metrics and /healthz");
        }
    });
}

/// Serves `/metrics` and `/healthz` on `addr` until the process ends. Logs the address it bound,
/// which tests read when they ask for port 0.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(address = %listener.local_addr()?, "serving /metrics and /healthz");
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
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".to_string()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
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
}
