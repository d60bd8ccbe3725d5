//! The pipeline's topics: how each resolves against the Kafka cluster Secrets, and what the reconcile
//! does about each given what Kafka said of it.
//!
//! Managed topics that are missing are created with the resource's partitions, replication and
//! `topicConfig`. Existing topics are never altered: what differs from the resource is reported as a
//! Warning event, and the operator leaves the topic as it is. Unmanaged topics are only described;
//! a missing one is reported. No topic is ever created automatically by a client: the sidecar's
//! clients ask with `allow.auto.create.topics=false`.

use std::collections::{BTreeMap, BTreeSet};

use crate::blueprint::CLEANUP_POLICY;
use crate::events::{Event, EventType};
use crate::resource::{Batch, TopicSpec, TopicStatus};

/// How the operator creates a managed topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedSettings {
    /// Partitions.
    pub partitions: i32,
    /// Replication factor.
    pub replicas: i32,
    /// Topic-level configuration set at creation.
    pub topic_config: BTreeMap<String, String>,
}

/// A topic of the resource resolved against the cluster Secrets: everything its clients need.
#[derive(Clone, PartialEq)]
pub struct ResolvedTopic {
    /// Topic id inside the pipeline.
    pub id: String,
    /// Kafka topic name.
    pub name: String,
    /// The cluster whose Secret it uses, if any.
    pub cluster: Option<String>,
    /// Brokers.
    pub bootstrap_servers: String,
    /// Properties of every client, Java client names: the cluster's with the topic's laid over.
    pub connection_config: BTreeMap<String, String>,
    /// Producer properties, merged the same way.
    pub producer_config: BTreeMap<String, String>,
    /// Consumer properties, merged the same way.
    pub consumer_config: BTreeMap<String, String>,
    /// Batch limits of the inlets reading it.
    pub batch: Batch,
    /// `Some` for a managed topic: how to create it.
    pub managed: Option<ManagedSettings>,
}

impl std::fmt::Debug for ResolvedTopic {
    /// Without property values, which may hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedTopic")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("cluster", &self.cluster)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("connection_config", &self.connection_config.keys().collect::<Vec<_>>())
            .field("producer_config", &self.producer_config.keys().collect::<Vec<_>>())
            .field("consumer_config", &self.consumer_config.keys().collect::<Vec<_>>())
            .field("managed", &self.managed)
            .finish()
    }
}

/// A Kafka cluster Secret `kafka-cluster-<name>`, decoded: its keys and their text.
pub type ClusterSecret = BTreeMap<String, String>;

