//! `flow-bench`: measures the reset latency of the operator against Kafka's own tool, the operator's
//! memory, CPU and reconcile time with many AnkkaFlows (each with a kwok pod) and after a restart,
//! and the wall time of the CLI, on the test bed. Run it on demand with `scripts/bench.sh` (see
//! docs/performance.md); it is not a test.
//!
//! Prints a markdown table to stdout and writes it to `target/bench/results.md`. Everything it makes
//! is its own: namespace `bench`, topics `bench.p<partitions>`, groups `bench.p<partitions>-s<i>.in`
//! and `bench-f<i>.p<partitions>-s0.in`; all are deleted at the end. While it has more pods than the
//! kwok node's capacity (110) allows, it raises that capacity, and puts the old value back after.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use flow_testbed::{
    bed, ensure_namespace, fresh_namespace, install_cluster_secret, install_crd, kafka, kubectl, serial,
};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const NS: &str = "bench";
const PIPELINE: &str = "bench";
const REQUEST: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets";
const DONE: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets-done";
/// Records written to each partition; the groups commit at this offset before every reset.
const RECORDS: u32 = 2;
/// The test bed's one kwok node.
const NODE: &str = "kwok-node-0";
/// The 50-streamlet blueprint for the CLI measurements, relative to the repository root.
const RELAY50: &str = "testbed/bench/relay50";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Phase {
    /// Reset latency against Kafka's tool.
    Resets,
    /// Operator memory, CPU and reconcile time with many AnkkaFlows, and after a restart.
    Flows,
    /// CLI wall time.
    Cli,
}

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
    #[arg(long, value_delimiter = ',', default_values_t = [3i32, 100, 500])]
    partitions: Vec<i32>,
    /// Kafka's tool once per group is repeated `reps` times only up to this many groups, once above
    /// (each call starts a JVM, about 1.3 s).
    #[arg(long, default_value_t = 10)]
    loop_reps_max_groups: usize,
    /// AnkkaFlows for the memory and restart measurement, comma separated; each has one streamlet
    /// at replicas 1, so as many kwok pods.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    flows: Vec<usize>,
    /// Seconds over which the operator's CPU time is sampled once all AnkkaFlows are Ready.
    #[arg(long, default_value_t = 30)]
    cpu_window: u64,
    /// Which phases to run, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Phase::Resets, Phase::Flows, Phase::Cli])]
    phases: Vec<Phase>,
    /// After the reset measurements, one more reset of <groups>x<partitions> (e.g. 50x500) with a
    /// timeline: every change of the resource as a watch sees it, and the operator's log lines
    /// (debug level for the flow crates) of that window; written to target/bench/trace-*.md.
    #[arg(long)]
    trace_reset: Option<String>,
    /// Measure only the cost of one fresh Kafka client with a group id (as the operator makes three
    /// per group), then exit.
    #[arg(long)]
    probe_only: bool,
}

struct Ctx {
    release: PathBuf,
    ledger: PathBuf,
    out_dir: PathBuf,
    flow_bin: PathBuf,
    /// Operator processes started so far (names their log files).
    starts: u32,
}

impl Ctx {
    fn start_op(&mut self, tag: &str) -> Op {
        self.starts += 1;
        let op =
            Op::start(&self.release, &self.ledger, &self.out_dir.join(format!("operator-{}-{tag}.log", self.starts)));
        op.wait_ready();
        op
    }
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
    let trace = args.trace_reset.as_deref().map(|s| {
        let (g, p) = s.split_once('x').expect("--trace-reset <groups>x<partitions>, e.g. 50x500");
        (g.parse::<usize>().expect("groups"), p.parse::<i32>().expect("partitions"))
    });
    let ledger = out_dir.join("ledger");
    let _ = std::fs::remove_dir_all(&ledger);
    std::fs::create_dir_all(&ledger).expect("ledger dir");
    let mut cx = Ctx { flow_bin: release.join("flow"), release, ledger, out_dir: out_dir.clone(), starts: 0 };
    let started = Instant::now();

    let mut report = Report::default();
    report.line(&format!(
        "Measured from {} (UTC) on the test bed; `flow-bench {}`. Load average at the start: {}.",
        utc_now(),
        std::env::args().skip(1).collect::<Vec<_>>().join(" "),
        loadavg()
    ));

    // Set-up and idle memory.
    let mut op;
    {
        let _lock = serial();
        eprintln!("setting up namespace {NS}");
        install_crd();
        install_cluster_secret();
        fresh_namespace(NS);
        op = cx.start_op("idle");
        std::thread::sleep(Duration::from_secs(3));
        report.idle_rss = Some(op.rss_kib());
        eprintln!("idle RSS {} KiB", op.rss_kib());
        let p0 = args.partitions.first().copied().unwrap_or(3);
        report.probe = Some(probe(p0));
        if args.probe_only {
            op.stop();
            let _ = kubectl(&["delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=300s"]);
            delete_kafka(&args);
            let text = report.render(&args);
            print!("{text}");
            return;
        }
        // Every phase's pipelines read `bench.p<first partitions>`; the reset phase makes the others.
        kafka::recreate_topic(&format!("bench.p{p0}"), p0);
        kafka::produce(&format!("bench.p{p0}"), p0, RECORDS);
    }

