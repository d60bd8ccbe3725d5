//! Consumer-group helpers beyond [`crate::kafka`]: offsets with their commit metadata, commits by
//! hand, deleting a group, deleting a topic.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::bed::{bed, wait_until};
use crate::kafka;

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
