//! `flow-bench`: measures the reset latency of the operator against Kafka's own tool, the operator's
//! memory and its reconcile time after a restart, and the wall time of two CLI commands, on the test
//! bed. Run it on demand with `scripts/bench.sh` (see docs/performance.md); it is not a test.
//!
//! Prints a markdown table to stdout and writes it to `target/bench/results.md`. Everything it makes
//! is its own: namespace `bench`, topics `bench.p<partitions>`, groups `bench.p<partitions>-s<i>.in`;
//! all are deleted at the end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use flow_testbed::{
    bed, ensure_namespace, fresh_namespace, install_cluster_secret, install_crd, kafka, kubectl, serial,
};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const NS: &str = "bench";
const PIPELINE: &str = "bench";
const DONE: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets-done";
/// Records written to each partition; the groups commit at this offset before every reset.
const RECORDS: u32 = 2;

#[derive(Parser, Debug)]
#[command(about = "Benchmarks the reset, the operator's memory and the CLI on the test bed")]
struct Args {
    /// Repetitions of each reset measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Inlet groups per pipeline, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 10, 50])]
    groups: Vec<usize>,
    /// Partitions of the topic the inlets read, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [3i32, 100])]
    partitions: Vec<i32>,
    /// Kafka's tool once per group is repeated `reps` times only up to this many groups, once above
    /// (each call starts a JVM, about 1.3 s).
    #[arg(long, default_value_t = 10)]
    loop_reps_max_groups: usize,
    /// AnkkaFlows for the memory and restart measurement.
    #[arg(long, default_value_t = 100)]
    flows: usize,
    /// Measure only the cost of one fresh Kafka client with a group id (as the operator makes three
    /// per group), then exit.
    #[arg(long)]
    probe_only: bool,
}

