//! `flow-standin`: a stand-in for a streamlet's inlet, for tests and the demo.
//!
//! It joins the inlet's consumer group (`--group`, which is also its `client.id`, as a streamlet's
//! sidecar does), reads the topic, commits what it read, and prints a one-line JSON summary on stdout:
//! `{"records":N,"first":{"<partition>":<offset>},"next":{"<partition>":<offset>}}` where `first` is
//! the first offset read per partition and `next` the committed position.
//!
//! Modes: `--expect N` reads until N records arrived (then commits and exits 0; exits 1 if they do
//! not arrive within `--timeout`); `--hold` stays in the group, reading and committing, until it is
//! sent SIGTERM or SIGINT, then commits what it read and leaves (a live member).
//!
//! Playing a pod's container: `--close-delay-seconds N` keeps reading for N seconds after the
//! signal (a pod with a long termination grace period), and `--commit-on-close` then commits the
//! consumer's position on every assigned partition, synchronously, before it leaves the group (and
//! exits 1 if that commit fails). Progress lines go to stderr, each starting with `flow-standin: `,
//! so that a test can wait for them: see [`say`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

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
    /// Stay in the group until SIGTERM/SIGINT, then commit what was read and leave.
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
    /// On SIGTERM/SIGINT, commit the consumer's position on every assigned partition, synchronously,
    /// before leaving the group; a failed commit makes the exit status 1.
    #[arg(long)]
    commit_on_close: bool,
    /// After SIGTERM/SIGINT, keep reading (and committing as usual) this many seconds before closing.
    #[arg(long, default_value_t = 0)]
    close_delay_seconds: u64,
    /// Extra client properties, key=value; repeatable.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

/// One progress line on stderr. Tests wait for these; their wording is part of the tool's interface
/// (docs/testbed.md lists them).
fn say(line: &str) {
    eprintln!("flow-standin: {line}");
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
    say(&format!("reading '{}' as group '{}' (pid {})", args.topic, args.group, std::process::id()));

    let signal = Arc::new(AtomicI32::new(0));
    stop_signals::watch(signal.clone());
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut records = 0u64;
    let mut first: BTreeMap<i32, i64> = BTreeMap::new();
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let started = Instant::now();
    let mut close_at: Option<Instant> = None;
    loop {
        if close_at.is_none() {
            let sig = signal.load(Ordering::SeqCst);
            if sig != 0 {
                let name = stop_signals::name(sig);
                let delay = args.close_delay_seconds;
                if delay > 0 {
                    say(&format!("{name} received: reading on for {delay} s before closing"));
                } else {
                    say(&format!("{name} received: closing"));
                }
                close_at = Some(Instant::now() + Duration::from_secs(delay));
            }
        }
        if close_at.is_some_and(|t| Instant::now() >= t) {
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
                if records == 0 {
                    say(&format!("first record: partition {} offset {}", m.partition(), m.offset()));
                }
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
    if close_at.is_some() && args.commit_on_close {
        commit_position(&consumer)?;
    } else if records > 0 {
        match consumer.commit_consumer_state(CommitMode::Sync) {
            // Everything read was committed already (throttled reads commit as they go).
            Err(e) if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::NoOffset) => {}
            other => other.context("committing")?,
        }
    }
    consumer.unsubscribe();
    // Dropping the consumer closes it: it leaves the group and waits until that is done.
    drop(consumer);
    if close_at.is_some() {
        say("left the group");
    }
    let summary = serde_json::json!({ "records": records, "first": first, "next": next });
    println!("{summary}");
    Ok(())
}

/// The close commit: the position (next offset to read) of every assigned partition that has one,
/// committed synchronously, then reported as `committed on close: {"<partition>":<offset>,...}`.
fn commit_position(consumer: &BaseConsumer) -> anyhow::Result<()> {
    let position = consumer.position().context("reading the consumer's position")?;
    let mut tpl = TopicPartitionList::new();
    let mut shown = BTreeMap::new();
    for e in position.elements() {
        if let Offset::Offset(n) = e.offset() {
            tpl.add_partition_offset(e.topic(), e.partition(), Offset::Offset(n)).context("an offset")?;
            shown.insert(e.partition(), n);
        }
    }
    if shown.is_empty() {
        say("committed on close: nothing (no position yet)");
        return Ok(());
    }
    say(&format!("closing: committing {}", serde_json::json!(shown)));
    consumer.commit(&tpl, CommitMode::Sync).context("the commit on close")?;
    say(&format!("committed on close: {}", serde_json::json!(shown)));
    Ok(())
}

/// SIGTERM and SIGINT store their number in a flag, through tokio's signal support on a helper
/// thread, so the consumer loop stays synchronous and commits before it leaves.
mod stop_signals {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, Ordering};

    use tokio::signal::unix::{SignalKind, signal};

    /// Starts listening; the first of SIGTERM or SIGINT sets `flag` to its number (later ones are
    /// ignored: a pod's grace period is not cut short by a second signal).
    pub fn watch(flag: Arc<AtomicI32>) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        // Install the handlers before returning, so that a signal sent right after start is seen.
        let (mut term, mut int) = rt.block_on(async {
            (
                signal(SignalKind::terminate()).expect("SIGTERM handler"),
                signal(SignalKind::interrupt()).expect("SIGINT handler"),
            )
        });
        std::thread::spawn(move || {
            rt.block_on(async move {
                let sig = tokio::select! {
                    _ = term.recv() => SignalKind::terminate().as_raw_value(),
                    _ = int.recv() => SignalKind::interrupt().as_raw_value(),
                };
                flag.store(sig, Ordering::SeqCst);
                // Keep the handlers installed: further signals are absorbed, never fatal.
                loop {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
            });
        });
    }

    /// `SIGTERM` or `SIGINT`.
    pub fn name(sig: i32) -> &'static str {
        if sig == SignalKind::interrupt().as_raw_value() { "SIGINT" } else { "SIGTERM" }
    }
}
