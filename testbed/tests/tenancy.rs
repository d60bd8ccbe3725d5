//! Cluster credentials belong to the namespaces allowed to use them (docs/tenancy.md): each way a
//! tenant may try to misuse a cluster Secret, on the test bed.
//!
//! - `refusals`: one operator watching the tenant's namespace, and a listener of the test's own
//!   standing in for a broker the tenant controls (it counts connections and keeps what it
//!   receives). A pipeline naming a cluster whose Secret does not list the namespace, one naming a
//!   Secret that lists none, one overriding the cluster's brokers and security to send its
//!   credentials to that listener in clear text, one loading a shared library, and one whose Secret
//!   names a trust store file: each is refused (a `Refused` event per problem, phase Failed), gets
//!   no Deployment, carries out no reset, and never connects anywhere. Then the administrator
//!   allows the namespace, and the same pipeline runs and connects at once, which shows the
//!   listener would have seen a connection had the rule not held.
//! - `shared_consumer_groups`: the reproduction. `cart` in `shop` runs its router (replicas
//!   1, a running pod), `cart` in `tenant` maps to the same consumer group `cart.router.in` on the
//!   same cluster, whose Secret both namespaces may use, and one operator watches both: both get a
//!   `ConsumerGroupShared` warning, the tenant's reset is refused naming shop's pipeline and moves
//!   nothing (`flow reset --wait` exits with 3), until an administrator allows shared groups on the
//!   cluster's Secret.
//! - `a_watch_namespace_naming_no_namespace_refuses_to_start`: a `FLOW_WATCH_NAMESPACE` that names no
//!   namespace (`,,`, spaces) or one that is not a namespace name never widens the operator to every
//!   namespace: it exits with a usage error naming the value, before it takes a Lease.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_testbed::cart::DONE;
use flow_testbed::*;

/// A TCP listener on loopback that plays a broker the tenant controls: it answers nothing, counts
/// the connections it accepts, and keeps every byte it receives.
struct TenantBroker {
    addr: String,
    connections: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<u8>>>,
}

impl TenantBroker {
    fn start() -> TenantBroker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("its address").to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (count, keep) = (connections.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                count.fetch_add(1, Ordering::SeqCst);
                let keep = keep.clone();
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        keep.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        TenantBroker { addr, connections, received }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// Deletes the named cluster Secrets of `ankka-flow` when dropped.
struct Secrets(Vec<String>);

impl Drop for Secrets {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(&["-n", "ankka-flow", "delete", "secret", name, "--ignore-not-found"]);
        }
    }
}

/// Applies cluster Secret `kafka-cluster-<cluster>` with brokers `brokers`, `connection-config`
/// `config` and, when given, the allowed-namespaces annotation.
fn cluster_secret(cluster: &str, brokers: &str, config: &str, allowed: Option<&str>) {
    let annotations = allowed
        .map(|a| format!("  annotations:\n    flow.ankka.thinkmorestupidless.com/allowed-namespaces: \"{a}\"\n"))
        .unwrap_or_default();
    let config: String = config.lines().map(|l| format!("    {l}\n")).collect();
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: kafka-cluster-{cluster}\n  namespace: ankka-flow\n{annotations}\
         stringData:\n  bootstrap.servers: \"{brokers}\"\n  connection-config: |\n{config}"
    ));
}

/// Pipeline `pipeline` in `ns`, from the real `flow generate`: streamlet `router` (the cart
/// example's descriptor, 0 replicas) reading unmanaged topic `tenancy.<pipeline>`, whose other
/// blueprint settings are `topic` (HOCON lines of the topic object).
fn apply_pipeline(ns: &str, pipeline: &str, topic: &str) {
    apply_router(ns, pipeline, &format!("tenancy.{pipeline}"), topic, 0);
}

