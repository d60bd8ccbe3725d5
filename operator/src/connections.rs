//! The Kafka connections of a resource's topics: the cluster Secrets read at most once per use, and
//! one [`KafkaClient`] per distinct connection, shared by every group read over it. The reset driver
//! and the lag measurement both reach Kafka through here.

use std::collections::HashMap;
use std::sync::Arc;

use flow_adapters::kafka::KafkaClient;
use flow_adapters::kube as k;
use flow_core::connection::{self, Clusters, KafkaConnection, Resolution};
use flow_core::reset::KafkaFailure;
use flow_core::resource::AnkkaFlow;
use kube::ResourceExt;

use crate::context::Context;

/// Kafka connections of resources' topics, read from the cluster Secrets at most once per use,
/// and one [`KafkaClient`] per distinct connection, shared by every group read over it.
pub struct Connections<'a> {
    ctx: &'a Context,
    clusters: Option<Clusters>,
    /// Each resource's resolution, by namespace and name, once per use.
    resolved: HashMap<(String, String), Resolution>,
    clients: Vec<(KafkaConnection, Arc<KafkaClient>)>,
}

impl Drop for Connections<'_> {
    /// Closing a librdkafka client waits for its threads: done on the blocking pool, not on a
    /// runtime worker.
    fn drop(&mut self) {
        let clients = std::mem::take(&mut self.clients);
        if !clients.is_empty() {
            tokio::task::spawn_blocking(move || drop(clients));
        }
    }
}

impl<'a> Connections<'a> {
    /// Connections of `ctx`'s cluster Secrets, read lazily.
    pub fn new(ctx: &'a Context) -> Self {
        Connections { ctx, clusters: None, resolved: HashMap::new(), clients: Vec::new() }
    }

    /// The client of topic `topic_id`'s connection in `flow`, built on first use.
    ///
    /// # Errors
    /// As [`Connections::get`], or librdkafka rejecting the connection's properties.
    pub async fn client(&mut self, flow: &AnkkaFlow, topic_id: &str) -> Result<Arc<KafkaClient>, KafkaFailure> {
        let conn = self.get(flow, topic_id).await?;
        if let Some((_, c)) = self.clients.iter().find(|(known, _)| *known == conn) {
            return Ok(Arc::clone(c));
        }
        let c = Arc::new(KafkaClient::new(&conn, self.ctx.deadlines)?);
        self.clients.push((conn, Arc::clone(&c)));
        Ok(c)
    }

    /// The operator's connection of topic `topic_id` of `flow`, resolved by the same rules as the
    /// reconcile's: a resource refused as a whole (any of its topics has a problem) gets no
    /// connection, so no client is ever built for a refused pipeline.
    ///
    /// # Errors
    /// An undeclared topic, a refused resource (its problems, joined), or cluster Secrets that
    /// cannot be read.
    pub async fn get(&mut self, flow: &AnkkaFlow, topic_id: &str) -> Result<KafkaConnection, KafkaFailure> {
        let final_ = KafkaFailure::configuration;
        if flow.spec.topic(topic_id).is_none() {
            return Err(final_(format!("the inlet reads topic '{topic_id}', which the resource does not declare")));
        }
        let key = (flow.namespace().unwrap_or_default(), flow.name_any());
        if !self.resolved.contains_key(&key) {
            if self.clusters.is_none() {
                let ns = self.ctx.settings.clusters_namespace();
                let listed = k::clusters(&self.ctx.client, ns).await.map_err(|e| {
                    KafkaFailure::unavailable(format!("cannot read the Kafka cluster Secrets in namespace '{ns}': {e}"))
                })?;
                self.clusters = Some(listed);
            }
            let empty = Clusters::new();
            let clusters = self.clusters.as_ref().unwrap_or(&empty);
            self.resolved.insert(key.clone(), connection::resolve_pipeline(&flow.spec, &key.0, clusters));
        }
        let resolution = &self.resolved[&key];
        if resolution.refused() {
            let problems: Vec<String> = resolution.problems.iter().map(ToString::to_string).collect();
            return Err(final_(format!("the pipeline is refused: {}", problems.join("; "))));
        }
        resolution
            .topic(topic_id)
            .map(|t| t.kafka_connection().clone())
            .ok_or_else(|| final_(format!("topic '{topic_id}' did not resolve")))
    }
}
