//! The operator's metrics and readiness on the real test bed: lag series labelled with the
//! AnkkaFlow's namespace and name, sampling errors counted per Kafka connection when a topic cannot
//! be sampled, reconciles by outcome, build and process series, and `/readyz` once the instance
//! holds the Lease and hears from the API server, and 503 without either; the shipped alerts
//! evaluated by promtool; the same pipeline in two namespaces, and series that go with their pipelines;
//! an operator whose metrics address is taken stops at start, before it takes the Lease.

use std::time::Duration;

use flow_testbed::*;

fn series<'a>(body: &'a str, prefix: &str) -> Vec<&'a str> {
    body.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn value(line: &str) -> f64 {
    line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

#[test]
fn metrics_name_each_pipeline_count_sampling_errors_and_readiness_follows_the_lease() {
    let _side_by_side = side_by_side();
    let ns = "shop-metrics";
    let cart = Cart::own("metrics");
    let op = cart.scenario(ns, 0, &[("FLOW_LAG_INTERVAL_SECONDS", "1")]);
    let addr = metrics_address(&op);
    assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".to_string()));
    let (code, why) = wait_until("/readyz to answer 200", Duration::from_secs(30), || {
        let r = http_get(&addr, "/readyz");
        (r.0 == 200).then_some(r)
    });
    assert_eq!(code, 200);
    assert!(why.contains("apiserver: answered") && why.contains("lease: held"), "{why}");

    // The lag of the cart's inlet, one series for the group, labelled with the AnkkaFlow's namespace
    // and name, in records and in seconds, and whether it is rebuilding.
    let (name, topic) = (&cart.name, &cart.topic);
    let group = format!("{{namespace=\"{ns}\",pipeline=\"{name}\",consumergroup=\"{}\"", cart.group);
    let want = format!("ankka_flow_consumer_group_lag{group},topic=\"{topic}\"}} ");
    let body = wait_until("the lag series", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        (series(&body, &want).len() == 1).then_some(body)
    });
    assert_eq!(
        series(&body, &format!("ankka_flow_consumer_group_lag_seconds{group},topic=\"{topic}\"}} ")).len(),
        1,
        "{body}"
    );
    assert_eq!(series(&body, &format!("ankka_flow_consumer_group_rebuilding{group}}} 0")).len(), 1, "{body}");
    assert!(!body.contains("client_id"), "{body}");
    assert!(
        series(&body, "ankka_flow_lag_last_success_timestamp_seconds{cluster=\"shop\"}").iter().any(|l| value(l) > 1e9),
        "{body}"
    );

    // A second pipeline whose inlet reads a topic the cluster does not have: its lag cannot be
    // sampled, which is counted for the connection, and the cart's series stay.
    apply_own_pipeline(ns, "ghost", &[("reader", "shop.no-such-topic", 0)]);
    let body = wait_until("a sampling error for cluster shop", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        series(&body, "ankka_flow_lag_sample_errors_total{cluster=\"shop\"}")
            .iter()
            .any(|l| value(l) >= 1.0)
            .then_some(body)
    });
    assert_eq!(series(&body, &want).len(), 1, "{body}");
    assert!(series(&body, "ankka_flow_consumer_group_lag{").iter().all(|l| !l.contains("ghost")), "{body}");
    // The connection works for the cart, so its last success keeps advancing despite the ghost.
    let last_success = |body: &str| {
        series(body, "ankka_flow_lag_last_success_timestamp_seconds{cluster=\"shop\"}").first().map(|l| value(l))
    };
    let before = last_success(&body).expect("a last success for shop");
    wait_until("the last success of shop to advance", Duration::from_secs(30), || {
        last_success(&http_get(&addr, "/metrics").1).filter(|t| *t > before)
    });

    // Reconciles by outcome, build and process series.
    assert!(
        series(&body, "ankka_flow_reconciles_total{outcome=\"success\"}").iter().any(|l| value(l) >= 1.0),
        "{body}"
    );
    assert!(!series(&body, "ankka_flow_reconcile_duration_seconds_bucket{").is_empty(), "{body}");
    assert!(
        series(&body, "ankka_flow_build_info{version=\"0.1.0\",commit=\"").iter().any(|l| value(l) == 1.0),
        "{body}"
    );
    for p in ["process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds "] {
        assert!(series(&body, p).iter().any(|l| value(l) > 0.0), "no {p}: {body}");
    }
    assert!(op.log_text().contains("flow-operator 0.1.0"), "the start-up line names the version");

    // Every series the shipped alerts and dashboard ask for is one the operator serves.
    for file in ["charts/ankka-flow/files/alerts.yaml", "charts/ankka-flow/files/dashboard.json"] {
        let text = std::fs::read_to_string(bed().root.join(file)).expect("file");
        // Served once a reset is catching up: the two-namespace test below checks it.
        for name in
            metric_names(&text).into_iter().filter(|n| n != "ankka_flow_reset_catch_up_started_timestamp_seconds")
        {
            let base =
                ["_total", "_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(&name);
            assert!(
                body.lines().any(|l| l.starts_with(&format!("# TYPE {base} "))),
                "{file} uses {name}, which the operator does not serve:\n{body}"
            );
        }
    }
}

