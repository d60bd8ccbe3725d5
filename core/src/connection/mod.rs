//! What the platform resolves for each topic of a pipeline: its Kafka connection, its settings, and,
//! for a managed topic, how to create it.
//!
//! A topic names brokers itself (`bootstrapServers`) or a Kafka cluster, whose Secret
//! `kafka-cluster-<name>` in the operator's clusters namespace holds the brokers
//! (`bootstrap.servers`), Java `.properties` text for every client (`connection-config`), producers
//! (`producer-config`) and consumers (`consumer-config`), and the `partitions` and `replicas` that
//! managed topics without their own take. A topic with neither uses the cluster `default`. The
//! topic's own maps are laid over the cluster's, key by key.
//!
//! Cluster credentials belong to the namespaces their Secret allows (annotation
//! [`ANNOTATION_ALLOWED_NAMESPACES`]); a topic that uses a cluster Secret cannot set the brokers or
//! any security setting ([`properties::cluster_owned`]); settings that load code or read files are
//! refused wherever they come from ([`properties::refused`]); keys that are not property names are
//! refused everywhere ([`properties::is_property_name`]). `docs/tenancy.md` gives the model.
//!
//! The operator's own client connection is built, not filtered: from the cluster Secret's security
//! settings alone (a topic's own maps never reach it), or, for a topic that names its own brokers
//! and no cluster, from the topic's security settings; translated to librdkafka's, then only the
//! keys of [`properties::OPERATOR_CLIENT_KEYS`] kept. A token endpoint the operator's client would
//! call comes from a cluster Secret, or from the administrator's [`TokenEndpoints`].
//!
//! A cluster Secret may give each namespace's streamlets credentials of their own, so that the
//! operator's never reach a tenant's namespace ([`credentials`]).
//!
//! [`resolve_pipeline`] turns a resource's topics and the cluster Secrets it may use into one
//! [`ResolvedTopic`] per topic, or reports every problem at once, each a [`ConnectionError`] with a
//! stable [`ConnectionError::kind`]: a pipeline with any problem is refused as a whole, before
//! anything is applied, and no Kafka client is ever built for it. A [`ResolvedTopic`] holds its
//! settings in the Java client's form, as the sidecar reads them, and the operator's own client
//! connection in librdkafka's ([`ResolvedTopic::kafka_connection`], translated by [`java`]).
//!
//! `Debug` of every type here that holds settings shows keys, never values: they hold credentials.

mod cluster;
mod credentials;
pub mod java;
pub mod properties;

use std::collections::BTreeMap;
use std::fmt;

use crate::resource::{AnkkaFlowSpec, Batch, TopicSpec};

pub use cluster::{
    ANNOTATION_ALLOW_SHARED_GROUPS, ANNOTATION_ALLOWED_NAMESPACES, ANNOTATION_MAX_TOPIC_PARTITIONS,
    ANNOTATION_NAMESPACE_TOPIC_PREFIXES, ANNOTATION_TOPIC_PREFIXES, AllowedNamespaces, CLUSTER_SECRET_PREFIX, Cluster,
    Clusters, DEFAULT_CLUSTER, DEFAULT_MAX_TOPIC_PARTITIONS, NAMESPACE_PLACEHOLDER, TopicPrefixes,
};
pub use credentials::{ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS, STREAMLET_CREDENTIALS_PREFIX, StreamletCredentials};

