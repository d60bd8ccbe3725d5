//! TLS, mutual TLS, SCRAM and OAUTHBEARER on the test bed's secured listeners.

use super::*;

/// An address from `testbed/tb env`.
fn env(key: &str) -> String {
    std::env::var(key)
        .unwrap_or_else(|_| panic!("{key} is not set: load the test bed's settings with `eval \"$(testbed/tb env)\"`"))
}

/// The text of file `name` of the test bed's Kafka PKI (`FLOW_TESTBED_KAFKA_PKI`).
fn pki(name: &str) -> String {
    let path = std::path::Path::new(&env("FLOW_TESTBED_KAFKA_PKI")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One line of Java properties text: `key=value`, with the value's newlines (PEM) escaped.
fn property(key: &str, value: &str) -> String {
    format!("{key}={}", value.replace('\\', "\\\\").replace('\n', "\\n"))
}

/// Cluster Secret `kafka-cluster-<cluster>` with brokers `brokers` and `connection-config` `props`,
/// for the namespaces of this file's secured tests.
fn secured_secret(cluster: &str, brokers: &str, props: &[(&str, String)]) -> String {
    let lines: String = props.iter().map(|(k, v)| format!("    {}\n", property(k, v))).collect();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kafka-cluster-{cluster}\n  namespace: ankka-flow\n  labels:\n    \
         flow.ankka.thinkmorestupidless.com/kafka-cluster: {cluster}\n  annotations:\n    \
         flow.ankka.thinkmorestupidless.com/allowed-namespaces: sec-listeners, sec-markers\nstringData:\n  \
         bootstrap.servers: {brokers}\n  connection-config: |\n{lines}"
    )
}

/// librdkafka settings of the test bed's TLS listeners: the CA that signed the broker's certificate.
fn tls(protocol: &str, ca: &str) -> Vec<(&'static str, String)> {
    let protocol = if protocol == "SSL" { "SSL" } else { "SASL_SSL" };
    vec![("security.protocol", protocol.to_string()), ("ssl.ca.pem", pki(ca))]
}

/// Mutual TLS as user shop: certificate `cert`, and the client key encrypted with its password.
fn mtls(cert: &str) -> Vec<(&'static str, String)> {
    let mut p = tls("SSL", "ca.crt");
    p.push(("ssl.certificate.pem", pki(cert)));
    p.push(("ssl.key.pem", pki("client-encrypted.key")));
    p.push(("ssl.key.password", CLIENT_KEY_PASSWORD.to_string()));
    p
}

fn scram(mechanism: &str, password: &str) -> Vec<(&'static str, String)> {
    let mut p = tls("SASL_SSL", "ca.crt");
    p.push(("sasl.mechanism", mechanism.to_string()));
    p.push(("sasl.username", "shop".to_string()));
    p.push(("sasl.password", password.to_string()));
    p
}

/// OAUTHBEARER with OIDC client credentials against the test bed's token endpoint.
fn oidc(client: &str, secret: &str) -> Vec<(&'static str, String)> {
    let mut p = tls("SASL_SSL", "ca.crt");
    p.push(("sasl.mechanism", "OAUTHBEARER".to_string()));
    p.push(("sasl.oauthbearer.method", "oidc".to_string()));
    p.push(("sasl.oauthbearer.client.id", client.to_string()));
    p.push(("sasl.oauthbearer.client.secret", secret.to_string()));
    p.push(("sasl.oauthbearer.scope", "kafka".to_string()));
    p.push(("sasl.oauthbearer.token.endpoint.url", env("FLOW_TESTBED_OAUTH_TOKEN_URL")));
    p
}

/// The settings of `tls`, written for a Java client (the sidecar's form): KIP-651 inline PEM, which
/// the operator translates into librdkafka's.
fn java_tls(protocol: &str) -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", protocol.to_string()),
        ("ssl.truststore.type", "PEM".to_string()),
        ("ssl.truststore.certificates", pki("ca.crt")),
    ]
}

/// Mutual TLS as user shop, written for a Java client: KIP-651 key store with the encrypted key.
fn java_mtls() -> Vec<(&'static str, String)> {
    let mut p = java_tls("SSL");
    p.push(("ssl.keystore.type", "PEM".to_string()));
    p.push(("ssl.keystore.certificate.chain", pki("client.crt")));
    p.push(("ssl.keystore.key", pki("client-encrypted.key")));
    p.push(("ssl.key.password", CLIENT_KEY_PASSWORD.to_string()));
    p
}

/// SCRAM-SHA-512 as user shop, written for a Java client: a `ScramLoginModule` JAAS line.
fn java_scram() -> Vec<(&'static str, String)> {
    let mut p = java_tls("SASL_SSL");
    p.push(("sasl.mechanism", "SCRAM-SHA-512".to_string()));
    p.push((
        "sasl.jaas.config",
        format!(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="shop" password="{SCRAM_PASSWORD}";"#
        ),
    ));
    p
}

