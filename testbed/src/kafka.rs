//! Kafka helpers, over rdkafka against the test bed's broker.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::bed::{bed, show, wait_until};

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
    wait_until("the topic to go", Duration::from_secs(30), || (!topics().contains(&topic.to_string())).then_some(()));
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

/// A consumer that commits nothing by itself, in `group` when given.
pub(crate) fn group_consumer(group: Option<&str>) -> BaseConsumer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &bed().kafka).set("enable.auto.commit", "false");
    if let Some(g) = group {
        c.set("group.id", g);
    }
    c.create().expect("consumer")
}

/// The group's committed offsets on `partitions` partitions of `topic`, each with the metadata
/// string it was committed with (`None`: no offset).
pub fn positions(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<(i64, String)>> {
    positions_over(&group_consumer(Some(group)), topic, partitions)
}

/// [`positions`] of the group of consumer `c`, over its own brokers (another cluster of the test
/// bed's, say).
pub fn positions_over(c: &BaseConsumer, topic: &str, partitions: i32) -> BTreeMap<i32, Option<(i64, String)>> {
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

/// The group's committed offsets on `partitions` partitions of `topic` (`None`: no offset).
pub fn committed(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i64>> {
    positions(group, topic, partitions).into_iter().map(|(p, o)| (p, o.map(|(n, _)| n))).collect()
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
