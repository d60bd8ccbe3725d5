//! Whose topics the operator may delete: only those it created for that very AnkkaFlow
//! (docs/rendering.md, "Who owns a topic"), and only with names an administrator allows the
//! namespace.
//!
//! - `another_teams_topic_declared_managed_survives_the_tenants_deletion`: a tenant declares another
//!   team's existing topic managed with `onDelete: Delete`, forges its own status to claim it, and
//!   deletes its AnkkaFlow: the other team's topic keeps its partitions and records (read back with
//!   Kafka's own tool); the topic the operator created for the tenant goes with it. Under the shipped
//!   rights, and a tenant with `edit` cannot write where the operator records what it created.
//! - `a_recreated_resource_or_topic_inherits_no_ownership`: a resource deleted and created again
//!   under its name does not own its predecessor's topic, and a topic the operator created that
//!   someone else deleted and created again is not the operator's either: both survive the deletion.
//! - `the_prefix_rule_refuses_before_anything_is_applied`: a managed topic outside the prefixes the
//!   cluster Secret allows the namespace is refused, naming the topic and the prefixes; nothing is
//!   created in Kafka or Kubernetes.
//!
//! And the shared-group rule, which reads only what a tenant cannot forge (docs/tenancy.md, rule 4):
//!
//! - `another_spelling_or_a_forged_resumed_status_cannot_reset_another_namespaces_group`: a tenant
//!   whose pipeline has another namespace's pipeline id names the same brokers as `localhost`
//!   rather than `127.0.0.1`: Kafka's cluster id tells them apart from no other cluster, so its
//!   reset is refused. It then forges its status to say that its next request already began (an
//!   intent of the shared group in its progress), which once skipped the rule: refused again, and
//!   the other namespace's offsets never move.
//!
//! And bulkheads (docs/troubleshooting.md, "A reset is taken up late"):
//!
//! - `ten_failing_clusters_do_not_hold_back_a_healthy_reset`: ten pipelines on failing clusters
//!   (nothing listening, a wrong CA, a wrong password) requested first; `flow reset --wait` of a
//!   healthy pipeline is done while failing requests are still retrying (its wall time is printed,
//!   and recorded in docs/performance.md).

use super::*;

/// The cluster Secret of this file's tests.
const CLUSTER: &str = "owners";
const PREFIXES: &str = "flow.ankka.thinkmorestupidless.com/topic-prefixes";
const OWNER_NAMESPACE: &str = "flow.ankka.thinkmorestupidless.com/owner-namespace";

/// Applies cluster Secret `kafka-cluster-owners` (the test bed's plain broker, one partition and
/// one replica by default) allowing `namespaces`, with `annotations` (YAML lines) more; deleted when
/// the guard drops.
fn owners_cluster(namespaces: &str, annotations: &[(&str, &str)]) -> ClusterSecrets {
    let more: String = annotations.iter().map(|(k, v)| format!("    {k}: \"{v}\"\n")).collect();
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kafka-cluster-{CLUSTER}\n  namespace: {CLUSTERS}\n  \
         annotations:\n    {ALLOWED}: \"{namespaces}\"\n{more}stringData:\n  bootstrap.servers: \"{}\"\n  \
         partitions: \"1\"\n  replicas: \"1\"\n",
        env("FLOW_TESTBED_KAFKA")
    ));
    ClusterSecrets(vec![format!("kafka-cluster-{CLUSTER}")])
}