/// The metric names (`ankka_flow_*`, `process_*`) a text mentions.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for prefix in ["ankka_flow_", "process_"] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let tail = &rest[at..];
            let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    names
}

/// The shipped alerts, evaluated by Prometheus's own rule engine (`promtool test rules`) against
/// the series of testbed/tests/alerts/rules_test.yaml: `AnkkaFlowLagNotFalling` fires per
/// namespace, pipeline and consumer group, only for a group whose reset has not caught up, and not
/// while the reset itself is what raised the lag.
#[test]
fn the_alerts_fire_per_pipeline_and_only_for_groups_catching_up_after_a_reset() {
    let promtool = bed().root.join("scripts/promtool.sh");
    let check = std::process::Command::new(&promtool)
        .args(["check", "rules", "charts/ankka-flow/files/alerts.yaml"])
        .current_dir(&bed().root)
        .output()
        .expect("scripts/promtool.sh runs");
    assert!(check.status.success(), "{}", show(&check));
    let test = std::process::Command::new(&promtool)
        .args(["test", "rules", "testbed/tests/alerts/rules_test.yaml"])
        .current_dir(&bed().root)
        .output()
        .expect("scripts/promtool.sh runs");
    assert!(test.status.success(), "{}", show(&test));
}

/// The series of `name` in `body` whose labels include every one of `labels` (`key="value"`).
fn labelled<'a>(body: &'a str, name: &str, labels: &[&str]) -> Vec<&'a str> {
    series(body, &format!("{name}{{")).into_iter().filter(|l| labels.iter().all(|x| l.contains(x))).collect()
}