/// Resolves one topic against the cluster Secrets (keyed by cluster name).
///
/// The cluster is the topic's `cluster`; else `default` when the topic names no brokers. The brokers
/// are the topic's, else the cluster's. The properties maps are the cluster's with the topic's laid
/// over key by key. A managed topic takes partitions and replicas from the topic, else from the
/// cluster's defaults.
///
/// # Errors
/// Every reason the topic cannot be used, as refusal texts (docs/rendering.md lists them).
pub fn resolve(topic: &TopicSpec, clusters: &BTreeMap<String, ClusterSecret>) -> Result<ResolvedTopic, Vec<String>> {
    let mut problems = Vec::new();
    let named = topic.cluster.as_deref();
    let cluster_name = named.or(topic.bootstrap_servers.is_none().then_some(crate::connection::DEFAULT_CLUSTER));
    let secret_brokers =
        |s: &ClusterSecret| s.get("bootstrap.servers").map(|b| b.trim().to_string()).filter(|b| !b.is_empty());
    let cluster = match cluster_name {
        None => None,
        Some(name) => match clusters.get(name) {
            Some(secret) if secret_brokers(secret).is_some() => Some((name, secret)),
            found => {
                problems.push(format!(
                    "topic '{}' uses Kafka cluster '{name}', but there is no Secret 'kafka-cluster-{name}'",
                    topic.id
                ));
                if found.is_some() && named.is_some() {
                    problems.push(format!("Kafka cluster '{name}' has no bootstrap.servers"));
                }
                None
            }
        },
    };
    let bootstrap_servers = topic
        .bootstrap_servers
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(str::to_string)
        .or_else(|| cluster.and_then(|(_, s)| secret_brokers(s)));
    if bootstrap_servers.is_none() && cluster_name.is_none() {
        problems.push(format!("topic '{}' names no bootstrap.servers and no Kafka cluster", topic.id));
    }
    let mut props = |key: &str, own: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        let mut merged = BTreeMap::new();
        if let Some((name, secret)) = cluster
            && let Some(text) = secret.get(key)
        {
            match java_properties::read(text.as_bytes()) {
                Ok(m) => merged.extend(m),
                Err(e) => problems
                    .push(format!("Secret 'kafka-cluster-{name}': key '{key}' is not Java properties text: {e}")),
            }
        }
        merged.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged
    };
    let connection_config = props("connection-config", &topic.connection_config);
    let producer_config = props("producer-config", &topic.producer_config);
    let consumer_config = props("consumer-config", &topic.consumer_config);
    let managed = if topic.managed {
        let default_of =
            |key: &str| -> Option<i32> { cluster.and_then(|(_, s)| s.get(key)).and_then(|v| v.trim().parse().ok()) };
        let secret_name = cluster_name.unwrap_or(crate::connection::DEFAULT_CLUSTER);
        let partitions = topic.partitions.or_else(|| default_of("partitions"));
        let replicas = topic.replicas.or_else(|| default_of("replicas"));
        for (what, value) in [("partitions", partitions), ("replicas", replicas)] {
            if value.is_none() {
                problems.push(format!(
                    "managed topic '{}' has no {what}: set it in the blueprint, or as a default in Secret 'kafka-cluster-{secret_name}'",
                    topic.id
                ));
            }
        }
        partitions.zip(replicas).map(|(partitions, replicas)| ManagedSettings {
            partitions,
            replicas,
            topic_config: topic.topic_config.clone(),
        })
    } else {
        None
    };
    match bootstrap_servers {
        Some(bootstrap_servers) if problems.is_empty() => Ok(ResolvedTopic {
            id: topic.id.clone(),
            name: topic.name.clone(),
            cluster: cluster.map(|(n, _)| n.to_string()),
            bootstrap_servers,
            connection_config,
            producer_config,
            consumer_config,
            batch: topic.batch.clone().unwrap_or(Batch {
                max_records: crate::blueprint::generate::DEFAULT_MAX_RECORDS,
                max_bytes: crate::blueprint::generate::DEFAULT_MAX_BYTES,
            }),
            managed,
        }),
        _ => Err(problems),
    }
}

/// What Kafka said of a topic when the operator described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KafkaTopic {
    /// It does not exist.
    Missing,
    /// It exists.
    Exists(LiveTopic),
    /// Its Kafka could not be asked; the reason.
    Unreachable(String),
}

/// An existing topic as Kafka describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveTopic {
    /// Partition count.
    pub partitions: i32,
    /// Replication factor of its first partition.
    pub replication: i32,
    /// The live values of the topic-level settings the resource's `topicConfig` sets (a key Kafka
    /// did not return is left out).
    pub configs: BTreeMap<String, String>,
}

/// A managed topic to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicCreation {
    /// Topic id.
    pub id: String,
    /// Kafka topic name.
    pub name: String,
    /// Partitions.
    pub partitions: i32,
    /// Replication factor.
    pub replication: i32,
    /// Topic-level configuration.
    pub config: BTreeMap<String, String>,
    /// `TopicCreated`, to record once the topic was created (or found created by a racing client).
    pub event: Event,
}

/// What the reconcile does about one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicDecision {
    /// The creation, for a managed topic that is missing.
    pub create: Option<TopicCreation>,
    /// Warnings about an existing or missing topic.
    pub events: Vec<Event>,
    /// Its status entry.
    pub status: TopicStatus,
}

