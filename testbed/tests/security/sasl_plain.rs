//! SASL/PLAIN configured as for a JVM client: the reset, a wrong password, and no secret in sight.

use super::*;

#[test]
fn c5_sasl_plain_reset_a_wrong_password_fails_and_no_secret_leaks() {
    // Isolated: namespaces `case-c5` and `case-c5-bad`, their topics, groups and cluster Secrets.
    let _bed = side_by_side();
    let (ns, p, topic) = ("case-c5", "case-c5", "case.c5-events");
    let (bad_ns, bad_p, bad_topic) = ("case-c5-bad", "case-c5-bad", "case.c5-bad-events");
    let (g, bad_g) = (format!("{p}.router.in"), format!("{bad_p}.router.in"));

    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(&["kafka-cluster-sasl-good", "kafka-cluster-sasl-bad"]);
    kubectl_apply(&cluster_secret("sasl-good", GOOD_PASSWORD));
    kubectl_apply(&cluster_secret("sasl-bad", BAD_PASSWORD));
    fresh_namespace(ns);
    fresh_namespace(bad_ns);

    // The shop user reaches the SASL listener with librdkafka's own settings: the listener works.
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", sasl_brokers())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "shop")
        .set("sasl.password", GOOD_PASSWORD)
        .create()
        .expect("SASL client");
    probe.fetch_metadata(None, Duration::from_secs(10)).expect("metadata over SASL_PLAINTEXT as user shop");

    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    kafka::delete_records(topic, 1, 5);
    kafka::recreate_topic(bad_topic, 3);
    kafka::produce(bad_topic, 3, 20);
    delete_group(&g);
    delete_group(&bad_g);
    commit_all(&g, topic, 3, 20);
    commit_all(&bad_g, bad_topic, 3, 10);

    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")]);
    let bad_op = Operator::start(
        &fresh_dir(bad_ns),
        &[("FLOW_WATCH_NAMESPACE", bad_ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")],
    );
    apply_pipeline(ns, p, topic, "sasl-good");
    apply_pipeline(bad_ns, bad_p, bad_topic, "sasl-bad");

    let id = flow_reset(ns, p, &[]);
    let bad_id = flow_reset(bad_ns, bad_p, &[]);

    // (a) over SASL/PLAIN, with the Java jaas line translated: reset to the log starts 0/5/0.
    wait_done(ns, p, &id, Duration::from_secs(60));
    assert_eq!(kafka::committed(&g, topic, 3), some(&[0, 5, 0]));
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{g}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(event_notes(ns, "ResetOffsetsFailed"), Vec::<String>::new());

    // (b) a wrong password: one failure event for the group, nothing committed; the operator's log
    // names the authentication failure (the note does not yet: see the module's known gap).
    let note = wait_failed(bad_ns, bad_p, &bad_g, &bad_id);
    eprintln!("C5: the wrong password's failure note: {note}");
    assert_eq!(kafka::committed(&bad_g, bad_topic, 3), some(&[10, 10, 10]), "nothing committed");
    assert!(
        bad_op.log_text().contains("SASL authentication error: Authentication failed"),
        "the operator's log does not name the authentication failure"
    );

    // (c) neither password anywhere the user or the cluster's readers can see.
    let mut seen = vec![
        ("the operator's log".to_string(), op.log_text()),
        ("the second operator's log".to_string(), bad_op.log_text()),
    ];
    for (n, pl) in [(ns, p), (bad_ns, bad_p)] {
        seen.push((format!("the Events of {n}"), kubectl_ok(&["-n", n, "get", "events", "-o", "json"])));
        seen.push((
            format!("the events.k8s.io Events of {n}"),
            kubectl_ok(&["-n", n, "get", "events.events.k8s.io", "-o", "json"]),
        ));
        seen.push((format!("AnkkaFlow {n}/{pl}"), kubectl_ok(&["-n", n, "get", "aflow", pl, "-o", "json"])));
    }
    for (what, text) in &seen {
        assert!(!text.is_empty(), "{what} is empty");
        for secret in [GOOD_PASSWORD, BAD_PASSWORD] {
            assert!(!text.contains(secret), "{what} shows a password");
        }
    }
    op.stop();
    bad_op.stop();
}

/// The note of a wrong password names the authentication failure (librdkafka reports it only to the
/// client's error callback, which the adapter keeps), and it is final: not retried for a minute.
#[test]
fn c5_a_wrong_password_is_reported_as_an_authentication_failure() {
    // Isolated: namespace `case-c5-auth`, its topic, group and cluster Secret.
    let _bed = side_by_side();
    let (ns, p, topic) = ("case-c5-auth", "case-c5-auth", "case.c5-auth-events");
    let g = format!("{p}.router.in");
    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(&["kafka-cluster-sasl-wrong"]);
    kubectl_apply(&cluster_secret("sasl-wrong", BAD_PASSWORD));
    fresh_namespace(ns);
    kafka::recreate_topic(topic, 1);
    delete_group(&g);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", "127.0.0.1:0")]);
    apply_pipeline(ns, p, topic, "sasl-wrong");
    let id = flow_reset(ns, p, &[]);
    let note = wait_failed(ns, p, &g, &id);
    let lower = note.to_lowercase();
    assert!(lower.contains("authentication") || lower.contains("sasl"), "not an authentication reason: {note}");
    assert!(!note.contains(BAD_PASSWORD));
    op.stop();
}
