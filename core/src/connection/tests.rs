use super::*;
use crate::targets::tests::topic;

fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Cluster `name` from Secret data `data`, allowing namespace `shop` (where these tests' resources
/// are).
fn cluster(name: &str, data: &[(&str, &str)]) -> Cluster {
    Cluster::from_secret(name, &map(data), &map(&[(ANNOTATION_ALLOWED_NAMESPACES, "shop")]))
}

fn clusters(list: Vec<Cluster>) -> Clusters {
    list.into_iter().map(|c| (c.name.clone(), c)).collect()
}

/// A topic of cluster `cluster` (no brokers of its own).
fn of_cluster(id: &str, cluster: Option<&str>) -> TopicSpec {
    let mut t = topic(id, &format!("shop.{id}"));
    t.bootstrap_servers = None;
    t.cluster = cluster.map(str::to_string);
    t
}

fn problems(t: &TopicSpec, c: &Clusters) -> Vec<String> {
    resolve_topic(t, "shop", c, &TokenEndpoints::default()).unwrap_err().iter().map(ToString::to_string).collect()
}

#[test]
fn topic_brokers_need_no_cluster() {
    let t = topic("cart-events", "shop.cart-events.v1");
    let r = resolve_topic(&t, "shop", &Clusters::new(), &TokenEndpoints::default()).unwrap();
    assert_eq!(r.bootstrap_servers, "127.0.0.1:19092");
    assert_eq!(r.cluster, None);
    assert_eq!(r.kafka_connection().bootstrap_servers, "127.0.0.1:19092");
    assert_eq!(r.name, "shop.cart-events.v1");
    assert!(!r.managed);
    assert_eq!((r.partitions, r.replicas), (None, None));
    assert_eq!(r.batch, Batch { max_records: 100, max_bytes: 1_048_576 });
}

#[test]
fn the_cluster_secret_supplies_brokers_and_every_properties_block() {
    let mut t = of_cluster("cart-events", Some("shop"));
    t.consumer_config = map(&[("auto.offset.reset", "earliest"), ("flow.batch.max-records", "500")]);
    t.producer_config = map(&[("linger.ms", "5")]);
    t.connection_config = map(&[("request.timeout.ms", "20000")]);
    t.batch = Some(Batch { max_records: 500, max_bytes: 4_194_304 });
    let c = clusters(vec![cluster(
        "shop",
        &[
            ("bootstrap.servers", " kafka:9092 \n"),
            ("connection-config", "security.protocol=SSL\nrequest.timeout.ms=10000\n"),
            ("producer-config", "acks=all\nlinger.ms=20\n"),
            ("consumer-config", "max.poll.records=10\nssl.endpoint.identification.algorithm=\n"),
        ],
    )]);
    let r = resolve_topic(&t, "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!(r.cluster.as_deref(), Some("shop"));
    assert_eq!(r.bootstrap_servers, "kafka:9092");
    assert_eq!(r.connection_config, map(&[("request.timeout.ms", "20000"), ("security.protocol", "SSL")]));
    assert_eq!(r.producer_config, map(&[("acks", "all"), ("linger.ms", "5")]));
    assert_eq!(
        r.consumer_config,
        map(&[
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "10"),
            ("ssl.endpoint.identification.algorithm", "")
        ]),
        "the topic's entries laid over the cluster's, without flow.* keys"
    );
    assert_eq!(r.batch, Batch { max_records: 500, max_bytes: 4_194_304 });
    // The operator's client: the Secret's security settings alone, translated; neither the topic's
    // request.timeout.ms nor the Secret's reaches it.
    let k = r.kafka_connection();
    assert_eq!(k.bootstrap_servers, "kafka:9092");
    assert_eq!(k.properties, map(&[("security.protocol", "SSL"), ("ssl.endpoint.identification.algorithm", "none")]));
}

#[test]
fn the_default_cluster_serves_a_topic_that_names_neither() {
    let t = of_cluster("cart-events", None);
    let c = clusters(vec![cluster("default", &[("bootstrap.servers", "k:9092")])]);
    let r = resolve_topic(&t, "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!(r.cluster.as_deref(), Some("default"));
    assert_eq!(r.bootstrap_servers, "k:9092");
}

#[test]
fn managed_topics_take_partitions_and_replicas_from_the_topic_else_the_cluster() {
    let c = clusters(vec![
        cluster("shop", &[("bootstrap.servers", "k:9092"), ("partitions", " 6\n"), ("replicas", "3")]),
        cluster("bare", &[("bootstrap.servers", "k:9092")]),
        cluster("typo", &[("bootstrap.servers", "k:9092"), ("partitions", "six"), ("replicas", "0")]),
        cluster("default", &[("bootstrap.servers", "k:9092")]),
    ]);
    let mut t = of_cluster("valid-carts", Some("shop"));
    t.managed = true;
    let r = resolve_topic(&t, "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!((r.partitions, r.replicas), (Some(6), Some(3)));
    t.partitions = Some(2);
    let r = resolve_topic(&t, "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!((r.partitions, r.replicas), (Some(2), Some(3)));

    let mut bare = of_cluster("valid-carts", Some("bare"));
    bare.managed = true;
    assert_eq!(
        problems(&bare, &c),
        [
            "managed topic 'valid-carts' has no partitions: set it in the blueprint, or as a default in Secret 'kafka-cluster-bare'",
            "managed topic 'valid-carts' has no replicas: set it in the blueprint, or as a default in Secret 'kafka-cluster-bare'",
        ]
    );
    bare.replicas = Some(1);
    assert_eq!(
        problems(&bare, &c),
        [
            "managed topic 'valid-carts' has no partitions: set it in the blueprint, or as a default in Secret 'kafka-cluster-bare'"
        ]
    );
    // A topic with its own brokers has no cluster: the message names the default cluster.
    let mut own = topic("valid-carts", "cart.valid-carts");
    own.managed = true;
    own.partitions = Some(3);
    assert_eq!(
        problems(&own, &c),
        [
            "managed topic 'valid-carts' has no replicas: set it in the blueprint, or as a default in Secret 'kafka-cluster-default'"
        ]
    );

    let mut typo = of_cluster("valid-carts", Some("typo"));
    typo.managed = true;
    assert_eq!(
        problems(&typo, &c),
        [
            "managed topic 'valid-carts' takes its partitions from Secret 'kafka-cluster-typo', whose key 'partitions' is not a whole number of at least 1",
            "managed topic 'valid-carts' takes its replicas from Secret 'kafka-cluster-typo', whose key 'replicas' is not a whole number of at least 1",
        ]
    );
    // An unmanaged topic needs neither.
    let r = resolve_topic(&of_cluster("in", Some("typo")), "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!((r.partitions, r.replicas), (None, None));
}

#[test]
fn missing_secret_and_missing_brokers_keep_the_platforms_messages() {
    let t = of_cluster("cart-events", None);
    assert_eq!(
        problems(&t, &Clusters::new()),
        ["topic 'cart-events' uses Kafka cluster 'default', but there is no Secret 'kafka-cluster-default'"]
    );
    let empty = clusters(vec![cluster("default", &[]), cluster("shop", &[("bootstrap.servers", "  ")])]);
    assert_eq!(problems(&t, &empty), ["topic 'cart-events' names no bootstrap.servers and no Kafka cluster"]);
    // Named explicitly: the cluster's own problem is reported as well.
    assert_eq!(
        problems(&of_cluster("cart-events", Some("shop")), &empty),
        [
            "Kafka cluster 'shop' has no bootstrap.servers",
            "topic 'cart-events' names no bootstrap.servers and no Kafka cluster"
        ]
    );
}

#[test]
fn a_secret_whose_properties_do_not_parse_is_a_problem_of_every_topic_using_it() {
    let c = cluster("shop", &[("bootstrap.servers", "k:9092"), ("producer-config", "a=\\u12")]);
    assert_eq!(c.problems.len(), 1);
    let text = c.problems[0].to_string();
    assert!(
        text.starts_with("Secret 'kafka-cluster-shop': key 'producer-config' is not Java properties text: "),
        "{text}"
    );
    assert_eq!(c.problems[0].kind(), "ClusterSecretInvalid");
    let c = clusters(vec![c]);
    assert_eq!(problems(&of_cluster("a", Some("shop")), &c), [text]);
}

#[test]
fn a_pipeline_reports_every_problem_once_in_topic_order() {
    let mut spec = crate::targets::tests::cart(0);
    spec.topics = vec![
        of_cluster("a", Some("shop")),
        of_cluster("b", Some("shop")),
        of_cluster("c", Some("missing")),
        topic("d", "shop.d"),
    ];
    let c = clusters(vec![cluster("shop", &[])]);
    let r = resolve_pipeline(&spec, "shop", &c, &TokenEndpoints::default());
    assert!(r.refused());
    let texts: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "Kafka cluster 'shop' has no bootstrap.servers",
            "topic 'a' names no bootstrap.servers and no Kafka cluster",
            "topic 'b' names no bootstrap.servers and no Kafka cluster",
            "topic 'c' uses Kafka cluster 'missing', but there is no Secret 'kafka-cluster-missing'",
        ]
    );
    let kinds: Vec<&str> = r.problems.iter().map(ConnectionError::kind).collect();
    assert_eq!(kinds, ["ClusterHasNoBrokers", "NoBrokers", "NoBrokers", "ClusterSecretMissing"]);
    assert_eq!(r.topics.len(), 1);
    assert!(r.topic("d").is_some() && r.topic("a").is_none());
}

#[test]
fn a_cluster_secret_written_for_jvm_clients_is_translated_for_the_operator() {
    let plain =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop" password="s3cr\"et";"#;
    let c = clusters(vec![cluster(
        "default",
        &[
            ("bootstrap.servers", "127.0.0.1:19094"),
            (
                "connection-config",
                // properties text reads `\\` as `\`, as the Java client's loader does
                &format!(
                    "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={}\n",
                    plain.replace('\\', "\\\\")
                ),
            ),
        ],
    )]);
    let r = resolve_topic(&of_cluster("cart-events", None), "shop", &c, &TokenEndpoints::default()).unwrap();
    assert_eq!(r.connection_config["sasl.jaas.config"], plain, "the sidecar gets the Java form");
    let k = r.kafka_connection();
    assert_eq!(k.properties["sasl.username"], "shop");
    assert_eq!(k.properties["sasl.password"], "s3cr\"et");
    assert!(!k.properties.contains_key("sasl.jaas.config"));
    for debug in [format!("{r:?}"), format!("{:?}", c["default"]), format!("{k:?}")] {
        assert!(!debug.contains("s3cr") && !debug.contains("SASL_PLAINTEXT"), "Debug shows a value: {debug}");
    }
}

#[test]
fn untranslatable_settings_are_problems_that_name_the_topic_and_no_value() {
    let mut t = topic("cart-events", "shop.cart-events.v1");
    t.connection_config.insert(
        "sasl.jaas.config".into(),
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required password="hunter2";"#.into(),
    );
    t.connection_config.insert("ssl.endpoint.identification.algorithm".into(), "hunter3".into());
    let err = resolve_topic(&t, "shop", &Clusters::new(), &TokenEndpoints::default()).unwrap_err();
    let texts: Vec<String> = err.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "topic 'cart-events': sasl.jaas.config is not of the form '<LoginModule> required <option>=\"...\" ...;': \
             option 'username' is missing or empty",
            "topic 'cart-events': ssl.endpoint.identification.algorithm is neither empty (no check) nor HTTPS",
        ]
    );
    assert!(err.iter().all(|e| e.kind() == "SettingsUntranslatable"));
}

// ---- tenancy rules ----

const PLAIN_SHOP: &str =
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop" password="shop-secret";"#;

/// The cluster `shop` behind SASL, allowing the namespaces `allowed`.
fn shop(allowed: Option<&str>) -> Clusters {
    let mut annotations = BTreeMap::new();
    if let Some(a) = allowed {
        annotations.insert(ANNOTATION_ALLOWED_NAMESPACES.to_string(), a.to_string());
    }
    let data = map(&[
        ("bootstrap.servers", "kafka.shop:9093"),
        (
            "connection-config",
            &format!("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN_SHOP}\n"),
        ),
    ]);
    clusters(vec![Cluster::from_secret("shop", &data, &annotations)])
}

#[test]
fn a_cluster_secret_serves_only_the_namespaces_it_lists() {
    let t = of_cluster("cart-events", Some("shop"));
    for allowed in ["shop", "tenant-a, shop", "tenant-a shop\n", "*"] {
        let r = resolve_topic(&t, "shop", &shop(Some(allowed)), &TokenEndpoints::default()).unwrap();
        assert_eq!(r.kafka_connection().properties["sasl.password"], "shop-secret", "{allowed:?}");
    }
    let err = resolve_topic(&t, "tenant", &shop(Some("shop,tenant-a")), &TokenEndpoints::default()).unwrap_err();
    assert_eq!(
        err.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "topic 'cart-events' uses Kafka cluster 'shop', which namespace 'tenant' may not use: Secret 'kafka-cluster-shop' \
          does not list it in its annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces'"
        ]
    );
    assert_eq!(err[0].kind(), "ClusterNotAllowed");
    let err = resolve_topic(&t, "shop", &shop(None), &TokenEndpoints::default()).unwrap_err();
    assert_eq!(
        err[0].to_string(),
        "topic 'cart-events' uses Kafka cluster 'shop', which no namespace may use yet: Secret 'kafka-cluster-shop' has \
         no annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces' listing the namespaces allowed"
    );
    // The default cluster is no exception.
    let mut c = shop(Some("shop"));
    let mut default = c["shop"].clone();
    default.name = "default".into();
    c.insert("default".into(), default);
    assert!(resolve_topic(&of_cluster("in", None), "tenant", &c, &TokenEndpoints::default()).is_err());
    assert!(resolve_topic(&of_cluster("in", None), "shop", &c, &TokenEndpoints::default()).is_ok());
}