/// Why a topic's connection or settings cannot be resolved. Every variant has a stable
/// [`ConnectionError::kind`]; no message quotes a setting's value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// A properties block of a cluster Secret does not parse.
    #[error("Secret '{secret}': key '{key}' is not Java properties text: {reason}")]
    Properties {
        /// Secret name.
        secret: String,
        /// Data key.
        key: String,
        /// Parser's reason (a line number and what is malformed, never the text).
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
    /// A cluster the topic names explicitly has a Secret without brokers.
    #[error("Kafka cluster '{cluster}' has no bootstrap.servers")]
    ClusterNoBrokers {
        /// Cluster name.
        cluster: String,
    },
    /// Neither the topic nor its cluster names brokers.
    #[error("topic '{topic}' names no bootstrap.servers and no Kafka cluster")]
    NoBrokers {
        /// Topic id.
        topic: String,
    },
    /// A managed topic has no partition count, and its cluster gives none.
    #[error(
        "managed topic '{topic}' has no partitions: set it in the blueprint, or as a default in Secret 'kafka-cluster-{cluster}'"
    )]
    NoPartitions {
        /// Topic id.
        topic: String,
        /// The topic's cluster, or `default`.
        cluster: String,
    },
    /// A managed topic has no replication factor, and its cluster gives none.
    #[error(
        "managed topic '{topic}' has no replicas: set it in the blueprint, or as a default in Secret 'kafka-cluster-{cluster}'"
    )]
    NoReplicas {
        /// Topic id.
        topic: String,
        /// The topic's cluster, or `default`.
        cluster: String,
    },
    /// A default of a cluster Secret that a managed topic needs is not a whole number of at least 1.
    #[error(
        "managed topic '{topic}' takes its {key} from Secret 'kafka-cluster-{cluster}', whose key '{key}' is not a whole number of at least 1"
    )]
    BadDefault {
        /// Topic id.
        topic: String,
        /// Cluster name.
        cluster: String,
        /// `partitions` or `replicas`.
        key: &'static str,
    },
    /// The topic's cluster Secret does not allow the resource's namespace.
    #[error("{}", not_allowed(topic, cluster, namespace, *declared))]
    NotAllowed {
        /// Topic id.
        topic: String,
        /// Cluster name.
        cluster: String,
        /// The resource's namespace.
        namespace: String,
        /// Whether the Secret lists namespaces at all.
        declared: bool,
    },
    /// An entry of a cluster Secret's allowed-namespaces annotation is not a namespace name.
    #[error(
        "Secret '{secret}': annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces' lists '{entry}', which is not \
         a namespace name: list namespaces by name, or '*' for every namespace"
    )]
    AnnotationEntry {
        /// Secret name.
        secret: String,
        /// The entry (an annotation holds no credential).
        entry: String,
    },
    /// An entry of a cluster Secret's topic prefixes annotation is not a topic name prefix.
    #[error(
        "Secret '{secret}': annotation '{annotation}' lists '{entry}', which is not the start of a Kafka topic name: \
         list prefixes of ASCII letters, digits, '.', '_' and '-' (with '{{namespace}}' for the namespace's name), or \
         '*' for any name"
    )]
    PrefixEntry {
        /// Secret name.
        secret: String,
        /// The annotation's key.
        annotation: String,
        /// The entry (an annotation holds no credential).
        entry: String,
    },
    /// A cluster Secret's limit annotation is not a whole number of at least 1.
    #[error("Secret '{secret}': annotation '{annotation}' is '{entry}', which is not a whole number of at least 1")]
    LimitEntry {
        /// Secret name.
        secret: String,
        /// The annotation's key.
        annotation: String,
        /// The value (an annotation holds no credential).
        entry: String,
    },
    /// A managed topic's Kafka name does not start with a prefix its cluster allows the namespace.
    #[error("{}", name_not_allowed(topic, name, cluster, namespace, prefixes))]
    TopicNameNotAllowed {
        /// Topic id.
        topic: String,
        /// Kafka topic name.
        name: String,
        /// Cluster name.
        cluster: String,
        /// The resource's namespace.
        namespace: String,
        /// The prefixes the namespace may use there (possibly none).
        prefixes: Vec<String>,
    },
    /// A topic using a cluster Secret sets what only the Secret decides.
    #[error(
        "topic '{topic}' uses Kafka cluster '{cluster}', whose Secret alone sets the brokers and the security settings: \
         remove {settings} from the topic"
    )]
    ClusterOwned {
        /// Topic id.
        topic: String,
        /// Cluster name.
        cluster: String,
        /// The settings, as `bootstrapServers` and `connectionConfig 'security.protocol'`, joined.
        settings: String,
    },
    /// A setting that loads code or reads files (see [`properties::refused`]).
    #[error("{origin}: {block} '{key}' is refused: {why}")]
    PropertyRefused {
        /// `topic '<id>'` or `Secret 'kafka-cluster-<name>'`.
        origin: String,
        /// The block: a resource field (`connectionConfig`) or a Secret key (`connection-config`).
        block: String,
        /// The setting.
        key: String,
        /// Why, and what to write instead.
        why: String,
    },
    /// A key of a settings block is not a property name (see [`properties::is_property_name`]).
    #[error(
        "{origin}: {block} has the key {key}, which is not a property name: a key is ASCII letters, digits, '.', '_' \
         and '-' only, with no spaces"
    )]
    KeyNotAPropertyName {
        /// `topic '<id>'` or `Secret 'kafka-cluster-<name>'`.
        origin: String,
        /// The block: a resource field (`connectionConfig`) or a Secret key (`connection-config`).
        block: String,
        /// The key, as [`properties::shown_key`] shows it.
        key: String,
    },
    /// A topic with its own brokers names a token endpoint the administrator does not allow.
    #[error(
        "topic '{topic}' names its own OAuth token endpoint (sasl.oauthbearer.token.endpoint.url), which the operator \
         calls only when it comes from a cluster Secret or is one an administrator allows (FLOW_OAUTH_TOKEN_ENDPOINTS): \
         use a Kafka cluster Secret, or ask an administrator to allow the endpoint"
    )]
    TokenEndpointNotAllowed {
        /// Topic id.
        topic: String,
    },
    /// A key of a cluster Secret holds what cannot be used (see [`credentials`]).
    #[error("Secret '{secret}': key '{key}': {reason}")]
    SecretKey {
        /// Secret name.
        secret: String,
        /// Data key.
        key: String,
        /// What is wrong, naming settings, never their values.
        reason: String,
    },
    /// The cluster requires streamlet credentials of each namespace's own, and has none for this one.
    #[error(
        "Kafka cluster '{cluster}' requires the streamlets of each namespace to have credentials of their own, and \
         Secret 'kafka-cluster-{cluster}' has none for namespace '{namespace}': an administrator adds its key \
         'streamlet-credentials.{namespace}'"
    )]
    NoStreamletCredentials {
        /// Cluster name.
        cluster: String,
        /// The resource's namespace.
        namespace: String,
    },
    /// The topic's client settings cannot be turned into the operator's client's.
    #[error("topic '{topic}': {reason}")]
    Untranslatable {
        /// Topic id.
        topic: String,
        /// What is wrong, naming the setting, never its value.
        reason: String,
    },
}

