//! The floor of a reset: the Kafka work alone, done as directly as the admin API allows, on the same
//! groups and topic as the `flow reset` it is compared with (see docs/performance.md).
//!
//! One round is: describe every group in one DescribeConsumerGroups call (and check that none has a
//! member), list the topic's log start offsets (one metadata request, one ListOffsets request),
//! then for every group at once commit those offsets (one OffsetCommit per group, as the protocol
//! has it) and read them back (one OffsetFetch per group), checking that each reads back at the log
//! start. It goes through the operator's own Kafka adapter (`flow_adapters::kafka`, librdkafka's
//! admin API), so the gap between `flow reset` and this floor is what the operator does around the
//! Kafka calls: Kubernetes reads and writes, the ledger, the settle, and the reconcile's start.
//!
//! A broker answers the requests of one connection one at a time, in order, so the groups' commits
//! run side by side only over several connections: the floor spreads them over up to `connections`
//! clients (each its own connection to the group coordinator), and is also measured over one.
//!
//! Nothing here is checked by Kubernetes or persisted: it is not a reset anyone could rely on, only
//! its lower bound in time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use flow_adapters::kafka::{self, Deadlines, KafkaClient};
use flow_core::connection::KafkaConnection;
use flow_core::names::GroupId;
use flow_core::targets::InletTarget;

use crate::measure::{broker_cpu_secs, own_cpu_secs};

/// Wall times of the rounds, in ms.
pub struct Floor {
    /// The first round, on one client made for it (bootstrap, then the coordinator's connection).
    pub cold: f64,
    /// Rounds on one connected client: every group's commit over one connection.
    pub one: Vec<f64>,
    /// Rounds with the commits spread over several connected clients.
    pub spread: Vec<f64>,
    /// How many clients the spread rounds used.
    pub clients: usize,
    /// CPU seconds of each spread round: this process's (the floor's client) and the broker's.
    pub spread_cpu: Vec<(f64, f64)>,
}

/// Resets every group of `groups` on `topic` to the log start offsets: one round on a new client,
/// `reps` rounds on one connected client, and `reps` rounds over `min(groups, connections)` connected
/// clients. Before each round every group is set back to offset `back_to` on every partition (not
/// timed). Panics when a round does not reset every group.
pub fn measure(
    bootstrap: &str,
    groups: &[String],
    topic: &str,
    back_to: i64,
    reps: usize,
    connections: usize,
) -> Floor {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(groups.len().max(16) + 16)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let conn = KafkaConnection { bootstrap_servers: bootstrap.to_string(), properties: BTreeMap::new() };
        let home = groups.first().cloned().unwrap_or_default();
        let client = || Arc::new(KafkaClient::new(&conn, Deadlines::default(), &home).expect("a Kafka client"));
        let targets: Vec<InletTarget> = groups
            .iter()
            .map(|g| InletTarget {
                group: GroupId::from_raw(g),
                streamlet: String::new(),
                inlet: "in".into(),
                topic_id: "input".into(),
                topic: topic.to_string(),
            })
            .collect();
        // The cold round's groups are set back by another client, so that its own starts cold.
        let pool: Vec<Arc<KafkaClient>> = (0..connections.clamp(1, groups.len().max(1))).map(|_| client()).collect();
        set_back(&pool, &targets, back_to).await;
        let t = Instant::now();
        let one = vec![client()];
        round(&one, &targets, "flow-bench/floor/cold").await;
        let cold = t.elapsed().as_secs_f64() * 1000.0;
        let mut floor =
            Floor { cold, one: Vec::new(), spread: Vec::new(), clients: pool.len(), spread_cpu: Vec::new() };
        for rep in 0..reps {
            for spread in [false, true] {
                let clients = if spread { &pool } else { &one };
                set_back(&pool, &targets, back_to).await;
                let (t, own, broker) = (Instant::now(), own_cpu_secs(), broker_cpu_secs());
                round(clients, &targets, &format!("flow-bench/floor/{rep}")).await;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                if spread {
                    floor.spread.push(ms);
                    floor.spread_cpu.push((own_cpu_secs() - own, broker_cpu_secs() - broker));
                } else {
                    floor.one.push(ms);
                }
            }
        }
        floor
    })
}

/// One reset of every group of `targets`, as directly as the protocol allows; group `i` commits
/// over client `i % clients.len()`.
async fn round(clients: &[Arc<KafkaClient>], targets: &[InletTarget], metadata: &str) {
    let c = &clients[0];
    let names: Vec<String> = targets.iter().map(|t| t.group.as_str().to_string()).collect();
    let described = kafka::describe_groups(Arc::clone(c), names).await.expect("describe the groups");
    for (t, d) in targets.iter().zip(described) {
        let d = d.unwrap_or_else(|f| panic!("describe {}: {}", t.group, f.reason));
        assert_eq!(d.members, 0, "group {} has members (state {})", t.group, d.state);
    }
    let topic = targets.first().map(|t| t.topic.clone()).unwrap_or_default();
    let start = kafka::log_start_offsets(Arc::clone(c), topic).await.expect("log start offsets");
    let commits = targets.iter().enumerate().map(|(i, t)| {
        let c = Arc::clone(&clients[i % clients.len()]);
        let (t, start, metadata) = (t.clone(), start.clone(), metadata.to_string());
        tokio::spawn(async move {
            let group = t.group.clone();
            let back = kafka::commit(c, t, start.clone(), metadata).await;
            let back = back.unwrap_or_else(|f| panic!("commit {group}: {}", f.reason));
            let expected: BTreeMap<i32, Option<i64>> = start.iter().map(|(p, o)| (*p, Some(*o))).collect();
            assert_eq!(back, expected, "group {group} read back");
        })
    });
    for joined in futures::future::join_all(commits).await {
        joined.expect("a commit task");
    }
}

/// Commits `offset` on every partition of every group (all at once), as before a measured reset.
async fn set_back(clients: &[Arc<KafkaClient>], targets: &[InletTarget], offset: i64) {
    let Some(first) = targets.first() else { return };
    let start =
        kafka::log_start_offsets(Arc::clone(&clients[0]), first.topic.clone()).await.expect("log start offsets");
    let offsets: BTreeMap<i32, i64> = start.keys().map(|p| (*p, offset)).collect();
    let commits = targets.iter().enumerate().map(|(i, t)| {
        let (c, t, offsets) = (Arc::clone(&clients[i % clients.len()]), t.clone(), offsets.clone());
        tokio::spawn(async move {
            let group = t.group.clone();
            kafka::commit(c, t, offsets, String::new())
                .await
                .unwrap_or_else(|f| panic!("set back {group}: {}", f.reason))
        })
    });
    for joined in futures::future::join_all(commits).await {
        joined.expect("a commit task");
    }
}
