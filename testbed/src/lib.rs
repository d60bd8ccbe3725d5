//! Helpers for end-to-end tests on the real test bed (a Kafka broker and a Kubernetes control plane
//! started by `testbed/tb up`; see docs/testbed.md).
//!
//! Tests read the test bed's coordinates from the environment that `eval "$(testbed/tb env)"` sets
//! (`make test` does it). Nothing here is a mock: every call goes to the real broker, the real API
//! server, or the real `flow` and `flow-operator` binaries built from this workspace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// The test bed's coordinates.
#[derive(Debug)]
pub struct Bed {
    /// Kafka bootstrap servers.
    pub kafka: String,
    /// Kubeconfig path.
    pub kubeconfig: PathBuf,
    /// Repository root.
    pub root: PathBuf,
    /// Where the workspace's binaries are.
    pub bin_dir: PathBuf,
}

/// The test bed, from the environment; panics with what to do when it is not set up.
pub fn bed() -> &'static Bed {
    static BED: OnceLock<Bed> = OnceLock::new();
    BED.get_or_init(|| {
        let need = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("{k} is not set: start the test bed and load its settings with `testbed/tb up && eval \"$(testbed/tb env)\"`, or run `make test`")
            })
        };
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), PathBuf::from);
        let kafka = need("FLOW_TESTBED_KAFKA");
        group_coordinator_ready(&kafka);
        Bed { kafka, kubeconfig: PathBuf::from(need("KUBECONFIG")), bin_dir: target.join("debug"), root }
    })
}

/// Waits until the broker's group coordinator answers. On a fresh broker the first group request
/// creates and loads `__consumer_offsets`, and until then group calls answer "coordinator load in
/// progress"; tests must not mistake that for a result.
fn group_coordinator_ready(kafka: &str) {
    let group = "flow-testbed-warm-up";
    let c: BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", kafka).set("group.id", group).create().expect("consumer");
    wait_until("the broker's group coordinator", Duration::from_secs(120), || {
        // An offset fetch goes through the coordinator, which creates and loads __consumer_offsets.
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(group, 0);
        c.committed_offsets(tpl, Duration::from_secs(5)).ok()?;
        c.fetch_group_list(Some(group), Duration::from_secs(5)).ok().map(|_| ())
    });
}

/// Serialises the end-to-end tests: they share one cluster and one broker, and reuse the example's
/// fixed topic and consumer group. Within a test binary by a mutex; across test binaries and `cargo
/// test` runs (several people on one test bed, several worktrees) by an exclusive lock on
/// `e2e.lock` in the test bed's run directory, which the OS drops when the process ends.
pub fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let in_process = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let run = std::env::var_os("FLOW_TESTBED_RUN").map_or_else(|| bed().root.join("target/testbed"), PathBuf::from);
    let path = run.join("e2e.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    file.lock().unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    Serial { _across_processes: file, _in_process: in_process }
}

/// Held while a test runs; see [`serial`].
pub struct Serial {
    _across_processes: std::fs::File,
    _in_process: MutexGuard<'static, ()>,
}

/// Path of a workspace binary; panics when it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bed().bin_dir.join(name);
    assert!(p.exists(), "{} is missing: run `cargo build --workspace --bins` first (make test does)", p.display());
    p
}

/// A finished command's exit code, stdout and stderr, for assertion messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `kubectl` (the test bed's, from PATH) against the test bed.
pub fn kubectl(args: &[&str]) -> Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig)
        .output()
        .expect("kubectl runs (is the test bed's bin directory on PATH? `eval \"$(testbed/tb env)\"`)")
}

