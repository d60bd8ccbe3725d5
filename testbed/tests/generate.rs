//! `flow generate` output taken by the real kube-apiserver: the command line of
//! docs/rebuild-from-the-start.md piped into `kubectl apply`, server-side dry runs of the fixtures of
//! `core/tests/fixtures`, and values that YAML readers like to turn into other types coming back as
//! written.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use flow_testbed::*;

/// The namespace of the seed's command line; the other tests each have their own.
const NS: &str = "gen-test";

/// Runs `flow` in `dir`; panics unless it succeeds.
fn flow_in(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(bin("flow")).args(args).current_dir(dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?}: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

fn stored(ns: &str, name: &str) -> serde_json::Value {
    serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "json"])).expect("JSON")
}

fn fixtures() -> PathBuf {
    bed().root.join("core/tests/fixtures")
}

#[test]
fn the_seed_command_line_applies_as_written() {
    let _side_by_side = side_by_side();
    // The example under names of this test's own (its operator creates the managed topics): the
    // page's command lines run as written in a copy of examples/cart.
    let example = Cart::own("gen");
    let name = example.name.as_str();
    install_crd();
    install_cluster_secret();
    fresh_namespace(NS);
    let _operator = Operator::start(&fresh_dir(NS), &[("FLOW_WATCH_NAMESPACE", NS)]);
    let pods = |want: usize, what: &str| {
        wait_until(what, Duration::from_secs(60), || {
            (running_pipeline_pods(NS, name) == want && pipeline_pods(NS, name).len() == want).then_some(())
        })
    };
    let path = format!(
        "{}:{}",
        bed().bin_dir.display(),
        std::env::var("PATH").expect("PATH is set (with the test bed's kubectl)")
    );
    let run = |line: &str| {
        let o = Command::new("sh")
            .args(["-c", line])
            .current_dir(example.dir())
            .env("PATH", &path)
            .env("KUBECONFIG", &bed().kubeconfig)
            .output()
            .expect("sh runs");
        assert!(o.status.success(), "{line}: {}", show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // The two command lines of docs/rebuild-from-the-start.md, with our namespace.
    let stop = "flow generate blueprint.conf --descriptors flow --conf prod.conf --conf stop.conf \
                --image router=registry.example.com/cart-router:1.2 -n gen-test | kubectl apply -f -";
    let start = "flow generate blueprint.conf --descriptors flow --conf prod.conf \
                 --image router=registry.example.com/cart-router:1.2 -n gen-test | kubectl apply -f -";
    assert!(run(start).contains(&format!("ankkaflow.flow.ankka.thinkmorestupidless.com/{name}")));
    let r = stored(NS, name);
    assert_eq!(r["metadata"]["labels"]["flow.ankka.thinkmorestupidless.com/pipeline"], name);
    assert_eq!(r["metadata"]["labels"]["app.kubernetes.io/managed-by"], "ankka-flow");
    let spec = &r["spec"];
    assert_eq!(spec["pipeline"], name);
    assert_eq!(spec["protocolVersion"], "1.0");
    assert_eq!(spec["onDelete"]["managedTopics"], "Keep");
    let router = &spec["streamlets"][0];
    assert_eq!(router["name"], "router");
    assert_eq!(router["image"], "registry.example.com/cart-router:1.2");
    assert_eq!(router["replicas"], 1);
    assert_eq!(router["config"]["review-threshold"], 100);
    assert_eq!(router["inlets"]["in"], "cart-events");
    assert_eq!(router["descriptor"]["config_parameters"][0]["default_value"], "100");
    let topics: Vec<&str> =
        spec["topics"].as_array().expect("topics").iter().map(|t| t["id"].as_str().unwrap_or("")).collect();
    assert_eq!(topics, ["cart-events", "review-carts", "valid-carts"]);
    assert_eq!(spec["topics"][0]["name"], example.topic.as_str());
    assert_eq!(spec["topics"][0]["cluster"], "shop");
    assert_eq!(spec["topics"][2]["topicConfig"]["retention.ms"], "86400000");
    assert_eq!(spec["topics"][2]["batch"], serde_json::json!({"maxRecords": 100, "maxBytes": 1048576}));

    // The operator runs what was generated: one router pod, none once stopped, one again after.
    pods(1, "router's pod to run");
    run(stop);
    assert_eq!(stored(NS, name)["spec"]["streamlets"][0]["replicas"], 0);
    pods(0, "the pipeline's pods to go");
    run(start);
    assert_eq!(stored(NS, name)["spec"]["streamlets"][0]["replicas"], 1);
    pods(1, "router's pod to run again");
    // The helper every end-to-end test uses produces the same resource.
    assert_eq!(
        kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], &example.yaml(NS, 0)).trim_end(),
        format!("ankkaflow.flow.ankka.thinkmorestupidless.com/{name} configured (server dry run)")
    );
}

