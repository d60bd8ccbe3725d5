//! The Kafka connections of a resource's topics: the cluster Secrets read at most once per use, and
//! one [`KafkaClient`] per distinct connection, shared by every group read over it and kept
//! connected between uses (a [`Clients`] pool). The reset driver and the lag measurement both reach
//! Kafka through here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flow_adapters::kafka::KafkaClient;
use flow_adapters::kube as k;
use flow_core::connection::{self, Clusters, KafkaConnection, Resolution};
use flow_core::reset::KafkaFailure;
use flow_core::resource::AnkkaFlow;
use kube::ResourceExt;

use crate::context::Context;

/// How long a pooled client stays connected without a use before it is closed.
const IDLE: Duration = Duration::from_secs(600);

/// Clients at most per connection, each its own connection to the brokers. A broker answers one
/// connection's requests one at a time, in order, so the commits of different consumer groups run
/// side by side only over different connections (see docs/performance.md, "The floor").
pub const LANES: usize = 8;

/// The operator's Kafka clients, one per distinct connection, kept between reconciles.
///
/// A new client costs a bootstrap, a metadata request and a connection to each broker it talks to
/// (about 100 ms on a loopback broker, more over TLS and SASL), which a reset would otherwise pay
/// on its critical path and the lag sampler once per sample. A client is shared only by resources
/// whose connection is the very same (servers, credentials and every property), so no tenant uses
/// another's credentials; one unused for [`IDLE`] is closed.
#[derive(Default)]
pub struct Clients {
    pooled: Mutex<Vec<Pooled>>,
}

struct Pooled {
    conn: KafkaConnection,
    lane: usize,
    client: Arc<KafkaClient>,
    used: Instant,
}

impl Clients {
    /// The client of `conn` in lane `lane` (below [`LANES`]), connected already when it was used
    /// within [`IDLE`].
    ///
    /// # Errors
    /// librdkafka rejecting the connection's properties.
    fn get(&self, conn: &KafkaConnection, lane: usize, ctx: &Context) -> Result<Arc<KafkaClient>, KafkaFailure> {
        let lane = lane % LANES;
        let now = Instant::now();
        let mut pooled = self.pooled.lock().unwrap_or_else(|p| p.into_inner());
        let (idle, kept): (Vec<Pooled>, Vec<Pooled>) = std::mem::take(&mut *pooled).into_iter().partition(|p| {
            // A client with a final TLS or authentication failure would word every later failure
            // as that one, even after the cause was fixed: it is closed, and the next use
            // connects anew.
            now.duration_since(p.used) > IDLE || p.client.has_final_failure()
        });
        *pooled = kept;
        if !idle.is_empty() {
            // Closing a librdkafka client waits for its threads: done on the blocking pool, not on
            // a runtime worker.
            tokio::task::spawn_blocking(move || drop(idle));
        }
        if let Some(p) = pooled.iter_mut().find(|p| p.lane == lane && p.conn == *conn) {
            p.used = now;
            return Ok(Arc::clone(&p.client));
        }
        let client = Arc::new(KafkaClient::new(conn, ctx.deadlines)?);
        pooled.push(Pooled { conn: conn.clone(), lane, client: Arc::clone(&client), used: now });
        Ok(client)
    }
}

/// Kafka connections of resources' topics, read from the cluster Secrets at most once per use,
/// and one [`KafkaClient`] per distinct connection, from the context's [`Clients`].
pub struct Connections<'a> {
    ctx: &'a Context,
    clusters: Option<Clusters>,
    /// Each resource's resolution, by namespace and name, once per use.
    resolved: HashMap<(String, String), Resolution>,
}

impl<'a> Connections<'a> {
    /// Connections of `ctx`'s cluster Secrets, read lazily.
    pub fn new(ctx: &'a Context) -> Self {
        Connections { ctx, clusters: None, resolved: HashMap::new() }
    }

    /// The client of topic `topic_id`'s connection in `flow`, from the context's [`Clients`].
    ///
    /// # Errors
    /// As [`Connections::get`], or librdkafka rejecting the connection's properties.
    pub async fn client(&mut self, flow: &AnkkaFlow, topic_id: &str) -> Result<Arc<KafkaClient>, KafkaFailure> {
        self.client_in(flow, topic_id, 0).await
    }

    /// [`Connections::client`] in lane `lane`: calls in different lanes go over different
    /// connections, so that a broker serves them side by side.
    ///
    /// # Errors
    /// As [`Connections::client`].
    pub async fn client_in(
        &mut self,
        flow: &AnkkaFlow,
        topic_id: &str,
        lane: usize,
    ) -> Result<Arc<KafkaClient>, KafkaFailure> {
        let conn = self.get(flow, topic_id).await?;
        self.ctx.clients.get(&conn, lane, self.ctx)
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
