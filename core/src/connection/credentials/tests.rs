use super::super::*;
use super::*;
use crate::targets::tests::topic;

fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const OPERATOR_JAAS: &str =
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="operator" password="op-pw-1";"#;
const SHOP_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop-streamlets" password="shop-pw-2";"#;

/// The cluster `main`'s Secret data: the operator's credential over SASL_SSL, settings of every
/// kind besides, and `extra`.
fn data(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut d = map(&[
        ("bootstrap.servers", "kafka:9093"),
        (
            "connection-config",
            &format!(
                "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={OPERATOR_JAAS}\n\
                 ssl.truststore.type=PEM\nssl.truststore.certificates=CA-OF-THE-CLUSTER\nrequest.timeout.ms=20000\n"
            ),
        ),
        ("producer-config", "acks=all\nssl.endpoint.identification.algorithm=\n"),
        ("consumer-config", "max.poll.records=10\nsasl.login.refresh.buffer.seconds=60\n"),
    ]);
    d.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    d
}

/// Cluster `main`, allowing `shop` and `tenant`, with `extra` data and annotations.
fn clusters(extra: &[(&str, &str)], annotations: &[(&str, &str)]) -> Clusters {
    let mut a = map(&[(ANNOTATION_ALLOWED_NAMESPACES, "shop, tenant")]);
    a.extend(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Clusters::from([("main".to_string(), Cluster::from_secret("main", &data(extra), &a))])
}

fn shop_credentials() -> String {
    format!(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={SHOP_JAAS}\nssl.truststore.type=PEM\n\
         ssl.truststore.certificates=CA-OF-THE-CLUSTER\n"
    )
}

/// Topic `events` of cluster `main`, with a setting of each block of its own.
fn events() -> TopicSpec {
    let mut t = topic("events", "shop.events");
    t.bootstrap_servers = None;
    t.cluster = Some("main".into());
    t.consumer_config = map(&[("auto.offset.reset", "earliest")]);
    t.producer_config = map(&[("linger.ms", "5")]);
    t
}

fn spec() -> AnkkaFlowSpec {
    let mut spec = crate::targets::tests::cart(0);
    spec.topics = vec![events()];
    spec
}

fn texts(problems: &[ConnectionError]) -> Vec<String> {
    problems.iter().map(ToString::to_string).collect()
}

#[test]
fn without_streamlet_credentials_the_streamlets_get_what_they_got_before() {
    let c = clusters(&[], &[]);
    assert_eq!(c["main"].streamlet_credentials, StreamletCredentials::default());
    let r = resolve_topic(&events(), "shop", &c, &Default::default()).unwrap();
    assert_eq!(r.connection_config["sasl.jaas.config"], OPERATOR_JAAS);
    assert_eq!(r.connection_config.len(), 6);
    assert_eq!(
        r.producer_config,
        map(&[("acks", "all"), ("linger.ms", "5"), ("ssl.endpoint.identification.algorithm", "")])
    );
}

#[test]
fn a_namespace_with_its_own_credentials_gets_them_and_none_of_the_operators() {
    let c = clusters(&[("streamlet-credentials.shop", &shop_credentials())], &[]);
    assert!(c["main"].problems.is_empty(), "{:?}", c["main"].problems);
    let r = resolve_topic(&events(), "shop", &c, &Default::default()).unwrap();
    // Every security setting is the namespace's; every other setting stays.
    assert_eq!(
        r.connection_config,
        map(&[
            ("request.timeout.ms", "20000"),
            ("sasl.jaas.config", SHOP_JAAS),
            ("sasl.mechanism", "PLAIN"),
            ("security.protocol", "SASL_SSL"),
            ("ssl.truststore.certificates", "CA-OF-THE-CLUSTER"),
            ("ssl.truststore.type", "PEM"),
        ])
    );
    assert_eq!(r.producer_config, map(&[("acks", "all"), ("linger.ms", "5")]));
    assert_eq!(r.consumer_config, map(&[("auto.offset.reset", "earliest"), ("max.poll.records", "10")]));
    // The operator's client keeps the cluster's credential.
    let k = r.kafka_connection();
    assert_eq!(
        (k.properties["sasl.username"].as_str(), k.properties["sasl.password"].as_str()),
        ("operator", "op-pw-1")
    );
    // A namespace without its own gets the cluster's, as before.
    let t = resolve_topic(&events(), "tenant", &c, &Default::default()).unwrap();
    assert_eq!(t.connection_config["sasl.jaas.config"], OPERATOR_JAAS);
    assert!(resolve_pipeline(&spec(), "tenant", &c, &Default::default()).problems.is_empty());
}

#[test]
fn an_administrator_can_require_them_and_a_namespace_without_is_refused() {
    let required = [(ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS, " True ")];
    let c = clusters(&[("streamlet-credentials.shop", &shop_credentials())], &required);
    assert!(c["main"].streamlet_credentials.required);
    assert!(resolve_pipeline(&spec(), "shop", &c, &Default::default()).problems.is_empty());
    let r = resolve_pipeline(&spec(), "tenant", &c, &Default::default());
    assert!(r.refused());
    assert_eq!(
        texts(&r.problems),
        [
            "Kafka cluster 'main' requires the streamlets of each namespace to have credentials of their own, and Secret \
          'kafka-cluster-main' has none for namespace 'tenant': an administrator adds its key \
          'streamlet-credentials.tenant'"
        ]
    );
    assert_eq!(r.problems[0].kind(), "StreamletCredentialsMissing");
    // A deletion uses the operator's client alone: it still resolves, and what the streamlets would
    // get holds no credential at all, never the cluster's.
    let t = resolve_topic(&events(), "tenant", &c, &Default::default()).unwrap();
    assert_eq!(t.kafka_connection().properties["sasl.username"], "operator");
    assert!(t.connection_config.keys().all(|k| !k.starts_with("sasl.") && !k.starts_with("ssl.")), "{t:?}");
    assert!(!t.connection_config.contains_key("security.protocol"));
    assert_eq!(t.producer_config, map(&[("acks", "all"), ("linger.ms", "5")]));
    // A namespace the cluster does not allow learns only that.
    let other = resolve_pipeline(&spec(), "elsewhere", &c, &Default::default());
    assert_eq!(other.problems.len(), 1);
    assert_eq!(other.problems[0].kind(), "ClusterNotAllowed");
    // Without the annotation, or with another value, nothing is required.
    for value in ["false", "yes", ""] {
        let c = clusters(&[], &[(ANNOTATION_REQUIRE_STREAMLET_CREDENTIALS, value)]);
        assert!(!c["main"].streamlet_credentials.required, "{value}");
    }
}

#[test]
fn what_is_wrong_with_a_namespaces_credentials_refuses_that_namespace_alone_and_quotes_no_value() {
    let broken = "security.protocol=SASL_SSL\nsasl.jaas.config=com.example.Evil required password=\"pw-3\";\n\
                  ssl.keystore.location=/etc/secret/ks.jks\nrequest.timeout.ms=5\nsasl.username=x\n";
    let c = clusters(&[("streamlet-credentials.shop", broken)], &[]);
    assert!(c["main"].problems.is_empty(), "the Secret's other users are not refused: {:?}", c["main"].problems);
    assert!(resolve_pipeline(&spec(), "tenant", &c, &Default::default()).problems.is_empty());
    let r = resolve_pipeline(&spec(), "shop", &c, &Default::default());
    let got = texts(&r.problems);
    assert_eq!(
        got,
        [
            "Secret 'kafka-cluster-main': streamlet-credentials.shop 'request.timeout.ms' is refused: it is not a security \
             setting: a namespace's streamlet credentials hold only security.*, sasl.*, ssl.* and https.* settings (put \
             other settings in connection-config)",
            "Secret 'kafka-cluster-main': streamlet-credentials.shop 'sasl.jaas.config' is refused: it names a login \
             module the sidecar would load; use PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule",
            "Secret 'kafka-cluster-main': streamlet-credentials.shop 'ssl.keystore.location' is refused: it names a file, \
             which the operator and the sidecar never read for a connection; put the certificate and key inline \
             instead: ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key (and \
             ssl.key.password for an encrypted key)",
        ]
    );
    for text in &got {
        assert!(!text.contains("pw-3") && !text.contains("/etc/secret"), "{text}");
    }
    // Settings that pass the rules but that no client could use: named, never quoted.
    let c = clusters(
        &[(
            "streamlet-credentials.shop",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required password=\"pw-4\";\n",
        )],
        &[],
    );
    let got = texts(&resolve_pipeline(&spec(), "shop", &c, &Default::default()).problems);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("Secret 'kafka-cluster-main': key 'streamlet-credentials.shop': sasl.jaas.config"),
        "{got:?}"
    );
    assert!(!got[0].contains("pw-4"), "{got:?}");
    assert_eq!(resolve_pipeline(&spec(), "shop", &c, &Default::default()).problems[0].kind(), "ClusterSecretInvalid");
    // Text that is not properties.
    let c = clusters(&[("streamlet-credentials.shop", "sasl.password=\\u12")], &[]);
    let got = texts(&resolve_pipeline(&spec(), "shop", &c, &Default::default()).problems);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0]
            .starts_with("Secret 'kafka-cluster-main': key 'streamlet-credentials.shop' is not Java properties text: "),
        "{got:?}"
    );
    // Broken, they are withheld rather than replaced by the cluster's.
    let t = resolve_topic(&events(), "shop", &c, &Default::default()).unwrap();
    assert!(!t.connection_config.contains_key("sasl.jaas.config"), "{t:?}");
}

#[test]
fn a_key_that_names_no_namespace_is_a_problem_of_the_whole_secret() {
    let c = clusters(&[("streamlet-credentials.Shop_1", &shop_credentials())], &[]);
    assert_eq!(
        texts(&c["main"].problems),
        [
            "Secret 'kafka-cluster-main': key 'streamlet-credentials.Shop_1': 'Shop_1' is not a namespace name: name the \
          namespace as it is written"
        ]
    );
    assert!(resolve_pipeline(&spec(), "tenant", &c, &Default::default()).refused());
}

#[test]
fn debug_shows_keys_never_values() {
    let c = clusters(&[("streamlet-credentials.shop", &shop_credentials())], &[]);
    let text = format!("{:?} {:?}", c["main"], resolve_topic(&events(), "shop", &c, &Default::default()).unwrap());
    assert!(text.contains("shop") && text.contains("sasl.jaas.config"), "{text}");
    for secret in ["op-pw-1", "shop-pw-2", "CA-OF-THE-CLUSTER"] {
        assert!(!text.contains(secret), "{text}");
    }
}