#[test]
fn a_namespace_not_allowed_learns_nothing_else_of_the_secret() {
    let mut c = shop(Some("shop"));
    c.get_mut("shop").unwrap().problems.push(ConnectionError::ClusterNoBrokers { cluster: "shop".into() });
    let err =
        resolve_topic(&of_cluster("cart-events", Some("shop")), "tenant", &c, &TokenEndpoints::default()).unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].kind(), "ClusterNotAllowed");
}

#[test]
fn the_topics_own_problems_are_reported_beside_its_clusters() {
    let mut t = of_cluster("cart-events", Some("shop"));
    t.connection_config.insert("security.protocol".into(), "PLAINTEXT".into());
    t.consumer_config.insert("plugin.library.paths".into(), "/tmp/x.so".into());
    t.managed = true;
    let kinds = |c: &Clusters, ns: &str| -> Vec<&'static str> {
        resolve_topic(&t, ns, c, &TokenEndpoints::default()).unwrap_err().iter().map(ConnectionError::kind).collect()
    };
    // Sizes and brokers depend on the Secret, so they are not judged without it.
    assert_eq!(
        kinds(&shop(Some("shop")), "tenant"),
        ["ClusterNotAllowed", "ClusterSettingsOverridden", "PropertyRefused"]
    );
    assert_eq!(
        kinds(&Clusters::new(), "shop"),
        ["ClusterSecretMissing", "ClusterSettingsOverridden", "PropertyRefused"]
    );
}

