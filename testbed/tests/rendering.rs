//! What the operator renders and reports for the platform's streamlet runtime, on the real test bed:
//! the examples' Secrets read back from the API server and compared byte for byte with the
//! fixtures, the graph example's built-in with the sidecar alone, every event the reconcile
//! records, managed topics created with their settings (read back with Kafka's own tool), removal
//! and deletion, a cluster Secret edit, names that cannot fit, and a failed apply.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use flow_testbed::*;

/// The examples' cluster Secrets, as the fixtures were rendered with them. The brokers are not
/// reachable from the test bed: the streamlets' files are rendered all the same.
const REFERENCE_CLUSTERS: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: kafka-cluster-shop
  namespace: flow-rendering-clusters
  annotations: {flow.ankka.thinkmorestupidless.com/allowed-namespaces: shop-rendering}
stringData:
  bootstrap.servers: kafka.kafka.svc:9092
  connection-config: |
    security.protocol=PLAINTEXT
---
apiVersion: v1
kind: Secret
metadata:
  name: kafka-cluster-default
  namespace: flow-rendering-clusters
  annotations: {flow.ankka.thinkmorestupidless.com/allowed-namespaces: shop-rendering}
stringData:
  bootstrap.servers: kafka.kafka.svc:9092
  partitions: "3"
  replicas: "1"
"#;
const REFERENCE_CLUSTERS_NS: &str = "flow-rendering-clusters";

fn fixtures() -> PathBuf {
    bed().root.join("core/tests/fixtures")
}