/// OAUTHBEARER with OIDC client credentials, written for a Java client (KIP-768): the login
/// callback handler, the token endpoint, and an `OAuthBearerLoginModule` JAAS line.
fn java_oidc() -> Vec<(&'static str, String)> {
    let mut p = java_tls("SASL_SSL");
    p.push(("sasl.mechanism", "OAUTHBEARER".to_string()));
    p.push((
        "sasl.login.callback.handler.class",
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler".to_string(),
    ));
    p.push(("sasl.oauthbearer.token.endpoint.url", env("FLOW_TESTBED_OAUTH_TOKEN_URL")));
    p.push((
        "sasl.jaas.config",
        format!(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="flow-operator" clientSecret="{OAUTH_SECRET}" scope="kafka";"#
        ),
    ));
    p
}

/// Test credentials of the test bed (docs/testbed.md), looked for in everything the operator shows.
const CLIENT_KEY_PASSWORD: &str = "client-key-secret";
const SCRAM_PASSWORD: &str = "shop-scram-secret";
const OAUTH_SECRET: &str = "flow-operator-secret";

/// One pipeline of the secured test: its cluster, and what its reset ends in (`None`: done, to the
/// log start; `Some(words)`: one ResetOffsetsFailed whose note holds each of `words`).
struct Secured {
    name: &'static str,
    brokers: String,
    props: Vec<(&'static str, String)>,
    fails_with: Option<&'static [&'static str]>,
}

fn secured_cases() -> Vec<Secured> {
    let ssl = env("FLOW_TESTBED_KAFKA_SSL");
    let mtls_at = env("FLOW_TESTBED_KAFKA_MTLS");
    let scram_at = env("FLOW_TESTBED_KAFKA_SCRAM");
    let oauth = env("FLOW_TESTBED_KAFKA_OAUTH");
    let case =
        |name, brokers: &String, props, fails_with| Secured { name, brokers: brokers.clone(), props, fails_with };
    vec![
        case("ssl", &ssl, tls("SSL", "ca.crt"), None),
        case("mtls", &mtls_at, mtls("client.crt"), None),
        case("scram512", &scram_at, scram("SCRAM-SHA-512", SCRAM_PASSWORD), None),
        case("scram256", &scram_at, scram("SCRAM-SHA-256", SCRAM_PASSWORD), None),
        case("oidc", &oauth, oidc("flow-operator", OAUTH_SECRET), None),
        // the same, from Secrets written for Java clients
        case("java-mtls", &mtls_at, java_mtls(), None),
        case("java-scram", &scram_at, java_scram(), None),
        case("java-oidc", &oauth, java_oidc(), None),
        case("wrong-ca", &ssl, tls("SSL", "other-ca.crt"), Some(&["TLS", "not signed by a CA the client trusts"])),
        case("foreign-cert", &mtls_at, mtls("client-foreign.crt"), Some(&["TLS", "refused the client's certificate"])),
        case("expired-cert", &mtls_at, mtls("client-expired.crt"), Some(&["TLS", "expired"])),
        case(
            "scram-wrong",
            &scram_at,
            scram("SCRAM-SHA-512", "not-the-scram-secret-3f9a"),
            Some(&["authentication", "SCRAM-SHA-512"]),
        ),
        case(
            "token-rejected",
            &oauth,
            oidc("flow-rejected", "flow-rejected-secret"),
            Some(&["authentication", "invalid_token"]),
        ),
        case(
            "no-token",
            &oauth,
            oidc("flow-operator", "not-the-oauth-secret-81c2"),
            Some(&["authentication", "OAUTHBEARER token"]),
        ),
    ]
}

