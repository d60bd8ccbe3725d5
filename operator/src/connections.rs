//! The operator's Kafka connections, all in one place: the one [`Pool`] of librdkafka clients, kept
//! connected between reconciles (the group clients of the reset driver and the lag measurement, in
//! lanes, and one topic admin client per connection), with each connection's bulkhead ([`Gate`]);
//! topic administration over it ([`Kafka`]); and the resolution of a resource's topics to their
//! connections, from the cluster Secrets read at most once per use ([`Connections`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use flow_adapters::kafka::{Deadlines, KafkaClient, Requests, ResetCalls};
use flow_adapters::topics::TopicAdmin;
use flow_core::connection::{self, Clusters, KafkaConnection, Resolution};
use flow_core::names::GroupId;
use flow_core::reset::KafkaFailure;
use flow_core::resource::AnkkaFlow;
use kube::ResourceExt;

#[cfg(test)]
pub mod fake;
mod topics;

pub use topics::Kafka;

/// How long a pooled client stays connected without a use before it is closed (so an edited
/// cluster Secret does not leave the old connection's client open for ever).
const IDLE: Duration = Duration::from_secs(600);

/// Group clients at most per connection, each its own connection to the brokers. A broker answers
/// one connection's requests one at a time, in order, so the commits of different consumer groups
/// run side by side only over different connections (see docs/performance.md, "The floor"). As
/// many as a reset runs Kafka calls at once by default (`FLOW_RESET_CONCURRENCY`), so that those
/// calls never wait for each other; a lane's client is made on its first use.
pub const LANES: usize = 16;

/// The operator's librdkafka clients, kept between reconciles: per distinct connection, up to
/// [`LANES`] group clients ([`KafkaClient`]) and one topic admin client ([`TopicAdmin`]).
///
/// A new client costs a bootstrap, a metadata request and a connection to each broker it talks to
/// (about 100 ms on a loopback broker, more over TLS and SASL), which a reset would otherwise pay
/// on its critical path and the lag sampler once per sample. A client is shared only by resources
/// whose connection is the very same (servers, credentials and every property), so no tenant uses
/// another's credentials; one unused for [`IDLE`] is closed, and so is a group client that met a
/// final TLS or authentication failure.
pub struct Pool {
    deadlines: Deadlines,
    pooled: Mutex<Vec<Pooled>>,
    /// What the group clients closed so far sent (see [`Pool::requests_sent`]).
    retired: Mutex<Requests>,
    /// How many Kafka calls each connection runs at once, and how long a call waits for its turn.
    bulkhead: Bulkhead,
    /// Each connection's bulkhead, with its last use.
    gates: Mutex<Vec<(KafkaConnection, Arc<Semaphore>, Instant)>>,
}

/// The bounds of every connection's bulkhead (see [`Gate`]).
#[derive(Clone, Copy, Debug)]
pub struct Bulkhead {
    /// Kafka calls one connection runs at once (`FLOW_KAFKA_CALLS_PER_CLUSTER`).
    pub calls: usize,
    /// How long a call waits for its turn before it fails as transient: the Kafka request deadline.
    pub wait: Duration,
}

/// One connection's bulkhead: at most [`Bulkhead::calls`] of the operator's Kafka calls over the
/// connection run at once, whoever makes them (a reset, the lag, a topic's describe), and a call
/// waits at most [`Bulkhead::wait`] for its turn. A connection is the brokers with the client
/// settings (credentials included), so a connection that fails (a wrong CA, a wrong password,
/// nothing listening) fills only its own: calls over every other connection never wait for it, and
/// neither does any reconcile, which holds no slot while it waits for Kafka (`crate::slots`).
#[derive(Clone)]
pub struct Gate {
    calls: Arc<Semaphore>,
    bulkhead: Bulkhead,
    brokers: String,
}

