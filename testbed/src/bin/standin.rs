//! `flow-standin`: a stand-in for a streamlet's inlet, for tests and the demo.
//!
//! It joins the inlet's consumer group (`--group`, which is also its `client.id`, as a streamlet's
//! sidecar does), reads the topic, commits what it read, and prints a one-line JSON summary on stdout:
//! `{"records":N,"first":{"<partition>":<offset>},"next":{"<partition>":<offset>}}` where `first` is
//! the first offset read per partition and `next` the committed position.
//!
//! Modes: `--expect N` reads until N records arrived (then commits and exits 0; exits 1 if they do
//! not arrive within `--timeout`); `--hold` stays in the group, reading and committing, until it is
//! sent SIGTERM or SIGINT, then commits and leaves (a live member, or a pod committing on close).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;

#[derive(Parser, Debug)]
#[command(name = "flow-standin", about = "Stand-in streamlet consumer for tests and the demo")]
struct Args {
    /// Kafka brokers.
    #[arg(long, env = "FLOW_TESTBED_KAFKA", default_value = "127.0.0.1:19092")]
    bootstrap_servers: String,
    /// Consumer group, also used as client.id: <pipeline>.<streamlet>.<inlet>.
    #[arg(long)]
    group: String,
    /// Topic to read.
    #[arg(long)]
    topic: String,
    /// Read this many records, commit and exit.
    #[arg(long, conflicts_with = "hold")]
    expect: Option<u64>,
    /// Stay in the group until SIGTERM/SIGINT, then commit and leave.
    #[arg(long)]
    hold: bool,
    /// Give up after this many seconds (with --expect).
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Group protocol: classic, or consumer (KIP-848).
    #[arg(long, default_value = "classic")]
    group_protocol: String,
    /// Where a group without committed offsets starts: earliest or latest.
    #[arg(long, default_value = "earliest")]
    auto_offset_reset: String,
    /// Records per second at most (0: unthrottled).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Extra client properties, key=value; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &args.bootstrap_servers)
        .set("group.id", &args.group)
        .set("client.id", &args.group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", &args.auto_offset_reset)
        .set("group.protocol", &args.group_protocol);
    if args.group_protocol == "classic" {
        cfg.set("session.timeout.ms", "6000").set("heartbeat.interval.ms", "500");
    }
    for p in &args.properties {
        let (k, v) = p.split_once('=').context("--property takes KEY=VALUE")?;
        cfg.set(k, v);
    }
    let consumer: BaseConsumer = cfg.create().context("creating the consumer")?;
    consumer.subscribe(&[&args.topic]).context("subscribing")?;

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [stop_signals::SIGTERM, stop_signals::SIGINT] {
        stop_signals::register(sig, stop.clone());
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut records = 0u64;
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let started = Instant::now();
    loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        if let Some(n) = args.expect {
            if records >= n {
                break;
            }
            if Instant::now() > deadline {
                bail!("read {records} of {n} records from '{}' within {} s", args.topic, args.timeout);
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => eprintln!("flow-standin: {e}"),
            Some(Ok(m)) => {
                records += 1;
                first.entry(m.partition()).or_insert(m.offset());
                next.insert(m.partition(), m.offset() + 1);
                if args.rate > 0 {
                    let due = started + Duration::from_secs_f64(records as f64 / args.rate as f64);
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    if records.is_multiple_of(args.rate.max(1)) {
                        consumer.commit_consumer_state(CommitMode::Sync).ok();
                    }
                }
                if args.hold && records.is_multiple_of(100) {
                    consumer.commit_consumer_state(CommitMode::Sync).ok();
                }
            }
        }
    }
    if records > 0 {
        match consumer.commit_consumer_state(CommitMode::Sync) {
            // Everything read was committed already (throttled reads commit as they go).
            Err(e) if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::NoOffset) => {}
            other => other.context("committing")?,
        }
    }
    consumer.unsubscribe();
    let summary = serde_json::json!({ "records": records, "first": first, "next": next });
    println!("{summary}");
    Ok(())
}

/// SIGTERM and SIGINT set a flag, through tokio's signal support (already a dependency) on a helper
/// thread, so the consumer loop stays synchronous and commits before it leaves.
mod stop_signals {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    pub const SIGTERM: i32 = 15;
    pub const SIGINT: i32 = 2;

    pub fn register(sig: i32, flag: Arc<AtomicBool>) {
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let kind = tokio::signal::unix::SignalKind::from_raw(sig);
                if let Ok(mut s) = tokio::signal::unix::signal(kind) {
                    s.recv().await;
                    flag.store(true, Ordering::SeqCst);
                }
            });
        });
    }
}