/// `flow generate` of a fixture example (`cart`, `graph`) with its images and overrides, as the
/// fixtures were rendered.
fn example_yaml(example: &str, ns: &str) -> String {
    let args = [
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
    ];
    let o = Command::new(bin("flow")).args(args).current_dir(fixtures().join(example)).output().expect("flow runs");
    assert!(o.status.success(), "flow generate {example}: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// The hex SHA-256 of `text`, computed by `sha256sum`, independently of the operator.
fn sha256(text: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum runs");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write");
    let o = child.wait_with_output().expect("sha256sum ends");
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap_or_default().to_string()
}

fn containers(d: &serde_json::Value) -> Vec<String> {
    d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn config_hash(d: &serde_json::Value) -> String {
    d["spec"]["template"]["metadata"]["annotations"]["flow.ankka.thinkmorestupidless.com/config-hash"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn phase(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.phase}"])
}

fn wait_event(ns: &str, reason: &str, note: &str) {
    wait_until(&format!("event {reason}: {note}"), Duration::from_secs(60), || {
        event_notes(ns, reason).iter().any(|n| n == note).then_some(())
    });
}

/// Objects labelled with `pipeline` in `ns`, of the kinds the operator renders.
fn rendered_objects(ns: &str, pipeline: &str) -> String {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={pipeline}");
    kubectl_ok(&["-n", ns, "get", "deployments,secrets,serviceaccounts,roles,rolebindings", "-l", &label, "-o", "name"])
}

#[test]
fn the_examples_render_as_the_existing_operator_renders_them() {
    let _lock = side_by_side(); // isolated: its own namespaces and cluster Secrets, brokers it cannot reach
    let ns = "shop-rendering";
    install_crd();
    fresh_namespace(ns);
    ensure_namespace(REFERENCE_CLUSTERS_NS);
    kubectl_apply(REFERENCE_CLUSTERS);
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: neo4j-shop, namespace: {ns}}}\nstringData: {{uri: 'bolt://neo4j:7687', username: neo4j, password: not-used}}\n"
    ));
    let _op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_KAFKA_CLUSTERS_NAMESPACE", REFERENCE_CLUSTERS_NS),
            ("FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS", "2"),
        ],
    );
    kubectl_apply(&example_yaml("cart", ns));
    kubectl_apply(&example_yaml("graph", ns));

    // Every streamlet's Secret, read back from the API server, equals the fixture byte for byte.
    for (example, pipeline, streamlet) in [
        ("cart", "cart", "router"),
        ("cart", "cart", "sink"),
        ("graph", "checkouts", "mapper"),
        ("graph", "checkouts", "graph"),
    ] {
        let name = format!("flow-{pipeline}-{streamlet}");
        wait_until(&format!("Deployment {name}"), Duration::from_secs(60), || {
            (!get_json(ns, "deployment", &name).is_null()).then_some(())
        });
        let dir = fixtures().join(example).join("rendered");
        let conf = secret_file(ns, &name, "streamlet.conf");
        let descriptor = secret_file(ns, &name, "descriptor.json");
        let want_conf = std::fs::read_to_string(dir.join(format!("{streamlet}.streamlet.conf"))).expect("fixture");
        let want_descriptor =
            std::fs::read_to_string(dir.join(format!("{streamlet}.descriptor.json"))).expect("fixture");
        assert_eq!(conf, want_conf, "{name}: streamlet.conf");
        assert_eq!(descriptor, want_descriptor, "{name}: descriptor.json");
        eprintln!(
            "rendering: {name}: streamlet.conf ({} bytes) and descriptor.json ({} bytes) equal the fixtures",
            conf.len(),
            descriptor.len()
        );

        // The config hash in the pod template, computed here independently.
        let d = get_json(ns, "deployment", &name);
        let mut hashed = format!("{want_descriptor}\n---\n{want_conf}");
        if streamlet == "graph" {
            let rv =
                kubectl_ok(&["-n", ns, "get", "secret", "neo4j-shop", "-o", "jsonpath={.metadata.resourceVersion}"]);
            hashed.push_str(&format!("\n---\nsecret:{rv}"));
        }
        assert_eq!(config_hash(&d), sha256(&hashed), "{name}: config hash");
        let secret = get_json(ns, "secret", &name);
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "AnkkaFlow");
        let want: Vec<&str> = if streamlet == "graph" { vec!["sidecar"] } else { vec!["sidecar", "process"] };
        assert_eq!(containers(&d), want, "{name}");
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], format!("flow-{pipeline}"));
        assert_eq!(pod["containers"][0]["image"], SIDECAR_IMAGE);
        let volumes: Vec<&str> =
            pod["volumes"].as_array().expect("volumes").iter().filter_map(|v| v["name"].as_str()).collect();
        if streamlet == "graph" {
            assert_eq!(volumes, ["config", "api-token", "neo4j"], "{name}");
            let neo4j = &pod["volumes"][2]["secret"];
            assert_eq!((&neo4j["secretName"], &neo4j["defaultMode"]), (&"neo4j-shop".into(), &0o440.into()));
        } else {
            assert_eq!(volumes, ["config", "api-token"], "{name}");
        }
    }
    // The per-pipeline identity of the sidecar, owned by the resource.
    for kind in ["serviceaccount", "role", "rolebinding"] {
        let o = get_json(ns, kind, "flow-cart");
        assert_eq!(o["metadata"]["ownerReferences"][0]["name"], "cart", "{kind}: {o}");
    }
    let role = get_json(ns, "role", "flow-cart");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}])
    );

    // Names that cannot fit: a 40-character pipeline with a 50-character streamlet makes a
    // 91-character app.kubernetes.io/name. Refused before anything is applied.
    let pipeline = "p".repeat(40);
    let streamlet = "s".repeat(50);
    let mut long: serde_json::Value =
        serde_saphyr::from_str(&own_pipeline_yaml(ns, "longnames", &[("router", "shop.cart-events.v1", 1)]))
            .expect("YAML");
    long["metadata"]["name"] = "long".into();
    long["metadata"]["labels"]["flow.ankka.thinkmorestupidless.com/pipeline"] = pipeline.clone().into();
    long["spec"]["pipeline"] = pipeline.clone().into();
    long["spec"]["streamlets"][0]["name"] = streamlet.clone().into();
    kubectl_apply(&long.to_string());
    wait_until("the long-named pipeline to be Failed", Duration::from_secs(30), || {
        (phase(ns, "long") == "Failed").then_some(())
    });
    let refused = event_notes(ns, "Refused");
    assert!(refused.iter().any(|n| n.contains(&format!("{pipeline}-{streamlet}")) && n.contains("63")), "{refused:?}");
    let detail = kubectl_ok(&["-n", ns, "get", "aflow", "long", "-o", "jsonpath={.status.detail}"]);
    assert!(detail.contains("63"), "{detail}");
    assert_eq!(rendered_objects(ns, &pipeline), "", "nothing of the refused pipeline may be applied");
    let applied = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "aflow",
        "long",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Applied\")].status} {.status.conditions[?(@.type==\"Applied\")].reason}",
    ]);
    assert_eq!(applied, "False Refused");
}

