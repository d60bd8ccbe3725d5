//! Consumer-group helpers beyond [`crate::kafka`]: offsets with their commit metadata, commits by
//! hand, deleting a group, deleting a topic.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

use crate::bed::{bed, wait_until};
use crate::kafka;
// The offsets a group committed, with their metadata: read in `kafka` (whose `committed` is built on
// it), named here too beside `commit`, which writes them.
pub use crate::kafka::positions;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime")
}

/// Commits `offsets` of `topic` for `group` without joining it (as the admin client does).
pub fn commit(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let c = kafka::group_consumer(Some(group));
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
        let list = kafka::group_consumer(None).fetch_group_list(Some(group), Duration::from_secs(10)).ok()?;
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