#[test]
fn the_same_pipeline_in_two_namespaces_has_series_of_its_own_and_they_go_with_it() {
    let _side_by_side = side_by_side();
    let (a, b) = ("shop-metrics-a", "shop-metrics-b");
    let cart = Cart::own("metrics-two");
    install_crd();
    install_cluster_secret();
    fresh_namespace(a);
    fresh_namespace(b);
    kafka::recreate_topic(&cart.topic, 3);
    kafka::produce(&cart.topic, 3, 20);
    standin::read(&cart.group, &cart.topic, 60);
    // One operator watching both namespaces (its Lease and identity named here: a namespace list is
    // no name).
    let watched = format!("{a},{b}");
    let identity = format!("flow-operator-metrics-{}", std::process::id());
    let op = Operator::start(
        &fresh_dir(a),
        &[
            ("FLOW_WATCH_NAMESPACE", &watched),
            ("FLOW_LAG_INTERVAL_SECONDS", "1"),
            ("FLOW_LAG_PER_PARTITION", "true"),
            ("FLOW_LEASE_NAME", "ankka-flow-operator-metrics"),
            ("HOSTNAME", &identity),
        ],
    );
    let addr = metrics_address(&op);
    // The same blueprint in both: the same consumer group on the same topic of the same cluster
    // (the test bed's Secret allows that).
    kubectl_apply(&cart.yaml(a, 0));
    kubectl_apply(&cart.yaml(b, 0));
    let lag = "ankka_flow_consumer_group_lag";
    let group = &format!("consumergroup=\"{}\"", cart.group);
    let pipeline = &format!("pipeline=\"{}\"", cart.name);
    // Per group, and per partition as asked for (FLOW_LAG_PER_PARTITION).
    let per_partition = "ankka_flow_consumer_group_partition_lag";
    wait_until("a lag series of each namespace's cart, and one per partition", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        let each = [lag, per_partition, &format!("{per_partition}_seconds")].map(|name| {
            [a, b].map(|ns| labelled(&body, name, &[&format!("namespace=\"{ns}\""), pipeline, group]).len())
        });
        (each == [[1, 1], [3, 3], [3, 3]]).then_some(())
    });

    // a's cart is reset: its group (b's too: it is the same group) has its 60 records to read
    // again, and a's reset group is catching up, b's was never reset.
    let o = flow(&["reset", &cart.name, "-n", a]);
    assert!(o.status.success(), "{}", show(&o));
    let caught = "ankka_flow_reset_catch_up_started_timestamp_seconds";
    let body = wait_until("a's catch-up series", Duration::from_secs(60), || {
        let body = http_get(&addr, "/metrics").1;
        (!labelled(&body, caught, &[&format!("namespace=\"{a}\""), group]).is_empty()).then_some(body)
    });
    assert!(body.contains(&format!("# TYPE {caught} gauge")), "{body}");
    let started = value(labelled(&body, caught, &[&format!("namespace=\"{a}\""), pipeline, group])[0]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    assert!((now - 120.0..=now + 1.0).contains(&started), "{started} is not the reset's end ({now} now)");
    assert!(labelled(&body, caught, &[&format!("namespace=\"{b}\"")]).is_empty(), "{body}");
    // Only a's group is under a reset: an alert on b's lag, which grew as much, is not silenced.
    let rebuilding = "ankka_flow_consumer_group_rebuilding";
    let marks = |body: &str| {
        [a, b].map(|ns| {
            labelled(body, rebuilding, &[&format!("namespace=\"{ns}\""), group])
                .iter()
                .map(|l| value(l))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(marks(&body), [vec![1.0], vec![0.0]], "{body}");
    let body = wait_until("the lag after the reset in both namespaces", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        let sums = [a, b].map(|ns| {
            labelled(&body, lag, &[&format!("namespace=\"{ns}\""), group]).iter().map(|l| value(l)).sum::<f64>()
        });
        (sums == [60.0, 60.0]).then_some(body)
    });
    assert!(!series(&body, "ankka_flow_lag_last_success_timestamp_seconds{cluster=\"shop\"}").is_empty(), "{body}");

    // Both pipelines go: so do their lag and catch-up series, and the series of the connection
    // they used, whose last success would otherwise age into the sampling-failing alert.
    for ns in [a, b] {
        kubectl_ok(&["-n", ns, "delete", "aflow", &cart.name, "--wait=true", "--timeout=60s"]);
    }
    wait_until("the series of the pipelines and their connection to go", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        let gone = series(&body, &format!("{lag}{{")).is_empty()
            && series(&body, &format!("{per_partition}{{")).is_empty()
            && series(&body, &format!("{rebuilding}{{")).is_empty()
            && series(&body, &format!("{caught}{{")).is_empty()
            && series(&body, "ankka_flow_lag_last_success_timestamp_seconds{").is_empty()
            && series(&body, "ankka_flow_lag_sample_errors_total{").is_empty();
        gone.then_some(())
    });
    assert!(!op.log_text().contains("forbidden"), "{}", op.log_text());
    op.stop();
}

#[test]
fn readyz_answers_503_without_the_api_server_or_without_the_lease() {
    let _lock = side_by_side(); // isolated: its own namespace and Lease
    // An API server that does not answer: alive, not ready (leader election off, so that only the
    // API server is missing).
    let dir = fresh_dir("readyz-unreachable");
    let unreachable = bed().root.join("testbed/tests/unreachable.kubeconfig");
    let alone = Operator::start(
        &dir,
        &[
            ("KUBECONFIG", unreachable.to_str().expect("utf-8")),
            ("FLOW_LEADER_ELECTION", "false"),
            ("FLOW_WATCH_NAMESPACE", "shop-metrics"),
        ],
    );
    let addr = metrics_address(&alone);
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    let (code, why) = http_get(&addr, "/readyz");
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("apiserver: not answered yet"), "{why}");
    // Some probes later it is still not ready.
    std::thread::sleep(Duration::from_secs(3));
    let (code, why) = http_get(&addr, "/readyz");
    assert_eq!((code, why.contains("apiserver: not answered yet")), (503, true), "{why}");
    // Dropped, not stopped: without an API server the operator does not end on SIGTERM alone (the
    // drop kills it after 10 s).
    drop(alone);

    // Two instances, one Lease: the holder is ready, the one waiting for the Lease is alive and
    // answers 503 until it gets it.
    let ns = "shop-readyz";
    fresh_namespace(ns);
    let env = [("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LEASE_DURATION_SECONDS", "15")];
    let first = Operator::start(&fresh_dir("readyz-first"), &[&env[..], &[("HOSTNAME", "readyz-first")]].concat());
    let first_addr = metrics_address(&first);
    wait_until("the first instance to be ready", Duration::from_secs(30), || {
        (http_get(&first_addr, "/readyz").0 == 200).then_some(())
    });
    let second = Operator::start(&fresh_dir("readyz-second"), &[&env[..], &[("HOSTNAME", "readyz-second")]].concat());
    let second_addr = metrics_address(&second);
    // It has heard from the API server, and still waits for the Lease.
    let why = wait_until("the second instance to hear from the API server", Duration::from_secs(30), || {
        let (code, why) = http_get(&second_addr, "/readyz");
        assert_eq!(code, 503, "{why}");
        why.contains("apiserver: answered").then_some(why)
    });
    assert!(why.contains("lease: waiting for it"), "{why}");
    assert_eq!(http_get(&second_addr, "/healthz").0, 200);
    assert_eq!(http_get(&first_addr, "/readyz").0, 200);
    // The holder stops and gives the Lease back: the second takes it and is ready.
    first.stop();
    wait_until("the second instance to be ready", Duration::from_secs(30), || {
        (http_get(&second_addr, "/readyz").0 == 200).then_some(())
    });
    second.stop();
}

