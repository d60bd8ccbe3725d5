//! The operator's metrics and readiness on the real test bed: lag series labelled with the
//! AnkkaFlow's namespace and name, sampling errors counted per Kafka connection when a topic cannot
//! be sampled, reconciles by outcome, build and process series, and `/readyz` once the instance
//! holds the Lease and hears from the API server.

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
    let _serial = serial();
    let ns = "shop-metrics";
    let op = cart_scenario(ns, 0, &[("FLOW_LAG_INTERVAL_SECONDS", "1")]);
    let addr = metrics_address(&op);
    assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".to_string()));
    let (code, why) = wait_until("/readyz to answer 200", Duration::from_secs(30), || {
        let r = http_get(&addr, "/readyz");
        (r.0 == 200).then_some(r)
    });
    assert_eq!(code, 200);
    assert!(why.contains("apiserver: answered") && why.contains("lease: held"), "{why}");

    // The lag of the cart's inlet, labelled with the AnkkaFlow's namespace and name.
    let want = format!(
        "ankka_flow_consumer_group_lag{{namespace=\"{ns}\",pipeline=\"cart\",client_id=\"cart.router.in\",topic=\"shop.cart-events.v1\",partition=\""
    );
    let body = wait_until("the lag series", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        (series(&body, &want).len() == 3).then_some(body)
    });
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
    assert_eq!(series(&body, &want).len(), 3, "{body}");
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
        for name in metric_names(&text) {
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