/// Runs `kubectl` and returns its stdout; panics on a non-zero exit.
pub fn kubectl_ok(args: &[&str]) -> String {
    let o = kubectl(args);
    assert!(o.status.success(), "kubectl {args:?} failed: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl <args>` with `stdin` as its input; panics unless it succeeds; returns stdout.
pub fn kubectl_stdin(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write to kubectl");
    let o = child.wait_with_output().expect("kubectl finishes");
    assert!(o.status.success(), "kubectl {args:?} failed: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl apply -f -` of `yaml`.
pub fn kubectl_apply(yaml: &str) -> String {
    kubectl_stdin(&["apply", "-f", "-"], yaml)
}

/// Runs the `flow` CLI against the test bed.
pub fn flow(args: &[&str]) -> Output {
    Command::new(bin("flow")).args(args).env("KUBECONFIG", &bed().kubeconfig).output().expect("flow runs")
}

/// Waits until `f` returns `Some`, polling every 200 ms; panics after `timeout` naming `what`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Deletes `ns` if it exists (waiting until it is gone), then creates it empty.
pub fn fresh_namespace(ns: &str) {
    let o = kubectl(&["delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s"]);
    assert!(o.status.success(), "deleting namespace {ns}: {}", show(&o));
    kubectl_ok(&["create", "namespace", ns]);
}

/// Makes sure the CRD is installed and established.
pub fn install_crd() {
    kubectl_ok(&["apply", "--server-side", "-f", bed().root.join("deploy/crd.yaml").to_str().expect("utf-8 path")]);
    kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/ankkaflows.flow.ankka.thinkmorestupidless.com",
        "--timeout=60s",
    ]);
}

/// The sidecar image the test operator renders (kwok runs no containers, so it is never pulled).
pub const SIDECAR_IMAGE: &str = "ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.1.0";

/// A running `flow-operator`, stopped when dropped (SIGTERM, so that it gives its Lease back; SIGKILL
/// if it is still there 10 s later). Its log goes to `target/e2e-logs/`.
pub struct Operator {
    child: Child,
    /// The log file.
    pub log: PathBuf,
}

impl Operator {
    /// Starts the operator with a ledger in `ledger_dir` and extra environment `env`.
    ///
    /// `env` overrides every default below, `KUBECONFIG` included (the test bed's admin by default),
    /// and [`SIDECAR_IMAGE`] as `FLOW_SIDECAR_IMAGE` (an empty value leaves it unset).
    /// Leader election stays on. Unless `env` names them, the Lease is `ankka-flow-operator-<ns>`
    /// and the instance (`HOSTNAME`, the identity in the Lease) `flow-operator-<ns>-<test pid>`, where
    /// `<ns>` is `FLOW_WATCH_NAMESPACE`: each test namespace has a Lease of its own, so an operator a
    /// previous test left holding one never delays the next test; an operator restarted within a
    /// test (after a crash point) takes its own Lease back at once; and operators of two test runs
    /// never share an identity.
    pub fn start(ledger_dir: &Path, env: &[(&str, &str)]) -> Operator {
        let logs = bed().root.join("target/e2e-logs");
        std::fs::create_dir_all(&logs).expect("log dir");
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = logs.join(format!("operator-{}-{n}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(bin("flow-operator"));
        cmd.env("KUBECONFIG", &bed().kubeconfig)
            .env("FLOW_LEDGER_DIR", ledger_dir)
            .env("FLOW_SIDECAR_IMAGE", SIDECAR_IMAGE)
            .env("FLOW_KAFKA_CLUSTERS_NAMESPACE", "ankka-flow")
            .env("FLOW_LOG_FORMAT", "text")
            .env("RUST_LOG", "info,flow_operator=debug")
            // Any free port: several operators run at once (other tests, a second instance).
            .env("FLOW_METRICS_ADDRESS", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(file);
        let given = |k: &str| env.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let scope = given("FLOW_WATCH_NAMESPACE").unwrap_or("all");
        cmd.env("FLOW_LEASE_NAME", format!("ankka-flow-operator-{scope}"))
            .env("HOSTNAME", format!("flow-operator-{scope}-{}", std::process::id()));
        if given("FLOW_OPERATOR_NAMESPACE").is_none() {
            ensure_namespace("ankka-flow");
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        Operator { child: cmd.spawn().expect("flow-operator starts"), log }
    }

    /// The operator's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit by itself (a crash point), returning its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        wait_until("the operator to exit", timeout, || self.child.try_wait().ok().flatten()).code()
    }

    /// Stops it with SIGTERM and waits.
    pub fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = wait_until("the operator to stop", Duration::from_secs(20), || self.child.try_wait().ok().flatten());
    }

    /// The process id (to send it a signal, such as SIGSTOP).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if !self.running() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates namespace `ns` unless it exists.
pub fn ensure_namespace(ns: &str) {
    let o = kubectl(&["create", "namespace", ns]);
    assert!(o.status.success() || String::from_utf8_lossy(&o.stderr).contains("AlreadyExists"), "{}", show(&o));
}

/// A kubeconfig like the test bed's admin one (same server, same CA) that logs in with bearer
/// `token` instead; written under `target/e2e-ledgers/` as `<name>.kubeconfig`.
pub fn kubeconfig_with_token(name: &str, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(&bed().kubeconfig).expect("the admin kubeconfig");
    let mut replaced = 0;
    let text: String = admin
        .lines()
        .map(|line| match line.trim_start().strip_prefix("token: ") {
            Some(_) => {
                replaced += 1;
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}token: {token}\n")
            }
            None => format!("{line}\n"),
        })
        .collect();
    assert_eq!(replaced, 1, "the admin kubeconfig has one token line");
    let dir = bed().root.join("target/e2e-ledgers");
    std::fs::create_dir_all(&dir).expect("kubeconfig dir");
    let path = dir.join(format!("{name}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}

/// Kafka helpers, over rdkafka against the test bed's broker.
pub mod kafka {
    use super::*;

    fn config() -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &bed().kafka);
        c
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime")
    }

    /// Deletes `topic` if it exists, then creates it with `partitions` partitions, and waits until
    /// every partition has a leader.
    pub fn recreate_topic(topic: &str, partitions: i32) {
        recreate_topic_with(topic, partitions, &[]);
    }

    /// Deletes `topic` if it exists and waits until the broker no longer lists it.
    pub fn remove_topic(topic: &str) {
        let admin: AdminClient<DefaultClientContext> = config().create().expect("admin client");
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let _ = runtime().block_on(admin.delete_topics(&[topic], &opts));
        wait_until("the topic to go", Duration::from_secs(30), || {
            (!topics().contains(&topic.to_string())).then_some(())
        });
    }

    /// What Kafka's own tool says of `topic`: `kafka-topics --describe`, its first line (name,
    /// partition count, replication factor and the topic's own configs).
    pub fn describe_with_kafka_tool(topic: &str) -> String {
        let o = Command::new(bed().root.join("testbed/kafka-tool"))
            .args(["topics", "--bootstrap-server", &bed().kafka, "--describe", "--topic", topic])
            .output()
            .expect("testbed/kafka-tool runs");
        assert!(o.status.success(), "kafka-topics --describe {topic}: {}", show(&o));
        String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or_default().to_string()
    }

    /// As [`recreate_topic`], with topic-level `configs`.
    pub fn recreate_topic_with(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        let admin: AdminClient<DefaultClientContext> = config().create().expect("admin client");
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        runtime().block_on(async {
            let _ = admin.delete_topics(&[topic], &opts).await;
            wait_until("the old topic to go", Duration::from_secs(30), || {
                (!topics().contains(&topic.to_string())).then_some(())
            });
            let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
            for (k, v) in configs {
                new = new.set(k, v);
            }
            let r = admin.create_topics(&[new], &opts).await.expect("create_topics answers");
            for x in r {
                x.expect("topic created");
            }
        });
        wait_until("the topic's partitions to have leaders", Duration::from_secs(30), || {
            let w = watermarks(topic);
            (w.len() == partitions as usize).then_some(())
        });
    }

    /// Names of every topic.
    pub fn topics() -> Vec<String> {
        let c: BaseConsumer = config().create().expect("consumer");
        let md = c.fetch_metadata(None, Duration::from_secs(10)).expect("metadata");
        md.topics().iter().map(|t| t.name().to_string()).collect()
    }

    /// Writes `per_partition` records to each of `partitions` partitions of `topic`.
    pub fn produce(topic: &str, partitions: i32, per_partition: u32) {
        let p: BaseProducer = config().set("linger.ms", "5").create().expect("producer");
        for part in 0..partitions {
            for i in 0..per_partition {
                let payload = format!("{{\"cart\":{i},\"partition\":{part}}}");
                let key = format!("cart-{i}");
                loop {
                    match p.send(BaseRecord::to(topic).partition(part).key(&key).payload(&payload)) {
                        Ok(()) => break,
                        Err((_, _)) => {
                            p.poll(Duration::from_millis(50));
                        }
                    }
                }
            }
        }
        p.flush(Duration::from_secs(30)).expect("records acknowledged");
    }

    /// Per partition: (log start offset, high watermark).
    pub fn watermarks(topic: &str) -> BTreeMap<i32, (i64, i64)> {
        let c: BaseConsumer = config().create().expect("consumer");
        let md = c.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
        let mut out = BTreeMap::new();
        if let Some(t) = md.topics().first() {
            for p in t.partitions() {
                if let Ok(w) = c.fetch_watermarks(topic, p.id(), Duration::from_secs(10)) {
                    out.insert(p.id(), w);
                }
            }
        }
        out
    }

    /// The group's committed offsets on `partitions` partitions of `topic` (`None`: no offset).
    pub fn committed(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i64>> {
        crate::groups::positions(group, topic, partitions).into_iter().map(|(p, o)| (p, o.map(|(n, _)| n))).collect()
    }

    /// Members of `group`, as the classic group description lists them.
    pub fn members(group: &str) -> usize {
        let c: BaseConsumer = config().create().expect("consumer");
        let list = c.fetch_group_list(Some(group), Duration::from_secs(10)).expect("group list");
        list.groups().iter().filter(|g| g.name() == group).map(|g| g.members().len()).sum()
    }

    /// Deletes records below `offset` in `partition` of `topic` (DeleteRecords), moving its log start.
    pub fn delete_records(topic: &str, partition: i32, offset: i64) {
        let admin: AdminClient<DefaultClientContext> = config().create().expect("admin client");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset)).expect("offset");
        runtime()
            .block_on(admin.delete_records(&tpl, &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)))))
            .expect("delete_records");
    }
}

/// The stand-in streamlet consumer (`flow-standin`).
pub mod standin {
    use super::*;

    /// Reads `expect` records of `topic` as group `group`, commits and returns the JSON summary.
    pub fn read(group: &str, topic: &str, expect: u64) -> serde_json::Value {
        let o = Command::new(bin("flow-standin"))
            .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic])
            .args(["--expect", &expect.to_string(), "--timeout", "60"])
            .output()
            .expect("flow-standin runs");
        assert!(o.status.success(), "flow-standin failed: {}", show(&o));
        serde_json::from_slice(&o.stdout).expect("flow-standin prints JSON")
    }

    /// The arguments that make `flow-standin` play streamlet `streamlet` of pipeline `pipeline` in
    /// `ns`: it learns its inlet's topic, group, client id and connection from the streamlet's
    /// rendered Secret, as the sidecar does.
    pub fn playing(ns: &str, pipeline: &str, streamlet: &str) -> Vec<String> {
        ["--namespace", ns, "--pipeline", pipeline, "--streamlet", streamlet].map(String::from).to_vec()
    }

    /// Plays streamlet `streamlet` of `pipeline` in `ns` (see [`playing`]) until it read `expect`
    /// records, commits and returns the JSON summary.
    pub fn read_as_streamlet(ns: &str, pipeline: &str, streamlet: &str, expect: u64) -> serde_json::Value {
        let o = Command::new(bin("flow-standin"))
            .args(playing(ns, pipeline, streamlet))
            .args(["--expect", &expect.to_string(), "--timeout", "60"])
            .env("KUBECONFIG", &bed().kubeconfig)
            .output()
            .expect("flow-standin runs");
        assert!(o.status.success(), "flow-standin failed: {}", show(&o));
        serde_json::from_slice(&o.stdout).expect("flow-standin prints JSON")
    }

    /// Starts a stand-in that stays in the group until stopped.
    pub fn hold(group: &str, topic: &str, extra: &[&str]) -> Child {
        Command::new(bin("flow-standin"))
            .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic, "--hold"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("flow-standin starts")
    }
}