/// As [`apply_pipeline`], reading Kafka topic `kafka_topic`, with `replicas` router replicas.
fn apply_router(ns: &str, pipeline: &str, kafka_topic: &str, topic: &str, replicas: i32) {
    let dir = fresh_dir(&format!("tenancy-{ns}-{pipeline}"));
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    std::fs::write(
        dir.join("blueprint.conf"),
        format!(
            "blueprint {{\n  name = {pipeline}\n  streamlets {{ router = cart-router }}\n  topics {{\n    events {{\n      \
             managed = false\n      topic.name = \"{kafka_topic}\"\n      consumers = [router.in]\n{topic}\n    }}\n  \
             }}\n}}\n"
        ),
    )
    .expect("blueprint");
    std::fs::write(dir.join("replicas.conf"), format!("flow.streamlets.router {{ replicas = {replicas} }}\n"))
        .expect("conf");
    let o = Command::new(bin("flow"))
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "replicas.conf"])
        .args(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns])
        .current_dir(&dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", show(&o));
    kubectl_apply(&String::from_utf8(o.stdout).expect("UTF-8"));
}

/// `flow reset <pipeline> -n <ns>`; the request id it printed.
fn reset(ns: &str, pipeline: &str) -> String {
    let o = flow(&["reset", pipeline, "-n", ns]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "flow reset: {}", show(&o));
    out.trim_end().rsplit(' ').next().unwrap_or_default().to_string()
}

/// Notes of the events with `reason` about AnkkaFlow `name` in `ns`, sorted.
fn notes(ns: &str, name: &str, reason: &str) -> Vec<String> {
    let out = kubectl_ok(&["-n", ns, "get", "events.events.k8s.io", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("events JSON");
    let mut got: Vec<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == reason && e["regarding"]["kind"] == "AnkkaFlow" && e["regarding"]["name"] == name)
        .map(|e| e["note"].as_str().unwrap_or_default().to_string())
        .collect();
    got.sort();
    got
}

/// `status.phase` and `status.detail` of AnkkaFlow `name`.
fn phase(ns: &str, name: &str) -> (String, String) {
    let v: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "json"])).expect("JSON");
    let text = |x: &serde_json::Value| x.as_str().unwrap_or_default().to_string();
    (text(&v["status"]["phase"]), text(&v["status"]["detail"]))
}

fn deployments(ns: &str) -> Vec<String> {
    kubectl_ok(&["-n", ns, "get", "deployments", "-o", "name"]).lines().map(str::to_string).collect()
}

const ALLOWED: &str = "flow.ankka.thinkmorestupidless.com/allowed-namespaces";
const SHOP_PASSWORD: &str = "shop-secret";

/// The test bed's SASL listener, and the `connection-config` of user `shop` there, as a JVM
/// client's settings.
fn shop_over_sasl() -> (String, String) {
    let sasl = std::env::var("FLOW_TESTBED_KAFKA_SASL").expect("FLOW_TESTBED_KAFKA_SASL: eval \"$(testbed/tb env)\"");
    let config = format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.\
         PlainLoginModule required username=\"shop\" password=\"{SHOP_PASSWORD}\";"
    );
    (sasl, config)
}