/// One pipeline of 200 inlets on a topic of 500 partitions, `pipeline` in namespace `ns`: ten
/// stopped streamlets of twenty inlets each, every inlet reading `topic` in its own group.
fn wide_pipeline_yaml(ns: &str, pipeline: &str, topic: &str) -> String {
    let mut y = format!(
        "apiVersion: flow.ankka.thinkmorestupidless.com/v1alpha1\nkind: AnkkaFlow\nmetadata:\n  name: {pipeline}\n  \
         namespace: {ns}\n  labels:\n    flow.ankka.thinkmorestupidless.com/pipeline: {pipeline}\nspec:\n  pipeline: \
         {pipeline}\n  protocolVersion: \"1.0\"\n  streamlets:\n"
    );
    for s in 0..10 {
        y += &format!("  - name: s{s}\n    image: registry.example.com/wide:1\n    replicas: 0\n    inlets:\n");
        for i in 0..20 {
            y += &format!("      i{i}: input\n");
        }
        y += "    descriptor:\n      name: wide\n      description: wide\n      config_parameters: []\n      inlets:\n";
        for i in 0..20 {
            y += &format!(
                "      - name: i{i}\n        contract:\n          fingerprint: nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=\n          \
                 format: json\n          schema_name: cart-events.v1\n"
            );
        }
        y += "      outlets: []\n    builtin: false\n";
    }
    y + &format!(
        "  topics:\n  - id: input\n    name: {topic}\n    managed: false\n    cluster: shop\n    consumerConfig:\n      \
         auto.offset.reset: earliest\n"
    )
}