fn event(type_: EventType, reason: &str, note: String) -> Event {
    let key = note.clone();
    Event::new(type_, reason, note, key)
}

fn policy_parts(p: &str) -> BTreeSet<&str> {
    p.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Whether a live topic-level value equals the declared one: a `cleanup.policy` as a set of policies,
/// anything else as trimmed text.
fn same_setting(key: &str, declared: &str, live: &str) -> bool {
    if key == CLEANUP_POLICY { policy_parts(declared) == policy_parts(live) } else { declared.trim() == live.trim() }
}

/// Decides about one resolved topic given what Kafka said of it.
pub fn decide(topic: &ResolvedTopic, kafka: &KafkaTopic) -> TopicDecision {
    let name = &topic.name;
    let mut events = Vec::new();
    let mut create = None;
    let status = match (kafka, &topic.managed) {
        (KafkaTopic::Exists(live), managed) => {
            if let Some(m) = managed {
                if live.partitions != m.partitions || live.replication != m.replicas {
                    events.push(event(
                        EventType::Warning,
                        "TopicDiffers",
                        format!(
                            "topic '{name}' exists with {} partitions and replication {}; the resource declares {} and {}. Left as it is.",
                            live.partitions, live.replication, m.partitions, m.replicas
                        ),
                    ));
                }
                let declared_policy = m.topic_config.get(CLEANUP_POLICY);
                let live_policy = live.configs.get(CLEANUP_POLICY);
                let not_compacted = match (declared_policy, live_policy) {
                    (Some(d), Some(l)) => policy_parts(d).contains("compact") && !policy_parts(l).contains("compact"),
                    _ => false,
                };
                if let (true, Some(d), Some(l)) = (not_compacted, declared_policy, live_policy) {
                    events.push(event(
                        EventType::Warning,
                        "TopicNotCompacted",
                        format!(
                            "topic '{name}' exists with cleanup.policy = {l} although the resource asks for {d}; it is not compacted and was left as it is, so records older than its retention are missing from a rebuild. Set cleanup.policy on the topic in Kafka to compact it."
                        ),
                    ));
                }
                let ignored: Vec<&str> = m
                    .topic_config
                    .iter()
                    .filter(|(k, _)| !(not_compacted && k.as_str() == CLEANUP_POLICY))
                    .filter(|(k, v)| live.configs.get(k.as_str()).is_none_or(|l| !same_setting(k, v, l)))
                    .map(|(k, _)| k.as_str())
                    .collect();
                if !ignored.is_empty() {
                    events.push(event(
                        EventType::Warning,
                        "TopicSettingsIgnored",
                        format!("topic '{name}' exists; changed settings {} were not applied", ignored.join(", ")),
                    ));
                }
            }
            TopicStatus { id: topic.id.clone(), exists: true, detail: String::new() }
        }
        (KafkaTopic::Missing | KafkaTopic::Unreachable(_), Some(m)) => {
            if *kafka == KafkaTopic::Missing {
                create = Some(TopicCreation {
                    id: topic.id.clone(),
                    name: name.clone(),
                    partitions: m.partitions,
                    replication: m.replicas,
                    config: m.topic_config.clone(),
                    event: event(
                        EventType::Normal,
                        "TopicCreated",
                        format!("created topic '{name}' with {} partitions", m.partitions),
                    ),
                });
            }
            TopicStatus { id: topic.id.clone(), exists: true, detail: "created by the operator".into() }
        }
        (KafkaTopic::Unreachable(reason), None) => {
            TopicStatus { id: topic.id.clone(), exists: false, detail: format!("Kafka unreachable: {reason}") }
        }
        (KafkaTopic::Missing, None) => {
            events.push(event(
                EventType::Warning,
                "TopicMissing",
                format!(
                    "topic '{name}' is not managed by the pipeline and does not exist; its consumers will not become ready"
                ),
            ));
            TopicStatus { id: topic.id.clone(), exists: false, detail: format!("topic '{name}' does not exist") }
        }
    };
    TopicDecision { create, events, status }
}

#[cfg(test)]
mod tests;
