//! What the settle can catch: when a consumer that is told to stop commits on close, does that
//! commit land before or after its group shows no member? The operator commits a reset only into a
//! group without members, so a close commit that lands before the group empties can never overwrite
//! a reset, and only one that lands after could (see docs/performance.md, "The settle").
//!
//! Each round starts `flow-standin --hold --commit-on-close` (a streamlet's inlet, `--group-protocol`
//! classic or consumer) on a topic it reads to the end, sends it SIGTERM as the kubelet does when
//! its pod is deleted, and then polls the group as fast as one connected client can (describe, then
//! the committed offsets), noting when the close commit first shows and when the group first shows
//! no member.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flow_adapters::kafka::{self, Deadlines, KafkaClient};
use flow_core::connection::KafkaConnection;
use flow_core::names::GroupId;
use flow_core::targets::InletTarget;

/// One round, in ms from the SIGTERM.
pub struct Round {
    /// `classic` or `consumer` (KIP-848).
    pub protocol: String,
    /// The close commit first read back.
    pub committed: f64,
    /// The group first described without a member.
    pub empty: f64,
    /// The stand-in's process ended.
    pub exited: f64,
    /// Polls made (describe + offsets) until both were seen.
    pub polls: usize,
}

/// Runs `reps` rounds per protocol of `protocols` on topic `topic` (`partitions` partitions, read to
/// the end by each round's new group `<topic>-<protocol>-<round>`).
pub fn measure(standin: &Path, bootstrap: &str, topic: &str, protocols: &[&str], reps: usize) -> Vec<Round> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let conn = KafkaConnection { bootstrap_servers: bootstrap.to_string(), properties: BTreeMap::new() };
    // Its home group: the first round's group (any group it serves would do).
    let home = format!("{topic}-{}-0", protocols.first().copied().unwrap_or_default());
    let client = Arc::new(KafkaClient::new(&conn, Deadlines::default(), &home).expect("a Kafka client"));
    let mut out = Vec::new();
    for protocol in protocols {
        for rep in 0..reps {
            let group = format!("{topic}-{protocol}-{rep}");
            out.push(rt.block_on(round(standin, bootstrap, &client, topic, &group, protocol)));
        }
    }
    out
}

async fn round(
    standin: &Path,
    bootstrap: &str,
    client: &Arc<KafkaClient>,
    topic: &str,
    group: &str,
    protocol: &str,
) -> Round {
    let mut child = Command::new(standin)
        .args(["--bootstrap-servers", bootstrap, "--group", group, "--topic", topic, "--hold", "--commit-on-close"])
        .args(["--group-protocol", protocol])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flow-standin starts");
    // Wait until it reads, then a moment more so that it holds a position on every partition.
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let line = rx.recv_timeout(end.saturating_duration_since(Instant::now())).expect("the stand-in reads");
        if line.starts_with("flow-standin: first record") {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let target = InletTarget {
        group: GroupId::from_raw(group),
        streamlet: String::new(),
        inlet: "in".into(),
        topic_id: "input".into(),
        topic: topic.to_string(),
    };
    let before = kafka::read_committed(Arc::clone(client), target.clone()).await.expect("committed offsets");
    let t0 = Instant::now();
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let (mut committed, mut empty, mut exited, mut polls) = (None, None, None, 0);
    let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
    while committed.is_none() || empty.is_none() || exited.is_none() {
        assert!(t0.elapsed() < Duration::from_secs(60), "round of {group}: no close commit or leave within 60 s");
        polls += 1;
        let described = kafka::describe_groups(Arc::clone(client), vec![group.to_string()]).await;
        let at = Instant::now();
        if empty.is_none() && matches!(described.as_deref(), Ok([Ok(d)]) if d.members == 0) {
            empty = Some(ms(at));
        }
        let now = kafka::read_committed(Arc::clone(client), target.clone()).await.expect("committed offsets");
        let at = Instant::now();
        if committed.is_none() && now != before {
            committed = Some(ms(at));
        }
        if exited.is_none() && matches!(child.try_wait(), Ok(Some(_))) {
            exited = Some(ms(Instant::now()));
        }
    }
    let _ = child.wait();
    Round {
        protocol: protocol.to_string(),
        committed: committed.unwrap_or(f64::NAN),
        empty: empty.unwrap_or(f64::NAN),
        exited: exited.unwrap_or(f64::NAN),
        polls,
    }
}

/// Deletes the rounds' groups and the topic.
pub fn clean_up(bootstrap: &str, topic: &str, protocols: &[&str], reps: usize) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let groups: Vec<String> =
        protocols.iter().flat_map(|p| (0..reps).map(move |r| format!("{topic}-{p}-{r}"))).collect();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let names: Vec<&str> = groups.iter().map(String::as_str).collect();
        if let Err(e) = admin.delete_groups(&names, &opts).await {
            eprintln!("deleting the settle rounds' groups: {e}");
        }
        if let Err(e) = admin.delete_topics(&[topic], &opts).await {
            eprintln!("deleting {topic}: {e}");
        }
    });
}