#[test]
fn allowed_namespace_entries_that_are_not_names_are_reported() {
    let c = Cluster::from_secret(
        "shop",
        &map(&[("bootstrap.servers", "k:9092")]),
        &map(&[(ANNOTATION_ALLOWED_NAMESPACES, "shop, team-*, Shop")]),
    );
    assert!(c.allows("shop") && !c.allows("team-a") && !c.allows("Shop"));
    let texts: Vec<String> = c.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "Secret 'kafka-cluster-shop': annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces' lists 'team-*', \
             which is not a namespace name: list namespaces by name, or '*' for every namespace",
            "Secret 'kafka-cluster-shop': annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces' lists 'Shop', \
             which is not a namespace name: list namespaces by name, or '*' for every namespace",
        ]
    );
}

#[test]
fn a_topic_using_a_cluster_secret_cannot_set_brokers_or_security() {
    // The issue's attack: the cluster's password, sent in clear text to a broker of the tenant's.
    let mut t = of_cluster("cart-events", Some("shop"));
    t.bootstrap_servers = Some("evil.tenant:9092".into());
    t.connection_config.insert("security.protocol".into(), "SASL_PLAINTEXT".into());
    t.consumer_config.insert("ssl.endpoint.identification.algorithm".into(), "".into());
    t.producer_config.insert("enable.ssl.certificate.verification".into(), "false".into());
    t.consumer_config.insert("auto.offset.reset".into(), "earliest".into());
    let err = resolve_topic(&t, "shop", &shop(Some("shop")), &TokenEndpoints::default()).unwrap_err();
    assert_eq!(
        err.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "topic 'cart-events' uses Kafka cluster 'shop', whose Secret alone sets the brokers and the security settings: \
          remove bootstrapServers, connectionConfig 'security.protocol', producerConfig \
          'enable.ssl.certificate.verification' and consumerConfig 'ssl.endpoint.identification.algorithm' from the topic"
        ]
    );
    assert_eq!(err[0].kind(), "ClusterSettingsOverridden");
    // Even a value equal to the Secret's is refused: an answer that depended on the value would let
    // a tenant guess the Secret's settings, password included.
    let mut same = of_cluster("cart-events", Some("shop"));
    same.connection_config.insert("sasl.jaas.config".into(), PLAIN_SHOP.into());
    assert_eq!(
        resolve_topic(&same, "shop", &shop(Some("shop")), &TokenEndpoints::default()).unwrap_err()[0].kind(),
        "ClusterSettingsOverridden"
    );
    // Other settings are the topic's to choose.
    let mut fine = of_cluster("cart-events", Some("shop"));
    fine.consumer_config.insert("auto.offset.reset".into(), "latest".into());
    fine.connection_config.insert("request.timeout.ms".into(), "30000".into());
    let r = resolve_topic(&fine, "shop", &shop(Some("shop")), &TokenEndpoints::default()).unwrap();
    assert_eq!(r.consumer_config["auto.offset.reset"], "latest");
    assert_eq!(r.connection_config["security.protocol"], "SASL_SSL");
}