    // Phase 1: reset latency. The lock is taken per partition count, so that other engineers'
    // end-to-end tests get a turn in between.
    if args.phases.contains(&Phase::Resets) {
        for (i, &p) in args.partitions.iter().enumerate() {
            let _lock = serial();
            let topic = format!("bench.p{p}");
            if i > 0 {
                kafka::recreate_topic(&topic, p);
                kafka::produce(&topic, p, RECORDS);
            }
            for &n in &args.groups {
                let row = reset_row(&args, &cx, n, p);
                report.resets.push(row);
                if trace == Some((n, p)) {
                    report.trace = Some(trace_reset(&cx, &op, n, p));
                }
            }
            kubectl_must(&["-n", NS, "delete", "aflow", PIPELINE, "--wait=true", "--timeout=120s"]);
        }
    }

    // Phase 2: memory, CPU and reconcile time with many AnkkaFlows, each with a kwok pod, and after
    // a restart. A fresh operator for each count, so that no figure carries an earlier high-water mark.
    if args.phases.contains(&Phase::Flows) {
        op.stop();
        for &n in &args.flows {
            let _lock = serial();
            let _capacity = NodePods::at_least(n + 110);
            let row = flows_row(&args, &mut cx, n);
            report.flows.push(row);
        }
        op = cx.start_op("cli");
    }

    // Phase 3: CLI wall time.
    if args.phases.contains(&Phase::Cli) {
        let _lock = serial();
        cli(&mut report, &cx, &mut op);
    }

    // Clean up.
    {
        let _lock = serial();
        op.stop();
        let _ = kubectl(&["delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=600s"]);
        delete_kafka(&args);
    }

    report.line(&format!(
        "Finished {} (UTC) after {:.1} min. Load average at the end: {}.",
        utc_now(),
        started.elapsed().as_secs_f64() / 60.0,
        loadavg()
    ));
    let text = report.render(&args);
    print!("{text}");
    std::fs::write(out_dir.join("results.md"), &text).expect("write results.md");
    eprintln!("written to {}", out_dir.join("results.md").display());
}

