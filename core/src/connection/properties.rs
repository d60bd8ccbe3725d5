//! Rules on client settings, wherever they come from: a cluster Secret or a resource's topic.
//!
//! - [`refused`]: settings that load code into a client's process or make it read files, run
//!   commands or use ambient credentials of the operator or the sidecar are refused, whoever wrote
//!   them. librdkafka's `plugin.library.paths`, `ssl.engine.*`, `ssl.providers`, every `*.location`
//!   and `*.file` path, `sasl.kerberos.kinit.cmd` and `sasl.kerberos.keytab`; the Java client's class
//!   settings (`*.class`, `*.classes`, serializers, `metric.reporters`, `security.providers`,
//!   `config.providers`) except Kafka's own classes listed in [`KNOWN_CLASSES`]; a `sasl.jaas.config`
//!   naming another login module than Kafka's three, or with such an option; a token endpoint that
//!   is not an `http(s)` URL (the Java client reads a `file:` URL from its own disk). From a
//!   resource, also the operator's own cloud identity (`sasl.oauthbearer.metadata.authentication.type`).
//!   The consumer group id is the platform's: `group.id` is refused too.
//! - [`cluster_owned`]: the settings a cluster Secret alone decides for the topics that use it: the
//!   brokers and everything about security. A topic using a cluster Secret that sets one is refused,
//!   so the cluster's credentials never go anywhere a tenant chose.
//!
//! - [`is_property_name`]: a key that is not an ASCII property name (a space, a control character,
//!   a letter outside ASCII) is refused wherever it is written, since the rules above compare keys
//!   exactly and a padded key would slip past them into the streamlets' configuration.
//! - [`OPERATOR_CLIENT_KEYS`]: the only librdkafka settings the operator's own clients take from a
//!   connection. Everything else a Secret or a resource holds goes to the streamlets alone.
//!
//! See `docs/tenancy.md` for why each rule exists, and `docs/kafka-settings.md` for the allow-list.

use super::java;

/// The librdkafka settings the operator's own clients (the reset's, the lag sampler's, the topic
/// administration's) take from a connection, after its Java settings are translated: how to reach
/// the brokers securely, and nothing else. The operator adds its own fixed settings (client id,
/// timeouts, no auto-commit; see the Kafka adapter). A key outside this list never reaches those
/// clients, whoever wrote it: librdkafka also has settings that make a client signal its own
/// process (`internal.termination.signal`), talk to an in-process mock cluster
/// (`test.mock.num.brokers`), log or count without bound (`debug`, `statistics.interval.ms`) or load
/// code, and a list of what is allowed cannot miss one the way a list of what is refused can.
pub const OPERATOR_CLIENT_KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.token.endpoint.url",
    "ssl.ca.pem",
    "ssl.ca.location",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
];

/// Whether `key` is a client property name: ASCII letters, digits, `.`, `_` and `-`, starting with
/// a letter or a digit, at most 255 characters. Kafka's and librdkafka's settings all are.
pub fn is_property_name(key: &str) -> bool {
    key.len() <= 255
        && key.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `key` as an error shows a key that is not a property name: quoted, with every character
/// outside printable ASCII (and the quote and backslash) escaped, so that it can neither hide a
/// space nor forge a line of a log; at most 64 characters of it.
pub fn shown_key(key: &str) -> String {
    let escaped: String = key.chars().take(64).flat_map(char::escape_default).collect();
    let more = if key.chars().count() > 64 { "..." } else { "" };
    format!("\"{escaped}{more}\"")
}

/// A setting refused by [`refused`]: why, and what to write instead, if anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why, phrased to follow "is refused: ".
    pub why: &'static str,
    /// What to write instead, phrased to follow "; ".
    pub instead: Option<&'static str>,
}

impl Refusal {
    /// `why`, and what to write instead when there is something.
    pub fn text(&self) -> String {
        match self.instead {
            Some(instead) => format!("{}; {instead}", self.why),
            None => self.why.to_string(),
        }
    }
}