/// Over each secured listener, through a cluster Secret in librdkafka's own keys and one written for
/// Java clients (docs/kafka-settings.md), with the real operator: a reset of a group reaches the
/// log start, and each broken setting (a wrong CA, a client certificate of another CA or expired, a
/// wrong SCRAM password, a token the broker rejects, no token at all) ends in one final
/// ResetOffsetsFailed within the request deadline, whose note (and the status) names the cause, with
/// nothing committed.
#[test]
fn secured_listeners_reset_and_each_failure_names_its_cause() {
    let _lock = side_by_side(); // isolated: its own namespace, topics, groups and cluster Secrets
    let ns = "sec-listeners";
    let cases = secured_cases();
    install_crd();
    ensure_namespace("ankka-flow");
    let names: Vec<String> = cases.iter().map(|c| format!("kafka-cluster-sec-{}", c.name)).collect();
    let _secrets = OwnedSecrets(names.clone());
    for c in &cases {
        kubectl_apply(&secured_secret(&format!("sec-{}", c.name), &c.brokers, &c.props));
    }
    fresh_namespace(ns);
    for c in &cases {
        let (p, topic) = (format!("sec-{}", c.name), format!("sec.{}-events", c.name));
        let g = format!("{p}.router.in");
        kafka::recreate_topic(&topic, 3);
        kafka::produce(&topic, 3, 20);
        kafka::delete_records(&topic, 1, 5);
        delete_group(&g);
        commit_all(&g, &topic, 3, 20);
    }
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")]);
    for c in &cases {
        apply_pipeline(ns, &format!("sec-{}", c.name), &format!("sec.{}-events", c.name), &format!("sec-{}", c.name));
    }
    let started = std::time::Instant::now();
    let ids: Vec<String> = cases.iter().map(|c| flow_reset(ns, &format!("sec-{}", c.name), &[])).collect();
    for (c, id) in cases.iter().zip(&ids) {
        wait_done(ns, &format!("sec-{}", c.name), id, Duration::from_secs(120));
    }
    eprintln!("secured: every request done {:?} after the first was written", started.elapsed());

    let done = event_notes(ns, "ResetOffsets");
    let failed = event_notes(ns, "ResetOffsetsFailed");
    let mut problems = Vec::new();
    for c in &cases {
        let (p, topic) = (format!("sec-{}", c.name), format!("sec.{}-events", c.name));
        let g = format!("{p}.router.in");
        let mine =
            |notes: &[String]| notes.iter().filter(|n| n.starts_with(&format!("{g}: "))).cloned().collect::<Vec<_>>();
        let committed = kafka::committed(&g, &topic, 3);
        match c.fails_with {
            None => {
                if committed != some(&[0, 5, 0])
                    || mine(&done) != [format!("{g}: 3 partition(s) of '{topic}' to earliest")]
                {
                    problems.push(format!(
                        "{}: committed {committed:?}, events {:?} {:?}",
                        c.name,
                        mine(&done),
                        mine(&failed)
                    ));
                }
            }
            Some(words) => {
                let notes = mine(&failed);
                eprintln!("secured: {}: {notes:?}", c.name);
                let status = reset_status(ns, &p).to_string();
                if committed != some(&[20, 20, 20]) || notes.len() != 1 || !mine(&done).is_empty() {
                    problems.push(format!(
                        "{}: committed {committed:?}, failures {notes:?}, done {:?}",
                        c.name,
                        mine(&done)
                    ));
                } else if let Some(w) = words.iter().find(|w| !notes[0].contains(*w)) {
                    problems.push(format!("{}: the note does not say '{w}': {}", c.name, notes[0]));
                } else if !status.contains(words[words.len() - 1]) {
                    problems.push(format!("{}: the status does not name the cause: {status}", c.name));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}\n(operator log: {})", problems.join("\n"), op.log.display());

    // No test credential shows in the log, the events, the statuses, the metrics or the CLI.
    let (_, metrics) = http_get(&metrics_address(&op), "/metrics");
    let mut seen = vec![
        ("the operator's log".to_string(), op.log_text()),
        ("the metrics".to_string(), metrics),
        (format!("the Events of {ns}"), kubectl_ok(&["-n", ns, "get", "events", "-o", "json"])),
        (format!("the AnkkaFlows of {ns}"), kubectl_ok(&["-n", ns, "get", "aflow", "-o", "json"])),
    ];
    for (c, id) in cases.iter().zip(&ids) {
        let o = flow(&["reset", "status", id, "-n", ns, "-o", "json"]);
        seen.push((format!("flow reset status of sec-{}", c.name), show(&o)));
    }
    for (what, text) in &seen {
        for secret in [
            CLIENT_KEY_PASSWORD,
            SCRAM_PASSWORD,
            OAUTH_SECRET,
            "not-the-scram-secret-3f9a",
            "not-the-oauth-secret-81c2",
        ] {
            assert!(!text.contains(secret), "{what} shows a credential");
        }
        assert!(!text.contains("PRIVATE KEY"), "{what} shows a private key");
    }
    op.stop();
}

/// Deletes the named cluster Secrets of `ankka-flow` when dropped.
struct OwnedSecrets(Vec<String>);

impl Drop for OwnedSecrets {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", name, "--ignore-not-found"]);
        }
    }
}

/// A marker value in each sensitive key of a cluster Secret (`sasl.password`, `sasl.jaas.config`,
/// `ssl.key.password`, `ssl.keystore.key`, `sasl.oauthbearer.client.secret`): after a run that fails
/// (librdkafka refuses the configuration, and its error quotes the value) and a run that succeeds
/// (SCRAM, the markers in the keys it does not use), no marker shows in the operator's log at debug
/// level, the events, the status, `/metrics` or the CLI's output.
#[test]
fn no_marker_of_a_sensitive_key_leaves_the_secret() {
    let _lock = side_by_side(); // isolated: its own namespace, topics, groups and cluster Secrets
    let ns = "sec-markers";
    const MARKERS: [(&str, &str); 5] = [
        ("sasl.password", "MARKER-sasl-password-5e0c"),
        ("sasl.jaas.config", "MARKER-jaas-password-5e0c"),
        ("ssl.key.password", "MARKER-ssl-key-password-5e0c"),
        ("ssl.keystore.key", "MARKER-ssl-keystore-key-5e0c"),
        ("sasl.oauthbearer.client.secret", "MARKER-oauth-client-secret-5e0c"),
    ];
    let jaas = |password: &str| {
        format!(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="shop" password="{password}";"#
        )
    };
    let scram_at = env("FLOW_TESTBED_KAFKA_SCRAM");
    // every key a marker: librdkafka refuses the client (the client key is no key). The
    // certificate beside it makes the settings complete, so that they pass the operator's own
    // checks and reach librdkafka.
    let mut failing = tls("SASL_SSL", "ca.crt");
    failing.push(("sasl.mechanism", "SCRAM-SHA-512".into()));
    failing.push(("sasl.username", "shop".into()));
    failing.push(("ssl.keystore.type", "PEM".into()));
    failing.push(("ssl.keystore.certificate.chain", pki("client.crt")));
    for (k, v) in MARKERS {
        failing.push((k, if k == "sasl.jaas.config" { jaas(v) } else { v.to_string() }));
    }
    // SCRAM that works; the markers sit in the keys SCRAM does not use
    let mut working = scram("SCRAM-SHA-512", SCRAM_PASSWORD);
    working.push(("sasl.jaas.config", jaas(MARKERS[1].1)));
    working.push(("ssl.key.password", MARKERS[2].1.into()));
    working.push(("sasl.oauthbearer.client.secret", MARKERS[4].1.into()));

    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = OwnedSecrets(vec!["kafka-cluster-sec-markers-fail".into(), "kafka-cluster-sec-markers-ok".into()]);
    kubectl_apply(&secured_secret("sec-markers-fail", &scram_at, &failing));
    kubectl_apply(&secured_secret("sec-markers-ok", &scram_at, &working));
    fresh_namespace(ns);
    let runs = [("sec-markers-fail", true), ("sec-markers-ok", false)];
    for (p, _) in runs {
        let topic = format!("sec.{p}-events");
        kafka::recreate_topic(&topic, 1);
        kafka::produce(&topic, 1, 5);
        delete_group(&format!("{p}.router.in"));
    }
    let op = Operator::start(
        &fresh_dir(ns),
        &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0"), ("RUST_LOG", "debug")],
    );
    let mut seen = Vec::new();
    let mut ids = Vec::new();
    for (p, fails) in runs {
        apply_pipeline(ns, p, &format!("sec.{p}-events"), p);
        let o = flow(&["reset", p, "-n", ns, "--wait"]);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        ids.push(out.lines().next().and_then(|l| l.rsplit(' ').next()).unwrap_or_default().to_string());
        seen.push((format!("flow reset --wait of {p}"), show(&o)));
        let failed = event_notes(ns, "ResetOffsetsFailed").iter().any(|n| n.starts_with(&format!("{p}.router.in: ")));
        assert_eq!(failed, fails, "{p}: {}", show(&o));
    }
    // the lag sampler has asked both connections too
    let addr = metrics_address(&op);
    std::thread::sleep(Duration::from_secs(2));
    seen.push(("the metrics".into(), http_get(&addr, "/metrics").1));
    seen.push(("the operator's log".into(), op.log_text()));
    seen.push((format!("the Events of {ns}"), kubectl_ok(&["-n", ns, "get", "events", "-o", "json"])));
    seen.push((format!("the AnkkaFlows of {ns}"), kubectl_ok(&["-n", ns, "get", "aflow", "-o", "json"])));
    for ((p, _), id) in runs.iter().zip(&ids) {
        seen.push((format!("flow reset status of {p}"), show(&flow(&["reset", "status", id, "-n", ns, "-o", "yaml"]))));
    }
    assert!(op.log_text().contains("DEBUG"), "the operator logs at debug level");
    for (what, text) in &seen {
        for (key, marker) in MARKERS {
            assert!(!text.contains(marker), "{what} shows the value of {key}");
        }
        assert!(!text.contains(SCRAM_PASSWORD), "{what} shows the SCRAM password");
    }
    op.stop();
}
