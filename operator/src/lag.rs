//! Consumer group lag: records an inlet's group has still to read, measured over its topic's own
//! connection. One measurement serves both of its users: the sampler, which publishes every inlet's
//! lag as metrics every lag interval (in records and, estimated from the log end offsets it saw at
//! earlier samples, in seconds; per group, and per partition with `--lag-per-partition`), and the
//! catch-up of a finished reset, which writes each reset group's lag into the status until it
//! reaches 0.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use flow_adapters::kafka::{self, KafkaClient, Lag};
use flow_core::lag::LogEndHistory;
use flow_core::request::ResetRequest;
use flow_core::reset::KafkaFailure;
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus};
use flow_core::targets::{self, InletTarget};
use kube::ResourceExt;

use crate::connections::{Connections, Gate};
use crate::context::Context;
use crate::metrics::{ClusterLabels, GroupLabels, LagLabels, PartitionLagLabels};

/// The log end offsets seen per partition over the samples, by connection (its label), topic and
/// partition: what the lag in seconds is estimated from. Kept for the topics that some inlet reads.
type Histories = BTreeMap<String, BTreeMap<String, BTreeMap<i32, LogEndHistory>>>;

/// The lag of each inlet of `wanted` (an inlet with the resource that declares its topic), in the
/// order given. Inlets are grouped by their connection's client, so that each connection is asked once: one
/// metadata request and one ListOffsets per topic, one OffsetFetch per group. The connections are
/// asked side by side, each in its turn of its bulkhead, so that one that does not answer delays no
/// other.
async fn measure(
    connections: &mut Connections<'_>,
    wanted: Vec<(&AnkkaFlow, InletTarget)>,
) -> Vec<(InletTarget, Result<Lag, KafkaFailure>)> {
    let mut results: Vec<Option<Result<Lag, KafkaFailure>>> = vec![None; wanted.len()];
    // Per client: its connection's bulkhead, and the indices into `wanted` it serves.
    let mut by_client: Vec<(Arc<KafkaClient>, Gate, Vec<usize>)> = Vec::new();
    for (i, (flow, inlet)) in wanted.iter().enumerate() {
        let client = connections.client(flow, &inlet.topic_id).await;
        let gate = connections.gate(flow, &inlet.topic_id).await;
        match (client, gate) {
            (Ok(client), Ok(gate)) => match by_client.iter_mut().find(|(c, _, _)| Arc::ptr_eq(c, &client)) {
                Some((_, _, served)) => served.push(i),
                None => by_client.push((client, gate, vec![i])),
            },
            (Err(e), _) | (_, Err(e)) => results[i] = Some(Err(e)),
        }
    }
    let asked = by_client.into_iter().map(|(client, gate, served)| {
        let asked: Vec<(String, String)> =
            served.iter().map(|i| (wanted[*i].1.group.to_string(), wanted[*i].1.topic.clone())).collect();
        async move {
            let lags = match gate.enter().await {
                Ok(_turn) => kafka::lags(client, asked).await,
                Err(e) => Err(e),
            };
            (served, lags)
        }
    });
    for (served, lags) in futures::future::join_all(asked).await {
        match lags {
            Ok(each) => {
                for (i, lag) in served.into_iter().zip(each) {
                    results[i] = Some(lag);
                }
            }
            Err(e) => {
                for i in served {
                    results[i] = Some(Err(e.clone()));
                }
            }
        }
    }
    wanted
        .into_iter()
        .zip(results)
        .map(|((_, inlet), lag)| {
            let lag = lag.unwrap_or_else(|| Err(KafkaFailure::unavailable("Kafka gave no lag")));
            (inlet, lag)
        })
        .collect()
}

/// Starts the lag sampler in the background (the Lease holder only: it reads the cluster Secrets
/// and talks to Kafka).
pub fn spawn_sampler(ctx: Arc<Context>) {
    tokio::spawn(sample_forever(ctx));
}

/// Samples every inlet group's lag and the pending requests every lag interval, forever.
async fn sample_forever(ctx: Arc<Context>) {
    let interval = Duration::from_secs(ctx.settings.lag_interval_seconds.max(1));
    // The controllers' own caches of the AnkkaFlows they reconcile: a list of them all every
    // interval would parse every resource anew each time (see docs/performance.md, "1,000
    // AnkkaFlows"). The first sample comes one interval after the start, when the caches hold their
    // first list; the sampler never waits on a cache's readiness itself, since the controller does (a
    // second waiter on it can take the controller's wake-up).
    // The connections the last sample went over.
    let mut in_use: BTreeSet<String> = BTreeSet::new();
    let mut histories = Histories::new();
    loop {
        tokio::time::sleep(interval).await;
        let cached = ctx.cached_flows();
        let flows: Vec<&AnkkaFlow> = cached.iter().filter_map(|f| f.0.as_ref().ok()).collect();
        let now_in_use = sample(&ctx, &flows, &mut histories).await;
        // A connection no pipeline uses any more has nothing left to sample: its series go (else its
        // last success would age and say that sampling fails).
        for cluster in in_use.difference(&now_in_use) {
            let labels = ClusterLabels { cluster: cluster.clone() };
            ctx.metrics.lag_last_success.remove(&labels);
            ctx.metrics.lag_sample_errors.remove(&labels);
        }
        in_use = now_in_use;
        drop(flows);
        drop(cached);
        // The sample's buffers are freed now; their pages go back to the system.
        crate::allocator::release_free();
    }
}

