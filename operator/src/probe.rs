//! The API server probe behind `/readyz`: asks the API server for its version every
//! [`APISERVER_PROBE`] and records each answer in the metrics, which serve `/readyz` from it.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;

/// How often the API server is asked.
const APISERVER_PROBE: Duration = Duration::from_secs(10);

/// Starts asking the API server for its version every [`APISERVER_PROBE`] in the background, and
/// records each answer, for `/readyz`.
pub fn spawn(client: kube::Client, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        loop {
            match tokio::time::timeout(APISERVER_PROBE, client.apiserver_version()).await {
                Ok(Ok(_)) => metrics.apiserver_answered(),
                Ok(Err(e)) => tracing::debug!(error = %e, "the API server did not answer the readiness probe"),
                Err(_) => tracing::debug!("the API server did not answer the readiness probe in time"),
            }
            tokio::time::sleep(APISERVER_PROBE).await;
        }
    });
}