impl Gate {
    /// A gate that never makes a call wait, for the in-memory Kafka of the mocked-API tests.
    #[cfg(test)]
    pub fn open(conn: &KafkaConnection) -> Gate {
        let bulkhead = Bulkhead { calls: Semaphore::MAX_PERMITS, wait: Duration::from_secs(1) };
        Gate { calls: Arc::new(Semaphore::new(bulkhead.calls)), bulkhead, brokers: conn.bootstrap_servers.clone() }
    }

    /// Waits for a turn; the turn ends when the returned permit drops, which the caller holds until
    /// its call truly ended (a blocking call runs on after its future is dropped).
    ///
    /// # Errors
    /// A transient [`KafkaFailure`] when no turn came within the wait: the connection's calls are
    /// all under way (its cluster is slow or does not answer).
    pub async fn enter(self) -> Result<OwnedSemaphorePermit, KafkaFailure> {
        let Gate { calls, bulkhead, brokers } = self;
        match tokio::time::timeout(bulkhead.wait, calls.acquire_owned()).await {
            Ok(Ok(turn)) => Ok(turn),
            // The semaphore is never closed.
            Ok(Err(_)) | Err(_) => Err(KafkaFailure::unavailable(format!(
                "the operator's {} Kafka calls over this connection to {brokers} at once were all under way for {} s \
                 (its cluster answers slowly or not at all; FLOW_KAFKA_CALLS_PER_CLUSTER)",
                bulkhead.calls,
                bulkhead.wait.as_secs()
            ))),
        }
    }
}

/// One pooled client: its connection, which one of that connection's clients it is, and its last use.
struct Pooled {
    conn: KafkaConnection,
    client: Client,
    used: Instant,
}

/// A pooled client of either kind.
#[derive(Clone)]
enum Client {
    /// A group client, in lane `.0`.
    Group(usize, Arc<KafkaClient>),
    /// The topic admin client.
    Topics(Arc<TopicAdmin>),
}

/// Which of a connection's clients is asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Group(usize),
    Topics,
}

impl Client {
    fn slot(&self) -> Slot {
        match self {
            Client::Group(lane, _) => Slot::Group(*lane),
            Client::Topics(_) => Slot::Topics,
        }
    }

    /// A client with a final TLS or authentication failure would word every later failure as that
    /// one, even after the cause was fixed: it is closed, and the next use connects anew.
    fn failed_for_good(&self) -> bool {
        match self {
            Client::Group(_, c) => c.has_final_failure(),
            Client::Topics(_) => false,
        }
    }
}

impl Pool {
    /// An empty pool whose clients' requests have deadlines `d`, and whose connections' calls are
    /// bounded by `bulkhead`.
    pub fn new(d: Deadlines, bulkhead: Bulkhead) -> Self {
        Pool {
            deadlines: d,
            pooled: Mutex::new(Vec::new()),
            retired: Mutex::new(Requests::new()),
            bulkhead,
            gates: Mutex::new(Vec::new()),
        }
    }

    /// The bulkhead of `conn` (see [`Gate`]); those of connections unused for [`IDLE`], with no call
    /// under way, are forgotten first.
    pub fn gate(&self, conn: &KafkaConnection) -> Gate {
        let now = Instant::now();
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        let calls = self.bulkhead.calls.max(1);
        gates.retain(|(_, s, used)| now.duration_since(*used) <= IDLE || s.available_permits() < calls);
        let semaphore = match gates.iter_mut().find(|(c, _, _)| c == conn) {
            Some((_, s, used)) => {
                *used = now;
                Arc::clone(s)
            }
            None => {
                let s = Arc::new(Semaphore::new(calls));
                gates.push((conn.clone(), Arc::clone(&s), now));
                s
            }
        };
        Gate { calls: semaphore, bulkhead: self.bulkhead, brokers: conn.bootstrap_servers.clone() }
    }