#[test]
fn refusals() {
    let _lock = side_by_side(); // isolated: its own namespace, cluster Secrets and broker
    let ns = "tenancy-tenant";
    let broker = TenantBroker::start();
    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets =
        Secrets(["closed", "unlisted", "sasl", "files"].iter().map(|c| format!("kafka-cluster-tenancy-{c}")).collect());
    let plaintext = "security.protocol=PLAINTEXT";
    // (a) Secrets that do not let the tenant in; their brokers are the listener, so any client
    // built for them would show there.
    cluster_secret("tenancy-closed", &broker.addr, plaintext, Some("tenancy-shop"));
    cluster_secret("tenancy-unlisted", &broker.addr, plaintext, None);
    // (b) The shop's SASL cluster, which the tenant may use (the test bed's SASL listener).
    let (sasl, shop_config) = shop_over_sasl();
    cluster_secret("tenancy-sasl", &sasl, &shop_config, Some(ns));
    // (c) A Secret naming a trust store file.
    cluster_secret(
        "tenancy-files",
        &broker.addr,
        "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\nssl.truststore.password=changeit",
        Some(ns),
    );
    fresh_namespace(ns);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns), ("FLOW_LAG_INTERVAL_SECONDS", "1")]);

    apply_pipeline(ns, "not-allowed", "      cluster = tenancy-closed");
    apply_pipeline(ns, "unlisted", "      cluster = tenancy-unlisted");
    // The attack: the cluster's password sent in clear text to a broker of the tenant's.
    apply_pipeline(
        ns,
        "override",
        &format!(
            "      cluster = tenancy-sasl\n      bootstrap.servers = \"{}\"\n      connection-config {{ security.protocol = \
             SASL_PLAINTEXT }}",
            broker.addr
        ),
    );
    apply_pipeline(
        ns,
        "plugin",
        &format!(
            "      bootstrap.servers = \"{}\"\n      connection-config {{ plugin.library.paths = \"/tmp/tenancy-evil.so\" }}\n      \
             consumer-config {{ ssl.keystore.location = \"/var/run/secrets/kubernetes.io/serviceaccount/token\" }}",
            broker.addr
        ),
    );
    apply_pipeline(ns, "secret-file", "      cluster = tenancy-files");
    // Reset requests for all but the first, which the administrator allows later on (its reset
    // would then run against the listener, which answers nothing).
    let ids: BTreeMap<&str, String> =
        ["unlisted", "override", "plugin", "secret-file"].iter().map(|p| (*p, reset(ns, p))).collect();

    let want: [(&str, &[&str]); 5] = [
        (
            "not-allowed",
            &[
                "topic 'events' uses Kafka cluster 'tenancy-closed', which namespace 'tenancy-tenant' may not use: Secret \
               'kafka-cluster-tenancy-closed' does not list it in its annotation \
               'flow.ankka.thinkmorestupidless.com/allowed-namespaces'",
            ],
        ),
        (
            "unlisted",
            &["topic 'events' uses Kafka cluster 'tenancy-unlisted', which no namespace may use yet: Secret \
               'kafka-cluster-tenancy-unlisted' has no annotation 'flow.ankka.thinkmorestupidless.com/allowed-namespaces' \
               listing the namespaces allowed"],
        ),
        (
            "override",
            &[
                "topic 'events' uses Kafka cluster 'tenancy-sasl', whose Secret alone sets the brokers and the security \
               settings: remove bootstrapServers and connectionConfig 'security.protocol' from the topic",
            ],
        ),
        (
            "plugin",
            &[
                "topic 'events': connectionConfig 'plugin.library.paths' is refused: it loads shared libraries into the \
                 client's process",
                "topic 'events': consumerConfig 'ssl.keystore.location' is refused: it names a file, which the operator \
                 and the sidecar never read for a connection; put the certificate and key inline instead: \
                 ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key (and ssl.key.password for \
                 an encrypted key)",
            ],
        ),
        (
            "secret-file",
            &[
                "Secret 'kafka-cluster-tenancy-files': connection-config 'ssl.truststore.location' is refused: it names a \
               file, which the operator and the sidecar never read for a connection; put the certificates inline instead: \
               ssl.truststore.type=PEM with ssl.truststore.certificates",
            ],
        ),
    ];
    for (p, problems) in want {
        let mut sorted: Vec<String> = problems.iter().map(|s| s.to_string()).collect();
        sorted.sort();
        wait_until(&format!("the Refused events of {p}"), Duration::from_secs(30), || {
            (notes(ns, p, "Refused") == sorted).then_some(())
        });
        assert_eq!(phase(ns, p), ("Failed".to_string(), problems.join("; ")), "{p}");
    }
    // Several lag intervals and reset rechecks later: nothing applied, no reset carried out, and
    // nothing ever connected to the tenant's broker.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(deployments(ns), Vec::<String>::new(), "nothing is applied for a refused pipeline");
    for (p, id) in &ids {
        assert_eq!(annotation(ns, p, DONE), None, "{p}: request {id} must not be carried out");
        assert_eq!(notes(ns, p, "ResetOffsets"), Vec::<String>::new());
        assert_eq!(notes(ns, p, "ResetOffsetsFailed"), Vec::<String>::new());
    }
    assert_eq!(broker.connections(), 0, "a client connected to the tenant's broker: {:?}", broker.received());
    let log = op.log_text();
    assert!(!log.contains(SHOP_PASSWORD), "the operator's log shows the cluster's password");
    assert!(!log.contains("tenancy-evil.so"), "the operator's log shows the refused library's path");

    // The administrator lets the tenant use the first cluster: the same pipeline runs, and its
    // connection reaches the listener within a lag interval or two.
    kubectl_ok(&[
        "-n",
        "ankka-flow",
        "annotate",
        "--overwrite",
        "secret",
        "kafka-cluster-tenancy-closed",
        &format!("{ALLOWED}=tenancy-shop,{ns}"),
    ]);
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", "not-allowed", "tenancy-test/poke=1"]);
    wait_until("a connection to the tenant's broker once allowed", Duration::from_secs(30), || {
        (broker.connections() > 0).then_some(())
    });
    wait_until("the allowed pipeline's Deployment", Duration::from_secs(30), || {
        deployments(ns).contains(&"deployment.apps/flow-not-allowed-router".to_string()).then_some(())
    });
    assert!(!broker.received().contains(SHOP_PASSWORD));
    op.stop();
}