#[test]
fn reference_fixtures_pass_server_side_validation() {
    let _lock = side_by_side(); // isolated: its own namespace, and no operator
    let ns = "gen-fixtures";
    install_crd();
    fresh_namespace(ns);
    let fx = fixtures();
    let cart = flow_in(
        &fx.join("cart"),
        &[
            "generate",
            "blueprint.conf",
            "--descriptors",
            "descriptors",
            "--images",
            "images.conf",
            "--conf",
            "overrides.conf",
            "--version",
            "0.3.1",
            "-n",
            ns,
            "--delete-managed-topics",
        ],
    );
    let graph = flow_in(
        &fx.join("graph"),
        &[
            "generate",
            "blueprint.conf",
            "--descriptors",
            "descriptors",
            "--images",
            "images.conf",
            "--conf",
            "overrides.conf",
            "--version",
            "0.1.0",
            "-n",
            ns,
        ],
    );
    for yaml in [&cart, &graph] {
        let out = kubectl_stdin(&["apply", "--dry-run=server", "-o", "json", "-f", "-"], yaml);
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(v["kind"], "AnkkaFlow");
    }
    kubectl_stdin(&["apply", "-f", "-"], &graph);
    let g = stored(ns, "checkouts");
    let graph_streamlet =
        g["spec"]["streamlets"].as_array().expect("streamlets").iter().find(|s| s["name"] == "graph").cloned();
    let graph_streamlet = graph_streamlet.expect("streamlet graph");
    assert_eq!(graph_streamlet["builtin"], true);
    assert_eq!(graph_streamlet["image"], "");
    assert_eq!(graph_streamlet["config"], serde_json::json!({"secret": "neo4j-shop", "transaction-timeout": "30s"}));
    let deltas = g["spec"]["topics"].as_array().expect("topics").iter().find(|t| t["id"] == "graph-deltas").cloned();
    assert_eq!(deltas.expect("graph-deltas")["topicConfig"]["cleanup.policy"], "compact");
}

#[test]
fn yaml_lookalike_values_come_back_as_written() {
    let _lock = side_by_side(); // isolated: its own namespace, and no operator
    let ns = "gen-tricky";
    install_crd();
    fresh_namespace(ns);
    let dir = fresh_dir("gen-tricky");
    std::fs::create_dir_all(dir.join("flow")).expect("dir");
    let contract = r#"{"fingerprint": "nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=", "format": "json", "schema_name": "cart-events.v1"}"#;
    let descriptor = format!(
        r#"{{"protocol_version": "1.0", "streamlet": {{"name": "tricky",
            "inlets": [{{"name": "on", "contract": {contract}}}, {{"name": "y", "contract": {contract}}}],
            "outlets": [{{"name": "null", "contract": {contract}}}],
            "config_parameters": [
              {{"key": "a", "default_value": "yes"}}, {{"key": "b", "default_value": "0x1F"}},
              {{"key": "c", "default_value": "1e3"}}, {{"key": "d", "default_value": "2026-01-01"}},
              {{"key": "e", "default_value": "~"}}, {{"key": "f", "type": "DOUBLE", "default_value": "2.50"}},
              {{"key": "g", "type": "BOOLEAN", "default_value": "true"}}, {{"key": "h", "default_value": "12:30"}}]}}}}"#
    );
    std::fs::write(dir.join("flow/tricky.json"), descriptor).expect("descriptor");
    std::fs::write(
        dir.join("blueprint.conf"),
        r#"blueprint { name = tricky, streamlets { s = tricky }, topics {
             in { managed = false, bootstrap.servers = "127.0.0.1:19092", consumers = [s.on, s.y], topic.name = "1e3" }
             out { producers = ["s.null"], topic { retention.ms = 1_000, x = "0o17", y = off, z = "" } }
           } }"#,
    )
    .expect("blueprint");
    let yaml = flow_in(
        &dir,
        &["generate", "blueprint.conf", "--descriptors", "flow", "--image", "s=img:1", "--version", "1.0", "-n", ns],
    );
    kubectl_stdin(&["apply", "-f", "-"], &yaml);
    let spec = stored(ns, "tricky")["spec"].clone();
    assert_eq!(spec["version"], "1.0");
    let s = &spec["streamlets"][0];
    assert_eq!(s["inlets"], serde_json::json!({"on": "in", "y": "in"}));
    assert_eq!(s["outlets"], serde_json::json!({"null": "out"}));
    assert_eq!(
        s["config"],
        serde_json::json!({"a": "yes", "b": "0x1F", "c": "1e3", "d": "2026-01-01", "e": "~", "f": 2.5, "g": true, "h": "12:30"})
    );
    assert_eq!(spec["topics"][0]["name"], "1e3");
    assert_eq!(
        spec["topics"][1]["topicConfig"],
        serde_json::json!({"retention.ms": "1_000", "x": "0o17", "y": "off", "z": ""})
    );
}