impl ConnectionError {
    /// A stable CamelCase name of the problem's kind, for logs and metrics (the event reason of a
    /// refusal is `Refused`, whatever the kind).
    pub fn kind(&self) -> &'static str {
        match self {
            ConnectionError::Properties { .. } => "ClusterSecretInvalid",
            ConnectionError::NoSecret { .. } => "ClusterSecretMissing",
            ConnectionError::ClusterNoBrokers { .. } => "ClusterHasNoBrokers",
            ConnectionError::NoBrokers { .. } => "NoBrokers",
            ConnectionError::NoPartitions { .. } => "NoPartitions",
            ConnectionError::NoReplicas { .. } => "NoReplicas",
            ConnectionError::BadDefault { .. } => "ClusterDefaultInvalid",
            ConnectionError::Untranslatable { .. } => "SettingsUntranslatable",
            ConnectionError::NotAllowed { .. } => "ClusterNotAllowed",
            ConnectionError::AnnotationEntry { .. } | ConnectionError::PrefixEntry { .. } => "ClusterSecretInvalid",
            ConnectionError::TopicNameNotAllowed { .. } => "TopicNameNotAllowed",
            ConnectionError::LimitEntry { .. } => "ClusterSecretInvalid",
            ConnectionError::ClusterOwned { .. } => "ClusterSettingsOverridden",
            ConnectionError::PropertyRefused { .. } => "PropertyRefused",
            ConnectionError::KeyNotAPropertyName { .. } => "KeyNotAPropertyName",
            ConnectionError::TokenEndpointNotAllowed { .. } => "TokenEndpointNotAllowed",
            ConnectionError::SecretKey { .. } => "ClusterSecretInvalid",
            ConnectionError::NoStreamletCredentials { .. } => "StreamletCredentialsMissing",
        }
    }
}