#[test]
fn shared_consumer_groups() {
    let _side_by_side = side_by_side();
    let (shop, tenant) = ("tenancy-shared-shop", "tenancy-shared-tenant");
    // The cart example's names of this test's own: pipeline, topic and consumer group.
    let cart = Cart::own("shared");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    install_crd();
    ensure_namespace("ankka-flow");
    // One cluster both namespaces may use: shop's SASL cluster (the test bed's SASL listener, user
    // shop), which its administrator shares with the tenant's namespace but does not let share
    // consumer groups. (The example pipelines other tests leave in their namespaces use the test
    // bed's plain listener, which this check does not take for the same cluster.)
    let _secrets = Secrets(vec!["kafka-cluster-tenancy-shared".into()]);
    let (sasl, shop_config) = shop_over_sasl();
    cluster_secret("tenancy-shared", &sasl, &shop_config, Some(&format!("{shop} {tenant}")));
    fresh_namespace(shop);
    fresh_namespace(tenant);
    kafka::recreate_topic(topic, 3);
    kafka::produce(topic, 3, 20);
    standin::read(group, topic, 60);
    let before = kafka::committed(group, topic, 3);
    assert_eq!(before, (0..3).map(|p| (p, Some(20))).collect(), "the group read everything");
    // One operator watching both namespaces (with rights there only, the check covers the watched
    // namespaces; docs/tenancy.md). Its Lease and identity are named here: a list is no name.
    let watched = format!("{shop},{tenant}");
    let identity = format!("flow-operator-tenancy-{}", std::process::id());
    let op = Operator::start(
        &fresh_dir(shop),
        &[
            ("FLOW_WATCH_NAMESPACE", &watched),
            ("FLOW_LEASE_NAME", "ankka-flow-operator-tenancy"),
            ("HOSTNAME", &identity),
        ],
    );
    // shop's cart runs its router: replicas 1, one running pod.
    apply_router(shop, name, topic, "      cluster = tenancy-shared", 1);
    wait_until("shop's router pod", Duration::from_secs(60), || (running_pipeline_pods(shop, name) == 1).then_some(()));
    // tenant's cart, stopped, maps to the same consumer group on the same cluster.
    apply_router(tenant, name, topic, "      cluster = tenancy-shared", 0);

    // Both resources are told, each naming the other.
    let warning = |other: &str| {
        vec![format!(
            "consumer group {group} is also the consumer group of AnkkaFlow {other}/{name} on the same Kafka cluster: the \
             streamlets of both share it, and a reset of it is refused while both exist"
        )]
    };
    wait_until("the warning on tenant's cart", Duration::from_secs(30), || {
        (notes(tenant, name, "ConsumerGroupShared") == warning(shop)).then_some(())
    });
    wait_until("the warning on shop's cart", Duration::from_secs(30), || {
        (notes(shop, name, "ConsumerGroupShared") == warning(tenant)).then_some(())
    });

    // The tenant's reset is refused, naming shop's pipeline; nothing moves. `--wait` says so with
    // its exit code 3 (docs/cli.md), the refusal on stderr and the final status on stdout.
    let versions = Versions::watch(tenant, name);
    wait_until("the watch shows tenant's cart", Duration::from_secs(30), || {
        (!versions.seen().is_empty()).then_some(())
    });
    let o = flow(&["reset", name, "-n", tenant, "--wait", "--timeout", "60s", "-o", "json"]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("reset requested for '{name}': ")))
        .unwrap_or_else(|| panic!("no request line: {}", show(&o)))
        .to_string();
    let final_status: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the final status as JSON");
    assert_eq!((final_status["id"].as_str(), final_status["phase"].as_str()), (Some(id.as_str()), Some("Refused")));
    assert_eq!(annotation(tenant, name, DONE).as_deref(), Some(id.as_str()));
    assert_eq!(versions.done_without(&id, "Refused"), Vec::<serde_json::Value>::new(), "the refusal shows before done");
    drop(versions);
    let why = format!(
        "reset {id} refused: consumer group {group} is also the consumer group of AnkkaFlow {shop}/{name} on the same Kafka \
         cluster, and a reset would move its offsets too; give one of the pipelines another name, or have an \
         administrator annotate Secret 'kafka-cluster-tenancy-shared' with \
         flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\""
    );
    assert_eq!(notes(tenant, name, "ResetRefused"), std::slice::from_ref(&why));
    assert!(stderr.lines().any(|l| l == format!("reset {id} of '{name}' was refused: {why}")), "{}", show(&o));
    let status = reset_status(tenant, name);
    assert_eq!((status["phase"].as_str(), status["detail"].as_str()), (Some("Refused"), Some(why.as_str())));
    assert_eq!(notes(tenant, name, "ResetOffsets"), Vec::<String>::new());
    assert_eq!(kafka::committed(group, topic, 3), before, "the shared group did not move");
    assert_eq!(running_pipeline_pods(shop, name), 1, "shop's router still runs");

    // An administrator allows shared groups on the cluster: a new request goes through.
    kubectl_ok(&[
        "-n",
        "ankka-flow",
        "annotate",
        "--overwrite",
        "secret",
        "kafka-cluster-tenancy-shared",
        "flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups=true",
    ]);
    let id = reset(tenant, name);
    wait_until("the allowed request done", Duration::from_secs(60), || {
        (annotation(tenant, name, DONE).as_deref() == Some(id.as_str())).then_some(())
    });
    assert_eq!(notes(tenant, name, "ResetOffsets"), [format!("{group}: 3 partition(s) of '{topic}' to earliest")]);
    assert_eq!(kafka::committed(group, topic, 3), (0..3).map(|p| (p, Some(0))).collect());
    assert!(!op.log_text().contains(SHOP_PASSWORD), "the operator's log shows the cluster's password");
    op.stop();
}

