//! Which Kafka connection a topic uses (reference.md §7).
//!
//! A topic names brokers itself (`bootstrapServers`) or a cluster, whose Secret
//! `kafka-cluster-<name>` in the operator's clusters namespace holds the brokers and Java `.properties`
//! text for `connection-config` and `consumer-config`. The topic's own maps are laid over the cluster's,
//! key by key. This module turns the Secret's decoded data and the topic into one
//! [`KafkaConnection`]; the adapter turns that into a client.

use std::collections::BTreeMap;
use std::fmt;

use crate::resource::TopicSpec;

/// Prefix of cluster Secret names.
pub const CLUSTER_SECRET_PREFIX: &str = "kafka-cluster-";
/// The cluster a topic uses when it names neither a cluster nor brokers.
pub const DEFAULT_CLUSTER: &str = "default";

/// One Kafka cluster, read from its Secret's data (keys `bootstrap.servers`, `connection-config`,
/// `consumer-config`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    /// Brokers, trimmed; `None` when the Secret has none.
    pub bootstrap_servers: Option<String>,
    /// Properties for every client.
    pub connection_config: BTreeMap<String, String>,
    /// Consumer properties.
    pub consumer_config: BTreeMap<String, String>,
}

/// Why a cluster Secret or a topic's connection could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// A properties block of the Secret does not parse.
    #[error("Secret '{secret}': key '{key}' is not Java properties text: {reason}")]
    Properties {
        /// Secret name.
        secret: String,
        /// Data key.
        key: String,
        /// Parser's reason.
        reason: String,
    },
    /// The topic's cluster has no Secret.
    #[error("topic '{topic}' uses Kafka cluster '{cluster}', but there is no Secret 'kafka-cluster-{cluster}'")]
    NoSecret {
        /// Topic id.
        topic: String,
        /// Cluster name.
        cluster: String,
    },
    /// Neither the topic nor its cluster names brokers.
    #[error("topic '{topic}' names no bootstrap.servers and no Kafka cluster")]
    NoBrokers {
        /// Topic id.
        topic: String,
    },
}

impl Cluster {
    /// Reads a cluster from the decoded data of Secret `secret` (its `data` and `stringData`).
    ///
    /// # Errors
    /// [`ConnectionError::Properties`] when `connection-config` or `consumer-config` is not Java
    /// properties text.
    pub fn from_secret_data(secret: &str, data: &BTreeMap<String, String>) -> Result<Self, ConnectionError> {
        let props = |key: &str| -> Result<BTreeMap<String, String>, ConnectionError> {
            match data.get(key) {
                None => Ok(BTreeMap::new()),
                Some(text) => java_properties::read(text.as_bytes()).map(|m| m.into_iter().collect()).map_err(|e| {
                    ConnectionError::Properties { secret: secret.into(), key: key.into(), reason: e.to_string() }
                }),
            }
        };
        Ok(Cluster {
            bootstrap_servers: data.get("bootstrap.servers").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            connection_config: props("connection-config")?,
            consumer_config: props("consumer-config")?,
        })
    }
}

/// What a client needs to reach a topic's brokers. `Debug` and `Display` never show property values,
/// since they may hold credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaConnection {
    /// Broker list.
    pub bootstrap_servers: String,
    /// Client properties: the connection's, plus the security settings (`security.*`, `sasl.*`,
    /// `ssl.*`) of the consumer configuration. Other consumer settings (fetch sizes, poll intervals,
    /// offset reset policy) concern reading records, which the reset never does, and are left out.
    pub properties: BTreeMap<String, String>,
}

impl fmt::Debug for KafkaConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConnection")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn is_security_key(k: &str) -> bool {
    k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl.")
}

