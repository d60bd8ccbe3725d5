//! Credentials of a namespace's streamlets of their own, so that the operator's credential never
//! leaves the operator's namespace.
//!
//! The streamlet Secret the operator renders into a namespace (`streamlet.conf`, see
//! `docs/rendering.md`) carries a Kafka connection, credential included. Without more, that is the
//! cluster Secret's own, the one the operator's clients use: whoever can read Secrets in any allowed
//! namespace can then do on the cluster whatever the operator may (reset any group of any
//! namespace with Kafka's own tool). A cluster Secret can give each namespace a credential of its
//! own instead, for a principal whose Kafka ACLs cover that namespace's topics and groups and no
//! other's (`docs/secured-kafka.md` lists them):
//!
//! - data key `streamlet-credentials.<namespace>`: Java properties text with the security settings
//!   of that namespace's streamlets (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
//!   the trust store and key store, ...), and nothing else. Its streamlets get those security
//!   settings and none of the cluster's; every other setting of the Secret and of the topic stays as
//!   it was. The operator's own clients keep the cluster's.
//! - annotation `flow.ankka.thinkmorestupidless.com/require-streamlet-credentials: "true"`: a
//!   namespace without such a key is refused, rather than given the cluster's credential.
//!
//! Per namespace, not per pipeline: whoever reads one streamlet Secret of a namespace can read
//! them all, so a credential per pipeline would separate nobody. `docs/tenancy.md` says what
//! reading a streamlet Secret gives with and without them.

use std::collections::BTreeMap;
use std::fmt;

use super::cluster::is_namespace_name;
use super::{ConnectionError, java, properties};

/// Prefix of the cluster Secret data keys that hold one namespace's streamlet credentials:
/// `streamlet-credentials.<namespace>`.
pub const STREAMLET_CREDENTIALS_PREFIX: &str = "streamlet-credentials.";
/// Annotation of a cluster Secret: `"true"` refuses the pipelines of every namespace that has no
/// streamlet credentials of its own in the Secret, instead of rendering the cluster's credential.
pub const ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS: &str =
    "flow.ankka.thinkmorestupidless.com/require-streamlet-credentials";

/// Why a setting of a namespace's streamlet credentials that is not a security setting is
/// refused, phrased to follow "is refused: ".
const NOT_SECURITY: &str = "it is not a security setting: a namespace's streamlet credentials hold only security.*, \
                            sasl.*, ssl.* and https.* settings (put other settings in connection-config)";

/// The streamlet credentials of one cluster Secret: each namespace's, and whether every namespace
/// must have its own. `Debug` shows namespaces and setting keys, never values.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct StreamletCredentials {
    /// By namespace: the security settings of its streamlets, in the Java client's form, or what is
    /// wrong with them.
    namespaces: BTreeMap<String, Result<BTreeMap<String, String>, Vec<ConnectionError>>>,
    /// Whether a namespace without its own is refused
    /// ([`ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS`]).
    pub required: bool,
}

impl fmt::Debug for StreamletCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let namespaces: BTreeMap<&String, Result<Vec<&String>, &Vec<ConnectionError>>> =
            self.namespaces.iter().map(|(ns, s)| (ns, s.as_ref().map(|m| m.keys().collect()))).collect();
        f.debug_struct("StreamletCredentials")
            .field("namespaces", &namespaces)
            .field("required", &self.required)
            .finish()
    }
}

/// Whether `key` is a security setting: what a cluster Secret alone decides for its topics
/// ([`properties::cluster_owned`]), but the brokers.
fn is_security_setting(key: &str) -> bool {
    properties::cluster_owned(key)
        && !matches!(key.to_ascii_lowercase().as_str(), "bootstrap.servers" | "metadata.broker.list")
}