#[test]
fn a_watch_namespace_naming_no_namespace_refuses_to_start() {
    let _side_by_side = side_by_side(); // isolated: it starts no reconcile, and takes no Lease
    for (value, why) in [
        (",,", "an empty namespace name"),
        (" , ", "an empty namespace name"),
        ("shop,,payments", "an empty namespace name"),
        ("Bad_NS", "'Bad_NS' is not a namespace name"),
    ] {
        let mut op = Operator::start(&fresh_dir("tenancy-watch-refused"), &[("FLOW_WATCH_NAMESPACE", value)]);
        let code = op.wait_exit(Duration::from_secs(30));
        let log = op.log_text();
        assert_eq!(code, Some(2), "{value:?}: {log}");
        let refused = format!("error: invalid value '{value}' for '--watch-namespace <NS[,NS...]>': {why}");
        assert!(log.starts_with(&refused), "{value:?}: {log}");
        assert!(!log.contains("hold the lease"), "{value:?}: {log}");
    }
}

/// `status.topics[0].detail` of AnkkaFlow `name` in `ns` (empty while there is none).
fn topic_detail(ns: &str, name: &str) -> String {
    kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.topics[0].detail}"])
}

/// `spec.replicas` of Deployment `name` in `ns`; empty while there is no such Deployment.
fn replicas(ns: &str, name: &str) -> String {
    let o = kubectl(&["-n", ns, "get", "deployment", name, "-o", "jsonpath={.spec.replicas}"]);
    if o.status.success() { String::from_utf8_lossy(&o.stdout).into_owned() } else { String::new() }
}