/// A pipeline `tops` of two streamlets whose topics meet every case of the topic step: `router`
/// (the example's descriptor) reads an unmanaged topic that exists and writes a managed topic to
/// create (`fresh`) and one that exists with other settings (`differs`); `mapper` (the graph
/// example's) reads an unmanaged topic that is missing and writes a managed graph-delta topic that
/// exists but is not compacted. Without `mapper` when `with_mapper` is false.
fn tops_yaml(ns: &str, router_image: &str, with_mapper: bool) -> String {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("tops-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    std::fs::copy(fixtures().join("graph/descriptors/mapper.json"), dir.join("flow/mapper.json")).expect("descriptor");
    let mapper = if with_mapper {
        r#"
    checkouts { managed = false, topic.name = "tops.checkouts.v1", cluster = shop, consumers = [mapper.in] }
    deltas { producers = [mapper.deltas], partitions = 1, replicas = 1 }"#
    } else {
        ""
    };
    let blueprint = format!(
        r#"blueprint {{
  name = tops
  streamlets {{
    router = cart-router{}
  }}
  topics {{
    input {{ managed = false, topic.name = "tops.input.v1", cluster = shop, consumers = [router.in] }}
    fresh {{ producers = [router.valid], partitions = 2, replicas = 1, topic {{ retention.ms = 3600000 }} }}
    differs {{ producers = [router.review], partitions = 4, replicas = 1, topic {{ retention.ms = 7200000 }} }}{mapper}
  }}
}}
"#,
        if with_mapper { "\n    mapper = mapper" } else { "" }
    );
    std::fs::write(dir.join("blueprint.conf"), blueprint).expect("blueprint");
    let mut args = vec!["generate", "blueprint.conf", "--descriptors", "flow", "--delete-managed-topics", "-n", ns];
    let router = format!("router={router_image}");
    args.extend(["--image", &router]);
    if with_mapper {
        args.extend(["--image", "mapper=registry.example.com/checkout-graph:0.1.0"]);
    }
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?}: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