    /// The requests the group clients (the reset driver's and the lag measurement's) sent to the
    /// brokers since the start, by request type, as librdkafka counts them: those of the clients
    /// open now and of those closed before. The metric `ankka_flow_kafka_requests_total` serves it.
    pub fn requests_sent(&self) -> Requests {
        let mut total = self.retired.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for p in self.pooled.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Client::Group(_, c) = &p.client {
                add(&mut total, &c.requests_sent());
            }
        }
        total
    }

    /// The group client of `conn` in lane `lane` (taken modulo [`LANES`]), connected already when it
    /// was used within [`IDLE`]. A new one gets the group `home` gives as its home group (see
    /// [`KafkaClient`]): a group it serves, so that the connection's principal may describe it.
    ///
    /// # Errors
    /// librdkafka rejecting the connection's properties, or `home`'s failure.
    pub fn group_client(
        &self,
        conn: &KafkaConnection,
        lane: usize,
        home: impl FnOnce() -> Result<GroupId, KafkaFailure>,
    ) -> Result<Arc<KafkaClient>, KafkaFailure> {
        let lane = lane % LANES;
        match self.get(conn, Slot::Group(lane), || {
            Ok(Client::Group(lane, Arc::new(KafkaClient::new(conn, self.deadlines, home()?.as_str())?)))
        })? {
            Client::Group(_, c) => Ok(c),
            Client::Topics(_) => unreachable!("a group slot holds a group client"),
        }
    }

    /// The topic admin client of `conn`, connected already when it was used within [`IDLE`].
    ///
    /// # Errors
    /// librdkafka rejecting the connection's properties.
    pub fn topic_admin(&self, conn: &KafkaConnection) -> Result<Arc<TopicAdmin>, KafkaFailure> {
        match self.get(conn, Slot::Topics, || Ok(Client::Topics(Arc::new(TopicAdmin::new(conn, self.deadlines)?))))? {
            Client::Topics(c) => Ok(c),
            Client::Group(..) => unreachable!("the topics slot holds an admin client"),
        }
    }

    /// The client in `slot` of `conn`, made by `make` when there is none; closes the clients unused
    /// for [`IDLE`] and those failed for good first.
    fn get(
        &self,
        conn: &KafkaConnection,
        slot: Slot,
        make: impl FnOnce() -> Result<Client, KafkaFailure>,
    ) -> Result<Client, KafkaFailure> {
        let now = Instant::now();
        let mut pooled = self.pooled.lock().unwrap_or_else(|p| p.into_inner());
        let (closing, kept): (Vec<Pooled>, Vec<Pooled>) = std::mem::take(&mut *pooled)
            .into_iter()
            .partition(|p| now.duration_since(p.used) > IDLE || p.client.failed_for_good());
        *pooled = kept;
        for p in &closing {
            if let Client::Group(_, c) = &p.client {
                add(&mut self.retired.lock().unwrap_or_else(|p| p.into_inner()), &c.requests_sent());
            }
        }
        close(closing);
        if let Some(p) = pooled.iter_mut().find(|p| p.client.slot() == slot && p.conn == *conn) {
            p.used = now;
            return Ok(p.client.clone());
        }
        let client = make()?;
        pooled.push(Pooled { conn: conn.clone(), client: client.clone(), used: now });
        Ok(client)
    }
}

/// Adds the counts of `more` to `total`.
fn add(total: &mut Requests, more: &Requests) {
    for (request, n) in more {
        *total.entry(request.clone()).or_default() += n;
    }
}

/// Closes `clients` off the runtime's workers: closing a librdkafka client waits for its threads,
/// so it is done on the blocking pool.
fn close(clients: Vec<Pooled>) {
    if !clients.is_empty()
        && let Ok(rt) = tokio::runtime::Handle::try_current()
    {
        rt.spawn_blocking(move || drop(clients));
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        close(std::mem::take(&mut *self.pooled.lock().unwrap_or_else(|p| p.into_inner())));
    }
}