/// docs/operator.md, "What one reconcile does", step 4: a pipeline whose Kafka cluster cannot be
/// reached still has a replicas change applied to its Deployment at once (its objects do not wait
/// for the topics' description, which waits out the 10 s Kafka deadline), while its status keeps
/// reporting that Kafka could not be asked.
#[test]
fn a_replicas_change_is_applied_without_waiting_for_an_unreachable_kafka() {
    let _side_by_side = side_by_side(); // isolated: its own namespace, cluster Secret and Lease
    let ns = "tenancy-kafka-down";
    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(vec!["kafka-cluster-tenancy-down".to_string()]);
    // Nothing listens on port 1: every connection is refused, and each describe waits out its deadline.
    cluster_secret("tenancy-down", "127.0.0.1:1", "security.protocol=PLAINTEXT", Some(ns));
    fresh_namespace(ns);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    let deployment = "flow-down-router";
    apply_router(ns, "down", "tenancy.down", "      cluster = tenancy-down", 1);
    wait_until("the Deployment at 1 replica", Duration::from_secs(30), || {
        (replicas(ns, deployment) == "1").then_some(())
    });
    wait_until("the status reporting Kafka unreachable", Duration::from_secs(60), || {
        topic_detail(ns, "down").starts_with("Kafka unreachable").then_some(())
    });
    // The user stops the streamlet before a reset.
    let generation = |what: &str| -> i64 {
        let v: serde_json::Value =
            serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", "down", "-o", "json"])).expect("JSON");
        let at = if what == "spec" { &v["metadata"]["generation"] } else { &v["status"]["observedGeneration"] };
        at.as_i64().unwrap_or_default()
    };
    apply_router(ns, "down", "tenancy.down", "      cluster = tenancy-down", 0);
    let changed = generation("spec");
    // The reconcile that takes the change may wait behind one still asking Kafka; it applies the
    // Deployment as it starts, and writes the status only once Kafka's deadline (10 s,
    // FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS) has passed.
    wait_until("the Deployment at 0 replicas", Duration::from_secs(30), || {
        (replicas(ns, deployment) == "0").then_some(())
    });
    // So a second after the Deployment changed, the status still waits for Kafka's answer on this
    // generation: the objects did not wait for it (they used to be applied after it, just before
    // the status).
    std::thread::sleep(Duration::from_secs(1));
    assert!(generation("status") < changed, "the status of generation {changed} came with the Deployment");
    // Kafka's answer still goes into the status.
    wait_until("the status after the change", Duration::from_secs(60), || {
        let v: serde_json::Value =
            serde_json::from_str(&kubectl_ok(&["-n", ns, "get", "aflow", "down", "-o", "json"])).expect("JSON");
        (v["status"]["observedGeneration"] == v["metadata"]["generation"]).then_some(())
    });
    let detail = topic_detail(ns, "down");
    assert!(detail.starts_with("Kafka unreachable"), "{detail}");
    // It names the cluster's brokers.
    assert!(detail.contains("the Kafka cluster at 127.0.0.1:1 did not answer"), "{detail}");
    assert_eq!(phase(ns, "down").0, "Degraded");
    eprintln!("topic: {detail}");
    op.stop();
}

/// A cluster Secret with a wrong password: the pipeline's status says the authentication failed,
/// naming the brokers (docs/troubleshooting.md), not the timeout it causes; never the password.
#[test]
fn a_wrong_password_shows_in_the_status_as_an_authentication_failure() {
    let _side_by_side = side_by_side(); // isolated: its own namespace, cluster Secret and Lease
    let ns = "tenancy-wrong-password";
    install_crd();
    ensure_namespace("ankka-flow");
    let _secrets = Secrets(vec!["kafka-cluster-tenancy-wrong".to_string()]);
    let (sasl, config) = shop_over_sasl();
    let wrong = "not-the-shop-secret";
    cluster_secret("tenancy-wrong", &sasl, &config.replace(SHOP_PASSWORD, wrong), Some(ns));
    fresh_namespace(ns);
    let op = Operator::start(&fresh_dir(ns), &[("FLOW_WATCH_NAMESPACE", ns)]);
    apply_router(ns, "wrong", "tenancy.wrong", "      cluster = tenancy-wrong", 0);
    let want = format!("Kafka unreachable: authentication with the Kafka cluster at {sasl} failed: ");
    let detail = wait_until("the status naming the authentication failure", Duration::from_secs(60), || {
        let d = topic_detail(ns, "wrong");
        (!d.is_empty()).then_some(d)
    });
    assert!(detail.starts_with(&want), "{detail}");
    assert!(!detail.contains(wrong), "{detail}");
    assert!(!op.log_text().contains(wrong), "the operator's log shows the password");
    op.stop();
}