fn main() {
    let args = Args::parse();
    let b = bed();
    let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| b.root.join("target"), PathBuf::from);
    let release = target.join("release");
    let out_dir = target.join("bench");
    std::fs::create_dir_all(&out_dir).expect("target/bench");
    for name in ["flow", "flow-operator"] {
        assert!(
            release.join(name).exists(),
            "{} is missing: cargo build --release -p flow-operator -p flow-cli",
            release.join(name).display()
        );
    }
    let flow_bin = release.join("flow");
    let ledger = out_dir.join("ledger");
    let _ = std::fs::remove_dir_all(&ledger);
    std::fs::create_dir_all(&ledger).expect("ledger dir");

    let mut report = Report::default();
    report.line(&format!(
        "Measured {} (UTC) on the test bed; `flow-bench {}`.",
        utc_now(),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    ));

    // Phase 1: idle memory, then reset latency.
    let mut op;
    {
        let _lock = serial();
        eprintln!("setting up namespace {NS}");
        install_crd();
        install_cluster_secret();
        fresh_namespace(NS);
        op = Op::start(&release, &ledger, &out_dir, 0);
        op.wait_ready();
        std::thread::sleep(Duration::from_secs(3));
        report.idle_rss = Some(op.rss_kib());
        eprintln!("idle RSS {} KiB", op.rss_kib());
        report.probe = Some(probe(args.partitions.first().copied().unwrap_or(3)));
        if args.probe_only {
            op.stop();
            let _ = kubectl(&["delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=300s"]);
            delete_kafka(&args);
            let text = report.render(&args);
            print!("{text}");
            return;
        }

        for &p in &args.partitions {
            let topic = format!("bench.p{p}");
            kafka::recreate_topic(&topic, p);
            kafka::produce(&topic, p, RECORDS);
            for &n in &args.groups {
                let groups: Vec<String> = (0..n).map(|i| format!("{PIPELINE}.{}.in", streamlet(p, i))).collect();
                apply(&pipeline_yaml(PIPELINE, p, n, 0, "1"));
                wait_reconciled(Duration::from_secs(120));
                let mut flow_ms = Vec::new();
                for r in 0..args.reps {
                    commit_all(&groups, &topic, p);
                    let ms = flow_reset(&flow_bin);
                    check_reset(&groups, &topic, p);
                    eprintln!("flow reset: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms");
                    flow_ms.push(ms);
                }
                let loop_reps = if n <= args.loop_reps_max_groups { args.reps } else { 1 };
                let mut loop_ms = Vec::new();
                for r in 0..loop_reps {
                    commit_all(&groups, &topic, p);
                    let t = Instant::now();
                    for g in &groups {
                        kafka_tool_reset(&[g.as_str()], &topic);
                    }
                    let ms = ms_since(t);
                    check_reset(&groups, &topic, p);
                    eprintln!("kafka tool per group: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms");
                    loop_ms.push(ms);
                }
                let mut all_ms = Vec::new();
                for r in 0..args.reps {
                    commit_all(&groups, &topic, p);
                    let t = Instant::now();
                    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
                    kafka_tool_reset(&names, &topic);
                    let ms = ms_since(t);
                    check_reset(&groups, &topic, p);
                    eprintln!("kafka tool all groups: {n} group(s), {p} partition(s), rep {r}: {ms:.0} ms");
                    all_ms.push(ms);
                }
                report.resets.push(ResetRow {
                    groups: n,
                    partitions: p,
                    flow: median(&flow_ms),
                    flow_reps: flow_ms.len(),
                    per_group: median(&loop_ms),
                    per_group_reps: loop_ms.len(),
                    all: median(&all_ms),
                });
            }
        }
        kubectl_must(&["-n", NS, "delete", "aflow", PIPELINE, "--wait=true", "--timeout=120s"]);
    }

    // Phase 2: memory with many AnkkaFlows, and reconcile time after a restart.
    {
        let _lock = serial();
        let p = args.partitions.first().copied().unwrap_or(3);
        let docs = |version: &str| -> String {
            (0..args.flows)
                .map(|i| pipeline_yaml(&format!("bench-f{i}"), p, 1, 0, version))
                .collect::<Vec<_>>()
                .join("---\n")
        };
        let t = Instant::now();
        apply(&docs("1"));
        wait_reconciled(Duration::from_secs(600));
        report.apply_reconcile_ms = Some(ms_since(t));
        std::thread::sleep(Duration::from_secs(5));
        report.busy_rss = Some(op.rss_kib());
        eprintln!("{} flows reconciled in {:.0} ms; RSS {} KiB", args.flows, ms_since(t), op.rss_kib());

        op.stop();
        // Bump every resource's generation while the operator is down, so that the restarted one
        // has to reconcile each of them again.
        apply(&docs("2"));
        let t = Instant::now();
        op = Op::start(&release, &ledger, &out_dir, 1);
        let polls = wait_reconciled(Duration::from_secs(600));
        report.restart_ms = Some(ms_since(t));
        eprintln!("restart: all reconciled after {:.0} ms ({polls} polls)", ms_since(t));
        std::thread::sleep(Duration::from_secs(5));
        report.restart_rss = Some(op.rss_kib());
        kubectl_must(&["-n", NS, "delete", "aflow", "--all", "--wait=true", "--timeout=300s"]);
    }

    // Phase 3: CLI wall time.
    {
        let _lock = serial();
        let p = args.partitions.first().copied().unwrap_or(3);
        apply(&pipeline_yaml("bench-running", p, 1, 1, "1"));
        wait_reconciled(Duration::from_secs(120));
        let refused = Command::new(&flow_bin).args(["reset", "bench-running", "-n", NS]).output().expect("flow runs");
        assert!(!refused.status.success(), "flow reset of a running pipeline must refuse");
        let msg = String::from_utf8_lossy(&refused.stderr).lines().next().unwrap_or_default().to_string();
        report.refusal_msg = msg.split(" Stop them first").next().unwrap_or_default().to_string();
        let reset_cmd = format!("{} reset bench-running -n {NS}", flow_bin.display());
        report.refusal = hyperfine(&reset_cmd, &b.root, &out_dir.join("hyperfine-reset.json"), true);
        let gen_cmd = format!(
            "{} generate blueprint.conf --descriptors flow --conf prod.conf --image router=registry.example.com/cart-router:1.2 -n {NS}",
            flow_bin.display()
        );
        report.generate =
            hyperfine(&gen_cmd, &b.root.join("examples/cart"), &out_dir.join("hyperfine-generate.json"), false);
    }

    // Clean up.
    {
        let _lock = serial();
        op.stop();
        let _ = kubectl(&["delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=300s"]);
        delete_kafka(&args);
    }

    let text = report.render(&args);
    print!("{text}");
    std::fs::write(out_dir.join("results.md"), &text).expect("write results.md");
    eprintln!("written to {}", out_dir.join("results.md").display());
}