#[test]
fn a_topic_with_its_own_brokers_sets_its_own_security() {
    let mut t = topic("cart-events", "tenant.cart-events");
    t.connection_config = map(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "tenant"),
        ("sasl.password", "tenant-secret"),
    ]);
    let r = resolve_topic(&t, "tenant", &shop(Some("shop")), &TokenEndpoints::default()).unwrap();
    assert_eq!(r.kafka_connection().properties["sasl.username"], "tenant");
}

#[test]
fn settings_that_load_code_or_read_files_are_refused_from_the_resource() {
    let mut t = topic("cart-events", "tenant.cart-events");
    t.connection_config = map(&[
        ("plugin.library.paths", "/tmp/evil.so"),
        ("ssl.truststore.location", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
        ("sasl.kerberos.kinit.cmd", "sh -c id"),
    ]);
    t.consumer_config = map(&[("interceptor.classes", "com.example.Spy"), ("group.id", "shop.router.in")]);
    t.producer_config = map(&[("sasl.oauthbearer.metadata.authentication.type", "azure_imds")]);
    let err = resolve_topic(&t, "tenant", &Clusters::new(), &TokenEndpoints::default()).unwrap_err();
    let texts: Vec<String> = err.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "topic 'cart-events': connectionConfig 'plugin.library.paths' is refused: it loads shared libraries into the \
             client's process",
            "topic 'cart-events': connectionConfig 'sasl.kerberos.kinit.cmd' is refused: it runs a command in the \
             client's container",
            "topic 'cart-events': connectionConfig 'ssl.truststore.location' is refused: it names a file, which the \
             operator and the sidecar never read for a connection; put the certificates inline instead: \
             ssl.truststore.type=PEM with ssl.truststore.certificates",
            "topic 'cart-events': producerConfig 'sasl.oauthbearer.metadata.authentication.type' is refused: it makes \
             the operator authenticate with its own cloud identity",
            "topic 'cart-events': consumerConfig 'group.id' is refused: the platform names each inlet's consumer group \
             itself (<pipeline>.<streamlet>.<inlet>)",
            "topic 'cart-events': consumerConfig 'interceptor.classes' is refused: it names Java classes the sidecar would \
             load, and only Kafka's own known ones are accepted",
        ]
    );
    assert!(err.iter().all(|e| e.kind() == "PropertyRefused"));
    for e in &texts {
        assert!(!e.contains("/tmp/evil.so") && !e.contains("com.example") && !e.contains("sh -c"), "{e}");
    }
}

