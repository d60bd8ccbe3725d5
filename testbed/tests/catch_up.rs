//! After the restart of docs/rebuild-from-the-start.md, the lag of the reset group starts at the size
//! of its input and falls to zero; the test watches it in the resource's status and on the operator's
//! `/metrics`, where the group is marked as rebuilding from the request until it caught up.

use std::time::Duration;

use flow_testbed::*;

fn status_lag(ns: &str, name: &str) -> (Option<i64>, Option<String>) {
    let text = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset.groups[0]}"]);
    let g: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    (g["lag"].as_i64(), g["caughtUpAt"].as_str().map(str::to_string))
}

#[test]
fn lag_starts_at_the_input_size_and_falls_to_zero() {
    let _side_by_side = side_by_side();
    let ns = "shop-catch-up";
    let cart = Cart::own("catch-up");
    let (name, group) = (cart.name.as_str(), cart.group.as_str());
    let started = std::time::Instant::now();
    let op = cart.scenario(ns, 0, &[("FLOW_METRICS_ADDRESS", "127.0.0.1:0"), ("FLOW_LAG_INTERVAL_SECONDS", "1")]);
    let addr = metrics_address(&op);
    assert_eq!(http_get(&addr, "/healthz"), (200, "ok\n".to_string()));
    let rebuilding = |body: &str| group_series(body, "ankka_flow_consumer_group_rebuilding", group);
    let seconds = |body: &str| group_series(body, "ankka_flow_consumer_group_lag_seconds", group);
    // Before the reset the group has read everything, and no reset is under way.
    let body = wait_until("lag 0 on /metrics", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        (lag_in_metrics(&body, group) == (0, 1)).then_some(body)
    });
    assert_eq!((rebuilding(&body), seconds(&body)), (Some(0.0), Some(0.0)), "{body}");
    assert!(!body.contains("ankka_flow_consumer_group_partition_lag{"), "per partition only when asked: {body}");

    let o = flow(&["reset", name, "-n", ns, "--wait"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let id = out.lines().next().and_then(|l| l.rsplit(' ').next()).expect("the request line").to_string();
    // Stopped and reset: the whole input is left to read.
    wait_until("lag 60 in the status", Duration::from_secs(30), || (status_lag(ns, name).0 == Some(60)).then_some(()));
    let body = wait_until("lag 60 on /metrics", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        (lag_in_metrics(&body, group) == (60, 1)).then_some(body)
    });
    // The reset group is rebuilding. Its records were written before the operator's first sample and
    // none since, so their age is estimated as the time since that sample: more than 0, less than
    // the test has run.
    assert_eq!(rebuilding(&body), Some(1.0), "{body}");
    let behind = seconds(&body).unwrap_or(f64::NAN);
    assert!(behind > 0.0 && behind < started.elapsed().as_secs_f64(), "lag seconds {behind}: {body}");
    assert!(body.contains("ankka_flow_reset_groups_total{outcome=\"reset\"} 1"), "{body}");
    assert!(body.contains("ankka_flow_reset_requests_pending 0"), "{body}");

    // Start again; the stand-in reads at 10 records a second, so the catch-up takes a few seconds.
    kubectl_apply(&cart.yaml(ns, 1));
    // The stand-in plays router: its group and topic come from the Secret the operator rendered.
    let reader = std::process::Command::new(bin("flow-standin"))
        .args(standin::playing(ns, name, "router"))
        .args(["--expect", "60", "--rate", "10", "--timeout", "60"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("flow-standin starts");
    // `flow reset status --watch` follows the catch-up until the group has caught up.
    let watch = std::process::Command::new(bin("flow"))
        .args(["reset", "status", &id, "-n", ns, "--watch"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("flow reset status --watch starts");
    let mut seen = vec![];
    let caught_up = wait_until("the status to say caught up", Duration::from_secs(60), || {
        let (lag, at) = status_lag(ns, name);
        if let Some(l) = lag
            && seen.last() != Some(&l)
        {
            seen.push(l);
        }
        at
    });
    let mut reader = reader;
    assert!(reader.wait().expect("stand-in ends").success());
    assert_eq!(seen.first(), Some(&60), "{seen:?}");
    assert_eq!(seen.last(), Some(&0), "{seen:?}");
    assert!(seen.len() >= 3, "the lag was seen falling, not only before and after: {seen:?}");
    assert!(seen.windows(2).all(|w| w[1] <= w[0]), "the lag only falls: {seen:?}");
    assert!(caught_up.ends_with('Z'));
    let watched = watch.wait_with_output().expect("the watch ends by itself once caught up");
    let text = String::from_utf8_lossy(&watched.stdout);
    assert!(watched.status.success(), "{text}");
    // It found the request done and not caught up, and said what it waits for.
    let note = String::from_utf8_lossy(&watched.stderr);
    assert!(note.starts_with("note: the reset is done; watching until every group it reset has caught up"), "{note}");
    assert!(text.contains(&format!("catch-up: {group} ")) && text.contains(" of 60 records left ("), "{text}");
    assert!(text.trim_end().ends_with(&format!("catch-up: {group} caught up at {caught_up}")), "{text}");
    // Caught up: no longer rebuilding, nothing behind.
    wait_until("lag 0 and no rebuild on /metrics", Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics").1;
        let done =
            lag_in_metrics(&body, group) == (0, 1) && rebuilding(&body) == Some(0.0) && seconds(&body) == Some(0.0);
        done.then_some(())
    });
}