/// The message of [`ConnectionError::NotAllowed`].
fn not_allowed(topic: &str, cluster: &str, namespace: &str, declared: bool) -> String {
    let secret = format!("{CLUSTER_SECRET_PREFIX}{cluster}");
    if declared {
        format!(
            "topic '{topic}' uses Kafka cluster '{cluster}', which namespace '{namespace}' may not use: Secret '{secret}' \
             does not list it in its annotation '{ANNOTATION_ALLOWED_NAMESPACES}'"
        )
    } else {
        format!(
            "topic '{topic}' uses Kafka cluster '{cluster}', which no namespace may use yet: Secret '{secret}' has no \
             annotation '{ANNOTATION_ALLOWED_NAMESPACES}' listing the namespaces allowed"
        )
    }
}

/// The message of [`ConnectionError::TopicNameNotAllowed`].
fn name_not_allowed(topic: &str, name: &str, cluster: &str, namespace: &str, prefixes: &[String]) -> String {
    let secret = format!("{CLUSTER_SECRET_PREFIX}{cluster}");
    let start = format!(
        "managed topic '{topic}' is Kafka topic '{name}', which namespace '{namespace}' may not create on Kafka cluster \
         '{cluster}'"
    );
    if prefixes.is_empty() {
        format!("{start}: Secret '{secret}' allows it no managed topics there")
    } else {
        let quoted: Vec<String> = prefixes.iter().map(|p| format!("'{p}'")).collect();
        format!("{start}: Secret '{secret}' allows it names starting with {}", or_list(&quoted))
    }
}

/// The managed topics of `topics` (resolved for a resource of namespace `namespace`) whose Kafka
/// name does not start with a prefix their cluster's Secret allows the namespace
/// ([`ANNOTATION_TOPIC_PREFIXES`]), each as a [`ConnectionError::TopicNameNotAllowed`]. A topic
/// with its own brokers has no cluster Secret to decide: the operator reaches its cluster with the
/// topic's own credential, whose Kafka ACLs decide what it may create.
pub fn names_not_allowed<'a>(
    topics: impl IntoIterator<Item = &'a ResolvedTopic>,
    namespace: &str,
    clusters: &Clusters,
) -> Vec<ConnectionError> {
    let mut out = Vec::new();
    for t in topics.into_iter().filter(|t| t.managed) {
        let Some(cluster) = t.cluster.as_ref().and_then(|c| clusters.get(c)) else { continue };
        let Some(prefixes) = cluster.topic_prefixes.of(namespace) else { continue };
        if !prefixes.iter().any(|p| t.name.starts_with(p.as_str())) {
            out.push(ConnectionError::TopicNameNotAllowed {
                topic: t.id.clone(),
                name: t.name.clone(),
                cluster: cluster.name.clone(),
                namespace: namespace.to_string(),
                prefixes,
            });
        }
    }
    out
}

/// What a client needs to reach a topic's brokers, in librdkafka's form. `Debug` never shows
/// property values, since they may hold credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaConnection {
    /// Broker list.
    pub bootstrap_servers: String,
    /// librdkafka properties, only keys of [`properties::OPERATOR_CLIENT_KEYS`]: the security
    /// settings of the cluster Secret (or of a topic with its own brokers), translated from the Java
    /// client's form. Nothing else of a Secret or a resource reaches the operator's clients.
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