/// Medians (ms) over 5 runs of: creating a consumer with a group id and reading the group's committed
/// offsets on topic `bench.p<partitions>` (a fresh client: bootstrap, coordinator lookup, OffsetFetch),
/// and then dropping it (rdkafka closes a consumer with a group id, polling in 100 ms steps).
fn probe(partitions: i32) -> (f64, f64) {
    let topic = format!("bench.p{partitions}");
    kafka::recreate_topic(&topic, partitions);
    let (mut call, mut drop_ms) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let c: BaseConsumer = kafka_config().set("group.id", "bench.probe").create().expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(&topic, p);
        }
        c.committed_offsets(tpl, Duration::from_secs(10)).expect("committed offsets");
        call.push(ms_since(t));
        let t = Instant::now();
        drop(c);
        drop_ms.push(ms_since(t));
    }
    eprintln!("probe: fresh client + committed {:.0} ms, drop {:.0} ms", median(&call), median(&drop_ms));
    (median(&call), median(&drop_ms))
}

fn streamlet(partitions: i32, i: usize) -> String {
    format!("p{partitions}-s{i}")
}

/// An AnkkaFlow `name` of `n` streamlets at `replicas`, each with one inlet `in` on topic
/// `bench.p<partitions>` (all streamlets read the same topic, each in its own group).
fn pipeline_yaml(name: &str, partitions: i32, n: usize, replicas: i32, version: &str) -> String {
    let mut y = format!(
        "apiVersion: flow.ankka.thinkmorestupidless.com/v1alpha1\nkind: AnkkaFlow\nmetadata:\n  name: {name}\n  namespace: {NS}\n  labels:\n    flow.ankka.thinkmorestupidless.com/pipeline: {name}\nspec:\n  pipeline: {name}\n  version: \"{version}\"\n  protocolVersion: \"1.0\"\n  streamlets:\n"
    );
    for i in 0..n {
        y.push_str(&format!(
            "  - name: {s}\n    image: registry.example.com/bench:1\n    replicas: {replicas}\n    inlets:\n      in: input\n    descriptor:\n      name: bench\n      description: bench streamlet\n      config_parameters: []\n      inlets:\n      - name: in\n        contract:\n          fingerprint: nXhoFwNZSB7DKScFuZUtZ1gnAYkIxadumsXNHWwbLfM=\n          format: json\n          schema_name: cart-events.v1\n      outlets: []\n    builtin: false\n",
            s = streamlet(partitions, i)
        ));
    }
    y.push_str(&format!(
        "  topics:\n  - id: input\n    name: bench.p{partitions}\n    managed: false\n    cluster: shop\n    consumerConfig:\n      auto.offset.reset: earliest\n"
    ));
    y
}