/// A fresh namespace `ns`: the AnkkaFlows a failed earlier run left there lose their finalizer
/// first, so that the namespace can go without an operator.
fn fresh(ns: &str) {
    let names = kubectl(&["-n", ns, "get", "aflow", "-o", "name"]);
    for name in String::from_utf8_lossy(&names.stdout).lines() {
        let _ = kubectl(&["-n", ns, "patch", name, "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    }
    fresh_namespace(ns);
}

/// Pipeline `pipeline` in `ns` from the real `flow generate` (with `--delete-managed-topics` when
/// `delete`): streamlet `router` (the cart example's descriptor, 0 replicas) reading `input` and
/// writing `valid` and `review`, each a managed topic of cluster `owners` with that Kafka name.
fn apply_pipeline(ns: &str, pipeline: &str, [input, valid, review]: [&str; 3], delete: bool) {
    let dir = fresh_dir(&format!("owners-{ns}-{pipeline}"));
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    let topic = |id: &str, name: &str, port: &str| {
        format!("    {id} {{ topic.name = \"{name}\", cluster = {CLUSTER}, {port} }}\n")
    };
    std::fs::write(
        dir.join("blueprint.conf"),
        format!(
            "blueprint {{\n  name = {pipeline}\n  streamlets {{ router = cart-router }}\n  topics {{\n{}{}{}  }}\n}}\n",
            topic("input", input, "consumers = [router.in]"),
            topic("valid", valid, "producers = [router.valid]"),
            topic("review", review, "producers = [router.review]"),
        ),
    )
    .expect("blueprint");
    std::fs::write(dir.join("stop.conf"), "flow.streamlets.router { replicas = 0 }\n").expect("conf");
    let mut args = vec!["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "stop.conf"];
    if delete {
        args.push("--delete-managed-topics");
    }
    args.extend(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns]);
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", show(&o));
    kubectl_apply(&String::from_utf8(o.stdout).expect("UTF-8"));
}

/// `status.topics[].ownership` of topic id `id` of AnkkaFlow `name` ("" when absent).
fn ownership(ns: &str, name: &str, id: &str) -> String {
    let topics = get_json(ns, "aflow", name)["status"]["topics"].clone();
    let found = topics.as_array().into_iter().flatten().find(|t| t["id"] == id).cloned();
    found.map(|t| t["ownership"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
}

/// Waits for an event `reason` about AnkkaFlow `name` whose note is `note`.
fn wait_note(ns: &str, name: &str, reason: &str, note: &str) {
    wait_until(&format!("{reason}: {note}"), Duration::from_secs(60), || {
        notes(ns, name, reason).iter().any(|n| n == note).then_some(())
    });
}

/// Deletes AnkkaFlow `name` and waits until it is gone (its finalizer removed by the operator).
fn delete_flow(ns: &str, name: &str) {
    kubectl_ok(&["-n", ns, "delete", "aflow", name, "--timeout=60s"]);
}

/// Whether Kafka has topic `topic` now (a deleted topic may stay listed for a moment).
fn exists(topic: &str) -> bool {
    kafka::topics().contains(&topic.to_string())
}

/// Waits until topic `topic` is gone from Kafka.
fn wait_gone(topic: &str) {
    wait_until(&format!("topic {topic} to go"), Duration::from_secs(30), || (!exists(topic)).then_some(()));
}

/// The names of the records the operator keeps of the topics it created for resources of `ns`.
fn records(ns: &str) -> Vec<String> {
    let out =
        kubectl_ok(&["-n", CLUSTERS, "get", "configmaps", "-l", &format!("{OWNER_NAMESPACE}={ns}"), "-o", "name"]);
    out.lines().map(str::to_string).collect()
}

#[test]
fn another_teams_topic_declared_managed_survives_the_tenants_deletion() {
    // One at a time with the other owners tests, which rewrite Secret `kafka-cluster-owners` for
    // their own namespaces (the prefix rule's test runs alone).
    let _lock = side_by_side_one_at_a_time("owners");
    let ns = "hostile-owners";
    let theirs = "team-b.orders";
    let (mine, review) = ("hostile-owners.valid", "hostile-owners.review");
    install_operator_rights();
    fresh(ns);
    let _secret = owners_cluster(ns, &[]);
    for t in [mine, review] {
        kafka::remove_topic(t);
    }
    // Team B's topic: 4 partitions, 5 records in each.
    kafka::recreate_topic(theirs, 4);
    kafka::produce(theirs, 4, 5);
    let before = kafka::watermarks(theirs);
    assert_eq!(before.values().map(|(_, high)| high).sum::<i64>(), 20);

    // A tenant with `edit` in its namespace cannot write where the operator records what it created.
    kubectl_apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: tenant-edit, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: hostile-tenant}}]\n"
    ));
    let can = |verb: &str, in_ns: &str| {
        let o = kubectl(&["auth", "can-i", verb, "configmaps", "-n", in_ns, "--as", "hostile-tenant"]);
        String::from_utf8_lossy(&o.stdout).trim() == "yes"
    };
    assert!(can("patch", ns), "the tenant's `edit` is not what this test means");
    for verb in ["create", "patch", "update", "delete"] {
        assert!(!can(verb, CLUSTERS), "a tenant may {verb} the operator's records");
    }

    let kubeconfig = shipped_rights_kubeconfig();
    let op = Operator::start(
        &fresh_dir(ns),
        &[
            ("FLOW_WATCH_NAMESPACE", ns),
            ("FLOW_OPERATOR_RESYNC_SECONDS", "2"),
            ("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path")),
        ],
    );
    // The tenant declares team B's topic managed, as its inlet's, with onDelete: Delete.
    apply_pipeline(ns, "grab", [theirs, mine, review], true);

    // It is adopted read-only, reported as such, and its differences as ever.
    wait_note(
        ns,
        "grab",
        "TopicAdopted",
        "topic 'team-b.orders' is adopted read-only: it existed before this resource declared it. The operator never \
         alters or deletes it, whatever onDelete says.",
    );
    wait_note(
        ns,
        "grab",
        "TopicDiffers",
        "topic 'team-b.orders' exists with 4 partitions and replication 1; the resource declares 1 and 1. Left as it is.",
    );
    wait_note(ns, "grab", "TopicCreated", "created topic 'hostile-owners.valid' with 1 partitions");
    wait_until("the status's owners", Duration::from_secs(30), || {
        (ownership(ns, "grab", "input") == "Adopted" && ownership(ns, "grab", "valid") == "Created").then_some(())
    });
    let detail = get_json(ns, "aflow", "grab")["status"]["topics"][0]["detail"].clone();
    assert_eq!(detail, "adopted read-only: it existed before this resource declared it");
    // One record, in the operator's namespace: the topic it created, by the id Kafka's own tool
    // shows (what an administrator copies to record a topic by hand).
    let record = records(ns);
    assert_eq!(record.len(), 1, "{record:?}");
    let data = get_json(CLUSTERS, "configmap", record[0].trim_start_matches("configmap/"))["data"].clone();
    assert_eq!(data.as_object().map(|d| d.len()), Some(2), "{data}");
    let id = data[mine].as_str().unwrap_or_default().to_string();
    let tool = kafka::describe_with_kafka_tool(mine);
    assert!(tool.contains(&format!("TopicId: {id}\t")), "{tool} vs {data}");

    // The tenant forges its status to claim the topic (a status is nobody's proof).
    let forged = serde_json::json!({"status": {"topics": [{"id": "input", "exists": true, "ownership": "Created"}]}});
    kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "aflow",
        "grab",
        "--subresource=status",
        "--type=merge",
        "-p",
        &forged.to_string(),
    ]);

    // Deleted: the topic the operator created for it goes, team B's stays, whole.
    delete_flow(ns, "grab");
    wait_gone(mine);
    wait_gone(review);
    assert!(exists(theirs), "team B's topic was deleted");
    let tool = kafka::describe_with_kafka_tool(theirs);
    assert!(tool.contains("PartitionCount: 4"), "{tool}");
    assert_eq!(kafka::watermarks(theirs), before, "team B's records changed");
    assert_eq!(
        notes(ns, "grab", "TopicKept"),
        ["topic 'team-b.orders' is left in Kafka: the operator did not create it for this resource"]
    );
    assert_eq!(
        notes(ns, "grab", "TopicDeleted"),
        [
            "deleted topic 'hostile-owners.review', which the operator created for this resource",
            "deleted topic 'hostile-owners.valid', which the operator created for this resource",
        ]
    );
    // The record goes right after the resource (the finalizer first, docs/rendering.md).
    wait_until("the record to go with the resource", Duration::from_secs(60), || records(ns).is_empty().then_some(()));
    let log = op.log_text();
    assert!(!log.to_lowercase().contains("forbidden"), "the shipped rights refused something:\n{log}");
    op.stop();
}

