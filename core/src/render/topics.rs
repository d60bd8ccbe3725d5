//! What the reconcile does about each topic of the pipeline (resolved against the Kafka cluster
//! Secrets by [`crate::connection`]), given what Kafka said of it.
//!
//! Managed topics that are missing are created with the resource's partitions, replication and
//! `topicConfig`. Existing topics are never altered: what differs from the resource is reported as a
//! Warning event, and the operator leaves the topic as it is. An existing managed topic that the
//! operator cannot prove it created for this resource ([`super::owners`]) is adopted read-only,
//! and reported so (event `TopicAdopted`, and the topic's status). Unmanaged topics are only
//! described; a missing one is reported. No topic is ever created automatically by a client: the
//! sidecar's clients ask with `allow.auto.create.topics=false`.

use std::collections::{BTreeMap, BTreeSet};

use super::owners::{self, Ownership, Record};
use crate::blueprint::CLEANUP_POLICY;
use crate::events::{Event, EventType};
use crate::resource::{TopicOwnership, TopicStatus};

pub use crate::connection::ResolvedTopic;

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
    /// Its topic id (KIP-516), as [`owners::topic_id`] writes it; `None` when Kafka gives none.
    pub topic_id: Option<String>,
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
    /// Who owns it, for an existing managed topic.
    pub ownership: Option<Ownership>,
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

/// How a managed topic is created: partitions, replication, topic-level configuration. `None` for an
/// unmanaged topic (resolution gives every managed topic its sizes).
fn creation(topic: &ResolvedTopic) -> Option<(i32, i32, &BTreeMap<String, String>)> {
    if !topic.managed {
        return None;
    }
    topic.partitions.zip(topic.replicas).map(|(p, r)| (p, r, &topic.topic_config))
}

/// Why a missing managed topic of `partitions` partitions is not created: more than the `most` its
/// cluster Secret allows.
fn too_many_partitions(topic: &ResolvedTopic, partitions: i32, most: i32) -> String {
    let cluster = topic.cluster.as_deref().unwrap_or_default();
    format!(
        "managed topic '{}' (Kafka topic '{}') has {partitions} partitions, more than the {most} that Secret \
         'kafka-cluster-{cluster}' allows a managed topic (annotation '{}'); it was not created",
        topic.id,
        topic.name,
        crate::connection::ANNOTATION_MAX_TOPIC_PARTITIONS
    )
}

/// Decides about one resolved topic given what Kafka said of it and the `record` of what the
/// operator created for the resource.
pub fn decide(topic: &ResolvedTopic, kafka: &KafkaTopic, record: &Record) -> TopicDecision {
    let name = &topic.name;
    let mut events = Vec::new();
    let mut create = None;
    let mut ownership = None;
    let status = match (kafka, creation(topic)) {
        (KafkaTopic::Exists(live), managed) => {
            let mut status = TopicStatus { id: topic.id.clone(), exists: true, detail: String::new(), ownership: None };
            if let Some((partitions, replicas, topic_config)) = managed {
                let owner = owners::ownership(record, name, live.topic_id.as_deref());
                match &owner {
                    Ownership::Created => status.ownership = Some(TopicOwnership::Created),
                    Ownership::Adopted(why) => {
                        let why = why.why();
                        events.push(event(
                            EventType::Warning,
                            "TopicAdopted",
                            format!(
                                "topic '{name}' is adopted read-only: {why}. The operator never alters or deletes \
                                 it, whatever onDelete says."
                            ),
                        ));
                        status.ownership = Some(TopicOwnership::Adopted);
                        status.detail = format!("adopted read-only: {why}");
                    }
                }
                ownership = Some(owner);
                if live.partitions != partitions || live.replication != replicas {
                    events.push(event(
                        EventType::Warning,
                        "TopicDiffers",
                        format!(
                            "topic '{name}' exists with {} partitions and replication {}; the resource declares {partitions} and {replicas}. Left as it is.",
                            live.partitions, live.replication
                        ),
                    ));
                }
                let declared_policy = topic_config.get(CLEANUP_POLICY);
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
                let ignored: Vec<&str> = topic_config
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
            status
        }
        (KafkaTopic::Missing | KafkaTopic::Unreachable(_), Some((partitions, replication, config))) => {
            let most = topic.max_partitions.filter(|most| partitions > *most);
            if let (KafkaTopic::Missing, Some(most)) = (kafka, most) {
                // Bounded by its cluster Secret: a tenant's resource must not have the operator
                // create a topic of millions of partitions on a cluster other teams share
                // (docs/tenancy.md, rule 6).
                let why = too_many_partitions(topic, partitions, most);
                events.push(event(EventType::Warning, "TopicNotCreated", why.clone()));
                return TopicDecision {
                    create,
                    events,
                    status: TopicStatus { id: topic.id.clone(), exists: false, detail: why, ownership: None },
                    ownership,
                };
            }
            if *kafka == KafkaTopic::Missing {
                create = Some(TopicCreation {
                    id: topic.id.clone(),
                    name: name.clone(),
                    partitions,
                    replication,
                    config: config.clone(),
                    event: event(
                        EventType::Normal,
                        "TopicCreated",
                        format!("created topic '{name}' with {partitions} partitions"),
                    ),
                });
            }
            // What the operator creates is its own; while Kafka cannot be asked, nobody knows.
            TopicStatus {
                id: topic.id.clone(),
                exists: true,
                detail: "created by the operator".into(),
                ownership: (*kafka == KafkaTopic::Missing).then_some(TopicOwnership::Created),
            }
        }
        (KafkaTopic::Unreachable(reason), None) => TopicStatus {
            id: topic.id.clone(),
            exists: false,
            detail: format!("Kafka unreachable: {reason}"),
            ownership: None,
        },
        (KafkaTopic::Missing, None) => {
            events.push(event(
                EventType::Warning,
                "TopicMissing",
                format!(
                    "topic '{name}' is not managed by the pipeline and does not exist; its consumers will not become ready"
                ),
            ));
            TopicStatus {
                id: topic.id.clone(),
                exists: false,
                detail: format!("topic '{name}' does not exist"),
                ownership: None,
            }
        }
    };
    TopicDecision { create, events, status, ownership }
}

#[cfg(test)]
mod tests;