#[test]
fn topics_streamlets_and_deletion_on_the_real_broker() {
    let _lock = side_by_side(); // isolated: its own namespace and topics
    let ns = "shop-topics";
    // Under the shipped rights (deploy/operator.yaml): removing a streamlet and deleting the resource
    // with its managed topics need nothing more.
    install_operator_rights();
    let kubeconfig = shipped_rights_kubeconfig();
    fresh_namespace(ns);
    for t in ["tops.fresh", "tops.checkouts.v1"] {
        kafka::remove_topic(t);
    }
    kafka::recreate_topic("tops.input.v1", 1);
    kafka::recreate_topic_with("tops.differs", 1, &[("retention.ms", "1000000")]);
    kafka::recreate_topic_with("tops.deltas", 1, &[("cleanup.policy", "delete")]);
    // A short resync, so that a topic created behind the operator's back is seen soon.
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_OPERATOR_RESYNC_SECONDS", "2"),
            ("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path")),
        ],
    );
    kubectl_apply(&tops_yaml(ns, "registry.example.com/cart-router:1.2", true));

    // Topics before Deployments: each case of the topic step, as its event.
    wait_event(ns, "TopicCreated", "created topic 'tops.fresh' with 2 partitions");
    wait_event(
        ns,
        "TopicDiffers",
        "topic 'tops.differs' exists with 1 partitions and replication 1; the resource declares 4 and 1. Left as it is.",
    );
    wait_event(
        ns,
        "TopicSettingsIgnored",
        "topic 'tops.differs' exists; changed settings retention.ms were not applied",
    );
    wait_until("TopicNotCompacted", Duration::from_secs(30), || {
        event_notes(ns, "TopicNotCompacted").iter().any(|n| n.starts_with("topic 'tops.deltas' ")).then_some(())
    });
    wait_event(
        ns,
        "TopicMissing",
        "topic 'tops.checkouts.v1' is not managed by the pipeline and does not exist; its consumers will not become ready",
    );
    // The managed topics that existed before are adopted read-only, and the status says so.
    wait_event(
        ns,
        "TopicAdopted",
        "topic 'tops.differs' is adopted read-only: it existed before this resource declared it. The operator never \
         alters or deletes it, whatever onDelete says.",
    );
    let ownership = |id: &str| {
        let topics = get_json(ns, "aflow", "tops")["status"]["topics"].clone();
        let found = topics.as_array().into_iter().flatten().find(|t| t["id"] == id).cloned();
        found.map(|t| t["ownership"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
    };
    wait_until("the status's owners", Duration::from_secs(30), || {
        (ownership("fresh") == "Created" && ownership("differs") == "Adopted" && ownership("deltas") == "Adopted")
            .then_some(())
    });
    assert_eq!(ownership("input"), "", "an unmanaged topic has no owner here");
    // Created with the resource's partitions, replication and topicConfig, as Kafka's own tool
    // describes it; the existing topics were left as they are.
    let fresh = kafka::describe_with_kafka_tool("tops.fresh");
    assert!(
        fresh.contains("PartitionCount: 2")
            && fresh.contains("ReplicationFactor: 1")
            && fresh.contains("retention.ms=3600000"),
        "{fresh}"
    );
    let differs = kafka::describe_with_kafka_tool("tops.differs");
    assert!(differs.contains("PartitionCount: 1") && differs.contains("retention.ms=1000000"), "{differs}");
    let deltas = kafka::describe_with_kafka_tool("tops.deltas");
    assert!(deltas.contains("cleanup.policy=delete"), "{deltas}");
    assert!(!kafka::topics().contains(&"tops.checkouts.v1".to_string()), "an unmanaged topic is never created");

    // The missing input makes the pipeline Degraded and says why.
    wait_until("phase Degraded", Duration::from_secs(60), || (phase(ns, "tops") == "Degraded").then_some(()));
    let detail = kubectl_ok(&["-n", ns, "get", "aflow", "tops", "-o", "jsonpath={.status.detail}"]);
    assert!(detail.starts_with("topic 'tops.checkouts.v1' does not exist"), "{detail}");
    // Once someone creates it, the pipeline becomes Ready, and `kubectl wait` says so.
    kafka::recreate_topic("tops.checkouts.v1", 1);
    kubectl_ok(&["-n", ns, "wait", "--for=condition=Ready", "aflow/tops", "--timeout=60s"]);

    // A new image rolls that streamlet, and only it.
    let mapper_hash = config_hash(&get_json(ns, "deployment", "flow-tops-mapper"));
    kubectl_apply(&tops_yaml(ns, "registry.example.com/cart-router:1.3", true));
    wait_event(ns, "StreamletRolled", "streamlet 'router' rolls out: its image, descriptor or configuration changed");
    let router = get_json(ns, "deployment", "flow-tops-router");
    assert_eq!(router["spec"]["template"]["spec"]["containers"][1]["image"], "registry.example.com/cart-router:1.3");
    assert_eq!(config_hash(&get_json(ns, "deployment", "flow-tops-mapper")), mapper_hash);
    assert_eq!(event_notes(ns, "StreamletRolled").len(), 1);

    // A streamlet no longer in the resource goes, with its Secret.
    kubectl_apply(&tops_yaml(ns, "registry.example.com/cart-router:1.3", false));
    wait_event(ns, "StreamletRemoved", "streamlet 'mapper' is no longer in the pipeline");
    wait_until("mapper's objects to go", Duration::from_secs(30), || {
        (get_json(ns, "deployment", "flow-tops-mapper").is_null()
            && get_json(ns, "secret", "flow-tops-mapper").is_null())
        .then_some(())
    });
    assert!(!get_json(ns, "secret", "flow-tops-router").is_null());

    // Deleted with `onDelete.managedTopics: Delete`: the managed topic it created goes, nothing
    // else; the managed topics that existed before stay, each with a TopicKept event.
    kubectl_ok(&["-n", ns, "delete", "aflow", "tops", "--timeout=60s"]);
    // Kafka deletes a topic asynchronously: its metadata may name it for a moment after the answer.
    let topics = wait_until("the created topic gone", Duration::from_secs(30), || {
        let topics = kafka::topics();
        (!topics.contains(&"tops.fresh".to_string())).then_some(topics)
    });
    for kept in ["tops.input.v1", "tops.checkouts.v1", "tops.deltas", "tops.differs"] {
        assert!(topics.contains(&kept.to_string()), "{kept} must stay: {topics:?}");
    }
    assert_eq!(
        event_notes(ns, "TopicDeleted"),
        ["deleted topic 'tops.fresh', which the operator created for this resource"]
    );
    let mut kept = event_notes(ns, "TopicKept");
    kept.sort();
    assert_eq!(
        kept,
        ["topic 'tops.differs' is left in Kafka: the operator did not create it for this resource"],
        "tops.deltas left the resource with mapper, so only tops.differs is a managed topic at deletion"
    );
    // The record of what the operator created goes with the resource (right after its finalizer).
    wait_until("the record gone", Duration::from_secs(60), || {
        let records = kubectl_ok(&[
            "-n",
            "ankka-flow",
            "get",
            "configmaps",
            "-l",
            "flow.ankka.thinkmorestupidless.com/owner-namespace=shop-topics",
            "-o",
            "name",
        ]);
        records.trim().is_empty().then_some(())
    });
    let log = op.log_text();
    assert!(!log.to_lowercase().contains("forbidden"), "the shipped rights refused something:\n{log}");
}

/// Cluster Secret `kafka-cluster-<name>` in `ankka-flow`, pointing at the test bed's broker, with
/// `connection-config` text `config`.
fn cluster_secret(name: &str, config: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: kafka-cluster-{name}, namespace: ankka-flow, annotations: {{flow.ankka.thinkmorestupidless.com/allowed-namespaces: shop-roll}}}}\nstringData:\n  bootstrap.servers: {}\n  connection-config: |\n    {config}\n",
        bed().kafka
    )
}

