//! The Kafka connections of a resource's topics: the cluster Secrets read at most once per use, and
//! one [`KafkaClient`] per distinct connection, shared by every group read over it. The reset driver
//! and the lag measurement both reach Kafka through here.

use std::collections::BTreeMap;
use std::sync::Arc;

use flow_adapters::kafka::KafkaClient;
use flow_adapters::kube as k;
use flow_core::connection::{self, Cluster, ConnectionError, KafkaConnection};
use flow_core::reset::KafkaFailure;
use flow_core::resource::AnkkaFlowSpec;

use crate::context::Context;

/// Kafka connections of a resource's topics, read from the cluster Secrets at most once per drive,
/// and one [`KafkaClient`] per distinct connection, shared by every group read over it.
pub struct Connections<'a> {
    ctx: &'a Context,
    clusters: Option<BTreeMap<String, Result<Cluster, ConnectionError>>>,
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
        Connections { ctx, clusters: None, clients: Vec::new() }
    }

    /// The client of topic `topic_id`'s connection, built on first use.
    ///
    /// # Errors
    /// As [`Connections::get`], or librdkafka rejecting the connection's properties.
    pub async fn client(&mut self, spec: &AnkkaFlowSpec, topic_id: &str) -> Result<Arc<KafkaClient>, KafkaFailure> {
        let conn = self.get(spec, topic_id).await?;
        if let Some((_, c)) = self.clients.iter().find(|(known, _)| *known == conn) {
            return Ok(Arc::clone(c));
        }
        let c = Arc::new(KafkaClient::new(&conn, self.ctx.deadlines)?);
        self.clients.push((conn, Arc::clone(&c)));
        Ok(c)
    }

    /// The connection of topic `topic_id` of `spec`.
    ///
    /// # Errors
    /// An undeclared topic, a missing or broken cluster Secret, or Secrets that cannot be read.
    pub async fn get(&mut self, spec: &AnkkaFlowSpec, topic_id: &str) -> Result<KafkaConnection, KafkaFailure> {
        let final_ = |reason: String| KafkaFailure { transient: false, reason };
        let topic = spec.topic(topic_id).ok_or_else(|| {
            final_(format!("the inlet reads topic '{topic_id}', which the resource does not declare"))
        })?;
        let needs_cluster = topic.cluster.is_some() || topic.bootstrap_servers.is_none();
        if needs_cluster && self.clusters.is_none() {
            let ns = self.ctx.settings.clusters_namespace();
            let listed = k::clusters(&self.ctx.client, ns).await.map_err(|e| KafkaFailure {
                transient: true,
                reason: format!("cannot read the Kafka cluster Secrets in namespace '{ns}': {e}"),
            })?;
            self.clusters = Some(listed);
        }
        let mut usable = BTreeMap::new();
        if let Some(all) = &self.clusters {
            let wanted = topic.cluster.as_deref().unwrap_or(connection::DEFAULT_CLUSTER);
            if let Some(Err(e)) = all.get(wanted) {
                return Err(final_(e.to_string()));
            }
            usable = all.iter().filter_map(|(k, v)| v.as_ref().ok().map(|c| (k.clone(), c.clone()))).collect();
        }
        connection::resolve(topic, &usable).map_err(|e| final_(e.to_string()))
    }
}
