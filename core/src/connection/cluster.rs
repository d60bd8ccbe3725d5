//! A Kafka cluster as its Secret `kafka-cluster-<name>` describes it: brokers, the settings of every
//! client, defaults for managed topics, and the namespaces that may use it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::*;

/// Prefix of cluster Secret names.
pub const CLUSTER_SECRET_PREFIX: &str = "kafka-cluster-";
/// The cluster a topic uses when it names neither a cluster nor brokers.
pub const DEFAULT_CLUSTER: &str = "default";
/// Annotation of a cluster Secret: the namespaces whose resources may use the cluster, by name,
/// separated by commas or spaces; `*` for every namespace. Without it, no namespace may.
pub const ANNOTATION_ALLOWED_NAMESPACES: &str = "flow.ankka.thinkmorestupidless.com/allowed-namespaces";
/// Annotation of a cluster Secret: `"true"` lets a reset move a consumer group that pipelines of
/// several namespaces map to on this cluster (see [`crate::tenancy`]).
pub const ANNOTATION_ALLOW_SHARED_GROUPS: &str = "flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups";

/// Annotation of a cluster Secret: the prefixes of the Kafka names of the managed topics that every
/// namespace it allows may declare on the cluster, separated by commas or spaces. `{namespace}`
/// stands for the namespace's name, `*` for any name. Without it (and without the namespace's own
/// annotation, [`ANNOTATION_NAMESPACE_TOPIC_PREFIXES`]), any name.
pub const ANNOTATION_TOPIC_PREFIXES: &str = "flow.ankka.thinkmorestupidless.com/topic-prefixes";
/// Annotation key of one namespace's topic prefixes, the namespace's name following the `/`:
/// `topic-prefixes.flow.ankka.thinkmorestupidless.com/<namespace>`. For that namespace it takes the
/// place of [`ANNOTATION_TOPIC_PREFIXES`]; same format.
pub const ANNOTATION_NAMESPACE_TOPIC_PREFIXES: &str = "topic-prefixes.flow.ankka.thinkmorestupidless.com/";
/// What stands for the namespace's name in a topic prefix.
pub const NAMESPACE_PLACEHOLDER: &str = "{namespace}";
/// Annotation of a cluster Secret: the most partitions a managed topic may have on the cluster, a
/// whole number of at least 1; [`DEFAULT_MAX_TOPIC_PARTITIONS`] without it.
pub const ANNOTATION_MAX_TOPIC_PARTITIONS: &str = "flow.ankka.thinkmorestupidless.com/max-topic-partitions";
/// The most partitions a managed topic may have on a cluster whose Secret does not say
/// ([`ANNOTATION_MAX_TOPIC_PARTITIONS`]): a tenant's resource must not make the operator create a
/// topic of millions of partitions on a cluster other teams share. A thousand is the largest topic
/// the operator's benchmarks reset (docs/performance.md).
pub const DEFAULT_MAX_TOPIC_PARTITIONS: i32 = 1000;

/// Which Kafka names of managed topics the namespaces may declare on a cluster, from
/// [`ANNOTATION_TOPIC_PREFIXES`] and [`ANNOTATION_NAMESPACE_TOPIC_PREFIXES`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicPrefixes {
    /// Every namespace's, unless it has its own.
    every: Option<Vec<String>>,
    /// Those of the namespaces that have their own, by namespace.
    per_namespace: BTreeMap<String, Vec<String>>,
}

impl TopicPrefixes {
    /// The prefixes the managed topics of namespace `namespace` must start with (`{namespace}`
    /// replaced), possibly none at all; `None` when any name will do.
    pub fn of(&self, namespace: &str) -> Option<Vec<String>> {
        let listed = self.per_namespace.get(namespace).or(self.every.as_ref())?;
        if listed.iter().any(|p| p == "*") {
            return None;
        }
        Some(listed.iter().map(|p| p.replace(NAMESPACE_PLACEHOLDER, namespace)).collect())
    }

    /// Reads the annotations; entries that are neither `*` nor a topic name prefix are returned
    /// apart, with the annotation that lists them.
    fn parse(annotations: &BTreeMap<String, String>) -> (Self, Vec<(String, String)>) {
        let mut out = TopicPrefixes::default();
        let mut bad = Vec::new();
        let mut read = |key: &str, value: &str| -> Vec<String> {
            let entries: Vec<&str> =
                value.split(|c: char| c == ',' || c.is_whitespace()).filter(|e| !e.is_empty()).collect();
            let (good, wrong): (Vec<&str>, Vec<&str>) = entries.into_iter().partition(|e| is_prefix(e));
            bad.extend(wrong.into_iter().map(|e| (key.to_string(), e.to_string())));
            good.into_iter().map(str::to_string).collect()
        };
        for (key, value) in annotations {
            if key == ANNOTATION_TOPIC_PREFIXES {
                out.every = Some(read(key, value));
            } else if let Some(ns) = key.strip_prefix(ANNOTATION_NAMESPACE_TOPIC_PREFIXES) {
                let prefixes = read(key, value);
                out.per_namespace.insert(ns.to_string(), prefixes);
            }
        }
        (out, bad)
    }
}