/// One sample: the pending requests, the groups under a reset or rebuild, and the lag of every
/// inlet of every pipeline. Returns the connections (by their label) that the inlets were sampled
/// over.
async fn sample(ctx: &Context, flows: &[&AnkkaFlow], histories: &mut Histories) -> BTreeSet<String> {
    let pending = flows
        .iter()
        .filter(|f| {
            let (raw, done) = flow_adapters::kube::reset_annotations(f);
            raw.and_then(|r| ResetRequest::parse(r).ok()).is_some_and(|r| done != Some(r.id.as_str()))
        })
        .count();
    ctx.metrics.pending.set(i64::try_from(pending).unwrap_or(i64::MAX));
    publish_resets(ctx, flows);

    let wanted: Vec<(&AnkkaFlow, InletTarget)> = flows
        .iter()
        .filter_map(|f| targets::select(&f.spec, &[]).ok().map(|ts| (*f, ts)))
        .flat_map(|(f, ts)| ts.into_iter().flat_map(|t| t.inlets).map(move |i| (f, i)))
        .collect();
    // Who each inlet is, for its labels: the AnkkaFlow's namespace and name, and the connection.
    let whose: Vec<(String, String, String)> = wanted
        .iter()
        .map(|(f, inlet)| (f.namespace().unwrap_or_default(), f.name_any(), connection_label(f, &inlet.topic_id)))
        .collect();
    // The histories of topics no inlet reads any more go; those of a topic whose sample fails
    // this time stay.
    let read: BTreeSet<(&str, &str)> = wanted
        .iter()
        .zip(&whose)
        .map(|((_, inlet), (_, _, cluster))| (cluster.as_str(), inlet.topic.as_str()))
        .collect();
    for (cluster, topics) in histories.iter_mut() {
        topics.retain(|topic, _| read.contains(&(cluster.as_str(), topic.as_str())));
    }
    histories.retain(|_, topics| !topics.is_empty());
    drop(read);

    let mut connections = Connections::new(ctx);
    let per_partition = ctx.settings.lag_per_partition;
    let mut groups: Vec<(LagLabels, i64, f64)> = Vec::new();
    let mut partitions: Vec<(PartitionLagLabels, i64, f64)> = Vec::new();
    // Per connection: whether some inlet over it was sampled, i.e. the connection works. An inlet
    // whose topic is missing fails alone (counted as a sampling error, reported as TopicMissing by
    // the reconcile) and does not make its whole cluster look unreachable.
    let mut clusters: BTreeMap<String, bool> = BTreeMap::new();
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let now = since_epoch.as_secs_f64();
    let now_ms = i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX);
    for ((inlet, lag), (namespace, pipeline, cluster)) in measure(&mut connections, wanted).await.into_iter().zip(whose)
    {
        match lag {
            Ok(parts) => {
                let labels =
                    LagLabels { namespace, pipeline, consumergroup: inlet.group.to_string(), topic: inlet.topic };
                let (mut records, mut seconds) = (0_i64, 0_f64);
                let topic = histories.entry(cluster.clone()).or_default().entry(labels.topic.clone()).or_default();
                for (p, offsets) in parts {
                    // Every group of a topic sees the same high watermarks (one ListOffsets per
                    // topic), so observing them once per group adds nothing twice.
                    let history = topic.entry(p).or_default();
                    history.observe(offsets.high_watermark, now_ms);
                    let behind = history.lag_seconds(offsets, now_ms);
                    records = records.saturating_add(offsets.lag());
                    seconds = seconds.max(behind);
                    if per_partition {
                        let group = labels.clone();
                        partitions.push((
                            PartitionLagLabels { group, partition: p.to_string() },
                            offsets.lag(),
                            behind,
                        ));
                    }
                }
                groups.push((labels, records, seconds));
                clusters.insert(cluster, true);
            }
            Err(e) => {
                tracing::debug!(group = %inlet.group, reason = %e.reason, "no lag");
                ctx.metrics.lag_sample_errors.get_or_create(&ClusterLabels { cluster: cluster.clone() }).inc();
                clusters.entry(cluster).or_insert(false);
            }
        }
    }
    for (cluster, ok) in &clusters {
        if *ok {
            ctx.metrics.lag_last_success.get_or_create(&ClusterLabels { cluster: cluster.clone() }).set(now);
        }
    }
    let m = &ctx.metrics;
    m.lag.clear();
    m.lag_seconds.clear();
    for (labels, records, seconds) in groups {
        m.lag_seconds.get_or_create(&labels).set(seconds);
        m.lag.get_or_create(&labels).set(records);
    }
    m.partition_lag.clear();
    m.partition_lag_seconds.clear();
    for (labels, records, seconds) in partitions {
        m.partition_lag_seconds.get_or_create(&labels).set(seconds);
        m.partition_lag.get_or_create(&labels).set(records);
    }
    clusters.into_keys().collect()
}