/// The example pipeline `cart` in namespace `ns` with router's replicas, as YAML: the output of the
/// real `flow generate`, run in `examples/cart` exactly as docs/rebuild-from-the-start.md writes it
/// (`--conf prod.conf`, plus `--conf stop.conf` for 0 replicas; another count comes from a conf
/// file of its own laid over prod.conf).
pub fn cart_yaml(ns: &str, replicas: i32) -> String {
    let dir = bed().root.join("examples/cart");
    let mut args: Vec<String> =
        ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "prod.conf"].map(String::from).to_vec();
    match replicas {
        1 => {}
        0 => args.extend(["--conf", "stop.conf"].map(String::from)),
        n => {
            let conf = bed().root.join("target/e2e-ledgers").join(format!("replicas-{n}-{}.conf", std::process::id()));
            std::fs::create_dir_all(conf.parent().expect("a parent directory")).expect("conf dir");
            std::fs::write(&conf, format!("flow.streamlets.router {{ replicas = {n} }}\n")).expect("conf file");
            args.extend(["--conf".to_string(), conf.display().to_string()]);
        }
    }
    args.extend(["--image", "router=registry.example.com/cart-router:1.2", "-n", ns].map(String::from));
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?} failed: {}", show(&o));
    String::from_utf8(o.stdout).expect("flow generate writes UTF-8")
}

