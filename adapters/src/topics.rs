//! Kafka topic administration over a topic's own connection: describe, create and delete, with
//! rdkafka's safe `AdminClient`.
//!
//! Nothing here ever makes a topic appear by accident: existence is read with DescribeTopics, whose
//! Metadata request does not allow topic creation, so a broker with
//! `auto.create.topics.enable=true` never creates a missing topic for it; a topic's configuration is
//! only asked for once that showed the topic exists. A topic is created only by
//! [`TopicAdmin::create`], which the operator calls for a managed topic it found missing.
//! DescribeTopics also gives each topic's id (KIP-516), which tells the topic the operator created
//! from one of the same name created by someone else (`flow_core::render::owners`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flow_core::connection::KafkaConnection;
use flow_core::redact::Secrets;
use flow_core::reset::{FailureKind, KafkaFailure};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::kafka::{CLIENT_ID, ClientLog, Deadlines, TopicAnswer, classify, config_rejected, describe_topics};

/// What the describe of one topic found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicState {
    /// The cluster has no topic of that name.
    Missing,
    /// The topic exists.
    Exists(Described),
    /// The cluster could not be asked; the reason never holds a credential.
    Unreachable(String),
}

/// An existing topic as Kafka describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// Number of partitions.
    pub partitions: i32,
    /// Replication factor of the topic's first partition (the lowest id).
    pub replication: i32,
    /// Live values of the configuration keys that were asked for; a key Kafka does not know (or
    /// gives no value for) is absent.
    pub configs: BTreeMap<String, String>,
    /// Its topic id (KIP-516) as Kafka's tools show it; `None` when the brokers give none.
    pub topic_id: Option<String>,
}

/// What [`TopicAdmin::create`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// The topic was created by this call; its topic id, once the brokers show the topic (`None`
    /// when they give topics no id, or did not show it within the request deadline).
    Created(Option<String>),
    /// Someone created it between the describe and the create (an already-exists race): nothing
    /// was done.
    AlreadyExisted,
}

/// What [`TopicAdmin::delete`] did to one topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The topic was deleted.
    Deleted,
    /// There was no such topic.
    Missing,
}

/// An admin client of one Kafka connection. Building one costs a bootstrap connection, so the
/// operator keeps one per connection and shares it between reconciles.
///
/// A thread serves the client's main queue while the admin client lives, as
/// [`crate::kafka::KafkaClient`]'s pump does for its own: librdkafka delivers its log lines and error
/// events there, and only once they reach the [`ClientLog`] does a failed authentication or TLS
/// handshake word the failure of a call ([`ClientLog`]'s explanation) instead of the timeout it
/// causes. rdkafka's admin client serves only the queue of its calls' results.
pub struct TopicAdmin {
    pump: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    admin: AdminClient<ClientLog>,
    bootstrap_servers: String,
    deadlines: Deadlines,
}