/// Publishes, per consumer group of every inlet, whether it is under an intentional reset or
/// rebuild (`flow_core::lag::rebuilding`); and per consumer group that a done reset moved and that
/// has not caught up yet (as the status says, which [`follow_catch_up`] keeps), when that reset
/// finished: what an alert on a lag that does not fall after a reset looks at. Rebuilt from the
/// resources at each sample, so the series of a group go once its inlet or pipeline went, and a
/// group's catch-up series once it caught up.
fn publish_resets(ctx: &Context, flows: &[&AnkkaFlow]) {
    ctx.metrics.rebuilding.clear();
    ctx.metrics.catch_up_started.clear();
    for flow in flows {
        let (namespace, pipeline) = (flow.namespace().unwrap_or_default(), flow.name_any());
        let labels = |group: &str| GroupLabels {
            namespace: namespace.clone(),
            pipeline: pipeline.clone(),
            consumergroup: group.to_string(),
        };
        let reset = flow.status.as_ref().and_then(|s| s.reset.as_ref());
        let (request, done) = flow_adapters::kube::reset_annotations(flow);
        let rebuilding = flow_core::lag::rebuilding(&flow.spec, request, done, reset);
        let inlets = targets::select(&flow.spec, &[]).unwrap_or_default();
        for inlet in inlets.iter().flat_map(|t| &t.inlets) {
            let group = inlet.group.as_str();
            ctx.metrics.rebuilding.get_or_create(&labels(group)).set(i64::from(rebuilding.contains(group)));
        }
        let Some(reset) = reset else { continue };
        let finished = reset.finished_at.as_deref().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
        let Some(finished) = finished else { continue };
        for i in flow_core::reset::catching_up(reset) {
            ctx.metrics
                .catch_up_started
                .get_or_create(&labels(&reset.groups[i].group))
                .set(finished.as_millisecond() as f64 / 1000.0);
        }
    }
}

/// The label of topic `topic_id`'s Kafka connection in `flow`: the cluster it names, else the
/// bootstrap servers it names, else the default cluster.
fn connection_label(flow: &AnkkaFlow, topic_id: &str) -> String {
    let topic = flow.spec.topic(topic_id);
    topic
        .and_then(|t| t.cluster.clone().or_else(|| t.bootstrap_servers.clone()))
        .unwrap_or_else(|| flow_core::connection::DEFAULT_CLUSTER.to_string())
}

/// Follows the catch-up of a done request's reset groups: measures each one's lag (records left to
/// read, over its topic's own connection) into the status until it is first seen at 0, which is
/// stamped as `caughtUpAt`. Returns when to measure again, while some group is still behind.
pub async fn follow_catch_up(ctx: &Context, flow: &AnkkaFlow, status: &mut AnkkaFlowStatus) -> Option<Duration> {
    let spec = &flow.spec;
    let reset = status.reset.as_mut()?;
    let behind = flow_core::reset::catching_up(reset);
    if behind.is_empty() {
        return None;
    }
    let interval = Duration::from_secs(ctx.settings.lag_interval_seconds.max(1));
    {
        let key = kube::runtime::reflector::ObjectRef::from_obj(flow);
        let mut measured = ctx.lag_measured.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if let Some(last) = measured.get(&key).filter(|last| now.duration_since(**last) < interval) {
            return Some(interval - now.duration_since(*last));
        }
        measured.insert(key, now);
    }
    let inlets: BTreeMap<String, InletTarget> = targets::select(spec, &[])
        .map(|ts| ts.into_iter().flat_map(|t| t.inlets).map(|i| (i.group.to_string(), i)).collect())
        .unwrap_or_default();
    // The status's groups to measure, by index, and the inlet each reads.
    let wanted: Vec<(usize, InletTarget)> =
        behind.into_iter().filter_map(|i| inlets.get(&reset.groups[i].group).map(|inlet| (i, inlet.clone()))).collect();
    // In a rebuild from streamlets, a group at the end of its topic catches up after its writers.
    let (annotation, _) = flow_adapters::kube::reset_annotations(flow);
    let later = flow_core::rebuild::catching_up_later(spec, annotation, &*reset);
    let mut connections = Connections::new(ctx);
    let measured = measure(&mut connections, wanted.iter().map(|(_, inlet)| (flow, inlet.clone())).collect()).await;
    let mut still_behind = false;
    for ((i, _), (_, lag)) in wanted.into_iter().zip(measured) {
        let g = &mut reset.groups[i];
        match lag {
            Ok(parts) => {
                let total: i64 = parts.values().map(|o| o.lag()).sum();
                g.lag = Some(total);
                if total == 0 && !later.contains(&g.group) {
                    g.caught_up_at = Some(crate::context::now().rfc3339());
                } else {
                    still_behind = true;
                }
            }
            Err(e) => {
                tracing::debug!(group = %g.group, reason = %e.reason, "lag not measured");
                still_behind = true;
            }
        }
    }
    still_behind.then_some(interval)
}
