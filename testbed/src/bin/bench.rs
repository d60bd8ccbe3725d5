//! `flow-bench`: measures the reset latency of the operator against Kafka's own tool, the operator's
//! memory, CPU and reconcile time with many AnkkaFlows (each with a kwok pod) and after a restart,
//! and the wall time of the CLI, on the test bed. Run it on demand with `scripts/bench.sh` (see
//! docs/performance.md); it is not a test.
//!
//! Prints a markdown table to stdout and writes it to `target/bench/results.md`. Everything it makes
//! is its own: namespace `bench`, topics `bench.p<partitions>`, groups `bench.p<partitions>-s<i>.in`
//! and `bench-f<i>.p<partitions>-s0.in`; all are deleted at the end. While it has more pods than the
//! kwok node's capacity (110) allows, it raises that capacity, and puts the old value back after.

#[path = "bench/cli.rs"]
mod cli;
#[path = "bench/floor.rs"]
mod floor;
#[path = "bench/flows.rs"]
mod flows;
#[path = "bench/groups.rs"]
mod groups;
#[path = "bench/k8s.rs"]
mod k8s;
#[path = "bench/large.rs"]
mod large;
#[path = "bench/measure.rs"]
mod measure;
#[path = "bench/op.rs"]
mod op;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/resets.rs"]
mod resets;
#[path = "bench/settle.rs"]
mod settle;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use flow_testbed::{bed, fresh_namespace, install_cluster_secret, install_crd, kafka, kubectl, serial};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;

use crate::cli::cli;
use crate::flows::flows_row;
use crate::groups::{kafka_config, probe};
use crate::k8s::{NodePods, kubectl_must, streamlet};
use crate::measure::{loadavg, utc_now};
use crate::op::Op;
use crate::report::Report;
use crate::resets::{reset_row, trace_reset};

pub const NS: &str = "bench";
pub const PIPELINE: &str = "bench";
/// Records written to each partition; the groups commit at this offset before every reset.
pub const RECORDS: u32 = 2;
/// The test bed's one kwok node.
pub const NODE: &str = "kwok-node-0";
/// The 50-streamlet blueprint for the CLI measurements, relative to the repository root.
pub const RELAY50: &str = "testbed/bench/relay50";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// Reset latency against Kafka's tool.
    Resets,
    /// Operator memory, CPU and reconcile time with many AnkkaFlows, and after a restart.
    Flows,
    /// CLI wall time.
    Cli,
    /// One reset of many groups over many partitions, and the resource's size.
    Large,
    /// When a consumer's commit on close lands against when its group empties (what the settle
    /// can catch).
    Settle,
}

#[derive(Parser, Debug)]
#[command(about = "Benchmarks the reset, the operator's memory and the CLI on the test bed")]
pub struct Args {
    /// Repetitions of each reset measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Inlet groups per pipeline, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 10, 50])]
    pub groups: Vec<usize>,
    /// Partitions of the topic the inlets read, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = [3i32, 100, 500])]
    pub partitions: Vec<i32>,
    /// Kafka's tool once per group is repeated `reps` times only up to this many groups, once above
    /// (each call starts a JVM, about 1.3 s).
    #[arg(long, default_value_t = 10)]
    pub loop_reps_max_groups: usize,
    /// Rounds of the floor (the Kafka work alone, see `floor.rs`) per row, over one connected client
    /// and over several, after one round on a new client.
    #[arg(long, default_value_t = 20)]
    pub floor_reps: usize,
    /// Clients (connections) at most over which the floor spreads the groups' commits.
    #[arg(long, default_value_t = 16)]
    pub floor_connections: usize,
    /// AnkkaFlows for the memory and restart measurement, comma separated; each has one streamlet
    /// at replicas 1, so as many kwok pods.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    pub flows: Vec<usize>,
    /// Seconds over which the operator's CPU time is sampled once all AnkkaFlows are Ready.
    #[arg(long, default_value_t = 30)]
    pub cpu_window: u64,
    /// Which phases to run, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Phase::Resets, Phase::Settle, Phase::Large, Phase::Flows, Phase::Cli])]
    pub phases: Vec<Phase>,
    /// The large reset's <groups>x<partitions>, comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = ["200x1000".to_string()])]
    pub large: Vec<String>,
    /// Resets of each large size (the median is reported, with the fastest and slowest).
    #[arg(long, default_value_t = 3)]
    pub large_reps: usize,
    /// Rounds of the settle phase per group protocol (classic, consumer).
    #[arg(long, default_value_t = 10)]
    pub settle_reps: usize,
    /// After the reset measurements, one more reset of <groups>x<partitions> (e.g. 50x500) with a
    /// timeline: every change of the resource as a watch sees it, and the operator's log lines
    /// (debug level for the flow crates) of that window; written to target/bench/trace-*.md.
    #[arg(long)]
    pub trace_reset: Option<String>,
    /// Measure only the cost of one fresh Kafka client with a group id (as the operator makes three
    /// per group), then exit.
    #[arg(long)]
    pub probe_only: bool,
    /// How the reset rows' streamlets stopped before each `flow reset`: `never` (at 0 replicas from
    /// the start, never seen running by the operator: it waits the full settle), `before` (run with
    /// one pod each, then stopped once, more than the settle before the first reset: the seed's
    /// path), `now` (run and stopped before each reset, the request written as soon as the pods are
    /// gone).
    #[arg(long, value_enum, default_value_t = Stopped::Never)]
    pub stopped: Stopped,
}

