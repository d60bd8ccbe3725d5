//! The user's page `rebuild-from-the-start.md`, replayed on the real test bed: the commands as the
//! page writes them where they apply, and the page's output checked.

use std::time::Duration;

use flow_testbed::*;

const NS: &str = "shop";
const TOPIC: &str = "shop.cart-events.v1";
const GROUP: &str = "cart.router.in";

#[test]
fn rebuild_from_the_start_as_the_seed_page_says() {
    // Isolated: the example as shipped (namespace `shop`, topic `shop.cart-events.v1`, group
    // `cart.router.in`, managed topics `cart.*`) is used besides only by tests that run alone.
    let _lock = side_by_side();
    install_crd();
    install_cluster_secret();
    fresh_namespace(NS);
    kafka::recreate_topic(TOPIC, 3);
    kafka::produce(TOPIC, 3, 100);

    let _operator = Operator::start(&fresh_dir("seed"), &[("FLOW_WATCH_NAMESPACE", NS)]);
    kubectl_apply(&cart_yaml(NS, 1));
    wait_until("router's pod to run", Duration::from_secs(60), || {
        (running_pipeline_pods(NS, "cart") == 1).then_some(())
    });
    let header = kubectl_ok(&["-n", NS, "get", "aflow"]);
    assert!(
        header.starts_with("NAME") && header.contains("PIPELINE") && header.contains("PHASE") && header.contains("AGE"),
        "{header}"
    );

    // The streamlet reads its whole input and commits. The stand-in plays router's sidecar: its
    // topic, group, client id and connection come from the Secret the operator rendered.
    let first = standin::read_as_streamlet(NS, "cart", "router", 300);
    assert_eq!(first["records"], 300);
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), [(0, Some(100)), (1, Some(100)), (2, Some(100))].into());

    // Stop the streamlets through the resource, and wait until their pods are gone.
    kubectl_apply(&cart_yaml(NS, 0));
    wait_until("the pipeline's pods to go", Duration::from_secs(60), || {
        pipeline_pods(NS, "cart").is_empty().then_some(())
    });

    // Request the reset.
    let out = flow(&["reset", "cart", "-n", NS]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let id = stdout
        .strip_prefix("reset requested for 'cart': ")
        .and_then(|s| s.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected output: {stdout:?}"))
        .to_string();
    assert!(uuid_like(&id), "{id}");

    // Check that it happened: one event per group, the done annotation, offsets at the log start.
    let notes = wait_until("the ResetOffsets event", Duration::from_secs(60), || {
        let n = event_notes(NS, "ResetOffsets");
        (!n.is_empty()).then_some(n)
    });
    assert_eq!(notes, ["cart.router.in: 3 partition(s) of 'shop.cart-events.v1' to earliest"]);
    let table = kubectl_ok(&[
        "-n",
        NS,
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=AnkkaFlow,reason=ResetOffsets",
    ]);
    assert!(table.contains("ResetOffsets") && table.contains("ankkaflow/cart"), "{table}");
    wait_until("the done annotation", Duration::from_secs(30), || {
        (annotation(NS, "cart", "flow.ankka.thinkmorestupidless.com/reset-offsets-done").as_deref()
            == Some(id.as_str()))
        .then_some(())
    });
    let reset: serde_json::Value = wait_until("status.reset to be Done", Duration::from_secs(30), || {
        let text = kubectl_ok(&["-n", NS, "get", "aflow", "cart", "-o", "jsonpath={.status.reset}"]);
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        (v["phase"] == "Done").then_some(v)
    });
    assert_eq!(reset["id"], id.as_str());
    // The reset's condition says so, in the form `kubectl wait` reads.
    kubectl_ok(&["-n", NS, "wait", "--for=condition=ResetComplete", "aflow/cart", "--timeout=30s"]);
    let condition = kubectl_ok(&[
        "-n",
        NS,
        "get",
        "aflow",
        "cart",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"ResetComplete\")]}",
    ]);
    let condition: serde_json::Value = serde_json::from_str(&condition).expect("the ResetComplete condition");
    assert_eq!(
        [&condition["status"], &condition["reason"], &condition["message"]],
        ["True", "Done", &format!("reset {id} is done")],
        "{condition}"
    );
    let g = &reset["groups"][0];
    assert_eq!(reset["groups"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        [&g["group"], &g["topic"], &g["outcome"], &g["message"]],
        [GROUP, TOPIC, "Reset", "3 partition(s) of 'shop.cart-events.v1' to earliest"]
    );
    assert_eq!(g["offsetsBefore"], serde_json::json!({"0": 100, "1": 100, "2": 100}));
    assert_eq!(g["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
    assert_eq!(g["recordsToReprocess"], 300);
    let starts: std::collections::BTreeMap<i32, Option<i64>> =
        kafka::watermarks(TOPIC).into_iter().map(|(p, (low, _))| (p, Some(low))).collect();
    assert_eq!(kafka::committed(GROUP, TOPIC, 3), starts);

    // Start the streamlets again: they read every record again, from the earliest offsets.
    kubectl_apply(&cart_yaml(NS, 1));
    wait_until("router's pod to run again", Duration::from_secs(60), || {
        (running_pipeline_pods(NS, "cart") == 1).then_some(())
    });
    let again = standin::read_as_streamlet(NS, "cart", "router", 300);
    assert_eq!(again["records"], 300);
    assert_eq!(again["first"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
}

fn uuid_like(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}