impl Drop for TopicAdmin {
    fn drop(&mut self) {
        // Before the client itself drops (fields drop after this): the thread holds its main queue.
        if let Some((stop, thread)) = self.pump.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

impl TopicAdmin {
    /// An admin client of `conn` whose every request has deadline `d.request`.
    ///
    /// # Errors
    /// A final [`KafkaFailure`] when librdkafka rejects the connection's properties.
    pub fn new(conn: &KafkaConnection, d: Deadlines) -> Result<Self, KafkaFailure> {
        let mut cfg = ClientConfig::new();
        for (k, v) in &conn.properties {
            cfg.set(k, v);
        }
        cfg.set("bootstrap.servers", &conn.bootstrap_servers)
            .set("client.id", CLIENT_ID)
            .set("socket.timeout.ms", d.request.as_millis().to_string());
        let log = ClientLog::new(&conn.bootstrap_servers, Secrets::of(&conn.properties));
        let admin = cfg.create_with_context(log).map_err(|e| {
            KafkaFailure::configuration(format!(
                "cannot build a Kafka admin client for {}: {}",
                conn.bootstrap_servers,
                config_rejected(&e)
            ))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = crate::kafka::serve_main_queue(&admin, Arc::clone(&stop))
            .map_err(|e| KafkaFailure::unavailable(format!("cannot start a Kafka client thread: {e}")))?;
        Ok(TopicAdmin {
            pump: Some((stop, thread)),
            admin,
            bootstrap_servers: conn.bootstrap_servers.clone(),
            deadlines: d,
        })
    }

    fn options(&self) -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(self.deadlines.request))
            .operation_timeout(Some(self.deadlines.request))
    }

    /// A failure, replaced by the final failure (TLS, authentication) librdkafka reported meanwhile,
    /// if any; either way without a credential or a token endpoint's answer.
    fn explain(&self, failure: KafkaFailure) -> KafkaFailure {
        self.admin.inner().context().explain(failure)
    }

    /// [`TopicAdmin::explain`] for a call that failed as a whole; a cluster that gave no answer
    /// (no final cause known) is named by its bootstrap servers, which hold no credential.
    fn explain_call(&self, failure: KafkaFailure) -> KafkaFailure {
        let f = self.explain(failure);
        match f.kind {
            FailureKind::Unreachable | FailureKind::Unavailable if !f.reason.contains(&self.bootstrap_servers) => {
                KafkaFailure {
                    reason: format!("the Kafka cluster at {} did not answer: {}", self.bootstrap_servers, f.reason),
                    ..f
                }
            }
            _ => f,
        }
    }

    /// Describes each topic of `wanted` (Kafka name -> the configuration keys whose live values
    /// are wanted): partitions, replication factor of the first partition, topic id, and those
    /// values.
    ///
    /// One DescribeTopics request for the topics, then one DescribeConfigs request for the existing
    /// topics that want configuration values. When the cluster cannot be asked, every
    /// topic is [`TopicState::Unreachable`] with the reason.
    pub async fn describe(
        self: &Arc<Self>,
        wanted: BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeMap<String, TopicState> {
        let this = Arc::clone(self);
        let names: Vec<String> = wanted.keys().cloned().collect();
        let metadata = tokio::task::spawn_blocking(move || {
            let answers = describe_topics(this.admin.inner(), &names, this.deadlines.request);
            answers
                .map(|mut answers| {
                    names
                        .iter()
                        .map(|name| {
                            let found = match answers.remove(name) {
                                Some(TopicAnswer::Exists { partitions, replication, topic_id: (msb, lsb) }) => {
                                    Some(Ok((partitions, replication, flow_core::render::owners::topic_id(msb, lsb))))
                                }
                                Some(TopicAnswer::Failed(RDKafkaErrorCode::UnknownTopicOrPartition, _)) => None,
                                Some(TopicAnswer::Failed(code, _)) => Some(Err(format!("topic '{name}': {code}"))),
                                None => Some(Err(format!("topic '{name}': Kafka gave no answer for it"))),
                            };
                            (name.clone(), found)
                        })
                        .collect::<BTreeMap<_, _>>()
                })
                .map_err(|f| this.explain_call(f))
        })
        .await
        .unwrap_or_else(|e| Err(KafkaFailure::unavailable(format!("Kafka worker stopped: {e}"))));
        let listed = match metadata {
            Ok(listed) => listed,
            Err(f) => {
                return wanted.into_keys().map(|name| (name, TopicState::Unreachable(f.reason.clone()))).collect();
            }
        };
        let mut out = BTreeMap::new();
        let mut configs_wanted: Vec<&str> = Vec::new();
        for (name, found) in &listed {
            match found {
                None => {
                    out.insert(name.clone(), TopicState::Missing);
                }
                Some(Err(reason)) => {
                    out.insert(name.clone(), TopicState::Unreachable(reason.clone()));
                }
                Some(Ok((partitions, replication, topic_id))) => {
                    out.insert(
                        name.clone(),
                        TopicState::Exists(Described {
                            partitions: *partitions,
                            replication: *replication,
                            configs: BTreeMap::new(),
                            topic_id: topic_id.clone(),
                        }),
                    );
                    if wanted.get(name).is_some_and(|keys| !keys.is_empty()) {
                        configs_wanted.push(name);
                    }
                }
            }
        }
        if configs_wanted.is_empty() {
            return out;
        }
        let specifiers: Vec<ResourceSpecifier<'_>> =
            configs_wanted.iter().map(|n| ResourceSpecifier::Topic(n)).collect();
        let opts = self.options();
        let answer = self.bounded(self.admin.describe_configs(specifiers.iter(), &opts)).await;
        match answer {
            Err(f) => {
                let f = self.explain(f);
                for name in configs_wanted {
                    out.insert(name.to_string(), TopicState::Unreachable(f.reason.clone()));
                }
            }
            Ok(results) => {
                for (name, result) in configs_wanted.into_iter().zip(results) {
                    match result {
                        Ok(resource) => {
                            if let (Some(TopicState::Exists(d)), Some(keys)) = (out.get_mut(name), wanted.get(name)) {
                                d.configs = resource
                                    .entries
                                    .into_iter()
                                    .filter(|e| keys.contains(&e.name))
                                    .filter_map(|e| e.value.map(|v| (e.name, v)))
                                    .collect();
                            }
                        }
                        // Deleted between the two requests.
                        Err(RDKafkaErrorCode::UnknownTopicOrPartition) => {
                            out.insert(name.to_string(), TopicState::Missing);
                        }
                        Err(code) => {
                            let f = self.explain(classify(&KafkaError::AdminOp(code)));
                            out.insert(
                                name.to_string(),
                                TopicState::Unreachable(format!(
                                    "topic '{name}': cannot read its configuration: {}",
                                    f.reason
                                )),
                            );
                        }
                    }
                }
            }
        }
        out
    }

    /// Creates topic `name` with `partitions`, replication factor `replication` and topic-level
    /// `config`, and gives its topic id. A topic that appeared meanwhile is no error
    /// ([`Created::AlreadyExisted`]).
    ///
    /// # Errors
    /// Kafka's refusal (an invalid setting, too few brokers for the replication factor, no right to
    /// create topics), or the deadline.
    pub async fn create(
        self: &Arc<Self>,
        name: &str,
        partitions: i32,
        replication: i32,
        config: &BTreeMap<String, String>,
    ) -> Result<Created, KafkaFailure> {
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
        for (k, v) in config {
            topic = topic.set(k, v);
        }
        let opts = self.options();
        let results = self.bounded(self.admin.create_topics([&topic], &opts)).await.map_err(|f| self.explain(f))?;
        match results.into_iter().next() {
            Some(Ok(_)) => Ok(Created::Created(self.created_id(name).await)),
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(Created::AlreadyExisted),
            Some(Err((_, code))) => Err(self.explain(classify(&KafkaError::AdminOp(code)))),
            None => Err(KafkaFailure::unavailable("Kafka gave no answer for the topic")),
        }
    }

    /// The topic id of topic `name`, which this client just created: asked until the brokers show
    /// the topic (a broker learns of a new topic a moment after the controller created it), up to
    /// the request deadline. `None` when they give topics no id, or did not show it in time.
    async fn created_id(self: &Arc<Self>, name: &str) -> Option<String> {
        let end = std::time::Instant::now() + self.deadlines.request;
        loop {
            let wanted = BTreeMap::from([(name.to_string(), BTreeSet::new())]);
            match self.describe(wanted).await.remove(name) {
                Some(TopicState::Exists(d)) => return d.topic_id,
                Some(TopicState::Missing) if std::time::Instant::now() < end => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => return None,
            }
        }
    }

    /// Deletes each topic of `names`; a topic that does not exist is [`Deleted::Missing`], not an
    /// error. Results are in the order of `names`.
    pub async fn delete(&self, names: &[String]) -> Vec<(String, Result<Deleted, KafkaFailure>)> {
        if names.is_empty() {
            return Vec::new();
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let opts = self.options();
        match self.bounded(self.admin.delete_topics(&refs, &opts)).await {
            Err(f) => {
                let f = self.explain(f);
                names.iter().map(|n| (n.clone(), Err(f.clone()))).collect()
            }
            Ok(results) => {
                let mut by_name: BTreeMap<String, Result<Deleted, KafkaFailure>> = results
                    .into_iter()
                    .map(|r| match r {
                        Ok(name) => (name, Ok(Deleted::Deleted)),
                        Err((name, RDKafkaErrorCode::UnknownTopicOrPartition)) => (name, Ok(Deleted::Missing)),
                        Err((name, code)) => (name, Err(self.explain(classify(&KafkaError::AdminOp(code))))),
                    })
                    .collect();
                names
                    .iter()
                    .map(|n| {
                        let r = by_name
                            .remove(n)
                            .unwrap_or_else(|| Err(KafkaFailure::unavailable("Kafka gave no answer for the topic")));
                        (n.clone(), r)
                    })
                    .collect()
            }
        }
    }

    /// Waits for an admin call at most a little longer than its own deadlines.
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, KafkaError>>,
    ) -> Result<T, KafkaFailure> {
        let limit = self.deadlines.request * 2 + Duration::from_secs(1);
        match tokio::time::timeout(limit, call).await {
            Ok(r) => r.map_err(|e| classify(&e)),
            Err(_) => Err(KafkaFailure::unreachable(format!(
                "Kafka at {} did not answer within {} s",
                self.bootstrap_servers,
                limit.as_secs()
            ))),
        }
    }
}