#[test]
fn settings_that_load_code_or_read_files_are_refused_from_the_secret() {
    let data = map(&[
        ("bootstrap.servers", "k:9093"),
        ("connection-config", "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n"),
        ("producer-config", "interceptor.classes=com.example.Spy\n"),
        ("consumer-config", "sasl.jaas.config=com.sun.security.auth.module.JndiLoginModule required;\n"),
    ]);
    let c = clusters(vec![Cluster::from_secret("shop", &data, &map(&[(ANNOTATION_ALLOWED_NAMESPACES, "shop")]))]);
    let err =
        resolve_topic(&of_cluster("cart-events", Some("shop")), "shop", &c, &TokenEndpoints::default()).unwrap_err();
    let texts: Vec<String> = err.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "Secret 'kafka-cluster-shop': connection-config 'ssl.truststore.location' is refused: it names a file, which \
             the operator and the sidecar never read for a connection; put the certificates inline instead: \
             ssl.truststore.type=PEM with ssl.truststore.certificates",
            "Secret 'kafka-cluster-shop': producer-config 'interceptor.classes' is refused: it names Java classes the \
             sidecar would load, and only Kafka's own known ones are accepted",
            "Secret 'kafka-cluster-shop': consumer-config 'sasl.jaas.config' is refused: it names a login module the \
             sidecar would load; use PlainLoginModule, ScramLoginModule or OAuthBearerLoginModule",
        ]
    );
}