/// See [`Args::stopped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Stopped {
    /// Never seen running.
    Never,
    /// Stopped long before the request.
    Before,
    /// Stopped right before the request.
    Now,
}

pub struct Ctx {
    pub release: PathBuf,
    pub ledger: PathBuf,
    pub out_dir: PathBuf,
    pub flow_bin: PathBuf,
    /// Operator processes started so far (names their log files).
    pub starts: u32,
}

impl Ctx {
    /// Starts an operator for the part of the run that `tag` names.
    pub fn start_op(&mut self, tag: &str) -> Op {
        self.starts += 1;
        // FLOW_BENCH_OPERATOR: another program to run as the operator, for example a script that runs
        // the release operator under a heap profiler (`heaptrack`), to find what holds its memory.
        let binary =
            std::env::var_os("FLOW_BENCH_OPERATOR").map_or_else(|| self.release.join("flow-operator"), PathBuf::from);
        let op = Op::start(&binary, &self.ledger);
        eprintln!("operator {} ({tag}) logs to {}", self.starts, op.log().display());
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

    // When a consumer's close commit lands against when its group empties.
    if args.phases.contains(&Phase::Settle) {
        let _lock = serial();
        let standin = cx.release.join("flow-standin");
        assert!(standin.exists(), "{} is missing: cargo build --release -p flow-testbed", standin.display());
        let (topic, protocols) = ("bench.settle", ["classic", "consumer"]);
        // Fewer records than the stand-in reads between its own commits (100): its only commit is
        // the one on close.
        kafka::recreate_topic(topic, 3);
        kafka::produce(topic, 3, 20);
        report.settle = settle::measure(&standin, &bed().kafka, topic, &protocols, args.settle_reps);
        settle::clean_up(&bed().kafka, topic, &protocols, args.settle_reps);
    }

    // The large reset: time to done and the resource's size.
    if args.phases.contains(&Phase::Large) {
        for (g, p) in large::sizes(&args.large) {
            let _lock = serial();
            let row = large::large_reset(&args, &cx, &op, g, p);
            eprintln!(
                "large reset: {g} groups, {p} partitions: {:.0} ms (median); {} / {} / {} bytes",
                row.to_done_ms, row.before, row.during, row.after
            );
            report.large.push(row);
            kubectl_must(&["-n", NS, "delete", "aflow", PIPELINE, "--wait=true", "--timeout=120s"]);
            // A topic of this size is not left on the shared broker longer than it is needed.
            kafka::remove_topic(&format!("bench.p{p}"));
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

/// Deletes every topic and consumer group the run made (the module doc lists them).
pub fn delete_kafka(args: &Args) {
    let admin: AdminClient<DefaultClientContext> = kafka_config().create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let large = large::sizes(&args.large);
    let topics: Vec<String> =
        args.partitions.iter().chain(large.iter().map(|(_, p)| p)).map(|p| format!("bench.p{p}")).collect();
    let p0 = args.partitions.first().copied().unwrap_or(3);
    let flows = args.flows.iter().copied().max().unwrap_or(0);
    // Without repeats: the large resets of several sizes share group names, and librdkafka refuses a
    // DeleteGroups that names a group twice (InvalidArgument).
    let groups: std::collections::BTreeSet<String> = args
        .partitions
        .iter()
        .flat_map(|&p| {
            (0..args.groups.iter().copied().max().unwrap_or(0))
                .map(move |i| format!("{PIPELINE}.{}.in", streamlet(p, i)))
        })
        .chain((0..flows).map(|i| format!("bench-f{i}.{}.in", streamlet(p0, 0))))
        .chain(["bench.probe".to_string(), format!("bench-running.{}.in", streamlet(3, 0))])
        .chain(large.iter().flat_map(|(g, p)| large::group_names(*p, *g)))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        // Groups nobody ever committed in do not exist; the broker says so per group, which is fine.
        let groups: Vec<String> = groups.into_iter().collect();
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
