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
    /// The `sasl.jaas.config` of the topic's connection cannot be turned into librdkafka settings.
    /// The reason never quotes the line, which holds a password.
    #[error("topic '{topic}': sasl.jaas.config {reason}")]
    Jaas {
        /// Topic id.
        topic: String,
        /// What is wrong, without any value of the line.
        reason: String,
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
    let properties =
        for_librdkafka(properties).map_err(|reason| ConnectionError::Jaas { topic: topic.id.clone(), reason })?;
    Ok(KafkaConnection { bootstrap_servers, properties })
}

/// Java client settings that librdkafka does not know and that the reset client can do without: the
/// JVM's pluggable classes and providers, TLS protocol and store-format choices (librdkafka takes
/// OpenSSL's defaults and reads PEM or PKCS#12 by itself), and DNS lookup policy. librdkafka refuses
/// to build a client with a property it does not know, so these are dropped rather than passed on.
/// `sasl.jaas.config` is translated first (see [`for_librdkafka`]), then dropped too.
pub const JAVA_ONLY_KEYS: &[&str] = &[
    "sasl.jaas.config",
    "sasl.login.class",
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "security.providers",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keystore.type",
    "ssl.truststore.type",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
    "client.dns.lookup",
];

/// Turns Java client settings into librdkafka's:
///
/// - `sasl.jaas.config` with `PlainLoginModule` or `ScramLoginModule` becomes `sasl.username` and
///   `sasl.password` (a `sasl.username` or `sasl.password` given as such wins); another login module is
///   an error, as is a line that does not parse;
/// - `ssl.endpoint.identification.algorithm` empty (Java's way to turn the check off) becomes `none`,
///   other values are lower-cased (`HTTPS` → `https`);
/// - the [`JAVA_ONLY_KEYS`] are dropped.
///
/// Everything else passes unchanged. Errors never quote a value.
///
/// # Errors
/// What is wrong with `sasl.jaas.config`, phrased to follow "sasl.jaas.config ".
pub fn for_librdkafka(mut props: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    if let Some(line) = props.get("sasl.jaas.config") {
        let (username, password) = jaas_credentials(line)?;
        props.entry("sasl.username".into()).or_insert(username);
        props.entry("sasl.password".into()).or_insert(password);
    }
    if let Some(v) = props.get_mut("ssl.endpoint.identification.algorithm") {
        *v = if v.trim().is_empty() { "none".into() } else { v.trim().to_ascii_lowercase() };
    }
    props.retain(|k, _| !JAVA_ONLY_KEYS.contains(&k.as_str()));
    Ok(props)
}

/// Login modules whose `username` and `password` options are librdkafka's `sasl.username` and
/// `sasl.password`.
const CREDENTIAL_MODULES: &[&str] = &[
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
];