#[test]
fn a_secret_written_for_jvm_clients_with_oidc_and_inline_pem_resolves() {
    let data = map(&[
        ("bootstrap.servers", "kafka.shop:9094"),
        (
            "connection-config",
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=OAUTHBEARER\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url=https://idp.shop/token\n\
             sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             clientId=\"flow\" clientSecret=\"oidc-secret\" scope=\"kafka\";\n\
             ssl.truststore.type=PEM\n\
             ssl.truststore.certificates=-----BEGIN CERTIFICATE-----\\n\\\n  MIIB\\n\\\n  -----END CERTIFICATE-----\n",
        ),
    ]);
    let c = clusters(vec![Cluster::from_secret("shop", &data, &map(&[(ANNOTATION_ALLOWED_NAMESPACES, "*")]))]);
    let r =
        resolve_topic(&of_cluster("cart-events", Some("shop")), "anywhere", &c, &TokenEndpoints::default()).unwrap();
    let p = &r.kafka_connection().properties;
    assert_eq!(p["sasl.oauthbearer.method"], "oidc");
    assert_eq!(p["sasl.oauthbearer.client.secret"], "oidc-secret");
    assert_eq!(p["ssl.ca.pem"], "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    assert!(!p.contains_key("sasl.login.callback.handler.class"));
}

/// Settings of librdkafka that would harm the operator's own process, and where a tenant or an
/// administrator can write them.
const HOSTILE: &[(&str, &str)] = &[
    ("internal.termination.signal", "9"),
    ("test.mock.num.brokers", "3"),
    ("debug", "all"),
    ("statistics.interval.ms", "10"),
    ("log_level", "7"),
    ("socket.timeout.ms", "1"),
    ("client.id", "someone-else"),
    ("enable.auto.commit", "true"),
];

#[test]
fn nothing_outside_the_allow_list_reaches_the_operators_client_from_a_resource_or_a_secret() {
    let hostile = map(HOSTILE);
    let lines: String = HOSTILE.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    // a topic on a cluster, and a topic with its own brokers, each with every block full of them
    let mut on_cluster = of_cluster("in", Some("shop"));
    let mut own = topic("own", "shop.own");
    for t in [&mut on_cluster, &mut own] {
        t.connection_config = hostile.clone();
        t.consumer_config = hostile.clone();
        t.producer_config = hostile.clone();
    }
    own.consumer_config.insert("security.protocol".into(), "SSL".into());
    let c = clusters(vec![cluster(
        "shop",
        &[
            ("bootstrap.servers", "kafka:9092"),
            ("connection-config", &format!("security.protocol=SSL\n{lines}")),
            ("consumer-config", &lines),
            ("producer-config", &lines),
        ],
    )]);
    for t in [&on_cluster, &own] {
        let r = resolve_topic(t, "shop", &c, &TokenEndpoints::default()).unwrap();
        let keys: Vec<&String> = r.kafka_connection().properties.keys().collect();
        assert_eq!(keys, ["security.protocol"], "{}", t.id);
        // the streamlets still get every setting the topic wrote
        assert_eq!(r.consumer_config.get("debug").map(String::as_str), Some("all"), "{}", t.id);
    }
}

proptest::proptest! {
    /// Whatever keys a topic and its cluster Secret hold, the operator's client gets only keys of
    /// the allow-list.
    #[test]
    fn the_operators_client_takes_only_allow_listed_keys(
        keys in proptest::collection::vec("[a-z][a-z._]{0,30}", 0..20),
        own_brokers in proptest::bool::ANY,
    ) {
        let entries: BTreeMap<String, String> = keys.iter().map(|k| (k.clone(), "1".to_string())).collect();
        let mut t = if own_brokers { topic("t", "shop.t") } else { of_cluster("t", Some("shop")) };
        if own_brokers {
            t.connection_config = entries.clone();
            t.consumer_config = entries.clone();
        }
        let lines: String = entries.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        let c = clusters(vec![cluster(
            "shop",
            &[("bootstrap.servers", "kafka:9092"), ("connection-config", &lines), ("consumer-config", &lines)],
        )]);
        // a refusal or an untranslatable setting builds no client at all, which is as safe
        if let Ok(r) = resolve_topic(&t, "shop", &c, &TokenEndpoints::default()) {
            for k in r.kafka_connection().properties.keys() {
                proptest::prop_assert!(properties::OPERATOR_CLIENT_KEYS.contains(&k.as_str()), "{k}");
            }
        }
    }
}

#[test]
fn keys_that_are_not_property_names_are_refused_in_every_block_naming_the_key_only() {
    let mut t = topic("in", "shop.in");
    t.connection_config = map(&[("bootstrap.servers ", "evil:9092")]);
    t.consumer_config = map(&[("auto.offset.reset\n", "earliest")]);
    t.producer_config = map(&[("linger.ms\u{200b}", "5")]);
    t.topic_config = map(&[("retention ms", "1")]);
    let err = resolve_topic(&t, "shop", &Clusters::new(), &TokenEndpoints::default()).unwrap_err();
    let kinds: Vec<&str> = err.iter().map(ConnectionError::kind).collect();
    assert_eq!(kinds, ["KeyNotAPropertyName"; 4], "{err:?}");
    let text: Vec<String> = err.iter().map(ToString::to_string).collect();
    assert!(text[0].starts_with("topic 'in': connectionConfig has the key \"bootstrap.servers \", "), "{}", text[0]);
    assert!(text[1].contains("producerConfig has the key \"linger.ms\\u{200b}\""), "{}", text[1]);
    assert!(text[2].contains("consumerConfig has the key \"auto.offset.reset\\n\""), "{}", text[2]);
    assert!(text[3].starts_with("topic 'in': topicConfig has the key \"retention ms\""), "{}", text[3]);
    assert!(text.iter().all(|t| !t.contains("evil")), "{text:?}");

    let c = clusters(vec![cluster(
        "shop",
        &[("bootstrap.servers", "k:9092"), ("connection-config", "security.protocol\\ =SSL\n")],
    )]);
    let err = resolve_topic(&of_cluster("in", Some("shop")), "shop", &c, &TokenEndpoints::default()).unwrap_err();
    assert_eq!(
        err[0].to_string(),
        "Secret 'kafka-cluster-shop': connection-config has the key \"security.protocol \", which is not a property \
         name: a key is ASCII letters, digits, '.', '_' and '-' only, with no spaces"
    );
}

#[test]
fn a_token_endpoint_of_a_topics_own_is_called_only_when_an_administrator_allows_it() {
    let url = "http://127.0.0.1:19110/token";
    let mut t = topic("in", "shop.in");
    t.connection_config = map(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.token.endpoint.url", url),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"c\" \
             clientSecret=\"s\";",
        ),
    ]);
    let err = resolve_topic(&t, "shop", &Clusters::new(), &TokenEndpoints::default()).unwrap_err();
    assert_eq!(err.iter().map(ConnectionError::kind).collect::<Vec<_>>(), ["TokenEndpointNotAllowed"]);
    assert!(!err[0].to_string().contains("19110"), "the URL is not echoed: {}", err[0]);
    let allowed = TokenEndpoints::new([format!(" {url} "), "https://idp.example.com/token".into()]);
    let r = resolve_topic(&t, "shop", &Clusters::new(), &allowed).unwrap();
    assert_eq!(r.kafka_connection().properties["sasl.oauthbearer.token.endpoint.url"], url);
    let other = TokenEndpoints::new(["http://127.0.0.1:19110/token2".to_string()]);
    assert!(resolve_topic(&t, "shop", &Clusters::new(), &other).is_err());
}