/// Deletes the named cluster Secrets of `ankka-flow` when dropped.
struct ClusterSecrets(&'static [&'static str]);

impl Drop for ClusterSecrets {
    fn drop(&mut self) {
        for name in self.0 {
            let _ = kubectl(&[
                "-n",
                "ankka-flow",
                "delete",
                "secret",
                &format!("kafka-cluster-{name}"),
                "--ignore-not-found",
            ]);
        }
    }
}

#[test]
fn a_cluster_secret_edit_rolls_exactly_the_streamlets_that_use_it() {
    let _lock = side_by_side(); // isolated: its own namespace, topics and cluster Secrets
    let ns = "shop-roll";
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    let _secrets = ClusterSecrets(&["roll-a", "roll-b"]);
    kubectl_apply(&cluster_secret("roll-a", "security.protocol=PLAINTEXT"));
    kubectl_apply(&cluster_secret("roll-b", "security.protocol=PLAINTEXT"));
    kafka::recreate_topic("roll.a.v1", 1);
    kafka::recreate_topic("roll.b.v1", 1);
    // The default resync (300 s): the edit must be noticed by watching the cluster Secrets.
    let _op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    // own_pipeline_yaml reads both topics over cluster `shop`: give each its own cluster.
    let mut doc: serde_json::Value =
        serde_saphyr::from_str(&own_pipeline_yaml(ns, "roll", &[("a", "roll.a.v1", 1), ("b", "roll.b.v1", 1)]))
            .expect("YAML");
    for t in doc["spec"]["topics"].as_array_mut().expect("topics") {
        let which = if t["name"] == "roll.a.v1" { "roll-a" } else { "roll-b" };
        t["cluster"] = which.into();
    }
    kubectl_apply(&doc.to_string());
    kubectl_ok(&["-n", ns, "wait", "--for=condition=Ready", "aflow/roll", "--timeout=60s"]);
    let hash = |s: &str| config_hash(&get_json(ns, "deployment", &format!("flow-roll-{s}")));
    let (a, b) = (hash("a"), hash("b"));

    kubectl_apply(&cluster_secret("roll-a", "security.protocol=PLAINTEXT\n    client.dns.lookup=use_all_dns_ips"));
    wait_event(ns, "StreamletRolled", "streamlet 'a' rolls out: its image, descriptor or configuration changed");
    assert_ne!(hash("a"), a, "a's configuration changed");
    assert_eq!(hash("b"), b, "b does not use the edited cluster");
    assert_eq!(event_notes(ns, "StreamletRolled").len(), 1, "only a rolled");
    let conf = secret_file(ns, "flow-roll-a", "streamlet.conf");
    assert!(conf.contains(r#""client.dns.lookup" = "use_all_dns_ips""#), "{conf}");
}

#[test]
fn a_failed_apply_and_a_missing_sidecar_image_show_on_the_resource() {
    let _lock = side_by_side(); // isolated: its own namespaces and topic
    let ns = "shop-quota";
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    kafka::recreate_topic("quota.input.v1", 1);
    // No Deployment may be created in the namespace: the API server's quota admission refuses it.
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {{name: no-deployments, namespace: {ns}}}\nspec: {{hard: {{count/deployments.apps: \"0\"}}}}\n"
    ));
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    apply_quota_pipeline(ns);
    let condition = wait_until("the Applied condition to be False", Duration::from_secs(60), || {
        let c = kubectl_ok(&[
            "-n",
            ns,
            "get",
            "aflow",
            "quota",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Applied\")]}",
        ]);
        let c: serde_json::Value = serde_json::from_str(&c).ok()?;
        (c["status"] == "False").then_some(c)
    });
    assert_eq!(condition["reason"], "ApplyFailed", "{condition}");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("could not apply Deployment 'flow-quota-router': "), "{message}");
    assert!(message.contains("quota"), "{message}");
    let notes = event_notes(ns, "ApplyFailed");
    assert_eq!(notes, [message], "one Warning event, whose reason is the error's category");
    let kind = kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        "reason=ApplyFailed",
        "-o",
        "jsonpath={.items[0].type}",
    ]);
    assert_eq!(kind, "Warning");
    // What came before the Deployment was applied; the log says it too.
    assert!(!get_json(ns, "secret", "flow-quota-router").is_null());
    assert!(op.log_text().contains("will retry"), "{}", op.log_text());
    drop(op);

    // An operator without a sidecar image refuses every pipeline, and says why.
    let ns = "shop-nosidecar";
    fresh_namespace(ns);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_SIDECAR_IMAGE", "")]);
    apply_quota_pipeline(ns);
    wait_event(ns, "SidecarImageMissing", "no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator");
    wait_until("phase Failed", Duration::from_secs(30), || (phase(ns, "quota") == "Failed").then_some(()));
    assert_eq!(rendered_objects(ns, "quota"), "");
    assert!(
        op.log_text().contains("sidecar image (not configured: every pipeline will be refused)"),
        "{}",
        op.log_text()
    );
}

fn apply_quota_pipeline(ns: &str) {
    kubectl_apply(&own_pipeline_yaml(ns, "quota", &[("router", "quota.input.v1", 1)]));
}