fn apply(yaml: &str) {
    let path = std::env::temp_dir().join(format!("flow-bench-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write yaml");
    kubectl_must(&["apply", "-f", path.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_file(&path);
}

fn kubectl_must(args: &[&str]) -> String {
    let o = kubectl(args);
    assert!(o.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Polls (one `kubectl get aflow` per poll, every 20 ms) until every AnkkaFlow in the namespace has
/// `status.observedGeneration` equal to its generation; returns the number of polls.
fn wait_reconciled(timeout: Duration) -> usize {
    let end = Instant::now() + timeout;
    let mut polls = 0;
    loop {
        polls += 1;
        let out = kubectl_must(&[
            "-n",
            NS,
            "get",
            "aflow",
            "-o",
            "jsonpath={range .items[*]}{.metadata.generation} {.status.observedGeneration}{\"\\n\"}{end}",
        ]);
        let done = out.lines().all(|l| {
            let mut w = l.split_whitespace();
            matches!((w.next(), w.next()), (Some(g), Some(o)) if g == o)
        });
        if done {
            return polls;
        }
        assert!(Instant::now() < end, "AnkkaFlows not reconciled after {timeout:?}:\n{out}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kafka_config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &bed().kafka);
    c
}

/// Commits offset `RECORDS` on every partition for each group, without joining the group.
fn commit_all(groups: &[String], topic: &str, partitions: i32) {
    for g in groups {
        let c: BaseConsumer = kafka_config().set("group.id", g).create().expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Offset(i64::from(RECORDS))).expect("offset");
        }
        c.commit(&tpl, CommitMode::Sync).unwrap_or_else(|e| panic!("commit for {g}: {e}"));
    }
}

/// Asserts every group reads back at offset 0 on every partition.
fn check_reset(groups: &[String], topic: &str, partitions: i32) {
    for g in groups {
        let got = kafka::committed(g, topic, partitions);
        assert!(got.values().all(|o| *o == Some(0)), "group {g} not reset: {got:?}");
    }
}

/// Runs `flow reset`, then waits (a `kubectl --watch` of the resource, so no polling delay) until
/// the done annotation holds the request's id; returns the milliseconds from starting `flow reset`.
fn flow_reset(flow_bin: &Path) -> f64 {
    let path = format!("jsonpath={{.metadata.annotations.{}}}{{\"\\n\"}}", DONE.replace('.', "\\."));
    let mut watch: Child = Command::new("kubectl")
        .args(["-n", NS, "get", "aflow", PIPELINE, "--watch", "-o", &path])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl --watch");
    let (tx, rx) = mpsc::channel::<(Instant, String)>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    // The first line is the current state: the watch is established.
    rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first line");
    let t = Instant::now();
    let o = Command::new(flow_bin).args(["reset", PIPELINE, "-n", NS]).output().expect("flow runs");
    assert!(o.status.success(), "flow reset failed: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let id = stdout.split_whitespace().last().expect("the request id").to_string();
    let end = t + Duration::from_secs(300);
    let at = loop {
        let left = end.saturating_duration_since(Instant::now());
        let (at, line) = rx.recv_timeout(left).expect("the done annotation within 300 s");
        if line.trim() == id {
            break at;
        }
    };
    let _ = watch.kill();
    let _ = watch.wait();
    at.duration_since(t).as_secs_f64() * 1000.0
}

fn kafka_tool_reset(groups: &[&str], topic: &str) {
    let mut cmd = Command::new(bed().root.join("testbed/kafka-tool"));
    cmd.args(["consumer-groups", "--bootstrap-server", &bed().kafka, "--reset-offsets", "--to-earliest", "--execute"]);
    for g in groups {
        cmd.args(["--group", g]);
    }
    cmd.args(["--topic", topic]);
    let o = cmd.output().expect("kafka-tool runs");
    assert!(o.status.success(), "kafka-tool failed: {}", String::from_utf8_lossy(&o.stderr));
}

fn delete_kafka(args: &Args) {
    let admin: AdminClient<DefaultClientContext> = kafka_config().create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let topics: Vec<String> = args.partitions.iter().map(|p| format!("bench.p{p}")).collect();
    let groups: Vec<String> = args
        .partitions
        .iter()
        .flat_map(|&p| {
            (0..args.groups.iter().copied().max().unwrap_or(0))
                .map(move |i| format!("{PIPELINE}.{}.in", streamlet(p, i)))
        })
        .chain(std::iter::once("bench.probe".to_string()))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let g: Vec<&str> = groups.iter().map(String::as_str).collect();
        if let Err(e) = admin.delete_groups(&g, &opts).await {
            eprintln!("deleting groups: {e}");
        }
        let t: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(e) = admin.delete_topics(&t, &opts).await {
            eprintln!("deleting topics: {e}");
        }
    });
}

/// Runs hyperfine on `cmd` in `dir`; returns (median, mean, stddev) in milliseconds.
fn hyperfine(cmd: &str, dir: &Path, json: &Path, ignore_failure: bool) -> Option<(f64, f64, f64)> {
    let mut h = Command::new("hyperfine");
    h.args(["-N", "--warmup", "3", "--export-json", json.to_str().expect("utf-8 path")]).current_dir(dir);
    if ignore_failure {
        h.arg("-i");
    }
    let o = h.arg(cmd).env("KUBECONFIG", &bed().kubeconfig).output().expect("hyperfine runs");
    if !o.status.success() {
        eprintln!("hyperfine failed: {}", String::from_utf8_lossy(&o.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).ok()?).ok()?;
    let r = &v["results"][0];
    Some((r["median"].as_f64()? * 1000.0, r["mean"].as_f64()? * 1000.0, r["stddev"].as_f64()? * 1000.0))
}

/// The operator from `target/release`, watching the bench namespace.
struct Op {
    child: Child,
    log: PathBuf,
}

impl Op {
    fn start(release: &Path, ledger: &Path, out_dir: &Path, n: u32) -> Op {
        ensure_namespace("ankka-flow");
        let log = out_dir.join(format!("operator-{n}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(release.join("flow-operator"))
            .env("KUBECONFIG", &bed().kubeconfig)
            .env("FLOW_LEDGER_DIR", ledger)
            .env("FLOW_KAFKA_CLUSTERS_NAMESPACE", "ankka-flow")
            .env("FLOW_WATCH_NAMESPACE", NS)
            .env("FLOW_METRICS_ADDRESS", "127.0.0.1:0")
            .env("FLOW_LEASE_NAME", format!("ankka-flow-operator-{NS}"))
            .env("HOSTNAME", format!("flow-bench-{}", std::process::id()))
            .env("FLOW_LOG_FORMAT", "text")
            .env("RUST_LOG", "info,flow_operator=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("flow-operator starts");
        Op { child, log }
    }

    fn wait_ready(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&self.log).unwrap_or_default().contains("serving /metrics and /healthz") {
            assert!(Instant::now() < end, "the operator did not start; see {}", self.log.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc status");
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }

    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        self.stop();
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

struct ResetRow {
    groups: usize,
    partitions: i32,
    flow: f64,
    flow_reps: usize,
    per_group: f64,
    per_group_reps: usize,
    all: f64,
}

#[derive(Default)]
struct Report {
    head: Vec<String>,
    idle_rss: Option<u64>,
    busy_rss: Option<u64>,
    restart_rss: Option<u64>,
    apply_reconcile_ms: Option<f64>,
    restart_ms: Option<f64>,
    resets: Vec<ResetRow>,
    refusal: Option<(f64, f64, f64)>,
    refusal_msg: String,
    generate: Option<(f64, f64, f64)>,
    probe: Option<(f64, f64)>,
}

impl Report {
    fn line(&mut self, s: &str) {
        self.head.push(s.to_string());
    }

    fn render(&self, args: &Args) -> String {
        let mut t = String::from("## flow-bench results\n\n");
        for l in &self.head {
            t.push_str(l);
            t.push('\n');
        }
        t.push_str(&format!(
            "\n### Reset latency (median ms of {} runs unless noted)\n\nAll inlets of a pipeline read one topic `bench.p<partitions>`; each inlet has its own group with \
             offsets committed on every partition. `flow reset`: from starting the CLI to the done annotation. Kafka's tool: \
             `kafka-consumer-groups --reset-offsets --to-earliest --execute`, once per group in a row, and once with every group.\n\n",
            args.reps
        ));
        t.push_str("| groups | partitions | `flow reset` to done | Kafka tool, once per group | Kafka tool, all groups in one call | flow / per-group tool | flow / all-groups tool |\n");
        t.push_str("|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.resets {
            let reps = |n: usize| {
                if n == args.reps { String::new() } else { format!(" ({n} run{})", if n == 1 { "" } else { "s" }) }
            };
            t.push_str(&format!(
                "| {} | {} | {:.0}{} | {:.0}{} | {:.0} | {:.2} | {:.2} |\n",
                r.groups,
                r.partitions,
                r.flow,
                reps(r.flow_reps),
                r.per_group,
                reps(r.per_group_reps),
                r.all,
                r.flow / r.per_group,
                r.flow / r.all
            ));
        }
        let kib = |v: Option<u64>| v.map_or("not measured".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let ms = |v: Option<f64>| v.map_or("not measured".to_string(), |m| format!("{m:.0} ms"));
        t.push_str("\n### Operator\n\n| measure | value |\n|---|---:|\n");
        t.push_str(&format!("| RSS, idle, no AnkkaFlow in its namespace | {} |\n", kib(self.idle_rss)));
        if let Some((call, dropped)) = self.probe {
            t.push_str(&format!(
                "| one fresh Kafka client with a group id: create + committed offsets / drop (median of 5) | {call:.0} ms / {dropped:.0} ms |\n"
            ));
        }
        t.push_str(&format!(
            "| apply of {} AnkkaFlows (replicas 0) until all reconciled | {} |\n",
            args.flows,
            ms(self.apply_reconcile_ms)
        ));
        t.push_str(&format!("| RSS with {} AnkkaFlows | {} |\n", args.flows, kib(self.busy_rss)));
        t.push_str(&format!(
            "| restart until all {} reconciled (generation bumped while stopped; from process start) | {} |\n",
            args.flows,
            ms(self.restart_ms)
        ));
        t.push_str(&format!("| RSS after the restart, {} AnkkaFlows | {} |\n", args.flows, kib(self.restart_rss)));
        let hf = |v: Option<(f64, f64, f64)>| {
            v.map_or("not measured".to_string(), |(med, mean, sd)| format!("{med:.1} ms (mean {mean:.1} ± {sd:.1})"))
        };
        t.push_str("\n### CLI wall time (hyperfine -N --warmup 3)\n\n| command | median |\n|---|---:|\n");
        t.push_str(&format!(
            "| `flow reset` refused (streamlet running: {}) | {} |\n",
            self.refusal_msg.replace('|', "\\|"),
            hf(self.refusal)
        ));
        t.push_str(&format!("| `flow generate` of examples/cart | {} |\n", hf(self.generate)));
        t
    }
}