#[test]
fn a_managed_topic_carries_the_most_partitions_its_cluster_allows() {
    let with = |annotation: Option<&str>| {
        let mut annotations = vec![(ANNOTATION_ALLOWED_NAMESPACES, "shop")];
        annotations.extend(annotation.map(|v| (ANNOTATION_MAX_TOPIC_PARTITIONS, v)));
        let data = map(&[("bootstrap.servers", "b:9092"), ("replicas", "1")]);
        clusters(vec![Cluster::from_secret("big", &data, &map(&annotations))])
    };
    let managed = |partitions: i32| {
        let mut t = of_cluster("orders", Some("big"));
        t.managed = true;
        t.partitions = Some(partitions);
        t
    };
    let most = |annotation: Option<&str>| {
        resolve_topic(&managed(i32::MAX), "shop", &with(annotation), &TokenEndpoints::default())
            .map(|r| r.max_partitions)
            .map_err(|e| e.iter().map(ToString::to_string).collect::<Vec<_>>())
    };
    // Resolving never refuses a size: only a creation is bounded (`render::topics::decide`), so an
    // existing topic, or one being deleted, is never held to it.
    assert_eq!(most(None), Ok(Some(DEFAULT_MAX_TOPIC_PARTITIONS)));
    assert_eq!(most(Some(" 5000 ")), Ok(Some(5000)));
    assert_eq!(most(Some("12")), Ok(Some(12)));
    // A topic with its own brokers has no cluster Secret to bound it.
    let own = {
        let mut t = topic("orders", "shop.orders");
        t.managed = true;
        t.partitions = Some(i32::MAX);
        t.replicas = Some(1);
        t
    };
    assert_eq!(resolve_topic(&own, "shop", &Clusters::new(), &TokenEndpoints::default()).unwrap().max_partitions, None);
    // An annotation that is no limit is a problem of the Secret, as its other annotations' are.
    for bad in ["0", "-3", "many", ""] {
        assert_eq!(
            most(Some(bad)),
            Err(vec![format!(
                "Secret 'kafka-cluster-big': annotation 'flow.ankka.thinkmorestupidless.com/max-topic-partitions' is \
                 '{bad}', which is not a whole number of at least 1"
            )]),
            "{bad:?}"
        );
    }
}
