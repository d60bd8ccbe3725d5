//! What a topic's settings may do to the operator's own Kafka clients: nothing. They are built from
//! the cluster Secret's security settings (or a topic's own, with its own brokers) through an
//! allow-list (docs/kafka-settings.md, "The operator's own clients").
//!
//! - `a_topics_settings_never_reach_the_operators_clients`: librdkafka settings that once killed the
//!   operator (`internal.termination.signal=9`, sent when a client closes: here, after an
//!   authentication failure), made it talk to an in-process mock cluster (`test.mock.num.brokers`)
//!   or log and count without bound (`debug=all`, `statistics.interval.ms=10`), in every block of a
//!   topic, on a cluster and with the topic's own brokers: the operator lives, its resets move the
//!   real broker's offsets, its thread count stays flat; the streamlets still get every setting. A
//!   key padded with a space is refused, naming the key and not the value.
//! - `a_tenants_token_endpoint_is_never_called_and_its_answer_never_shown`: a topic with its own
//!   brokers naming an OAuth token endpoint of the tenant's is refused before any connection; allowed
//!   by an administrator, the endpoint's error answer reaches no event, status, log or CLI output,
//!   only its HTTP status code does.

use super::*;

/// Settings that harmed the operator when a topic's settings reached its clients.
const HOSTILE: &str = "internal.termination.signal = 9, test.mock.num.brokers = 3, debug = all, \
                       statistics.interval.ms = 10";

/// HOCON lines of a topic with [`HOSTILE`] in each of its three blocks, after `first`.
fn hostile_topic(first: &str) -> String {
    format!(
        "{first}\n      connection-config {{ {HOSTILE} }}\n      consumer-config {{ {HOSTILE} }}\n      \
         producer-config {{ {HOSTILE} }}"
    )
}