/// Applies the example's cluster Secrets `kafka-cluster-shop` and `kafka-cluster-default`
/// (namespace `ankka-flow`), pointing at the test bed's broker. As the test bed's administrator, it
/// allows every namespace and consumer groups shared between them (docs/tenancy.md): the end-to-end
/// tests run the example pipeline `cart` in many namespaces, one at a time, all mapping to the
/// consumer group `cart.router.in`, and the namespaces of earlier tests stay. The examples allow
/// `shop` alone; the tenancy tests install or change Secrets of their own to test the rules.
pub fn install_cluster_secret() {
    ensure_namespace("ankka-flow");
    for file in ["kafka-cluster-shop.yaml", "kafka-cluster-default.yaml"] {
        let text = std::fs::read_to_string(bed().root.join("examples/cart").join(file)).expect("secret yaml");
        let allowed = "flow.ankka.thinkmorestupidless.com/allowed-namespaces: shop";
        assert!(text.contains(allowed), "{file} declares its namespaces");
        let test_bed = "flow.ankka.thinkmorestupidless.com/allowed-namespaces: \"*\"\n    \
                        flow.ankka.thinkmorestupidless.com/allow-shared-consumer-groups: \"true\"";
        kubectl_apply(&text.replace("127.0.0.1:19092", &bed().kafka).replace(allowed, test_bed));
    }
}