/// Whether a setting concerns the connection's security: the only settings the operator's client is
/// built from (then cut down to [`properties::OPERATOR_CLIENT_KEYS`] once translated).
fn is_security_key(k: &str) -> bool {
    k.starts_with("security.") || k.starts_with("sasl.") || k.starts_with("ssl.") || k.starts_with("enable.ssl.")
}

/// The OAuth token endpoints an administrator allows topics that name their own brokers to use
/// (the operator's setting `FLOW_OAUTH_TOKEN_ENDPOINTS`). The operator's client calls a token
/// endpoint with the client's secret: one a tenant chose would make the operator an HTTP client at
/// the tenant's command, inside the operator's network. Endpoints of cluster Secrets need no entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenEndpoints(std::collections::BTreeSet<String>);

impl TokenEndpoints {
    /// The endpoints `urls`, compared exactly (after trimming) with a topic's.
    pub fn new(urls: impl IntoIterator<Item = String>) -> Self {
        TokenEndpoints(urls.into_iter().map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).collect())
    }

    /// Whether `url` is one of them.
    pub fn allows(&self, url: &str) -> bool {
        self.0.contains(url.trim())
    }

    /// The endpoints, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// The operator's own client settings, in librdkafka's form, built from `security` (the Java
/// settings of the cluster Secret, or of a topic with its own brokers): only their security
/// settings are translated, and only the keys of [`properties::OPERATOR_CLIENT_KEYS`] kept.
///
/// # Errors
/// Every reason the security settings cannot be used (see [`java::for_librdkafka`]).
fn operator_client<'a>(
    security: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    let source: BTreeMap<String, String> =
        security.into_iter().filter(|(k, _)| is_security_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut p = java::for_librdkafka(source)?;
    // librdkafka's older spelling of the mechanism is the same setting
    if let Some(m) = p.remove("sasl.mechanisms") {
        p.entry("sasl.mechanism".into()).or_insert(m);
    }
    p.retain(|k, _| properties::OPERATOR_CLIENT_KEYS.contains(&k.as_str()));
    Ok(p)
}

/// Prefix of the platform's own consumer keys (batch limits), never passed to Kafka.
pub const PLATFORM_KEY_PREFIX: &str = "flow.";

/// One topic of a pipeline, resolved against the cluster Secrets: everything the operator and the
/// sidecar need of it. Only [`resolve_topic`] and [`resolve_pipeline`] build one, so its
/// connection always passed every rule. `Debug` shows setting keys, never values.
#[derive(Clone, PartialEq)]
pub struct ResolvedTopic {
    /// Topic id inside the pipeline.
    pub id: String,
    /// Kafka topic name.
    pub name: String,
    /// Whether the platform owns (creates) the topic.
    pub managed: bool,
    /// The cluster whose Secret the connection comes from; `None` when the topic names its own
    /// brokers and no cluster.
    pub cluster: Option<String>,
    /// Brokers: the topic's own, or its cluster's.
    pub bootstrap_servers: String,
    /// Properties for every client, in the Java client's form: the cluster's with the topic's laid
    /// over, key by key. These three maps are what the streamlets get: where the cluster gives the
    /// namespace streamlet credentials of its own, their security settings are the namespace's
    /// ([`StreamletCredentials`]), while [`ResolvedTopic::kafka_connection`] keeps the cluster's.
    pub connection_config: BTreeMap<String, String>,
    /// Producer properties, in the Java client's form, merged the same way.
    pub producer_config: BTreeMap<String, String>,
    /// Consumer properties, in the Java client's form, merged the same way, without the platform's
    /// `flow.*` keys.
    pub consumer_config: BTreeMap<String, String>,
    /// Partition count to create a managed topic with: the topic's, else its cluster's default.
    /// `None` for an unmanaged topic.
    pub partitions: Option<i32>,
    /// Replication factor to create a managed topic with: the topic's, else its cluster's default.
    /// `None` for an unmanaged topic.
    pub replicas: Option<i32>,
    /// Topic-level Kafka configuration for creating a managed topic.
    pub topic_config: BTreeMap<String, String>,
    /// The most partitions the operator may create the topic with: its cluster Secret's
    /// ([`Cluster::max_topic_partitions`]); `None` for a topic with its own brokers, which the
    /// operator reaches with the topic's own credential, whose Kafka ACLs and quotas decide.
    pub max_partitions: Option<i32>,
    /// Batch limits of every inlet reading the topic (defaults when the resource sets none).
    pub batch: Batch,
    /// The operator's own client connection, in librdkafka's form.
    kafka: KafkaConnection,
}

