//! Consumer group lag: the records each group has still to read, for the operator's lag sampler and
//! the catch-up after a reset.

use std::collections::BTreeMap;
use std::sync::Arc;

use flow_core::lag::PartitionOffsets;
use flow_core::reset::{KafkaFailure, Positions};

use super::{End, KafkaClient, admin, blocking, coordinator, log_offsets, topic_partitions};

/// Per partition of a group's topic: where the group is and where the log ends
/// ([`PartitionOffsets::lag`] is the records it has still to read).
pub type Lag = BTreeMap<i32, PartitionOffsets>;

/// A topic's partitions and their high watermarks.
type PartitionsAndHigh = (Vec<i32>, BTreeMap<i32, i64>);

/// The lag of each `(group, topic)` of `wanted`, per partition: the group's committed offset (the
/// log start offset where it has none) and the high watermark.
///
/// One metadata request and one ListOffsets per topic (and partition leader) serve every group;
/// each group costs one OffsetFetch, sent to its coordinator, a bounded number of them in flight at
/// once. A group whose coordinator the client does not know yet costs a describe first, once (see
/// [`coordinator`]).
/// Results are in the order of `wanted`.
///
/// # Errors
/// The outer error when the cluster's metadata cannot be read; otherwise each group's own
/// [`KafkaFailure`] (a missing topic is final).
pub async fn lags(
    client: Arc<KafkaClient>,
    wanted: Vec<(String, String)>,
) -> Result<Vec<Result<Lag, KafkaFailure>>, KafkaFailure> {
    blocking(client, move |h| {
        let md = h.metadata()?;
        let groups: Vec<&str> = wanted.iter().map(|(g, _)| g.as_str()).collect();
        let mut lost = coordinator::find(h, Some(&md), &groups)?;
        // Per topic: its partitions and their high watermarks, looked up once.
        let mut topics: BTreeMap<&str, Result<PartitionsAndHigh, KafkaFailure>> = BTreeMap::new();
        for (_, topic) in &wanted {
            topics.entry(topic.as_str()).or_insert_with(|| {
                let ps = topic_partitions(&md, topic)?;
                let high = log_offsets(h, topic, &ps, End::High)?;
                Ok((ps, high))
            });
        }
        // Each group's committed offsets, or why they cannot be asked for.
        let mut read: Vec<Option<Result<Positions, KafkaFailure>>> = Vec::with_capacity(wanted.len());
        let mut asks = Vec::new();
        let mut asked = Vec::new();
        for (i, (group, topic)) in wanted.iter().enumerate() {
            let ps = match &topics[topic.as_str()] {
                Ok((ps, _)) => ps,
                Err(f) => {
                    read.push(Some(Err(f.clone())));
                    continue;
                }
            };
            let broker = match lost.remove(group.as_str()) {
                Some(f) => Err(f),
                None => coordinator::known(h, group).ok_or_else(|| {
                    KafkaFailure::unavailable(format!("no broker answered as the coordinator of group '{group}'"))
                }),
            };
            match broker {
                Ok(broker) => {
                    read.push(None);
                    asks.push(admin::Ask { broker, group, topic, ps });
                    asked.push(i);
                }
                Err(f) => read.push(Some(Err(f))),
            }
        }
        for (i, got) in asked.into_iter().zip(admin::list_group_offsets(h, &asks)) {
            if let Err(f) = &got {
                coordinator::failed(h, &wanted[i].0, f);
            }
            read[i] = Some(got);
        }
        // The log start offsets of a topic, read once and only when a group has no committed
        // offset on some partition.
        let mut starts: BTreeMap<&str, Result<BTreeMap<i32, i64>, KafkaFailure>> = BTreeMap::new();
        let mut out = Vec::with_capacity(wanted.len());
        for ((_, topic), got) in wanted.iter().zip(read) {
            let positions = match got {
                Some(Ok(p)) => p,
                Some(Err(f)) => {
                    out.push(Err(f));
                    continue;
                }
                None => {
                    out.push(Err(KafkaFailure::unavailable("Kafka gave no offsets")));
                    continue;
                }
            };
            let Ok((ps, high)) = &topics[topic.as_str()] else {
                out.push(Err(KafkaFailure::unavailable("Kafka gave no partitions")));
                continue;
            };
            let start = if positions.values().any(Option::is_none) {
                match starts.entry(topic).or_insert_with(|| log_offsets(h, topic, ps, End::Start)) {
                    Ok(s) => Some(&*s),
                    Err(f) => {
                        out.push(Err(f.clone()));
                        continue;
                    }
                }
            } else {
                None
            };
            out.push(Ok(ps
                .iter()
                .map(|p| {
                    let committed = positions.get(p).and_then(|x| x.as_ref().map(|x| x.offset));
                    let at = committed.or_else(|| start.and_then(|s| s.get(p).copied())).unwrap_or(0);
                    (*p, PartitionOffsets { position: at, high_watermark: high.get(p).copied().unwrap_or(at) })
                })
                .collect()));
        }
        Ok(out)
    })
    .await
}