/// `/metrics` of one pipeline of 200 inlets on a 500-partition topic stays well under the 1 MB that
/// scrapers take by default: one series per group, whatever its partitions. Per partition (asked
/// for with FLOW_LAG_PER_PARTITION) it is a series per group and partition, as it was by default
/// before. Prints both sizes (docs/performance.md records them).
#[test]
fn metrics_of_200_inlets_on_500_partitions_stay_under_1_mb() {
    let _lock = side_by_side(); // isolated: its own namespace, topic and groups
    let ns = "shop-metrics-wide";
    let topic = "shop.metrics-wide.p500";
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    kafka::recreate_topic(topic, 500);
    let mut sizes = vec![];
    for per_partition in ["false", "true"] {
        let op = Operator::start(
            &fresh_dir(ns),
            &[
                ("FLOW_WATCH_NAMESPACE", ns),
                ("FLOW_LAG_INTERVAL_SECONDS", "1"),
                ("FLOW_LAG_PER_PARTITION", per_partition),
            ],
        );
        let addr = metrics_address(&op);
        kubectl_apply(&wide_pipeline_yaml(ns, "wide", topic));
        let want = if per_partition == "true" { 200 * 500 } else { 0 };
        let body = wait_until("a lag series of each of the 200 groups", Duration::from_secs(120), || {
            let body = http_get(&addr, "/metrics").1;
            let groups = series(&body, "ankka_flow_consumer_group_lag{").len();
            let partitions = series(&body, "ankka_flow_consumer_group_partition_lag{").len();
            (groups == 200 && partitions == want).then_some(body)
        });
        for name in ["ankka_flow_consumer_group_lag_seconds{", "ankka_flow_consumer_group_rebuilding{"] {
            assert_eq!(series(&body, name).len(), 200, "{name}");
        }
        eprintln!(
            "/metrics with 200 inlets on 500 partitions, FLOW_LAG_PER_PARTITION={per_partition}: {} bytes, {} lines",
            body.len(),
            body.lines().count()
        );
        sizes.push(body.len());
        if per_partition == "true" {
            // Deleted while an operator runs, which removes its finalizer.
            kubectl_ok(&["-n", ns, "delete", "aflow", "wide", "--wait=true", "--timeout=60s"]);
        }
        op.stop();
    }
    kafka::remove_topic(topic);
    assert!(sizes[0] < 1_000_000, "/metrics is {} bytes by default", sizes[0]);
    assert!(sizes[1] > sizes[0] * 10, "per partition adds a series per partition: {sizes:?}");
}

#[test]
fn a_metrics_address_that_cannot_be_bound_stops_the_operator_before_it_takes_the_lease() {
    let _side_by_side = side_by_side(); // isolated: its own Lease, which it must never take
    let ns = "shop-metrics-taken";
    let lease = format!("ankka-flow-operator-{ns}");
    ensure_namespace("ankka-flow");
    kubectl_ok(&["-n", "ankka-flow", "delete", "lease", &lease, "--ignore-not-found"]);
    // The port is held by the test itself, as another process would hold it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = taken.local_addr().expect("its address").to_string();
    let mut op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_METRICS_ADDRESS", &addr)]);
    let code = op.wait_exit(Duration::from_secs(30));
    let log = op.log_text();
    assert_eq!(code, Some(1), "{log}");
    let why = format!("flow-operator: cannot serve /metrics, /healthz and /readyz on {addr}: Address already in use");
    assert!(log.lines().any(|l| l.starts_with(&why)), "{log}");
    // It stopped before the Lease: never waited for it, never wrote it.
    assert!(!log.contains("serving /metrics") && !log.contains("hold the lease"), "{log}");
    let o = kubectl(&["-n", "ankka-flow", "get", "lease", &lease, "-o", "name"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("NotFound"), "{}", show(&o));
    drop(taken);
}