const LOADS_LIBRARY: &str = "it loads shared libraries into the client's process";
const LOADS_OPENSSL: &str = "it loads OpenSSL engines or providers into the client's process";
const READS_FILE: &str = "it names a file, which the operator and the sidecar never read for a connection";
const RUNS_COMMAND: &str = "it runs a command in the client's container";
const LOADS_CLASS: &str = "it names Java classes the sidecar would load, and only Kafka's own known ones are accepted";
const LOADS_MODULE: &str = "it names a login module the sidecar would load; use PlainLoginModule, ScramLoginModule or \
                            OAuthBearerLoginModule";
const READS_CONFIG: &str = "it makes the sidecar's Java client read files or its environment";
const NOT_HTTP: &str = "it is not an http:// or https:// URL (a Java client reads a file: URL from its own disk)";
const AMBIENT: &str = "it makes the operator authenticate with its own cloud identity";
const GROUP_ID: &str = "the platform names each inlet's consumer group itself (<pipeline>.<streamlet>.<inlet>)";

/// Java class settings the rules accept, with the classes accepted for each: Kafka's own, which
/// load nothing from outside the client library. Any other value of a class setting is refused.
pub const KNOWN_CLASSES: &[(&str, &[&str])] = &[
    (
        "sasl.login.callback.handler.class",
        &[
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            // its name before Kafka 3.4
            "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
        ],
    ),
    (
        "sasl.oauthbearer.jwt.retriever.class",
        &[
            "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
            "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
        ],
    ),
    (
        "sasl.oauthbearer.jwt.validator.class",
        &[
            "org.apache.kafka.common.security.oauthbearer.ClientJwtValidator",
            "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
        ],
    ),
    (
        "partition.assignment.strategy",
        &[
            "org.apache.kafka.clients.consumer.RangeAssignor",
            "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "org.apache.kafka.clients.consumer.StickyAssignor",
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            // librdkafka's names
            "range",
            "roundrobin",
            "cooperative-sticky",
        ],
    ),
];

/// Package of Kafka's own serializers and deserializers, accepted for `key.serializer` and its kind.
const SERIALIZATION_PACKAGE: &str = "org.apache.kafka.common.serialization.";

/// Settings whose value is a list of Java classes, besides the `*.class` and `*.classes` ones.
const CLASS_LIST_KEYS: &[&str] = &[
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "metric.reporters",
    "partition.assignment.strategy",
    "security.providers",
];

/// Whether setting `key` with `value` is refused (see the module documentation). `from_resource`:
/// the setting comes from a resource's topic rather than a cluster Secret.
pub fn refused(key: &str, value: &str, from_resource: bool) -> Option<Refusal> {
    let no = |why| Some(Refusal { why, instead: None });
    let k = key.to_ascii_lowercase();
    if k == "plugin.library.paths" {
        return no(LOADS_LIBRARY);
    }
    if (k.starts_with("ssl.engine.") && !k.ends_with(".class"))
        || k == "ssl_engine_callback_data"
        || k == "ssl.providers"
    {
        return no(LOADS_OPENSSL);
    }
    if k == "sasl.kerberos.kinit.cmd" {
        return no(RUNS_COMMAND);
    }
    if k == "group.id" {
        return no(GROUP_ID);
    }
    if k == "config.providers" || k.starts_with("config.providers.") {
        return no(READS_CONFIG);
    }
    if k.ends_with(".location") {
        // `probe`: librdkafka's search of the system's CA stores, which names no path.
        if matches!(k.as_str(), "ssl.ca.location" | "https.ca.location") && value.trim() == "probe" {
            return None;
        }
        return Some(Refusal { why: READS_FILE, instead: inline_instead(&k) });
    }
    if k.ends_with(".file") || k == "sasl.kerberos.keytab" {
        return no(READS_FILE);
    }
    if matches!(k.as_str(), "sasl.oauthbearer.token.endpoint.url" | "sasl.oauthbearer.jwks.endpoint.url") {
        let v = value.trim().to_ascii_lowercase();
        if !(v.starts_with("https://") || v.starts_with("http://")) {
            return no(NOT_HTTP);
        }
    }
    if from_resource
        && k == "sasl.oauthbearer.metadata.authentication.type"
        && !value.trim().eq_ignore_ascii_case("none")
    {
        return no(AMBIENT);
    }
    if k == "sasl.jaas.config" {
        return jaas_refused(value);
    }
    if k.ends_with(".class") || k.ends_with(".classes") || CLASS_LIST_KEYS.contains(&k.as_str()) {
        let known = KNOWN_CLASSES.iter().find(|(key, _)| *key == k).map_or(&[][..], |(_, classes)| *classes);
        let serialization = k.ends_with("serializer");
        let ok = value.split(',').map(str::trim).filter(|c| !c.is_empty()).all(|c| {
            known.contains(&c)
                || (serialization && c.strip_prefix(SERIALIZATION_PACKAGE).is_some_and(|rest| !rest.contains('.')))
        });
        if !ok {
            return no(LOADS_CLASS);
        }
    }
    None
}