/// Whether `entry` is `*`, or a prefix of Kafka topic names (ASCII letters, digits, `.`, `_` and
/// `-`, with `{namespace}` anywhere).
fn is_prefix(entry: &str) -> bool {
    entry == "*"
        || entry
            .replace(NAMESPACE_PLACEHOLDER, "")
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Which namespaces a cluster Secret allows, from [`ANNOTATION_ALLOWED_NAMESPACES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedNamespaces {
    /// `*`: every namespace.
    Every,
    /// These namespaces, by name.
    Listed(BTreeSet<String>),
}

impl AllowedNamespaces {
    /// Whether `namespace` may use the cluster.
    pub fn allows(&self, namespace: &str) -> bool {
        match self {
            AllowedNamespaces::Every => true,
            AllowedNamespaces::Listed(names) => names.contains(namespace),
        }
    }

    /// Reads the annotation's value; entries that are not namespace names are returned apart.
    fn parse(value: &str) -> (Self, Vec<String>) {
        let entries: Vec<&str> =
            value.split(|c: char| c == ',' || c.is_whitespace()).filter(|e| !e.is_empty()).collect();
        if entries.contains(&"*") {
            let bad = entries.iter().filter(|e| **e != "*" && !is_namespace_name(e)).map(|e| e.to_string()).collect();
            return (AllowedNamespaces::Every, bad);
        }
        let (good, bad): (Vec<&str>, Vec<&str>) = entries.into_iter().partition(|e| is_namespace_name(e));
        (
            AllowedNamespaces::Listed(good.into_iter().map(str::to_string).collect()),
            bad.into_iter().map(str::to_string).collect(),
        )
    }
}

/// A Kubernetes namespace name: a DNS label (RFC 1123).
pub(super) fn is_namespace_name(s: &str) -> bool {
    s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.is_empty()
}

/// One Kafka cluster, read from its Secret: the Secret's decoded data (`data` and `stringData`) and
/// its annotations.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Cluster {
    /// Cluster name: the Secret's name after [`CLUSTER_SECRET_PREFIX`].
    pub name: String,
    /// Brokers, trimmed; `None` when the Secret has none.
    pub bootstrap_servers: Option<String>,
    /// Properties for every client (`connection-config`).
    pub connection_config: BTreeMap<String, String>,
    /// Producer properties (`producer-config`).
    pub producer_config: BTreeMap<String, String>,
    /// Consumer properties (`consumer-config`).
    pub consumer_config: BTreeMap<String, String>,
    /// Default partition count of managed topics (`partitions`, trimmed), as written.
    pub partitions: Option<String>,
    /// Default replication factor of managed topics (`replicas`, trimmed), as written.
    pub replicas: Option<String>,
    /// The namespaces that may use the cluster; `None` when the Secret does not say, so none may.
    pub allowed_namespaces: Option<AllowedNamespaces>,
    /// Whether a reset may move a consumer group that pipelines of several namespaces map to on this
    /// cluster ([`ANNOTATION_ALLOW_SHARED_GROUPS`]).
    pub allow_shared_groups: bool,
    /// Which Kafka names of managed topics each namespace may declare on the cluster.
    pub topic_prefixes: TopicPrefixes,
    /// The most partitions a managed topic may have on the cluster, as
    /// [`ANNOTATION_MAX_TOPIC_PARTITIONS`] says; `None`: [`DEFAULT_MAX_TOPIC_PARTITIONS`] (see
    /// [`Cluster::max_topic_partitions`]).
    pub max_topic_partitions: Option<i32>,
    /// The credentials of each namespace's streamlets of their own (`streamlet-credentials.<namespace>`),
    /// and whether every namespace must have them ([`StreamletCredentials`]).
    pub streamlet_credentials: StreamletCredentials,
    /// What is wrong with the Secret itself; reported for every topic that uses the cluster (in a
    /// namespace it allows: others learn only that they may not use it).
    pub problems: Vec<ConnectionError>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("connection_config", &self.connection_config.keys().collect::<Vec<_>>())
            .field("producer_config", &self.producer_config.keys().collect::<Vec<_>>())
            .field("consumer_config", &self.consumer_config.keys().collect::<Vec<_>>())
            .field("partitions", &self.partitions)
            .field("replicas", &self.replicas)
            .field("allowed_namespaces", &self.allowed_namespaces)
            .field("allow_shared_groups", &self.allow_shared_groups)
            .field("topic_prefixes", &self.topic_prefixes)
            .field("max_topic_partitions", &self.max_topic_partitions)
            .field("streamlet_credentials", &self.streamlet_credentials)
            .field("problems", &self.problems)
            .finish()
    }
}

/// The Secret keys of the three properties blocks.
const PROPERTIES_KEYS: [&str; 3] = ["connection-config", "producer-config", "consumer-config"];

impl Cluster {
    /// Reads cluster `name` from the decoded data and the annotations of its Secret
    /// (`kafka-cluster-<name>`). What is wrong with the Secret (a properties block that does not
    /// parse, read as empty; a refused setting; an allowed-namespaces entry or a streamlet
    /// credentials key that is not a namespace name) is one of the cluster's [`Cluster::problems`];
    /// what is wrong with one namespace's streamlet credentials is that namespace's alone.
    pub fn from_secret(name: &str, data: &BTreeMap<String, String>, annotations: &BTreeMap<String, String>) -> Self {
        let secret = format!("{CLUSTER_SECRET_PREFIX}{name}");
        let mut problems = Vec::new();
        let mut props = |key: &str| -> BTreeMap<String, String> {
            match data.get(key) {
                None => BTreeMap::new(),
                Some(text) => match java_properties::read(text.as_bytes()) {
                    Ok(m) => m.into_iter().collect(),
                    Err(e) => {
                        problems.push(ConnectionError::Properties {
                            secret: secret.clone(),
                            key: key.into(),
                            reason: e.to_string(),
                        });
                        BTreeMap::new()
                    }
                },
            }
        };
        let [connection_config, producer_config, consumer_config] = PROPERTIES_KEYS.map(&mut props);
        for (block, settings) in PROPERTIES_KEYS.iter().zip([&connection_config, &producer_config, &consumer_config]) {
            for key in settings.keys().filter(|k| !properties::is_property_name(k)) {
                problems.push(ConnectionError::KeyNotAPropertyName {
                    origin: format!("Secret '{secret}'"),
                    block: (*block).to_string(),
                    key: properties::shown_key(key),
                });
            }
            for (key, value) in settings {
                if let Some(r) = properties::refused(key, value, false) {
                    problems.push(ConnectionError::PropertyRefused {
                        origin: format!("Secret '{secret}'"),
                        block: (*block).to_string(),
                        key: key.clone(),
                        why: r.text(),
                    });
                }
            }
        }
        let allowed_namespaces = annotations.get(ANNOTATION_ALLOWED_NAMESPACES).map(|v| {
            let (allowed, bad) = AllowedNamespaces::parse(v);
            for entry in bad {
                problems.push(ConnectionError::AnnotationEntry { secret: secret.clone(), entry });
            }
            allowed
        });
        let (topic_prefixes, bad) = TopicPrefixes::parse(annotations);
        for (annotation, entry) in bad {
            problems.push(ConnectionError::PrefixEntry { secret: secret.clone(), annotation, entry });
        }
        let (streamlet_credentials, bad) = StreamletCredentials::from_secret(&secret, data, annotations);
        problems.extend(bad);
        let max_topic_partitions = annotations.get(ANNOTATION_MAX_TOPIC_PARTITIONS).map(|v| v.trim()).and_then(|v| {
            let n = v.parse::<i32>().ok().filter(|n| *n >= 1);
            if n.is_none() {
                problems.push(ConnectionError::LimitEntry {
                    secret: secret.clone(),
                    annotation: ANNOTATION_MAX_TOPIC_PARTITIONS.to_string(),
                    entry: v.to_string(),
                });
            }
            n
        });
        let trimmed = |key: &str| data.get(key).map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        Cluster {
            name: name.to_string(),
            bootstrap_servers: trimmed("bootstrap.servers"),
            connection_config,
            producer_config,
            consumer_config,
            partitions: trimmed("partitions"),
            replicas: trimmed("replicas"),
            allowed_namespaces,
            allow_shared_groups: annotations
                .get(ANNOTATION_ALLOW_SHARED_GROUPS)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            topic_prefixes,
            max_topic_partitions,
            streamlet_credentials,
            problems,
        }
    }

    /// The most partitions a managed topic may have on the cluster.
    pub fn max_topic_partitions(&self) -> i32 {
        self.max_topic_partitions.unwrap_or(DEFAULT_MAX_TOPIC_PARTITIONS)
    }

    /// Whether resources of `namespace` may use the cluster.
    pub fn allows(&self, namespace: &str) -> bool {
        self.allowed_namespaces.as_ref().is_some_and(|a| a.allows(namespace))
    }

    /// The name of the cluster's Secret.
    pub fn secret_name(&self) -> String {
        format!("{CLUSTER_SECRET_PREFIX}{}", self.name)
    }
}

/// The cluster Secrets of the operator's clusters namespace, by cluster name.
pub type Clusters = BTreeMap<String, Cluster>;