#[test]
fn a_recreated_resource_or_topic_inherits_no_ownership() {
    // Serial: beside other tests its deleted resources' records were left over (twice in two runs of
    // the suite four at a time; the cause is not found yet), and Secret `kafka-cluster-owners`.
    let _serial = serial();
    let ns = "hostile-owners-again";
    let (input, valid, review) =
        ("hostile-owners-again.in", "hostile-owners-again.valid", "hostile-owners-again.review");
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh(ns);
    let _secret = owners_cluster(ns, &[]);
    for t in [input, valid, review] {
        kafka::remove_topic(t);
    }
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_OPERATOR_RESYNC_SECONDS", "2")]);

    // The first resource, onDelete: Keep, gets its three topics created.
    apply_pipeline(ns, "again", [input, valid, review], false);
    wait_until("the created topics", Duration::from_secs(60), || {
        ["input", "valid", "review"].iter().all(|id| ownership(ns, "again", id) == "Created").then_some(())
    });
    let first = get_json(ns, "aflow", "again")["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    kafka::produce(input, 1, 7);
    // Deleted (Keep: its topics stay) and created again under its name, now with onDelete: Delete.
    delete_flow(ns, "again");
    apply_pipeline(ns, "again", [input, valid, review], true);
    let second = get_json(ns, "aflow", "again")["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    assert_ne!(first, second);
    // Its predecessor's topics are not its own: adopted read-only.
    wait_until("the topics adopted", Duration::from_secs(60), || {
        ["input", "valid", "review"].iter().all(|id| ownership(ns, "again", id) == "Adopted").then_some(())
    });

    // A third resource creates topic `replaced`, which someone then deletes and creates again: the
    // operator created a topic of that name, not this one.
    let replaced = "hostile-owners-again.replaced";
    kafka::remove_topic(replaced);
    apply_pipeline(ns, "third", [input, valid, replaced], true);
    wait_until("the third's topic created", Duration::from_secs(60), || {
        (ownership(ns, "third", "review") == "Created").then_some(())
    });
    kafka::recreate_topic(replaced, 2);
    kafka::produce(replaced, 2, 3);
    wait_until("the replaced topic adopted", Duration::from_secs(60), || {
        (ownership(ns, "third", "review") == "Adopted").then_some(())
    });
    let adopted = notes(ns, "third", "TopicAdopted");
    assert!(
        adopted.iter().any(|n| n.starts_with(
            "topic 'hostile-owners-again.replaced' is adopted read-only: it was deleted and created again outside the \
             operator (it has topic id "
        )),
        "{adopted:?}"
    );

    // Both deleted with onDelete: Delete: nothing they did not create goes.
    delete_flow(ns, "again");
    delete_flow(ns, "third");
    for kept in [input, valid, review, replaced] {
        assert!(exists(kept), "{kept} was deleted");
    }
    assert_eq!(kafka::watermarks(input).values().map(|(_, high)| high).sum::<i64>(), 7);
    assert_eq!(kafka::watermarks(replaced).values().map(|(_, high)| high).sum::<i64>(), 6);
    // The first resource's record stays until the sweep (hourly) finds its resource gone; the
    // others went with their resources (their deletion may take a while on a busy machine).
    let first_record = format!("configmap/flow-topics-{first}");
    let mut left = vec![];
    let gone = (0..120).any(|_| {
        left = records(ns);
        let gone = left == [first_record.clone()];
        if !gone {
            std::thread::sleep(Duration::from_millis(500));
        }
        gone
    });
    assert!(gone, "the records of the deleted resources are left after 60 s: {left:?} (first: {first_record})");
    op.stop();
    for t in [input, valid, review, replaced] {
        kafka::remove_topic(t);
    }
}

#[test]
fn the_prefix_rule_refuses_before_anything_is_applied() {
    // Serial: it compares every topic of the broker before and after; Secret `kafka-cluster-owners`.
    let _serial = serial();
    let ns = "hostile-owners-prefix";
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh(ns);
    let _secret = owners_cluster(ns, &[(PREFIXES, "{namespace}.")]);
    let squatted = "team-b.payments";
    kafka::remove_topic(squatted);
    let before = kafka::topics();
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_OPERATOR_RESYNC_SECONDS", "2")]);

    // The tenant declares a name of another team's, which does not exist yet.
    apply_pipeline(ns, "squat", [squatted, "hostile-owners-prefix.valid", "hostile-owners-prefix.review"], true);
    let why = "managed topic 'input' is Kafka topic 'team-b.payments', which namespace 'hostile-owners-prefix' may not \
               create on Kafka cluster 'owners': Secret 'kafka-cluster-owners' allows it names starting with \
               'hostile-owners-prefix.'";
    wait_until("the refusal", Duration::from_secs(60), || {
        (phase(ns, "squat") == ("Failed".into(), why.into())).then_some(())
    });
    assert_eq!(notes(ns, "squat", "Refused"), [why]);
    // Nothing applied: no topic (not even the allowed ones), no record, no streamlet object.
    assert_eq!(kafka::topics(), before, "a topic was created");
    assert!(records(ns).is_empty());
    assert!(kubectl(&["-n", ns, "get", "secret", "flow-squat-router"]).status.code() != Some(0), "rendered");

    // Within its prefix, the same pipeline is applied.
    apply_pipeline(
        ns,
        "squat",
        ["hostile-owners-prefix.in", "hostile-owners-prefix.valid", "hostile-owners-prefix.review"],
        true,
    );
    wait_until("the topics created", Duration::from_secs(60), || {
        ["input", "valid", "review"].iter().all(|id| ownership(ns, "squat", id) == "Created").then_some(())
    });
    delete_flow(ns, "squat");
    for t in ["hostile-owners-prefix.in", "hostile-owners-prefix.valid", "hostile-owners-prefix.review"] {
        wait_gone(t);
    }
    assert!(!exists(squatted));
    op.stop();
}

#[test]
fn another_spelling_or_a_forged_resumed_status_cannot_reset_another_namespaces_group() {
    let _lock = side_by_side(); // isolated: its own namespaces, topic, group, cluster Secret and Lease
    let (victim, tenant) = ("hostile-spelling-victim", "hostile-spelling");
    let topic = "hostile-spelling.events";
    let group = "spell.router.in";
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh(victim);
    fresh(tenant);
    let plain = env("FLOW_TESTBED_KAFKA");
    let port = plain.rsplit(':').next().expect("a port").to_string();
    assert!(plain.starts_with("127.0.0.1:"), "the test bed's broker is not where this test expects: {plain}");
    // The victim's cluster: the test bed's broker as 127.0.0.1, for the victim's namespace alone.
    let _secret = cluster_secret("spelling", &plain, "security.protocol=PLAINTEXT", victim);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 10);
    standin::read(group, topic, 30);
    let before = kafka::committed(group, topic, 3);
    assert_eq!(before, (0..3).map(|p| (p, Some(10))).collect(), "the victim's group read everything");

    let watched = format!("{victim},{tenant}");
    let identity = format!("flow-operator-hostile-spelling-{}", std::process::id());
    let env_of = [
        ("FLOW_WATCH_NAMESPACE", watched.as_str()),
        ("FLOW_LEASE_NAME", "ankka-flow-operator-hostile-spelling"),
        ("HOSTNAME", identity.as_str()),
        ("FLOW_OPERATOR_RESYNC_SECONDS", "2"),
    ];
    let op = Operator::start(&fresh_dir(tenant), &env_of);
    // Both pipelines are `spell`, so both map inlet router.in to consumer group spell.router.in.
    apply_router(victim, "spell", topic, "      cluster = spelling");
    apply_router(tenant, "spell", topic, &format!("      bootstrap.servers = \"localhost:{port}\""));
    let refused = |id: &str| {
        format!(
            "reset {id} refused: consumer group {group} is also the consumer group of AnkkaFlow {victim}/spell on the \
             same Kafka cluster, and a reset would move its offsets too; give one of the pipelines another name, or \
             have an administrator annotate Secret 'kafka-cluster-spelling' with \
             flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\""
        )
    };

    // Another spelling of the same brokers: the same cluster id, so the same cluster.
    let o = flow(&["reset", "spell", "-n", tenant, "--wait", "--timeout", "60s"]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    // Without -o json, the request line and the final status both go to stdout.
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("reset requested for 'spell': "))
        .unwrap_or_else(|| panic!("no request line: {}", show(&o)))
        .to_string();
    let status = reset_status(tenant, "spell");
    assert_eq!((status["phase"].as_str(), status["detail"].as_str()), (Some("Refused"), Some(refused(&id).as_str())));
    // The status shows when the request was written beside when it was taken up, and so does the CLI.
    assert!(status["writtenAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{status}");
    assert!(stdout.lines().any(|l| l.starts_with("written: ") && l.ends_with(" s later)")), "{stdout}");
    assert_eq!(kafka::committed(group, topic, 3), before, "the victim's group moved");
    op.stop();

    // With no operator running, the tenant writes a request and forges a status that says the
    // operator began it already: an intent to move the victim's group to 0, as a status written by
    // a reset under way holds it.
    let forged_id = "6f1d2c3b-0000-4000-8000-00000000f04d";
    write_request(tenant, "spell", forged_id, &["router"]);
    let uid = get_json(tenant, "aflow", "spell")["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let forged = serde_json::json!({"status": {"reset": {
        "id": forged_id,
        "uid": uid,
        "phase": "Resetting",
        "requestedAt": "2026-12-06T00:00:00Z",
        "groups": [{
            "group": group,
            "topic": topic,
            "outcome": "Committing",
            "partitions": 3,
            "recordsToReprocess": 30,
            "offsetsBefore": {"0": 10, "1": 10, "2": 10},
            "offsetsAfter": {"0": 0, "1": 0, "2": 0},
        }],
    }}});
    kubectl_ok(&[
        "-n",
        tenant,
        "patch",
        "aflow",
        "spell",
        "--subresource=status",
        "--type=merge",
        "-p",
        &forged.to_string(),
    ]);
    let op = Operator::start(&fresh_dir(tenant), &env_of);
    wait_until("the forged request refused", Duration::from_secs(60), || {
        (reset_status(tenant, "spell")["phase"] == "Refused").then_some(())
    });
    assert_eq!(reset_status(tenant, "spell")["detail"].as_str(), Some(refused(forged_id).as_str()));
    assert_eq!(kafka::committed(group, topic, 3), before, "the victim's group moved");
    assert_eq!(notes(tenant, "spell", "ResetOffsets"), Vec::<String>::new());
    op.stop();
    kafka::remove_topic(topic);
}