/// Resolves the connection of `topic` (reference.md §7.2, steps 1, 2, 3 and 5).
///
/// # Errors
/// [`ConnectionError::NoSecret`] when the topic's cluster (named, or `default` when the topic names
/// no brokers) has no Secret; [`ConnectionError::NoBrokers`] when no brokers are known.
pub fn resolve(topic: &TopicSpec, clusters: &BTreeMap<String, Cluster>) -> Result<KafkaConnection, ConnectionError> {
    let cluster_name = match (&topic.cluster, &topic.bootstrap_servers) {
        (Some(c), _) => Some(c.as_str()),
        (None, None) => Some(DEFAULT_CLUSTER),
        (None, Some(_)) => None,
    };
    let cluster = match cluster_name {
        Some(name) => Some(
            clusters
                .get(name)
                .ok_or_else(|| ConnectionError::NoSecret { topic: topic.id.clone(), cluster: name.into() })?,
        ),
        None => None,
    };
    let bootstrap_servers = topic
        .bootstrap_servers
        .clone()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| cluster.and_then(|c| c.bootstrap_servers.clone()))
        .ok_or_else(|| ConnectionError::NoBrokers { topic: topic.id.clone() })?;
    let mut properties = BTreeMap::new();
    if let Some(c) = cluster {
        properties.extend(c.connection_config.clone());
        properties
            .extend(c.consumer_config.iter().filter(|(k, _)| is_security_key(k)).map(|(k, v)| (k.clone(), v.clone())));
    }
    properties.extend(topic.connection_config.clone());
    properties
        .extend(topic.consumer_config.iter().filter(|(k, _)| is_security_key(k)).map(|(k, v)| (k.clone(), v.clone())));
    Ok(KafkaConnection { bootstrap_servers, properties })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::tests::topic;

    fn secret(data: &[(&str, &str)]) -> BTreeMap<String, String> {
        data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn topic_brokers_win_and_need_no_cluster() {
        let t = topic("cart-events", "shop.cart-events.v1");
        let c = resolve(&t, &BTreeMap::new()).unwrap();
        assert_eq!(c.bootstrap_servers, "127.0.0.1:19092");
    }

    #[test]
    fn cluster_secret_supplies_brokers_and_properties_topic_overrides() {
        let mut t = topic("cart-events", "shop.cart-events.v1");
        t.bootstrap_servers = None;
        t.cluster = Some("shop".into());
        t.connection_config.insert("sasl.mechanism".into(), "PLAIN".into());
        t.consumer_config.insert("auto.offset.reset".into(), "earliest".into());
        let cluster = Cluster::from_secret_data(
            "kafka-cluster-shop",
            &secret(&[
                ("bootstrap.servers", " kafka:9092 \n"),
                ("connection-config", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"),
                ("consumer-config", "max.poll.records=10\nsasl.username=u\n"),
            ]),
        )
        .unwrap();
        let c = resolve(&t, &BTreeMap::from([("shop".into(), cluster)])).unwrap();
        assert_eq!(c.bootstrap_servers, "kafka:9092");
        assert_eq!(c.properties.get("security.protocol").unwrap(), "SASL_PLAINTEXT");
        assert_eq!(c.properties.get("sasl.mechanism").unwrap(), "PLAIN");
        assert_eq!(c.properties.get("sasl.username").unwrap(), "u");
        assert!(!c.properties.contains_key("max.poll.records"));
        assert!(!c.properties.contains_key("auto.offset.reset"));
        assert!(!format!("{c:?}").contains("SASL_PLAINTEXT"), "Debug shows no values");
    }

    #[test]
    fn missing_secret_and_missing_brokers() {
        let mut t = topic("cart-events", "shop.cart-events.v1");
        t.bootstrap_servers = None;
        assert_eq!(
            resolve(&t, &BTreeMap::new()).unwrap_err().to_string(),
            "topic 'cart-events' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'"
        );
        let empty = BTreeMap::from([("default".to_string(), Cluster::default())]);
        assert_eq!(
            resolve(&t, &empty).unwrap_err().to_string(),
            "topic 'cart-events' names no bootstrap.servers and no Kafka cluster"
        );
    }
}