/// What to write instead of a file path, for the paths that have an inline form.
fn inline_instead(key: &str) -> Option<&'static str> {
    Some(match key {
        "ssl.truststore.location" => {
            "put the certificates inline instead: ssl.truststore.type=PEM with ssl.truststore.certificates"
        }
        "ssl.keystore.location" => {
            "put the certificate and key inline instead: ssl.keystore.type=PEM with ssl.keystore.certificate.chain and \
             ssl.keystore.key (and ssl.key.password for an encrypted key)"
        }
        "ssl.ca.location" => "put the certificates inline instead: ssl.ca.pem",
        "ssl.certificate.location" => "put the certificate inline instead: ssl.certificate.pem",
        "ssl.key.location" => "put the key inline instead: ssl.key.pem",
        "https.ca.location" => "put the certificates inline instead: https.ca.pem",
        _ => return None,
    })
}

/// A `sasl.jaas.config` line naming another login module than Kafka's three, or an option that
/// would make one read a file or load a class (the OAuth module takes TLS settings for its token
/// endpoint as options).
fn jaas_refused(line: &str) -> Option<Refusal> {
    let module = java::jaas_module(line)?;
    if ![java::PLAIN_LOGIN_MODULE, java::SCRAM_LOGIN_MODULE, java::OAUTHBEARER_LOGIN_MODULE].contains(&module) {
        return Some(Refusal { why: LOADS_MODULE, instead: None });
    }
    // A line that does not parse is reported by the translation, with what is wrong.
    let jaas = java::parse_jaas(line).ok()?;
    jaas.options.iter().find_map(|(k, v)| refused(k, v, false)).map(|inner| Refusal {
        why: match inner.why {
            READS_FILE => {
                "one of its options names a file, which the operator and the sidecar never read for a connection"
            }
            LOADS_CLASS => "one of its options names Java classes the sidecar would load",
            _ => "one of its options is a setting the platform refuses",
        },
        instead: None,
    })
}

