//! Consumer group lag: the records each group has still to read, for the operator's lag sampler and
//! the catch-up after a reset.

use std::collections::BTreeMap;
use std::sync::Arc;

use flow_core::reset::KafkaFailure;

use super::{End, KafkaClient, blocking, committed, coordinator, log_offsets, topic_partitions};

/// Per partition lag of a group: records it has still to read.
pub type Lag = BTreeMap<i32, i64>;

/// A topic's partitions and their high watermarks.
type PartitionsAndHigh = (Vec<i32>, BTreeMap<i32, i64>);

/// The lag of each `(group, topic)` of `wanted`, per partition: the high watermark minus the
/// committed offset (minus the log start offset where the group has none), never below 0.
///
/// One metadata request and one ListOffsets per topic serve every group; each group costs one
/// OffsetFetch, sent to its coordinator. A group whose coordinator the client does not know yet
/// costs a describe first, once (see [`coordinator`]). Results are in the order of `wanted`.
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
        let mut starts: BTreeMap<&str, BTreeMap<i32, i64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(wanted.len());
        for (group, topic) in &wanted {
            let known = topics.entry(topic.as_str()).or_insert_with(|| {
                let ps = topic_partitions(&md, topic)?;
                let high = log_offsets(h, topic, &ps, End::High)?;
                Ok((ps, high))
            });
            let (ps, high) = match known {
                Ok(k) => k,
                Err(f) => {
                    out.push(Err(f.clone()));
                    continue;
                }
            };
            if let Some(f) = lost.remove(group.as_str()) {
                out.push(Err(f));
                continue;
            }
            let committed = match committed(h, group, topic, ps) {
                Ok(x) => x,
                Err(f) => {
                    out.push(Err(f));
                    continue;
                }
            };
            if ps.iter().any(|p| committed.get(p).copied().flatten().is_none()) && !starts.contains_key(topic.as_str())
            {
                match log_offsets(h, topic, ps, End::Start) {
                    Ok(s) => {
                        starts.insert(topic, s);
                    }
                    Err(f) => {
                        out.push(Err(f));
                        continue;
                    }
                }
            }
            let start = starts.get(topic.as_str());
            out.push(Ok(ps
                .iter()
                .map(|p| {
                    let at = committed.get(p).copied().flatten().or_else(|| start.and_then(|s| s.get(p).copied()));
                    let at = at.unwrap_or(0);
                    (*p, (high.get(p).copied().unwrap_or(at) - at).max(0))
                })
                .collect()));
        }
        Ok(out)
    })
    .await
}