/// A Java properties line `key=value`, the value's newlines and backslashes escaped.
fn property(key: &str, value: &str) -> String {
    format!("{key}={}", value.replace('\\', "\\\\").replace('\n', "\\n"))
}

#[test]
fn ten_failing_clusters_do_not_hold_back_a_healthy_reset() {
    let _lock = side_by_side(); // isolated: its own namespace, topic, groups and cluster Secrets
    let ns = "hostile-bulkheads";
    let topic = "hostile-bulkheads.events";
    install_crd();
    ensure_namespace(CLUSTERS);
    fresh(ns);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 10);
    standin::read("healthy.router.in", topic, 30);

    // Ten clusters that fail as a tenant's broken cluster would: nothing listening, a CA that did
    // not sign the broker's certificate, a wrong password.
    let other_ca = pki("other-ca.crt");
    let ca = pki("ca.crt");
    let mut secrets = vec![cluster_secret("bulk-ok", &env("FLOW_TESTBED_KAFKA"), "security.protocol=PLAINTEXT", ns)];
    let mut failing = Vec::new();
    for i in 0..10 {
        let (brokers, config) = match i % 3 {
            0 => (format!("127.0.0.1:{}", 2 + i), "security.protocol=PLAINTEXT".to_string()),
            1 => (
                env("FLOW_TESTBED_KAFKA_SSL"),
                [
                    property("security.protocol", "SSL"),
                    property("ssl.truststore.type", "PEM"),
                    property("ssl.truststore.certificates", &other_ca),
                ]
                .join("\n"),
            ),
            _ => (
                env("FLOW_TESTBED_KAFKA_SCRAM"),
                [
                    property("security.protocol", "SASL_SSL"),
                    property("sasl.mechanism", "SCRAM-SHA-512"),
                    property(
                        "sasl.jaas.config",
                        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="bulk" password="wrong";"#,
                    ),
                    property("ssl.truststore.type", "PEM"),
                    property("ssl.truststore.certificates", &ca),
                ]
                .join("\n"),
            ),
        };
        let cluster = format!("bulk-fail-{i}");
        secrets.push(cluster_secret(&cluster, &brokers, &config, ns));
        failing.push(format!("fail{i}"));
        apply_router(ns, &format!("fail{i}"), topic, &format!("      cluster = {cluster}"));
    }
    apply_router(ns, "healthy", topic, "      cluster = bulk-ok");
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    wait_until("the healthy pipeline applied", Duration::from_secs(60), || {
        (phase(ns, "healthy").0 == "Ready").then_some(())
    });

    // The ten requests first, then the healthy one: as `flow reset --wait --timeout` would be used.
    for (i, name) in failing.iter().enumerate() {
        write_request(ns, name, &format!("00000000-0000-4000-8000-0000000000{i:02}"), &["router"]);
    }
    let started = std::time::Instant::now();
    let o = flow(&["reset", "healthy", "-n", ns, "--wait", "--timeout", "60s"]);
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let status = reset_status(ns, "healthy");
    assert_eq!(status["phase"], "Done", "{status}");
    // Measured, not asserted (docs/performance.md): the request's wall time beside its settle.
    eprintln!("bulkheads: the healthy reset was done {took:?} after it was requested, beside 10 failing clusters");
    // The failing ones are still at it, or failed on their own: none of them was waited for.
    let unfinished = failing.iter().filter(|n| reset_status(ns, n)["finishedAt"].is_null()).count();
    eprintln!("bulkheads: {unfinished} of 10 failing requests still unfinished when the healthy one was done");
    assert!(unfinished > 0, "every failing request finished first: the healthy one was not ahead of them");
    assert_eq!(kafka::committed("healthy.router.in", topic, 3), (0..3).map(|p| (p, Some(0))).collect());
    op.stop();
    drop(secrets);
    kafka::remove_topic(topic);
}
