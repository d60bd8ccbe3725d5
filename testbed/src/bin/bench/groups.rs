//! The bench's Kafka side: committing and checking the groups, Kafka's own reset tool, the cost of a
//! fresh client, and deleting what the run made.

use std::process::Command;
use std::time::{Duration, Instant};

use flow_testbed::{bed, kafka};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::RECORDS;
use crate::measure::{median, ms_since};

/// Medians (ms) over 5 runs of: creating a consumer with a group id and reading the group's committed
/// offsets on topic `bench.p<partitions>` (a fresh client: bootstrap, coordinator lookup, OffsetFetch),
/// and then dropping it (rdkafka closes a consumer with a group id, polling in 100 ms steps).
pub fn probe(partitions: i32) -> (f64, f64) {
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

pub fn kafka_config() -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &bed().kafka);
    c
}

/// Commits offset `RECORDS` on every partition for each group, without joining the group; 10 groups
/// at a time (each client takes about 0.1 s to close).
pub fn commit_all(groups: &[String], topic: &str, partitions: i32) {
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
pub fn check_reset(groups: &[String], topic: &str, partitions: i32) {
    for_each_group(groups, |g| {
        let got = kafka::committed(g, topic, partitions);
        assert!(got.values().all(|o| *o == Some(0)), "group {g} not reset: {got:?}");
    });
}

/// Runs `f` for every group, 10 threads at a time; a panic in one is a panic here.
pub fn for_each_group(groups: &[String], f: impl Fn(&str) + Sync) {
    for chunk in groups.chunks(10) {
        std::thread::scope(|s| {
            for g in chunk {
                let f = &f;
                s.spawn(move || f(g));
            }
        });
    }
}

pub fn kafka_tool_reset(groups: &[&str], topic: &str) {
    let mut cmd = Command::new(bed().root.join("testbed/kafka-tool"));
    cmd.args(["consumer-groups", "--bootstrap-server", &bed().kafka, "--reset-offsets", "--to-earliest", "--execute"]);
    for g in groups {
        cmd.args(["--group", g]);
    }
    cmd.args(["--topic", topic]);
    let o = cmd.output().expect("kafka-tool runs");
    assert!(o.status.success(), "kafka-tool failed: {}", String::from_utf8_lossy(&o.stderr));
}