/// Names of the pods `kubectl -n <ns> get pods -l flow.ankka.thinkmorestupidless.com/pipeline=<p>` lists.
pub fn pipeline_pods(ns: &str, pipeline: &str) -> Vec<String> {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={pipeline}");
    kubectl_ok(&["-n", ns, "get", "pods", "-l", &label, "-o", "name"]).lines().map(str::to_string).collect()
}

/// Names of the pods of `pipeline` in phase Running.
pub fn running_pipeline_pods(ns: &str, pipeline: &str) -> usize {
    let label = format!("flow.ankka.thinkmorestupidless.com/pipeline={pipeline}");
    kubectl_ok(&["-n", ns, "get", "pods", "-l", &label, "--field-selector=status.phase=Running", "-o", "name"])
        .lines()
        .count()
}

/// An annotation of AnkkaFlow `name`, if set.
pub fn annotation(ns: &str, name: &str, key: &str) -> Option<String> {
    let path = format!("jsonpath={{.metadata.annotations.{}}}", key.replace('.', "\\."));
    let v = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", &path]);
    (!v.is_empty()).then_some(v)
}

/// Notes of the events about AnkkaFlows in `ns` with `reason`, as `kubectl get events` shows them.
pub fn event_notes(ns: &str, reason: &str) -> Vec<String> {
    let selector = format!("involvedObject.kind=AnkkaFlow,reason={reason}");
    kubectl_ok(&[
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        &selector,
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// The text under `key` of Secret `ns`/`name`, decoded, exactly as the API server holds it.
pub fn secret_file(ns: &str, name: &str, key: &str) -> String {
    let template = format!("{{{{index .data \"{key}\" | base64decode}}}}");
    kubectl_ok(&["-n", ns, "get", "secret", name, "-o", &format!("go-template={template}")])
}

/// The object `kind`/`name` of `ns` as JSON (`Null` when there is none).
pub fn get_json(ns: &str, kind: &str, name: &str) -> serde_json::Value {
    let o = kubectl(&["-n", ns, "get", kind, name, "-o", "json", "--ignore-not-found"]);
    assert!(o.status.success(), "kubectl get {kind} {name}: {}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// A fresh, empty directory under `target/e2e-ledgers/`.
pub fn fresh_dir(name: &str) -> PathBuf {
    let d = bed().root.join("target/e2e-ledgers").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("ledger dir");
    d
}

/// The example's topic, the consumer group of router's inlet, and the request and done annotations.
pub mod cart {
    /// Kafka topic router reads.
    pub const TOPIC: &str = "shop.cart-events.v1";
    /// Consumer group of router's inlet `in`.
    pub const GROUP: &str = "cart.router.in";
    /// The request annotation.
    pub const REQUEST: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets";
    /// The done annotation.
    pub const DONE: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets-done";
}

/// A namespace `ns` with the cart pipeline applied at `replicas`, its topic refilled with 3 partitions
/// of 20 records that group `cart.router.in` has read and committed (offsets 20/20/20), and a running
/// operator started with the extra environment `env` and a fresh ledger.
pub fn cart_scenario(ns: &str, replicas: i32, env: &[(&str, &str)]) -> Operator {
    install_crd();
    install_cluster_secret();
    fresh_namespace(ns);
    kafka::recreate_topic(cart::TOPIC, 3);
    kafka::produce(cart::TOPIC, 3, 20);
    standin::read(cart::GROUP, cart::TOPIC, 60);
    let mut env = env.to_vec();
    env.push(("FLOW_WATCH_NAMESPACE", ns));
    let op = Operator::start(&fresh_dir(ns), &env);
    kubectl_apply(&cart_yaml(ns, replicas));
    let want = usize::try_from(replicas).unwrap_or(0);
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, "cart") == want && pipeline_pods(ns, "cart").len() == want).then_some(())
    });
    op
}

/// The address the operator serves `/metrics` and `/healthz` on, from its start-up log line (start it
/// with `FLOW_METRICS_ADDRESS=127.0.0.1:0` to get a free port).
pub fn metrics_address(op: &Operator) -> String {
    wait_until("the operator's metrics address", Duration::from_secs(30), || {
        let log = op.log_text();
        let line = log.lines().find(|l| l.contains("serving /metrics and /healthz"))?;
        let at = line.find("address=")? + "address=".len();
        Some(line[at..].split_whitespace().next()?.trim_matches('"').to_string())
    })
}

/// `GET path` over plain HTTP/1.0 from `addr`: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the operator's endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

/// Sum of `ankka_flow_consumer_group_lag` series of `client_id` in a Prometheus text body, with
/// the number of series.
pub fn lag_in_metrics(body: &str, client_id: &str) -> (i64, usize) {
    let needle = format!("client_id=\"{client_id}\"");
    body.lines()
        .filter(|l| l.starts_with("ankka_flow_consumer_group_lag{") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .fold((0, 0), |(sum, n), v| (sum + v, n + 1))
}

/// A stand-in process playing a pod's container (cases F1, F2): `flow-standin` with its stdout and
/// stderr captured line by line, so a test can wait for its progress lines (`flow-standin: ...`,
/// docs/testbed.md) and send it the signal the kubelet would. SIGTERM, then SIGKILL after 15 s, when
/// dropped.
pub struct Container {
    child: Child,
    err: std::sync::Arc<Mutex<Vec<String>>>,
    out: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Container {
    /// Starts `flow-standin --group <group> --topic <topic> <extra...>` against the test bed.
    pub fn start(group: &str, topic: &str, extra: &[&str]) -> Container {
        let mut child = Command::new(bin("flow-standin"))
            .args(["--bootstrap-servers", &bed().kafka, "--group", group, "--topic", topic])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("flow-standin starts");
        let collect = |r: Box<dyn std::io::Read + Send>| {
            let lines = std::sync::Arc::new(Mutex::new(Vec::new()));
            let into = lines.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                    into.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
            lines
        };
        let err = collect(Box::new(child.stderr.take().expect("stderr")));
        let out = collect(Box::new(child.stdout.take().expect("stdout")));
        Container { child, err, out }
    }

    /// Its stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.err.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for a stderr line starting with `flow-standin: <prefix>` and returns the rest of it.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> String {
        let want = format!("flow-standin: {prefix}");
        wait_until(&format!("the stand-in to print '{want}'"), timeout, || {
            self.log().iter().find_map(|l| l.strip_prefix(&want).map(str::to_string))
        })
    }

    /// Sends it SIGTERM, as the kubelet does to a pod's container when the pod is deleted.
    pub fn terminate(&self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
    }

    /// Waits until it exits; returns whether it succeeded and its JSON summary (`Null` if none).
    pub fn wait_exit(&mut self, timeout: Duration) -> (bool, serde_json::Value) {
        let status = wait_until("the stand-in to exit", timeout, || self.child.try_wait().ok().flatten());
        // The reader threads may still be draining the pipes.
        let summary = wait_until("the stand-in's summary", Duration::from_secs(5), || {
            let out = self.out.lock().unwrap_or_else(|p| p.into_inner()).clone();
            out.iter()
                .find_map(|l| serde_json::from_str(l).ok())
                .or_else(|| (!status.success()).then_some(serde_json::Value::Null))
        });
        (status.success(), summary)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        self.terminate();
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Consumer-group helpers beyond [`kafka`]: offsets with their commit metadata, commits by hand,
/// deleting a group, deleting a topic.
pub mod groups {
    use super::*;

    fn client(group: Option<&str>) -> BaseConsumer {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &bed().kafka).set("enable.auto.commit", "false");
        if let Some(g) = group {
            c.set("group.id", g);
        }
        c.create().expect("consumer")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime")
    }

    /// The group's committed offsets on `partitions` partitions of `topic`, each with the metadata
    /// string it was committed with (`None`: no offset).
    pub fn positions(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<(i64, String)>> {
        let c = client(Some(group));
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let got = c.committed_offsets(tpl, Duration::from_secs(10)).expect("committed offsets");
        got.elements()
            .iter()
            .map(|e| {
                let o = match e.offset() {
                    Offset::Offset(n) if n >= 0 => Some((n, e.metadata().to_string())),
                    _ => None,
                };
                (e.partition(), o)
            })
            .collect()
    }

    /// Commits `offsets` of `topic` for `group` without joining it (as the admin client does).
    pub fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
        let c = client(Some(group));
        let mut tpl = TopicPartitionList::new();
        for (p, o) in offsets {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*o)).expect("offset");
        }
        c.commit(&tpl, rdkafka::consumer::CommitMode::Sync).expect("commit by hand");
    }

    /// Deletes `group` with everything it committed; no error when it does not exist.
    pub fn forget(group: &str) {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let _ = runtime().block_on(admin.delete_groups(&[group], &opts));
        wait_until("the group to be gone", Duration::from_secs(30), || {
            let list = client(None).fetch_group_list(Some(group), Duration::from_secs(10)).ok()?;
            list.groups().iter().all(|g| g.name() != group || g.state() == "Dead").then_some(())
        });
    }

    /// Deletes `topic` and waits until the broker's metadata no longer lists it.
    pub fn delete_topic(topic: &str) {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &bed().kafka).create().expect("admin client");
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let r = runtime().block_on(admin.delete_topics(&[topic], &opts)).expect("delete_topics answers");
        for x in r {
            x.expect("topic deleted");
        }
        wait_until("the topic to go", Duration::from_secs(30), || {
            (!kafka::topics().contains(&topic.to_string())).then_some(())
        });
    }
}