/// Whether `key` is a setting that only a cluster Secret decides for the topics using it: the
/// brokers, and everything about security (protocol, SASL, TLS, the token endpoint's TLS).
pub fn cluster_owned(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    matches!(k.as_str(), "bootstrap.servers" | "metadata.broker.list")
        || ["security.", "sasl.", "ssl.", "ssl_", "sasl_", "https.", "enable.ssl.", "enable.sasl."]
            .iter()
            .any(|p| k.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_files_commands_and_the_group_are_refused_from_anywhere() {
        for (key, value, why) in [
            ("plugin.library.paths", "/tmp/evil.so", LOADS_LIBRARY),
            ("ssl.engine.location", "/tmp/engine.so", LOADS_OPENSSL),
            ("ssl.engine.id", "dynamic", LOADS_OPENSSL),
            ("ssl.providers", "legacy", LOADS_OPENSSL),
            ("sasl.kerberos.kinit.cmd", "sh -c 'curl evil'", RUNS_COMMAND),
            ("sasl.kerberos.keytab", "/etc/krb5.keytab", READS_FILE),
            ("ssl.crl.location", "/etc/crl.pem", READS_FILE),
            ("ssl.ca.location", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", READS_FILE),
            ("sasl.oauthbearer.assertion.private.key.file", "/key.pem", READS_FILE),
            ("sasl.oauthbearer.assertion.jwt.template.file", "/t.json", READS_FILE),
            ("sasl.oauthbearer.token.endpoint.url", "file:///var/run/secrets/token", NOT_HTTP),
            ("sasl.oauthbearer.jwks.endpoint.url", "/jwks.json", NOT_HTTP),
            ("config.providers", "myprovider", READS_CONFIG),
            ("config.providers.file.class", "org.apache.kafka.common.config.provider.FileConfigProvider", READS_CONFIG),
            ("sasl.login.class", "com.example.Login", LOADS_CLASS),
            ("sasl.client.callback.handler.class", "com.example.Handler", LOADS_CLASS),
            ("sasl.login.callback.handler.class", "com.example.Handler", LOADS_CLASS),
            ("ssl.engine.factory.class", "com.example.Engine", LOADS_CLASS),
            ("interceptor.classes", "com.example.A,com.example.B", LOADS_CLASS),
            ("security.providers", "com.example.Provider", LOADS_CLASS),
            ("metric.reporters", "com.example.Reporter", LOADS_CLASS),
            ("value.deserializer", "com.example.Gadget", LOADS_CLASS),
            ("value.deserializer", "org.apache.kafka.common.serialization.sub.Gadget", LOADS_CLASS),
            ("partition.assignment.strategy", "com.example.Assignor", LOADS_CLASS),
            ("group.id", "shop.router.in", GROUP_ID),
            ("sasl.jaas.config", "com.sun.security.auth.module.JndiLoginModule required;", LOADS_MODULE),
            ("sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", LOADS_MODULE),
        ] {
            for from_resource in [false, true] {
                let r = refused(key, value, from_resource).unwrap_or_else(|| panic!("{key} passes"));
                assert_eq!(r.why, why, "{key}");
                assert!(!r.text().contains(value), "{key}: the reason quotes the value");
            }
        }
    }

    #[test]
    fn store_paths_say_what_to_write_instead() {
        let r = refused("ssl.truststore.location", "/etc/kafka/truststore.jks", false).unwrap();
        assert_eq!(
            r.text(),
            "it names a file, which the operator and the sidecar never read for a connection; put the certificates \
             inline instead: ssl.truststore.type=PEM with ssl.truststore.certificates"
        );
        let r = refused("ssl.keystore.location", "/etc/kafka/keystore.p12", true).unwrap();
        assert!(r.text().ends_with("ssl.keystore.key (and ssl.key.password for an encrypted key)"), "{}", r.text());
        for (key, pem) in [
            ("ssl.ca.location", "ssl.ca.pem"),
            ("ssl.certificate.location", "ssl.certificate.pem"),
            ("ssl.key.location", "ssl.key.pem"),
            ("https.ca.location", "https.ca.pem"),
        ] {
            assert!(refused(key, "/p", false).unwrap().text().ends_with(pem), "{key}");
        }
    }

    #[test]
    fn kafkas_own_classes_safe_urls_and_the_ca_probe_pass() {
        for (key, value) in [
            (
                "sasl.login.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            ),
            (
                "sasl.login.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
            ),
            (
                "sasl.oauthbearer.jwt.retriever.class",
                "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
            ),
            ("partition.assignment.strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
            ("partition.assignment.strategy", "range, roundrobin"),
            ("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer"),
            ("interceptor.classes", ""),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/token"),
            ("sasl.oauthbearer.token.endpoint.url", "HTTP://127.0.0.1:8080/token"),
            ("ssl.ca.location", "probe"),
            ("sasl.oauthbearer.metadata.authentication.type", "none"),
            ("ssl.endpoint.identification.algorithm", ""),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#,
            ),
            ("security.protocol", "SASL_SSL"),
            ("auto.offset.reset", "earliest"),
        ] {
            assert_eq!(refused(key, value, true), None, "{key}={value}");
        }
    }

    #[test]
    fn the_operators_cloud_identity_is_the_administrators_choice_only() {
        let key = "sasl.oauthbearer.metadata.authentication.type";
        assert_eq!(refused(key, "azure_imds", true).unwrap().why, AMBIENT);
        assert_eq!(refused(key, "azure_imds", false), None);
    }

    #[test]
    fn jaas_options_that_read_files_or_load_classes_are_refused() {
        let line = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"a\" \
                    clientSecret=\"s3cret\" ssl.truststore.location=\"/etc/ts.jks\";";
        let r = refused("sasl.jaas.config", line, false).unwrap();
        assert!(r.why.contains("one of its options names a file"), "{r:?}");
        assert!(!r.text().contains("s3cret") && !r.text().contains("/etc/ts.jks"));
    }

    #[test]
    fn property_names_are_ascii_without_blanks() {
        for k in ["bootstrap.servers", "auto.offset.reset", "ssl.ca.pem", "enable_idempotence", "max-poll", "a1"] {
            assert!(is_property_name(k), "{k}");
        }
        for k in [
            "",
            "bootstrap.servers ",
            " bootstrap.servers",
            "bootstrap servers",
            "security.protocol\t",
            "sasl.mechanism\n",
            "ssl.ca.pem\u{0}",
            "s\u{e9}curity.protocol",
            "security\u{2024}protocol",
            ".hidden",
            "a=b",
        ] {
            assert!(!is_property_name(k), "{k:?}");
        }
        assert!(!is_property_name(&"a".repeat(256)));
    }

    #[test]
    fn a_shown_key_makes_every_odd_character_visible() {
        assert_eq!(shown_key("bootstrap.servers "), "\"bootstrap.servers \"");
        assert_eq!(shown_key("a\nb\u{1b}[31m"), "\"a\\nb\\u{1b}[31m\"");
        assert_eq!(shown_key("s\u{e9}"), "\"s\\u{e9}\"");
        assert_eq!(shown_key(&"k".repeat(70)), format!("\"{}...\"", "k".repeat(64)));
    }

    #[test]
    fn the_allow_list_holds_connection_and_security_settings_only() {
        for k in OPERATOR_CLIENT_KEYS {
            assert!(is_property_name(k), "{k}");
            assert!(cluster_owned(k) || k.starts_with("enable.ssl."), "{k} is not a connection or security setting");
        }
        for k in ["internal.termination.signal", "test.mock.num.brokers", "debug", "statistics.interval.ms"] {
            assert!(!OPERATOR_CLIENT_KEYS.contains(&k), "{k}");
        }
    }

    #[test]
    fn the_cluster_owns_brokers_and_security() {
        for k in [
            "bootstrap.servers",
            "metadata.broker.list",
            "security.protocol",
            "SASL.mechanism",
            "sasl.jaas.config",
            "sasl.username",
            "sasl.oauthbearer.token.endpoint.url",
            "ssl.endpoint.identification.algorithm",
            "ssl.ca.pem",
            "enable.ssl.certificate.verification",
            "enable.sasl.oauthbearer.unsecure.jwt",
            "https.ca.pem",
        ] {
            assert!(cluster_owned(k), "{k}");
        }
        for k in ["auto.offset.reset", "request.timeout.ms", "client.dns.lookup", "linger.ms", "max.poll.records"] {
            assert!(!cluster_owned(k), "{k}");
        }
    }
}