/// The consumer group a client of topic `topic_id`'s connection in `flow` gets as its home group:
/// the group of the first inlet of `flow` that reads the topic, else of its first inlet.
///
/// # Errors
/// A pipeline without inlets, whose connections serve no group.
fn home_group(flow: &AnkkaFlow, topic_id: &str) -> Result<GroupId, KafkaFailure> {
    let inlets: Vec<_> =
        flow_core::targets::select(&flow.spec, &[]).unwrap_or_default().into_iter().flat_map(|t| t.inlets).collect();
    inlets.iter().find(|i| i.topic_id == topic_id).or(inlets.first()).map(|i| i.group.clone()).ok_or_else(|| {
        KafkaFailure::configuration(format!("the pipeline has no inlet: no consumer group reads topic '{topic_id}'"))
    })
}

/// What [`Connections`] work with: the cluster Secrets and the operator's Kafka clients.
/// `crate::context::Context` converts into it, so `Connections::new(ctx)` takes the reconcile's
/// context.
pub struct Parts<'a> {
    /// The Kafka cluster Secrets.
    pub clusters: &'a crate::clusters::ClusterSecrets,
    /// The operator's Kafka clients.
    pub kafka: &'a Kafka,
    /// The token endpoints an administrator allows topics with their own brokers to use.
    pub token_endpoints: &'a connection::TokenEndpoints,
}

/// Kafka connections of resources' topics, read from the cluster Secrets at most once per use,
/// and their clients, from the operator's [`Pool`].
pub struct Connections<'a> {
    parts: Parts<'a>,
    clusters: Option<Clusters>,
    /// Each resource's resolution, by namespace and name, once per use.
    resolved: HashMap<(String, String), Resolution>,
}

impl<'a> Connections<'a> {
    /// Connections of the cluster Secrets of `parts` (the reconcile's context), read lazily.
    pub fn new(parts: impl Into<Parts<'a>>) -> Self {
        Connections { parts: parts.into(), clusters: None, resolved: HashMap::new() }
    }

    /// The client of topic `topic_id`'s connection in `flow`, from the operator's [`Pool`].
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
        self.parts.kafka.group_client(&conn, lane, || home_group(flow, topic_id))
    }

    /// The client of a reset's Kafka calls over topic `topic_id`'s connection in `flow`, in lane
    /// `lane` (see [`Connections::client_in`]): the pool's group client, or the mocked-API tests'
    /// in-memory Kafka (see [`Kafka::reset_client`]).
    ///
    /// # Errors
    /// As [`Connections::client`].
    pub async fn reset_client(
        &mut self,
        flow: &AnkkaFlow,
        topic_id: &str,
        lane: usize,
    ) -> Result<Arc<dyn ResetCalls>, KafkaFailure> {
        let conn = self.get(flow, topic_id).await?;
        self.parts.kafka.reset_client(&conn, lane, || home_group(flow, topic_id))
    }

    /// The bulkhead of topic `topic_id`'s connection in `flow` (see [`Gate`]).
    ///
    /// # Errors
    /// As [`Connections::get`].
    pub async fn gate(&mut self, flow: &AnkkaFlow, topic_id: &str) -> Result<Gate, KafkaFailure> {
        let conn = self.get(flow, topic_id).await?;
        Ok(self.parts.kafka.gate(&conn))
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
                let ns = self.parts.clusters.namespace();
                let listed = self.parts.clusters.get().await.map_err(|e| {
                    KafkaFailure::unavailable(format!("cannot read the Kafka cluster Secrets in namespace '{ns}': {e}"))
                })?;
                self.clusters = Some(listed);
            }
            let empty = Clusters::new();
            let clusters = self.clusters.as_ref().unwrap_or(&empty);
            self.resolved.insert(
                key.clone(),
                connection::resolve_pipeline(&flow.spec, &key.0, clusters, self.parts.token_endpoints),
            );
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