/// One row of the reset table: `n` groups over `p` partitions, `flow reset` against Kafka's tool.
fn reset_row(args: &Args, cx: &Ctx, n: usize, p: i32) -> ResetRow {
    let topic = format!("bench.p{p}");
    let groups: Vec<String> = (0..n).map(|i| format!("{PIPELINE}.{}.in", streamlet(p, i))).collect();
    apply(&pipeline_yaml(PIPELINE, p, n, 0, "1"));
    wait_reconciled(Duration::from_secs(120));
    let mut flow_ms = Vec::new();
    for r in 0..args.reps {
        commit_all(&groups, &topic, p);
        let ms = flow_reset(&cx.flow_bin);
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
    ResetRow {
        groups: n,
        partitions: p,
        flow: median(&flow_ms),
        flow_min: flow_ms.iter().copied().fold(f64::INFINITY, f64::min),
        flow_max: flow_ms.iter().copied().fold(0.0, f64::max),
        flow_reps: flow_ms.len(),
        per_group: median(&loop_ms),
        per_group_reps: loop_ms.len(),
        all: median(&all_ms),
    }
}

/// One more `flow reset` of `n` groups over `p` partitions, with the resource's changes as a watch
/// sees them and the operator's log lines of that window, as markdown.
fn trace_reset(cx: &Ctx, op: &Op, n: usize, p: i32) -> String {
    let topic = format!("bench.p{p}");
    let groups: Vec<String> = (0..n).map(|i| format!("{PIPELINE}.{}.in", streamlet(p, i))).collect();
    commit_all(&groups, &topic, p);
    // The resource as JSON on every change; parsed on a thread, with the instant each one arrived.
    let mut watch: Child = Command::new("kubectl")
        .args(["-n", NS, "get", "aflow", PIPELINE, "--watch", "-o", "json"])
        .env("KUBECONFIG", &bed().kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl --watch");
    let (tx, rx) = mpsc::channel::<(Instant, serde_json::Value)>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(stdout).into_iter::<serde_json::Value>() {
            let Ok(v) = v else { break };
            if tx.send((Instant::now(), v)).is_err() {
                break;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("the watch's first object");
    let log_before = std::fs::read_to_string(&op.log).unwrap_or_default().len();
    let wall0 = wall_secs_of_day(SystemTime::now());
    let mut seen: Vec<(Instant, serde_json::Value)> = Vec::new();
    let (t0, ms) = reset_until_done(
        &cx.flow_bin,
        &rx,
        |v| v["metadata"]["annotations"][DONE].as_str().map(str::to_string),
        |at, v| seen.push((at, v.clone())),
    );
    // The operator goes on after the done annotation (final status, events, the catch-up follower);
    // give it a moment so the timeline shows that too.
    let end = Instant::now() + Duration::from_secs(3);
    while let Ok((at, v)) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        seen.push((at, v));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    check_reset(&groups, &topic, p);
    // How big the resource is that every status write carries, at the end.
    let size = |v: &serde_json::Value| serde_json::to_string(v).map_or(0, |s| s.len()) as f64 / 1024.0;
    let last = seen.last().map(|(_, v)| v.clone()).unwrap_or_default();
    let sizes = format!(
        "At the end the resource is {:.0} KiB of JSON: `status.reset` {:.0} KiB, `metadata.managedFields` {:.0} KiB, `spec` {:.0} KiB.",
        size(&last),
        size(&last["status"]["reset"]),
        size(&last["metadata"]["managedFields"]),
        size(&last["spec"])
    );
    let mut md = format!(
        "### Timeline of one `flow reset`, {n} groups over {p} partitions ({ms:.0} ms to the done annotation)\n\n{sizes}\n\n\
         Every change of the resource that a `kubectl get --watch -o json` saw, in ms from starting `flow reset`: \
         the id in the request annotation, the reset's phase, how many groups had each outcome in `status.reset.groups`, \
         and the id in the done annotation.\n\n\
         | ms | request annotation | reset phase | groups by outcome | done annotation |\n|---:|---|---|---|---|\n"
    );
    for (at, v) in &seen {
        let reset = &v["status"]["reset"];
        let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
        for g in reset["groups"].as_array().into_iter().flatten() {
            *outcomes.entry(g["outcome"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
        let outcomes = outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        let done = v["metadata"]["annotations"][DONE].as_str().unwrap_or("");
        let request = v["metadata"]["annotations"][REQUEST]
            .as_str()
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
            .and_then(|r| r["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        md.push_str(&format!(
            "| {:.0} | {} | {} | {} | {} |\n",
            signed_ms(*at, t0),
            request.get(..8).unwrap_or(&request),
            reset["phase"].as_str().unwrap_or(""),
            outcomes,
            done.get(..8).unwrap_or(done)
        ));
    }
    let log = std::fs::read_to_string(&op.log).unwrap_or_default();
    let window = log.get(log_before..).unwrap_or_default();
    let reconciled = "flow_operator::controller: reconciled";
    let lines: Vec<String> = window
        .lines()
        .filter(|l| !l.contains(reconciled))
        .map(|l| match l.split_once(' ').and_then(|(ts, rest)| Some((log_secs_of_day(ts)?, rest))) {
            Some((s, rest)) => format!("{:>7.0} ms {}", (s - wall0) * 1000.0, rest.trim_start()),
            None => l.to_string(),
        })
        .collect();
    md.push_str(&format!(
        "\nThe operator's log of that window ({} lines, without the {} `reconciled` lines), in ms from starting `flow reset`:\n\n```text\n",
        lines.len(),
        window.matches(reconciled).count()
    ));
    for l in lines.iter().take(300) {
        md.push_str(l);
        md.push('\n');
    }
    if lines.len() > 300 {
        md.push_str(&format!("... {} more lines in the log\n", lines.len() - 300));
    }
    md.push_str("```\n");
    let path = cx.out_dir.join(format!("trace-{n}g-{p}p.md"));
    std::fs::write(&path, &md).expect("write the trace");
    eprintln!("trace written to {}", path.display());
    md
}

fn signed_ms(at: Instant, t0: Instant) -> f64 {
    if at >= t0 {
        at.duration_since(t0).as_secs_f64() * 1000.0
    } else {
        -(t0.duration_since(at).as_secs_f64() * 1000.0)
    }
}

/// One row of the AnkkaFlows table: `n` AnkkaFlows, each one streamlet at replicas 1 (a kwok pod).
fn flows_row(args: &Args, cx: &mut Ctx, n: usize) -> FlowsRow {
    let p = args.partitions.first().copied().unwrap_or(3);
    let docs = |version: &str| -> String {
        (0..n).map(|i| pipeline_yaml(&format!("bench-f{i}"), p, 1, 1, version)).collect::<Vec<_>>().join("---\n")
    };
    let mut op = cx.start_op(&format!("flows{n}"));
    std::thread::sleep(Duration::from_secs(3));
    let idle_rss = op.rss_kib();

    let watch = FlowWatch::start();
    let t = Instant::now();
    apply(&docs("1"));
    let apply_ms = ms_since(t);
    let (reconciled, ready) = watch.wait(n, t, Duration::from_secs(1200));
    drop(watch);
    let pods = running_pods();
    let cpu_to_ready = op.cpu_secs();
    eprintln!(
        "{n} flows: kubectl apply {apply_ms:.0} ms, all reconciled {reconciled:.0} ms, all Ready {ready:.0} ms, {pods} pods Running"
    );
    std::thread::sleep(Duration::from_secs(5));
    let cpu0 = op.cpu_secs();
    std::thread::sleep(Duration::from_secs(args.cpu_window));
    let cpu_window = op.cpu_secs() - cpu0;
    let (rss, hwm) = (op.rss_kib(), op.hwm_kib());
    eprintln!("{n} flows: RSS {rss} KiB (peak {hwm} KiB), CPU {cpu_window:.2} s over {} s", args.cpu_window);

    op.stop();
    // Bump every resource's generation while the operator is down, so that the restarted one has to
    // reconcile each of them again (the version is not in the Deployments: no pod changes).
    let t = Instant::now();
    apply(&docs("2"));
    let reapply_ms = ms_since(t);
    let watch = FlowWatch::start();
    let t = Instant::now();
    op = cx.start_op(&format!("flows{n}-restart"));
    let (restart_reconciled, restart_ready) = watch.wait(n, t, Duration::from_secs(1200));
    drop(watch);
    let restart_cpu = op.cpu_secs();
    eprintln!("{n} flows: restart, all reconciled {restart_reconciled:.0} ms, all Ready {restart_ready:.0} ms");
    std::thread::sleep(Duration::from_secs(5));
    let (restart_rss, restart_hwm) = (op.rss_kib(), op.hwm_kib());
    op.stop();

    let t = Instant::now();
    // Not `--wait`: kubectl then waits for the resources one by one, which takes minutes for 1,000.
    kubectl_must(&["-n", NS, "delete", "aflow", "--all", "--wait=false"]);
    wait_no_pods(Duration::from_secs(900));
    let delete_ms = ms_since(t);
    eprintln!("{n} flows: deleted, pods gone after {delete_ms:.0} ms");
    FlowsRow {
        flows: n,
        pods,
        idle_rss,
        apply_ms,
        reconciled,
        ready,
        cpu_to_ready,
        rss,
        hwm,
        cpu_window,
        reapply_ms,
        restart_reconciled,
        restart_ready,
        restart_cpu,
        restart_rss,
        restart_hwm,
        delete_ms,
    }
}

/// CLI wall time: `flow generate` of the example and of the 50-streamlet blueprint, `flow reset`
/// refused by its guard (1 and 50 streamlets running), and `flow reset` that passes its guards and
/// writes the request (50 streamlets at 0, no operator).
fn cli(report: &mut Report, cx: &Ctx, op: &mut Op) {
    let b = bed();
    let flow = cx.flow_bin.display().to_string();
    let relay = b.root.join(RELAY50);
    let p = 3;
    let gen_cart = format!(
        "{flow} generate blueprint.conf --descriptors flow --conf prod.conf --image router=registry.example.com/cart-router:1.2 -n {NS}"
    );
    let gen_relay =
        format!("{flow} generate blueprint.conf --descriptors flow --conf prod.conf --images images.conf -n {NS}");
    let gen_relay_v = format!("{gen_relay} --version 1");
    report.cli.push((
        "`flow generate` of examples/cart (1 streamlet, 3 topics)".into(),
        hyperfine(&gen_cart, &b.root.join("examples/cart"), &cx.out_dir.join("hyperfine-generate-cart.json"), false),
    ));
    report.cli.push((
        "`flow generate` of testbed/bench/relay50 (50 streamlets, 51 topics)".into(),
        hyperfine(&gen_relay, &relay, &cx.out_dir.join("hyperfine-generate-relay50.json"), false),
    ));
    report.cli.push((
        "`flow generate` of relay50 with `--version 1` (no `git describe`)".into(),
        hyperfine(&gen_relay_v, &relay, &cx.out_dir.join("hyperfine-generate-relay50-version.json"), false),
    ));

    // Refused: 1 streamlet running.
    apply(&pipeline_yaml("bench-running", p, 1, 1, "1"));
    wait_reconciled(Duration::from_secs(120));
    let refused = Command::new(&cx.flow_bin).args(["reset", "bench-running", "-n", NS]).output().expect("flow runs");
    assert!(!refused.status.success(), "flow reset of a running pipeline must refuse");
    let msg = String::from_utf8_lossy(&refused.stderr).lines().next().unwrap_or_default().to_string();
    report.refusal_msg = msg.split(" Stop them first").next().unwrap_or_default().to_string();
    report.cli.push((
        "`flow reset` refused, 1 streamlet running (GET, pod list)".into(),
        hyperfine(
            &format!("{flow} reset bench-running -n {NS}"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-refused-1.json"),
            true,
        ),
    ));

    // Refused: 50 streamlets running (the blueprint as generated, replicas 1 each).
    let yaml = generate(cx, &relay, &["--conf", "prod.conf", "--version", "1"]);
    apply(&yaml);
    wait_ready("relay50", Duration::from_secs(300));
    let o = Command::new(&cx.flow_bin).args(["reset", "relay50", "-n", NS]).output().expect("flow runs");
    assert!(!o.status.success(), "flow reset of a running pipeline must refuse");
    report.cli.push((
        "`flow reset` refused, 50 streamlets running (GET, pod list of 50)".into(),
        hyperfine(
            &format!("{flow} reset relay50 -n {NS}"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-refused-50.json"),
            true,
        ),
    ));

    // Accepted: 50 streamlets at 0, with no operator running, so each run is the CLI alone: GET, pod
    // list, guards, and the conditional write of the request annotation. `--replace` supersedes the
    // previous run's request, which no operator takes up.
    op.stop();
    let yaml = generate(
        cx,
        &relay,
        &["--conf", "prod.conf", "--conf", "stop.conf", "--version", "1", "--pipeline", "relay50-idle"],
    );
    apply(&yaml);
    let o = Command::new(&cx.flow_bin).args(["reset", "relay50-idle", "-n", NS]).output().expect("flow runs");
    assert!(o.status.success(), "flow reset of a stopped pipeline: {}", String::from_utf8_lossy(&o.stderr));
    report.cli.push((
        "`flow reset --replace` accepted, 50 streamlets at 0 (GET, pod list, guards, annotation write)".into(),
        hyperfine(
            &format!("{flow} reset relay50-idle -n {NS} --replace"),
            &b.root,
            &cx.out_dir.join("hyperfine-reset-accepted-50.json"),
            false,
        ),
    ));
}

/// `flow generate` of the blueprint in `dir` with `extra` arguments, into namespace `bench`.
fn generate(cx: &Ctx, dir: &Path, extra: &[&str]) -> String {
    let o = Command::new(&cx.flow_bin)
        .args(["generate", "blueprint.conf", "--descriptors", "flow", "--images", "images.conf", "-n", NS])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("flow runs");
    assert!(o.status.success(), "flow generate: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("UTF-8")
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

/// One `kubectl apply -f` of `yaml` (any number of documents), server-side so that each object is
/// one PATCH.
fn apply(yaml: &str) {
    let path = std::env::temp_dir().join(format!("flow-bench-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write yaml");
    kubectl_must(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=flow-bench",
        "-f",
        path.to_str().expect("utf-8 path"),
    ]);
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

/// Polls until AnkkaFlow `name` is reconciled and its `status.phase` is `Ready`.
fn wait_ready(name: &str, timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        let out = kubectl_must(&[
            "-n",
            NS,
            "get",
            "aflow",
            name,
            "-o",
            "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.phase}",
        ]);
        let w: Vec<&str> = out.split(' ').collect();
        if w.len() == 3 && w[0] == w[1] && w[2] == "Ready" {
            return;
        }
        assert!(Instant::now() < end, "{name} not Ready after {timeout:?}: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A `kubectl get aflow --watch` of the namespace: per resource its generation, observed generation
/// and phase, with the instant each change arrived. No polling, so no polling delay, whatever the
/// number of resources.
struct FlowWatch {
    child: Child,
    rx: mpsc::Receiver<(Instant, String)>,
}

impl FlowWatch {
    fn start() -> FlowWatch {
        let mut child = Command::new("kubectl")
            .args([
                "-n",
                NS,
                "get",
                "aflow",
                "--watch",
                "-o",
                "jsonpath={.metadata.name} {.metadata.generation} {.status.observedGeneration} {.status.phase}{\"\\n\"}",
            ])
            .env("KUBECONFIG", &bed().kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl --watch");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        FlowWatch { child, rx }
    }

    /// Waits until `n` resources are all reconciled (observed generation = generation) and all
    /// Ready; returns the ms from `t` at which each first held.
    fn wait(&self, n: usize, t: Instant, timeout: Duration) -> (f64, f64) {
        let end = t + timeout;
        let mut state: HashMap<String, (bool, bool)> = HashMap::new();
        let mut reconciled = None;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let (at, line) = self.rx.recv_timeout(left).unwrap_or_else(|_| {
                let behind = state.values().filter(|(r, _)| !r).count();
                let not_ready = state.values().filter(|(_, r)| !r).count();
                panic!(
                    "after {timeout:?}: {} of {n} AnkkaFlows seen, {behind} not reconciled, {not_ready} not Ready",
                    state.len()
                )
            });
            let w: Vec<&str> = line.split(' ').collect();
            if w.len() < 4 || w[0].is_empty() {
                continue;
            }
            state.insert(w[0].to_string(), (w[1] == w[2], w[3] == "Ready"));
            if state.len() < n {
                continue;
            }
            let ms = at.duration_since(t).as_secs_f64() * 1000.0;
            if reconciled.is_none() && state.values().all(|(r, _)| *r) {
                reconciled = Some(ms);
            }
            if let Some(r) = reconciled
                && state.values().all(|(r, ready)| *r && *ready)
            {
                return (r, ms);
            }
        }
    }
}

impl Drop for FlowWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pods of the namespace in phase Running.
fn running_pods() -> usize {
    kubectl_must(&["-n", NS, "get", "pods", "--field-selector=status.phase=Running", "-o", "name"]).lines().count()
}

/// Waits until the namespace has no AnkkaFlow, Deployment, ReplicaSet or pod left.
fn wait_no_pods(timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        let left =
            kubectl_must(&["-n", NS, "get", "ankkaflows,deployments,replicasets,pods", "-o", "name"]).lines().count();
        if left == 0 {
            return;
        }
        assert!(Instant::now() < end, "{left} AnkkaFlows, Deployments, ReplicaSets or pods left after {timeout:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The kwok node's pod capacity, raised to at least a number while this lives, then put back.
struct NodePods {
    restore: Option<String>,
}

impl NodePods {
    fn at_least(pods: usize) -> NodePods {
        let now = kubectl_must(&["get", "node", NODE, "-o", "jsonpath={.status.allocatable.pods}"]);
        let now = now.trim().to_string();
        if now.parse::<usize>().is_ok_and(|n| n >= pods) {
            return NodePods { restore: None };
        }
        eprintln!("raising the pod capacity of {NODE} from {now} to {pods} for the measurement");
        Self::set(&pods.to_string());
        NodePods { restore: Some(now) }
    }

    fn set(pods: &str) {
        let patch = format!(r#"{{"status":{{"capacity":{{"pods":"{pods}"}},"allocatable":{{"pods":"{pods}"}}}}}}"#);
        kubectl_must(&["patch", "node", NODE, "--subresource=status", "--type=merge", "-p", &patch]);
    }
}

impl Drop for NodePods {
    fn drop(&mut self) {
        if let Some(old) = self.restore.take() {
            eprintln!("putting the pod capacity of {NODE} back to {old}");
            let patch = format!(r#"{{"status":{{"capacity":{{"pods":"{old}"}},"allocatable":{{"pods":"{old}"}}}}}}"#);
            let _ = kubectl(&["patch", "node", NODE, "--subresource=status", "--type=merge", "-p", &patch]);
        }
    }
}

fn kafka_config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &bed().kafka);
    c
}

/// Commits offset `RECORDS` on every partition for each group, without joining the group; 10 groups
/// at a time (each client takes about 0.1 s to close).
fn commit_all(groups: &[String], topic: &str, partitions: i32) {
    for_each_group(groups, |g| {
        let c: BaseConsumer = kafka_config().set("group.id", g).create().expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Offset(i64::from(RECORDS))).expect("offset");
        }
        c.commit(&tpl, CommitMode::Sync).unwrap_or_else(|e| panic!("commit for {g}: {e}"));
    });
}

/// Asserts every group reads back at offset 0 on every partition.
fn check_reset(groups: &[String], topic: &str, partitions: i32) {
    for_each_group(groups, |g| {
        let got = kafka::committed(g, topic, partitions);
        assert!(got.values().all(|o| *o == Some(0)), "group {g} not reset: {got:?}");
    });
}

/// Runs `f` for every group, 10 threads at a time; a panic in one is a panic here.
fn for_each_group(groups: &[String], f: impl Fn(&str) + Sync) {
    for chunk in groups.chunks(10) {
        std::thread::scope(|s| {
            for g in chunk {
                let f = &f;
                s.spawn(move || f(g));
            }
        });
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
    let (_, ms) = reset_until_done(flow_bin, &rx, |line| Some(line.trim().to_string()), |_, _| {});
    let _ = watch.kill();
    let _ = watch.wait();
    ms
}

/// Starts `flow reset`, then reads `rx` (a watch of the resource) until `done_of` an item is the
/// request's id, passing every item to `each`; returns the instant the CLI was started and the ms
/// from then to the item that showed the done annotation.
fn reset_until_done<T>(
    flow_bin: &Path,
    rx: &mpsc::Receiver<(Instant, T)>,
    done_of: impl Fn(&T) -> Option<String>,
    mut each: impl FnMut(Instant, &T),
) -> (Instant, f64) {
    let t = Instant::now();
    let o = Command::new(flow_bin).args(["reset", PIPELINE, "-n", NS]).output().expect("flow runs");
    assert!(o.status.success(), "flow reset failed: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let id = stdout.split_whitespace().last().expect("the request id").to_string();
    let end = t + Duration::from_secs(600);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let (at, item) = rx.recv_timeout(left).expect("the done annotation within 600 s");
        each(at, &item);
        if done_of(&item).is_some_and(|d| d == id) {
            return (t, at.duration_since(t).as_secs_f64() * 1000.0);
        }
    }
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
    let p0 = args.partitions.first().copied().unwrap_or(3);
    let flows = args.flows.iter().copied().max().unwrap_or(0);
    let groups: Vec<String> = args
        .partitions
        .iter()
        .flat_map(|&p| {
            (0..args.groups.iter().copied().max().unwrap_or(0))
                .map(move |i| format!("{PIPELINE}.{}.in", streamlet(p, i)))
        })
        .chain((0..flows).map(|i| format!("bench-f{i}.{}.in", streamlet(p0, 0))))
        .chain(["bench.probe".to_string(), format!("bench-running.{}.in", streamlet(3, 0))])
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        // Groups nobody ever committed in do not exist; the broker says so per group, which is fine.
        for chunk in groups.chunks(200) {
            let g: Vec<&str> = chunk.iter().map(String::as_str).collect();
            if let Err(e) = admin.delete_groups(&g, &opts).await {
                eprintln!("deleting groups: {e}");
            }
        }
        let t: Vec<&str> = topics.iter().map(String::as_str).collect();
        if let Err(e) = admin.delete_topics(&t, &opts).await {
            eprintln!("deleting topics: {e}");
        }
    });
}

/// Runs hyperfine on `cmd` in `dir`; returns (median, mean, stddev, runs) in milliseconds.
fn hyperfine(cmd: &str, dir: &Path, json: &Path, ignore_failure: bool) -> Option<Timing> {
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
    let runs = r["times"].as_array().map_or(0, Vec::len);
    Some((r["median"].as_f64()? * 1000.0, r["mean"].as_f64()? * 1000.0, r["stddev"].as_f64()? * 1000.0, runs))
}

/// The operator from `target/release`, watching the bench namespace.
struct Op {
    child: Child,
    log: PathBuf,
}

impl Op {
    fn start(release: &Path, ledger: &Path, log: &Path) -> Op {
        ensure_namespace("ankka-flow");
        let file = std::fs::File::create(log).expect("log file");
        let child = Command::new(release.join("flow-operator"))
            .env("KUBECONFIG", &bed().kubeconfig)
            .env("FLOW_LEDGER_DIR", ledger)
            .env("FLOW_KAFKA_CLUSTERS_NAMESPACE", "ankka-flow")
            .env("FLOW_WATCH_NAMESPACE", NS)
            .env("FLOW_METRICS_ADDRESS", "127.0.0.1:0")
            .env("FLOW_LEASE_NAME", format!("ankka-flow-operator-{NS}"))
            .env("HOSTNAME", format!("flow-bench-{}", std::process::id()))
            .env("FLOW_LOG_FORMAT", "text")
            .env("RUST_LOG", "info,flow_operator=debug,flow_adapters=debug,flow_core=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("flow-operator starts");
        Op { child, log: log.to_path_buf() }
    }

    fn wait_ready(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&self.log).unwrap_or_default().contains("serving /metrics and /healthz") {
            assert!(Instant::now() < end, "the operator did not start; see {}", self.log.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status_kib(&self, key: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc status");
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/<pid>/status"))
    }

    /// Resident set size now.
    fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// Peak resident set size since the process started.
    fn hwm_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// User plus system CPU seconds since the process started.
    fn cpu_secs(&self) -> f64 {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("/proc stat");
        // Fields after the command name (which is in parentheses): state is field 3, utime 14, stime 15.
        let rest = &s[s.rfind(')').expect("stat format") + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        ticks as f64 / clock_ticks()
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

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
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
        .args(["-u", "+%Y-%m-%d %H:%M:%S"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Seconds since midnight UTC of a wall-clock time.
fn wall_secs_of_day(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() % 86_400.0)
}

/// Seconds since midnight UTC of a log timestamp such as `2026-11-29T17:14:01.584169Z`.
fn log_secs_of_day(ts: &str) -> Option<f64> {
    let time = ts.split_once('T')?.1.strip_suffix('Z')?;
    let mut f = time.split(':');
    let (h, m, s) = (f.next()?.parse::<f64>().ok()?, f.next()?.parse::<f64>().ok()?, f.next()?.parse::<f64>().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

/// A hyperfine result: median, mean and standard deviation in ms, and the number of runs.
type Timing = (f64, f64, f64, usize);

struct ResetRow {
    groups: usize,
    partitions: i32,
    flow: f64,
    flow_min: f64,
    flow_max: f64,
    flow_reps: usize,
    per_group: f64,
    per_group_reps: usize,
    all: f64,
}

struct FlowsRow {
    flows: usize,
    pods: usize,
    idle_rss: u64,
    apply_ms: f64,
    reconciled: f64,
    ready: f64,
    cpu_to_ready: f64,
    rss: u64,
    hwm: u64,
    cpu_window: f64,
    reapply_ms: f64,
    restart_reconciled: f64,
    restart_ready: f64,
    restart_cpu: f64,
    restart_rss: u64,
    restart_hwm: u64,
    delete_ms: f64,
}

#[derive(Default)]
struct Report {
    head: Vec<String>,
    idle_rss: Option<u64>,
    resets: Vec<ResetRow>,
    flows: Vec<FlowsRow>,
    cli: Vec<(String, Option<Timing>)>,
    refusal_msg: String,
    probe: Option<(f64, f64)>,
    trace: Option<String>,
}

impl Report {
    fn line(&mut self, s: &str) {
        self.head.push(s.to_string());
    }

    fn render(&self, args: &Args) -> String {
        let mut t = String::from("## flow-bench results\n\n");
        for l in &self.head {
            t.push_str(l);
            t.push_str("\n\n");
        }
        if !self.resets.is_empty() {
            t.push_str(&format!(
                "### Reset latency (median ms of {} runs unless noted)\n\nAll inlets of a pipeline read one topic `bench.p<partitions>`; each inlet has its own group with \
                 offsets committed on every partition. `flow reset`: from starting the CLI to the done annotation (min-max of the runs in brackets). Kafka's tool: \
                 `kafka-consumer-groups --reset-offsets --to-earliest --execute`, once per group in a row, and once with every group.\n\n",
                args.reps
            ));
            t.push_str("| groups | partitions | `flow reset` to done | Kafka tool, once per group | Kafka tool, all groups in one call | flow / per-group tool | flow / all-groups tool |\n");
            t.push_str("|---:|---:|---:|---:|---:|---:|---:|\n");
            for r in &self.resets {
                let reps = |n: usize| {
                    if n == args.reps { String::new() } else { format!(" ({n} run{})", if n == 1 { "" } else { "s" }) }
                };
                let spread =
                    if r.flow_reps > 1 { format!(" [{:.0}-{:.0}]", r.flow_min, r.flow_max) } else { String::new() };
                t.push_str(&format!(
                    "| {} | {} | {:.0}{}{} | {:.0}{} | {:.0} | {:.2} | {:.2} |\n",
                    r.groups,
                    r.partitions,
                    r.flow,
                    spread,
                    reps(r.flow_reps),
                    r.per_group,
                    reps(r.per_group_reps),
                    r.all,
                    r.flow / r.per_group,
                    r.flow / r.all
                ));
            }
            t.push('\n');
        }
        let mib = |k: u64| format!("{:.1}", k as f64 / 1024.0);
        t.push_str("### Operator\n\n| measure | value |\n|---|---:|\n");
        if let Some(k) = self.idle_rss {
            t.push_str(&format!("| RSS, idle, no AnkkaFlow in its namespace | {} MiB |\n", mib(k)));
        }
        if let Some((call, dropped)) = self.probe {
            t.push_str(&format!(
                "| one fresh Kafka client with a group id: create + committed offsets / drop (median of 5) | {call:.0} ms / {dropped:.0} ms |\n"
            ));
        }
        if !self.flows.is_empty() {
            t.push_str(&format!(
                "\n### Operator with many AnkkaFlows (one streamlet at replicas 1 each, so one kwok pod each)\n\n\
                 A fresh operator per count. Times in ms from the start of the one `kubectl apply` (server-side, one multi-document file), \
                 and for the restart from starting the new process (every resource's `spec.version` changed while it was stopped). \
                 Reconciled: every `status.observedGeneration` = generation; Ready: every `status.phase` Ready (all pods ready), \
                 both seen through a `kubectl get --watch`. RSS settled 5 s after all Ready; CPU is the operator's user + system time.\n\n\
                 | measure | {} |\n|---|{}\n",
                self.flows.iter().map(|f| format!("{} AnkkaFlows", f.flows)).collect::<Vec<_>>().join(" | "),
                "---:|".repeat(self.flows.len())
            ));
            let row = |name: &str, f: &dyn Fn(&FlowsRow) -> String| {
                format!("| {name} | {} |\n", self.flows.iter().map(f).collect::<Vec<_>>().join(" | "))
            };
            t.push_str(&row("pods Running", &|f| f.pods.to_string()));
            t.push_str(&row("RSS of the fresh operator before the apply (MiB)", &|f| mib(f.idle_rss)));
            t.push_str(&row("`kubectl apply` itself (ms)", &|f| format!("{:.0}", f.apply_ms)));
            t.push_str(&row("apply → all reconciled (ms)", &|f| format!("{:.0}", f.reconciled)));
            t.push_str(&row("apply → all Ready (ms)", &|f| format!("{:.0}", f.ready)));
            t.push_str(&row("operator CPU from its start until all Ready (s)", &|f| format!("{:.1}", f.cpu_to_ready)));
            t.push_str(&row("RSS with all Ready (MiB)", &|f| mib(f.rss)));
            t.push_str(&row("peak RSS so far (MiB)", &|f| mib(f.hwm)));
            t.push_str(&row(&format!("operator CPU over {} s with all Ready (s)", args.cpu_window), &|f| {
                format!("{:.2}", f.cpu_window)
            }));
            t.push_str(&row("re-apply with a new `spec.version` while stopped (ms)", &|f| {
                format!("{:.0}", f.reapply_ms)
            }));
            t.push_str(&row("**restart → all reconciled (ms)**", &|f| format!("**{:.0}**", f.restart_reconciled)));
            t.push_str(&row("restart → all Ready (ms)", &|f| format!("{:.0}", f.restart_ready)));
            t.push_str(&row("operator CPU from the restart until all Ready (s)", &|f| format!("{:.1}", f.restart_cpu)));
            t.push_str(&row("RSS after the restart (MiB)", &|f| mib(f.restart_rss)));
            t.push_str(&row("peak RSS after the restart (MiB)", &|f| mib(f.restart_hwm)));
            t.push_str(&row("`kubectl delete aflow --all` → nothing left (ms)", &|f| format!("{:.0}", f.delete_ms)));
        }
        if !self.cli.is_empty() {
            let hf = |v: &Option<Timing>| {
                v.map_or("not measured".to_string(), |(med, mean, sd, runs)| {
                    format!("{med:.1} ms (mean {mean:.1} ± {sd:.1}, {runs} runs)")
                })
            };
            t.push_str("\n### CLI wall time (hyperfine -N --warmup 3)\n\n| command | median |\n|---|---:|\n");
            for (what, v) in &self.cli {
                t.push_str(&format!("| {what} | {} |\n", hf(v)));
            }
            t.push_str(&format!("\nThe refusal reads: {}\n", self.refusal_msg.replace('|', "\\|")));
        }
        if let Some(trace) = &self.trace {
            t.push('\n');
            t.push_str(trace);
        }
        t
    }
}