/// The `username` and `password` options of a JAAS line `<LoginModule> <flag> key="value"... ;`.
fn jaas_credentials(line: &str) -> Result<(String, String), String> {
    const FORM: &str = "is not of the form '<LoginModule> required username=\"...\" password=\"...\";'";
    let mut rest = line.trim();
    let word = |rest: &mut &str| -> Option<String> {
        let s = rest.trim_start();
        let end = s.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(s.len());
        let (w, r) = s.split_at(end);
        *rest = r;
        (!w.is_empty()).then(|| w.to_string())
    };
    let module = word(&mut rest).ok_or_else(|| "is empty".to_string())?;
    if !CREDENTIAL_MODULES.contains(&module.as_str()) {
        // a class name holds no secret; it tells the user what to change
        return Err(format!(
            "uses login module '{module}', which the operator cannot use; it reads PlainLoginModule and ScramLoginModule, \
             or set sasl.username and sasl.password (or librdkafka's sasl.oauthbearer.* settings) instead"
        ));
    }
    match word(&mut rest).as_deref() {
        Some("required" | "requisite" | "sufficient" | "optional") => {}
        _ => return Err(format!("{FORM}: the login module is not followed by a control flag such as 'required'")),
    }
    let mut options: BTreeMap<String, String> = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(';') {
            if !after.trim().is_empty() {
                return Err(format!("{FORM}: there is text after the ';'"));
            }
            break;
        }
        if rest.is_empty() {
            return Err(format!("{FORM}: it does not end with ';'"));
        }
        let eq = rest.find('=').ok_or_else(|| format!("{FORM}: an option has no '='"))?;
        let key = rest[..eq].trim().to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("{FORM}: an option name is missing or holds a space"));
        }
        rest = rest[eq + 1..].trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, e)) => value.push(e),
                        None => break,
                    },
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("{FORM}: the value of option '{key}' has no closing quote"))?;
            rest = &quoted[end..];
            value
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(rest.len());
            let (v, r) = rest.split_at(end);
            rest = r;
            v.to_string()
        };
        options.insert(key, value);
    }
    let mut take = |key: &str| {
        options
            .remove(key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{FORM}: option '{key}' is missing or empty"))
    };
    Ok((take("username")?, take("password")?))
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

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        secret(kv)
    }

    const PLAIN: &str =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop" password="s3cr\"et";"#;

    #[test]
    fn plain_jaas_becomes_username_and_password() {
        let p = for_librdkafka(props(&[("sasl.jaas.config", PLAIN), ("sasl.mechanism", "PLAIN")])).unwrap();
        assert_eq!(p, props(&[("sasl.mechanism", "PLAIN"), ("sasl.username", "shop"), ("sasl.password", "s3cr\"et")]));
    }

    #[test]
    fn scram_jaas_unquoted_values_other_flag_and_spacing() {
        let line = "  org.apache.kafka.common.security.scram.ScramLoginModule   sufficient\n username=u1\tpassword = \"p w\" tokenauth=false ;  ";
        let p = for_librdkafka(props(&[("sasl.jaas.config", line)])).unwrap();
        assert_eq!(p, props(&[("sasl.username", "u1"), ("sasl.password", "p w")]));
    }

    #[test]
    fn explicit_username_and_password_win_over_jaas() {
        let p = for_librdkafka(props(&[("sasl.jaas.config", PLAIN), ("sasl.username", "x"), ("sasl.password", "y")]))
            .unwrap();
        assert_eq!(p, props(&[("sasl.username", "x"), ("sasl.password", "y")]));
    }

    #[test]
    fn endpoint_identification_translated_and_java_only_keys_dropped() {
        let p = for_librdkafka(props(&[
            ("ssl.endpoint.identification.algorithm", ""),
            ("ssl.protocol", "TLSv1.3"),
            ("ssl.truststore.type", "PEM"),
            ("client.dns.lookup", "use_all_dns_ips"),
            ("sasl.login.callback.handler.class", "x.Y"),
            ("security.protocol", "SASL_SSL"),
        ]))
        .unwrap();
        assert_eq!(p, props(&[("security.protocol", "SASL_SSL"), ("ssl.endpoint.identification.algorithm", "none")]));
        let p = for_librdkafka(props(&[("ssl.endpoint.identification.algorithm", "HTTPS")])).unwrap();
        assert_eq!(p["ssl.endpoint.identification.algorithm"], "https");
    }

    #[test]
    fn malformed_jaas_is_a_clear_error_without_the_secret() {
        let m = "org.apache.kafka.common.security.plain.PlainLoginModule";
        let cases = [
            (format!(r#"{m} required username="shop" password="hunter2";"#).replace("\";", ""), "no closing quote"),
            (format!(r#"{m} required username="shop" password="hunter2""#), "does not end with ';'"),
            (format!(r#"{m} username="shop" password="hunter2";"#), "control flag"),
            (format!(r#"{m} required username="shop" hunter2;"#), "has no '='"),
            (format!(r#"{m} required username="shop" passwd="hunter2";"#), "option 'password' is missing"),
            (format!(r#"{m} required username="shop" password="hunter2"; x"#), "after the ';'"),
            (r#"com.sun.security.auth.module.Krb5LoginModule required password="hunter2";"#.into(), "Krb5LoginModule"),
            ("   ".into(), "is empty"),
        ];
        for (line, want) in cases {
            let err = for_librdkafka(props(&[("sasl.jaas.config", &line)])).unwrap_err();
            assert!(err.contains(want), "{line:?}: {err}");
            assert!(!err.contains("hunter2"), "the error quotes the secret: {err}");
        }
        let mut t = topic("cart-events", "shop.cart-events.v1");
        t.connection_config.insert("sasl.jaas.config".into(), format!(r#"{m} required password="hunter2";"#));
        let err = resolve(&t, &BTreeMap::new()).unwrap_err().to_string();
        assert_eq!(
            err,
            "topic 'cart-events': sasl.jaas.config is not of the form '<LoginModule> required username=\"...\" \
             password=\"...\";': option 'username' is missing or empty"
        );
    }

    #[test]
    fn resolve_translates_a_cluster_secret_written_for_jvm_clients() {
        let mut t = topic("cart-events", "shop.cart-events.v1");
        t.bootstrap_servers = None;
        let cluster = Cluster::from_secret_data(
            "kafka-cluster-default",
            &secret(&[
                ("bootstrap.servers", "127.0.0.1:19094"),
                (
                    "connection-config",
                    // properties text reads `\\` as `\`, as the Java client's loader does
                    &format!(
                        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={}\n",
                        PLAIN.replace('\\', "\\\\")
                    ),
                ),
            ]),
        )
        .unwrap();
        let c = resolve(&t, &BTreeMap::from([("default".into(), cluster)])).unwrap();
        assert_eq!(c.properties["sasl.username"], "shop");
        assert_eq!(c.properties["sasl.password"], "s3cr\"et");
        assert!(!c.properties.contains_key("sasl.jaas.config"));
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cr") && !debug.contains("shop\""), "Debug shows no values: {debug}");
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