/// A pipeline of one's own in namespace `ns`, as YAML: the real `flow generate` on a blueprint named
/// `pipeline` whose streamlets, given as (name, topic, replicas), each run the cart example's
/// `cart-router` descriptor and read their own unmanaged topic of the test bed's cluster `shop`
/// through inlet `in` (consumer group `<pipeline>.<name>.in`).
pub fn own_pipeline_yaml(ns: &str, pipeline: &str, streamlets: &[(&str, &str, i32)]) -> String {
    let dir = bed().root.join("target/e2e-ledgers").join(format!("own-{pipeline}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("flow")).expect("blueprint dir");
    std::fs::copy(bed().root.join("examples/cart/flow/cart-router.json"), dir.join("flow/cart-router.json"))
        .expect("descriptor");
    let mut bp = format!("blueprint {{\n  name = {pipeline}\n  streamlets {{\n");
    for (name, _, _) in streamlets {
        bp += &format!("    {name} = cart-router\n");
    }
    bp += "  }\n  topics {\n";
    for (name, topic, _) in streamlets {
        bp += &format!(
            "    t-{name} {{\n      managed = false\n      topic.name = \"{topic}\"\n      cluster = shop\n      \
             consumers = [{name}.in]\n      consumer-config {{ auto.offset.reset = earliest }}\n    }}\n"
        );
    }
    bp += "  }\n}\n";
    std::fs::write(dir.join("blueprint.conf"), bp).expect("blueprint");
    let conf: String =
        streamlets.iter().map(|(name, _, n)| format!("flow.streamlets.{name} {{ replicas = {n} }}\n")).collect();
    std::fs::write(dir.join("replicas.conf"), conf).expect("conf");
    let mut args: Vec<String> =
        ["generate", "blueprint.conf", "--descriptors", "flow", "--conf", "replicas.conf"].map(String::from).to_vec();
    for (name, _, _) in streamlets {
        args.extend(["--image".to_string(), format!("{name}=registry.example.com/cart-router:1.2")]);
    }
    args.extend(["-n".to_string(), ns.to_string()]);
    let o = Command::new(bin("flow")).args(&args).current_dir(&dir).output().expect("flow runs");
    assert!(o.status.success(), "flow {args:?}: {}", show(&o));
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// Applies [`own_pipeline_yaml`] and waits until the pipeline has exactly as many pods, all Running,
/// as its replicas.
pub fn apply_own_pipeline(ns: &str, pipeline: &str, streamlets: &[(&str, &str, i32)]) {
    kubectl_apply(&own_pipeline_yaml(ns, pipeline, streamlets));
    let want: usize = streamlets.iter().map(|(_, _, n)| usize::try_from(*n).unwrap_or(0)).sum();
    wait_until("the pipeline's pods", Duration::from_secs(60), || {
        (running_pipeline_pods(ns, pipeline) == want && pipeline_pods(ns, pipeline).len() == want).then_some(())
    });
}

/// The `status.reset` of AnkkaFlow `name` (`Null` when there is none).
pub fn reset_status(ns: &str, name: &str) -> serde_json::Value {
    let text = kubectl_ok(&["-n", ns, "get", "aflow", name, "-o", "jsonpath={.status.reset}"]);
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// Writes the request annotation `{"id":id,"streamlets":[...]}` on AnkkaFlow `name` by hand (past the
/// CLI's guards, as a user with kubectl can).
pub fn write_request(ns: &str, name: &str, id: &str, streamlets: &[&str]) {
    let text = serde_json::json!({"id": id, "streamlets": streamlets}).to_string();
    kubectl_ok(&["-n", ns, "annotate", "--overwrite", "aflow", name, &format!("{}={text}", cart::REQUEST)]);
}

/// Takes the finalizers off pod `ns`/`name` when dropped, so that it (and its namespace) can go.
pub struct ReleasePod(pub String, pub String);

impl Drop for ReleasePod {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "-n",
            &self.0,
            "patch",
            "pod",
            &self.1,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
    }
}

/// Bootstrap address of the test bed's second broker, the one with `auto.create.topics.enable=true`
/// (`FLOW_TESTBED_KAFKA_AUTOCREATE`, from `testbed/tb env`; docs/testbed.md). A cluster of its own:
/// what exists on the main broker does not exist there.
pub fn kafka_autocreate() -> String {
    std::env::var("FLOW_TESTBED_KAFKA_AUTOCREATE").unwrap_or_else(|_| {
        panic!(
            "FLOW_TESTBED_KAFKA_AUTOCREATE is not set: start the test bed and load its settings with \
             `testbed/tb up && eval \"$(testbed/tb env)\"`"
        )
    })
}