impl StreamletCredentials {
    /// Reads them from the decoded data and the annotations of Secret `secret`. A key that names no
    /// namespace is a problem of the whole Secret, returned apart; what is wrong with one
    /// namespace's credentials is that namespace's problem alone ([`StreamletCredentials::problems`]).
    pub(super) fn from_secret(
        secret: &str,
        data: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> (Self, Vec<ConnectionError>) {
        let mut out = StreamletCredentials {
            namespaces: BTreeMap::new(),
            required: annotations
                .get(ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        };
        let mut problems = Vec::new();
        for (key, text) in data {
            let Some(namespace) = key.strip_prefix(STREAMLET_CREDENTIALS_PREFIX) else { continue };
            if !is_namespace_name(namespace) {
                problems.push(ConnectionError::SecretKey {
                    secret: secret.to_string(),
                    key: key.clone(),
                    reason: format!("'{namespace}' is not a namespace name: name the namespace as it is written"),
                });
                continue;
            }
            out.namespaces.insert(namespace.to_string(), read(secret, key, text));
        }
        (out, problems)
    }

    /// What keeps the streamlets of `namespace` on cluster `cluster` from being rendered: what is
    /// wrong with their credentials, or none while the cluster requires some.
    pub(super) fn problems(&self, cluster: &str, namespace: &str) -> Vec<ConnectionError> {
        match self.namespaces.get(namespace) {
            Some(Err(problems)) => problems.clone(),
            None if self.required => {
                vec![ConnectionError::NoStreamletCredentials { cluster: cluster.into(), namespace: namespace.into() }]
            }
            _ => Vec::new(),
        }
    }

    /// Gives the streamlets of `namespace` their own security settings: the `connection`, `producer`
    /// and `consumer` settings (a topic's, the cluster's merged with its own) lose every security
    /// setting, and `connection` gets the namespace's. Left as they are when the namespace has none
    /// and the cluster requires none (the streamlets then use the cluster's credential). When its
    /// own cannot be used, or are required and missing, the security settings go and none come:
    /// such a pipeline is refused ([`StreamletCredentials::problems`]), and the cluster's
    /// credential is never what stands in for the namespace's.
    pub(super) fn lay_over(
        &self,
        namespace: &str,
        connection: &mut BTreeMap<String, String>,
        producer: &mut BTreeMap<String, String>,
        consumer: &mut BTreeMap<String, String>,
    ) {
        let own = match self.namespaces.get(namespace) {
            Some(Ok(settings)) => Some(settings),
            Some(Err(_)) => None,
            None if self.required => None,
            None => return,
        };
        for settings in [&mut *connection, producer, consumer] {
            settings.retain(|k, _| !is_security_setting(k));
        }
        connection.extend(own.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// One namespace's credentials, from data key `key` of Secret `secret`: security settings only,
/// none refused ([`properties::refused`]), and usable by a client (the stand-in streamlet and any
/// librdkafka client translate them as the operator does its own, [`java::for_librdkafka`]).
fn read(secret: &str, key: &str, text: &str) -> Result<BTreeMap<String, String>, Vec<ConnectionError>> {
    let settings: BTreeMap<String, String> = match java_properties::read(text.as_bytes()) {
        Ok(m) => m.into_iter().collect(),
        Err(e) => {
            return Err(vec![ConnectionError::Properties {
                secret: secret.into(),
                key: key.into(),
                reason: e.to_string(),
            }]);
        }
    };
    let mut problems = Vec::new();
    for (k, v) in &settings {
        if !properties::is_property_name(k) {
            problems.push(ConnectionError::KeyNotAPropertyName {
                origin: format!("Secret '{secret}'"),
                block: key.into(),
                key: properties::shown_key(k),
            });
            continue;
        }
        let why = if is_security_setting(k) {
            properties::refused(k, v, false).map(|r| r.text())
        } else {
            Some(NOT_SECURITY.into())
        };
        if let Some(why) = why {
            problems.push(ConnectionError::PropertyRefused {
                origin: format!("Secret '{secret}'"),
                block: key.into(),
                key: k.clone(),
                why,
            });
        }
    }
    if problems.is_empty()
        && let Err(reasons) = java::for_librdkafka(settings.clone())
    {
        problems.extend(reasons.into_iter().map(|reason| ConnectionError::SecretKey {
            secret: secret.into(),
            key: key.into(),
            reason,
        }));
    }
    if problems.is_empty() { Ok(settings) } else { Err(problems) }
}

#[cfg(test)]
mod tests;