impl ResolvedTopic {
    /// The connection of the operator's own client (the reset driver's and the lag sampler's), in
    /// librdkafka's form.
    pub fn kafka_connection(&self) -> &KafkaConnection {
        &self.kafka
    }
}

impl fmt::Debug for ResolvedTopic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedTopic")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("managed", &self.managed)
            .field("cluster", &self.cluster)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("connection_config", &self.connection_config.keys().collect::<Vec<_>>())
            .field("producer_config", &self.producer_config.keys().collect::<Vec<_>>())
            .field("consumer_config", &self.consumer_config.keys().collect::<Vec<_>>())
            .field("partitions", &self.partitions)
            .field("replicas", &self.replicas)
            .field("topic_config", &self.topic_config)
            .field("max_partitions", &self.max_partitions)
            .field("batch", &self.batch)
            .field("kafka", &self.kafka)
            .finish()
    }
}

/// Every topic of a pipeline, resolved, and every problem found on the way.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Resolution {
    /// The topics that resolved, in the resource's order.
    pub topics: Vec<ResolvedTopic>,
    /// Every problem, in the resource's topic order, each once. Not empty: the pipeline is refused.
    pub problems: Vec<ConnectionError>,
}

impl Resolution {
    /// The resolved topic of id `id`, if it resolved.
    pub fn topic(&self, id: &str) -> Option<&ResolvedTopic> {
        self.topics.iter().find(|t| t.id == id)
    }