#[test]
fn a_topics_settings_never_reach_the_operators_clients() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, groups and cluster Secret
    let ns = "hostile-clients";
    let topic = "hostile.clients";
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh_namespace(ns);
    let plain = env("FLOW_TESTBED_KAFKA");
    let _secret = cluster_secret("hostile-plain", &plain, "security.protocol=PLAINTEXT", ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 10);
    for pipeline in ["on-cluster", "own-brokers"] {
        standin::read(&format!("{pipeline}.router.in"), topic, 30);
    }
    apply_router(ns, "on-cluster", topic, &hostile_topic("      cluster = hostile-plain"));
    apply_router(ns, "own-brokers", topic, &hostile_topic(&format!("      bootstrap.servers = \"{plain}\"")));
    // Its own brokers, a wrong password: the operator's client fails authentication and is closed,
    // when librdkafka sends its process the termination signal it was given.
    apply_router(
        ns,
        "auth-fails",
        topic,
        &format!(
            "      bootstrap.servers = \"{}\"\n      connection-config {{ security.protocol = SASL_PLAINTEXT, \
             sasl.mechanism = PLAIN, sasl.jaas.config = \"org.apache.kafka.common.security.plain.PlainLoginModule \
             required username=\\\"shop\\\" password=\\\"not-the-shop-secret-3e9a\\\";\", {HOSTILE} }}",
            env("FLOW_TESTBED_KAFKA_SASL")
        ),
    );
    // A key padded with a space, written into the resource by hand (flow generate is not the only
    // writer of a resource).
    apply_router(ns, "padded", topic, "      cluster = hostile-plain");
    let padded: BTreeMap<&str, String> = [("bootstrap.servers ", "127.0.0.1:9".to_string())].into();
    set_block(ns, "padded", "connectionConfig", &padded);

    let mut op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LAG_INTERVAL_SECONDS", "1")]);
    // (auth-fails is Degraded: its topic cannot be described without authenticating)
    for (p, want) in [("on-cluster", "Ready"), ("own-brokers", "Ready"), ("auth-fails", "Degraded")] {
        wait_until(&format!("{p} applied"), Duration::from_secs(60), || (phase(ns, p).0 == want).then_some(()));
    }
    let threads_before = proc_status(op.pid(), "Threads");

    // The padded key is refused, named, its value never shown; nothing is rendered for it.
    let why = "topic 'events': connectionConfig has the key \"bootstrap.servers \", which is not a property name: a \
               key is ASCII letters, digits, '.', '_' and '-' only, with no spaces";
    wait_until("the padded key refused", Duration::from_secs(30), || (phase(ns, "padded").1 == why).then_some(()));
    assert_eq!(notes(ns, "padded", "Refused"), [why]);
    assert!(kubectl(&["-n", ns, "get", "secret", "flow-padded-router"]).status.code() != Some(0), "rendered");

    // Resets: over the cluster and over the topic's own brokers they reach the real broker.
    let ids: Vec<(&str, String)> =
        ["on-cluster", "own-brokers", "auth-fails"].into_iter().map(|p| (p, flow_reset(ns, p, &[]))).collect();
    for (p, id) in &ids {
        wait_done(ns, p, id, Duration::from_secs(60));
    }
    for p in ["on-cluster", "own-brokers"] {
        let group = format!("{p}.router.in");
        assert_eq!(notes(ns, p, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
        assert_eq!(
            kafka::committed(&group, topic, 3),
            (0..3).map(|p| (p, Some(0))).collect(),
            "{p}: the real broker's offsets moved (not a mock's)"
        );
    }
    let failed = notes(ns, "auth-fails", "ResetOffsetsFailed");
    assert!(failed.len() == 1 && failed[0].contains("authentication"), "{failed:?}");

    // Lag samples every second rebuild and close the failing client; the operator lives on, and
    // its threads stay as they were.
    std::thread::sleep(Duration::from_secs(5));
    let threads_mid = proc_status(op.pid(), "Threads");
    std::thread::sleep(Duration::from_secs(10));
    assert!(op.running(), "the operator died:\n{}", op.log_text());
    let threads_after = proc_status(op.pid(), "Threads");
    let rss_kib = proc_status(op.pid(), "VmRSS");
    eprintln!(
        "operator threads: {threads_before} before the resets, {threads_mid} and {threads_after} after; RSS {rss_kib} KiB"
    );
    assert!(threads_after <= threads_mid + 4, "threads grow: {threads_mid} then {threads_after}");
    assert!(threads_after <= threads_before + 48, "threads: {threads_before} then {threads_after}");

    // The streamlets still get what the topic says: it is their client's business.
    let conf = secret_file(ns, "flow-on-cluster-router", "streamlet.conf");
    assert!(conf.contains("internal.termination.signal"), "{conf}");
    op.stop();
}

#[test]
fn a_tenants_token_endpoint_is_never_called_and_its_answer_never_shown() {
    let _lock = side_by_side(); // isolated: its own namespace, topic and endpoint
    let ns = "hostile-tokens";
    let topic = "hostile.tokens";
    const MARKER: &str = "MARKER-token-body-6d1f";
    let endpoint = TenantEndpoint::start(
        "400 Bad Request",
        r#"{"error":"invalid_client","error_description":"MARKER-token-body-6d1f at the tenant's endpoint"}"#,
    );
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh_namespace(ns);
    kafka::recreate_topic(topic, 1);
    apply_router(ns, "own-token", topic, &format!("      bootstrap.servers = \"{}\"", env("FLOW_TESTBED_KAFKA_OAUTH")));
    let settings: BTreeMap<&str, String> = [
        ("security.protocol", "SASL_SSL".to_string()),
        ("ssl.ca.pem", pki("ca.crt")),
        ("sasl.mechanism", "OAUTHBEARER".to_string()),
        ("sasl.oauthbearer.method", "oidc".to_string()),
        ("sasl.oauthbearer.client.id", "flow-operator".to_string()),
        ("sasl.oauthbearer.client.secret", "tenant-client-secret".to_string()),
        ("sasl.oauthbearer.token.endpoint.url", endpoint.url.clone()),
    ]
    .into();
    set_block(ns, "own-token", "connectionConfig", &settings);

    // Not allowed: refused before any connection, the URL not echoed.
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LAG_INTERVAL_SECONDS", "1")]);
    let why = "topic 'events' names its own OAuth token endpoint (sasl.oauthbearer.token.endpoint.url), which the \
               operator calls only when it comes from a cluster Secret or is one an administrator allows \
               (FLOW_OAUTH_TOKEN_ENDPOINTS): use a Kafka cluster Secret, or ask an administrator to allow the endpoint";
    wait_until("the token endpoint refused", Duration::from_secs(30), || {
        (phase(ns, "own-token").1 == why).then_some(())
    });
    let id = flow_reset(ns, "own-token", &[]);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(endpoint.requests(), 0, "the operator called the tenant's endpoint");
    assert_eq!(annotation(ns, "own-token", flow_testbed::cart::DONE), None, "the request must wait");
    op.stop();

    // An administrator allows the endpoint: the operator calls it, and of its error answer shows
    // only the status code.
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_LAG_INTERVAL_SECONDS", "1"),
            ("FLOW_OAUTH_TOKEN_ENDPOINTS", &endpoint.url),
        ],
    );
    wait_done(ns, "own-token", &id, Duration::from_secs(90));
    assert!(endpoint.requests() > 0, "the allowed endpoint was not called");
    assert!(endpoint.received.lock().unwrap_or_else(|p| p.into_inner()).starts_with("POST /token"), "a token request");
    let failed = notes(ns, "own-token", "ResetOffsetsFailed");
    assert!(failed.len() == 1 && failed[0].contains("answered HTTP 400"), "{failed:?}");
    let status = flow(&["reset", "status", &id, "-n", ns]);
    let shown = [
        kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]),
        get_json(ns, "aflow", "own-token")["status"].to_string(),
        op.log_text(),
        String::from_utf8_lossy(&status.stdout).into_owned(),
        String::from_utf8_lossy(&status.stderr).into_owned(),
    ];
    for (what, text) in
        ["events", "the status", "the operator's log", "flow reset status", "its stderr"].iter().zip(&shown)
    {
        assert!(!text.contains(MARKER), "{what} shows the token endpoint's answer");
        assert!(!text.contains("tenant-client-secret"), "{what} shows the client secret");
    }
    op.stop();
}