    /// Whether the pipeline must be refused.
    pub fn refused(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// Resolves every topic of `spec`, a resource of namespace `namespace`, against `clusters` and the
/// token endpoints an administrator allows. Problems common to several topics (a cluster's own) are
/// reported once. Besides each topic's own problems ([`resolve_topic`]), its streamlets'
/// credentials: a cluster that requires streamlet credentials of the namespace's own and has none,
/// or has some that cannot be used, refuses the pipeline. A deletion resolves its topics with
/// [`resolve_topic`] alone, since it uses the operator's client only.
pub fn resolve_pipeline(
    spec: &AnkkaFlowSpec,
    namespace: &str,
    clusters: &Clusters,
    endpoints: &TokenEndpoints,
) -> Resolution {
    let mut out = Resolution::default();
    for topic in &spec.topics {
        let mut problems = match resolve_topic(topic, namespace, clusters, endpoints) {
            Ok(t) => {
                out.topics.push(t);
                Vec::new()
            }
            Err(problems) => problems,
        };
        // A namespace the cluster does not allow learns nothing else of it (`NotAllowed` says it).
        if let Some(c) = cluster_name(topic).and_then(|n| clusters.get(n)).filter(|c| c.allows(namespace)) {
            problems.extend(c.streamlet_credentials.problems(&c.name, namespace));
        }
        for p in problems {
            if !out.problems.contains(&p) {
                out.problems.push(p);
            }
        }
    }
    out
}

/// The cluster of `topic`: the one it names; `default` when it names no brokers either.
fn cluster_name(topic: &TopicSpec) -> Option<&str> {
    match (&topic.cluster, &topic.bootstrap_servers) {
        (Some(c), _) => Some(c.as_str()),
        (None, None) => Some(DEFAULT_CLUSTER),
        (None, Some(_)) => None,
    }
}

/// Resolves `topic` of a resource in namespace `namespace` against `clusters` and the token
/// endpoints an administrator allows (`endpoints`).
///
/// # Errors
/// Every problem of the topic (see [`ConnectionError`]).
pub fn resolve_topic(
    topic: &TopicSpec,
    namespace: &str,
    clusters: &Clusters,
    endpoints: &TokenEndpoints,
) -> Result<ResolvedTopic, Vec<ConnectionError>> {
    let id = &topic.id;
    let own_brokers = topic.bootstrap_servers.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let cluster_name = cluster_name(topic);
    // The cluster's own problems first: a missing Secret, a namespace it does not allow (nothing
    // else of the Secret is told to such a namespace), or what is wrong with the Secret.
    let mut problems: Vec<ConnectionError> = Vec::new();
    let cluster = cluster_name.and_then(|name| clusters.get(name));
    match (cluster_name, cluster) {
        (Some(name), None) => problems.push(ConnectionError::NoSecret { topic: id.clone(), cluster: name.into() }),
        (_, Some(c)) if !c.allows(namespace) => problems.push(ConnectionError::NotAllowed {
            topic: id.clone(),
            cluster: c.name.clone(),
            namespace: namespace.into(),
            declared: c.allowed_namespaces.is_some(),
        }),
        (_, Some(c)) => problems.extend(c.problems.iter().cloned()),
        (None, None) => {}
    }
    // Without the cluster's settings, nothing that depends on them can be judged.
    let cluster_blocked = !problems.is_empty();
    // Then what is wrong with the topic's own settings, whatever its cluster's state.
    let blocks = [
        ("connectionConfig", &topic.connection_config),
        ("producerConfig", &topic.producer_config),
        ("consumerConfig", &topic.consumer_config),
    ];
    if let Some(name) = cluster_name {
        let mut owned: Vec<String> = Vec::new();
        if topic.bootstrap_servers.is_some() {
            owned.push("bootstrapServers".into());
        }
        for (block, settings) in blocks {
            owned.extend(settings.keys().filter(|k| properties::cluster_owned(k)).map(|k| format!("{block} '{k}'")));
        }
        if !owned.is_empty() {
            problems.push(ConnectionError::ClusterOwned {
                topic: id.clone(),
                cluster: name.to_string(),
                settings: and_list(&owned),
            });
        }
    }
    for (block, settings) in blocks.iter().copied().chain([("topicConfig", &topic.topic_config)]) {
        for key in settings.keys().filter(|k| !properties::is_property_name(k)) {
            problems.push(ConnectionError::KeyNotAPropertyName {
                origin: format!("topic '{id}'"),
                block: block.into(),
                key: properties::shown_key(key),
            });
        }
    }
    for (block, settings) in blocks {
        for (key, value) in settings {
            if let Some(r) = properties::refused(key, value, true) {
                problems.push(ConnectionError::PropertyRefused {
                    origin: format!("topic '{id}'"),
                    block: block.into(),
                    key: key.clone(),
                    why: r.text(),
                });
            }
        }
    }
    if cluster_blocked {
        return Err(problems);
    }
    let refused_settings = !problems.is_empty();
    // With a cluster, its brokers (a topic's own are refused above); else the topic's.
    let bootstrap_servers = match cluster {
        Some(c) => c.bootstrap_servers.clone(),
        None => own_brokers.map(str::to_string),
    };
    if bootstrap_servers.is_none() {
        if let (Some(c), Some(_)) = (cluster, &topic.cluster) {
            problems.push(ConnectionError::ClusterNoBrokers { cluster: c.name.clone() });
        }
        problems.push(ConnectionError::NoBrokers { topic: id.clone() });
    }
    let merged = |of_cluster: Option<&BTreeMap<String, String>>, of_topic: &BTreeMap<String, String>| {
        let mut m = of_cluster.cloned().unwrap_or_default();
        m.extend(of_topic.iter().map(|(k, v)| (k.clone(), v.clone())));
        m
    };
    let mut connection_config = merged(cluster.map(|c| &c.connection_config), &topic.connection_config);
    let mut producer_config = merged(cluster.map(|c| &c.producer_config), &topic.producer_config);
    let mut consumer_config = merged(cluster.map(|c| &c.consumer_config), &topic.consumer_config);
    consumer_config.retain(|k, _| !k.starts_with(PLATFORM_KEY_PREFIX));

    let (partitions, replicas) = if topic.managed {
        let shown = cluster_name.unwrap_or(DEFAULT_CLUSTER);
        let mut size = |own: Option<i32>, default: Option<&String>, key: &'static str| -> Option<i32> {
            if own.is_some() {
                return own;
            }
            match default {
                Some(text) => match text.parse::<i32>() {
                    Ok(n) if n >= 1 => Some(n),
                    _ => {
                        problems.push(ConnectionError::BadDefault { topic: id.clone(), cluster: shown.into(), key });
                        None
                    }
                },
                None => {
                    problems.push(if key == "partitions" {
                        ConnectionError::NoPartitions { topic: id.clone(), cluster: shown.into() }
                    } else {
                        ConnectionError::NoReplicas { topic: id.clone(), cluster: shown.into() }
                    });
                    None
                }
            }
        };
        let p = size(topic.partitions, cluster.and_then(|c| c.partitions.as_ref()), "partitions");
        let r = size(topic.replicas, cluster.and_then(|c| c.replicas.as_ref()), "replicas");
        (p, r)
    } else {
        (None, None)
    };

    // The operator's own client: the Secret's security settings, or those of a topic with its own
    // brokers; never another setting of a topic (see `operator_client`).
    let security: Vec<(&String, &String)> = match cluster {
        Some(c) => c.connection_config.iter().chain(&c.consumer_config).collect(),
        None => topic.connection_config.iter().chain(&topic.consumer_config).collect(),
    };
    // Refused settings are not translated: their problems say it all.
    let properties = match operator_client(security) {
        _ if refused_settings => None,
        Ok(p) => {
            let endpoint = p.get("sasl.oauthbearer.token.endpoint.url");
            if cluster.is_none() && endpoint.is_some_and(|url| !endpoints.allows(url)) {
                problems.push(ConnectionError::TokenEndpointNotAllowed { topic: id.clone() });
            }
            Some(p)
        }
        Err(reasons) => {
            problems.extend(
                reasons.into_iter().map(|reason| ConnectionError::Untranslatable { topic: id.clone(), reason }),
            );
            None
        }
    };

    // The streamlets' security settings: their namespace's own where the cluster gives it some (the
    // operator's client, above, keeps the cluster's).
    if let Some(c) = cluster {
        c.streamlet_credentials.lay_over(namespace, &mut connection_config, &mut producer_config, &mut consumer_config);
    }

    match (bootstrap_servers, properties) {
        (Some(bootstrap_servers), Some(properties)) if problems.is_empty() => Ok(ResolvedTopic {
            id: id.clone(),
            name: topic.name.clone(),
            managed: topic.managed,
            cluster: cluster.map(|c| c.name.clone()),
            kafka: KafkaConnection { bootstrap_servers: bootstrap_servers.clone(), properties },
            bootstrap_servers,
            connection_config,
            producer_config,
            consumer_config,
            partitions,
            replicas,
            topic_config: topic.topic_config.clone(),
            max_partitions: cluster.map(Cluster::max_topic_partitions),
            batch: topic.batch.clone().unwrap_or_default(),
        }),
        _ => Err(problems),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list<S: AsRef<str>>(items: &[S]) -> String {
    joined(items, "and")
}

/// `a`, `a or b`, `a, b or c`.
fn or_list<S: AsRef<str>>(items: &[S]) -> String {
    joined(items, "or")
}

fn joined<S: AsRef<str>>(items: &[S], last_word: &str) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    match &items[..] {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} {last_word} {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests;
