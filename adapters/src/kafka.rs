//! Kafka side of a reset, over rdkafka (librdkafka 2.12).
//!
//! One [`KafkaClient`] per Kafka connection serves every group read over that connection. It never
//! joins a group (see [`KafkaClient`]). Every blocking call runs on tokio's blocking pool and has a
//! deadline. Lookups are batched: one metadata request per step, one ListOffsets request per end of
//! the log for all partitions, one OffsetFetch and one OffsetCommit per group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flow_core::connection::KafkaConnection;
use flow_core::redact::Secrets;
use flow_core::reset::{Committed, FailureKind, Inspection, KafkaFailure, Positions};
use flow_core::targets::InletTarget;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::metadata::Metadata;
use rdkafka::{Offset, TopicPartitionList};

/// Kafka `client.id` of the operator's clients.
pub const CLIENT_ID: &str = "ankka-flow-operator";

/// Deadline of each Kafka request, and the upper bound of each step's wall time.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    /// Per request (metadata, describe, list offsets, commit, fetch offsets).
    pub request: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines { request: Duration::from_secs(10) }
    }
}

/// Kafka's answer sorted into what the reset machine needs: its kind (which says whether it is
/// transient or final), and a reason.
///
/// Transient: timeouts, transport failures, coordinator moving or loading, a rebalance, members
/// present (UNKNOWN_MEMBER_ID answers a join-less commit into a group with members). Everything else
/// (unknown topic, authorization, authentication, invalid requests) is final.
pub fn classify(e: &KafkaError) -> KafkaFailure {
    classify_code(e.rdkafka_error_code(), &e.to_string())
}

/// [`classify`] for an error code and its text: the admin API answers bare codes, which rdkafka's
/// `KafkaError::AdminOp` does not expose as `rdkafka_error_code()`, so they are classified here.
fn classify_code(code: Option<RDKafkaErrorCode>, text: &str) -> KafkaFailure {
    use RDKafkaErrorCode as C;
    let kind = match code {
        Some(
            C::RequestTimedOut
            | C::OperationTimedOut
            | C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::NetworkException,
        ) => FailureKind::Unreachable,
        Some(C::CoordinatorLoadInProgress | C::CoordinatorNotAvailable | C::NotCoordinator | C::LeaderNotAvailable) => {
            FailureKind::Unavailable
        }
        Some(C::RebalanceInProgress | C::UnknownMemberId) => FailureKind::MembersPresent,
        Some(C::Authentication | C::SaslAuthenticationFailed) => FailureKind::Authentication,
        Some(C::TopicAuthorizationFailed | C::GroupAuthorizationFailed | C::ClusterAuthorizationFailed) => {
            FailureKind::Authorization
        }
        Some(C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition) => FailureKind::UnknownTopic,
        _ => FailureKind::Refused,
    };
    let reason = match kind {
        FailureKind::MembersPresent => {
            format!("Kafka refused the commit because consumers are still active in the group ({text})")
        }
        _ => text.to_string(),
    };
    KafkaFailure::new(kind, reason)
}

/// The consumer behind a [`KafkaClient`].
type Client = BaseConsumer<ClientLog>;

/// How often librdkafka counts what a client sent (its statistics, delivered to [`ClientLog`] by the
/// pump thread), for [`KafkaClient::requests_sent`].
pub const STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// How often the pump thread serves the client's queue.
const PUMP_INTERVAL: Duration = Duration::from_millis(100);

/// The operator's client of one Kafka connection, shared by every group that connection serves.
///
/// It has no `group.id`, never subscribes and never polls for records, so it never joins a group.
/// Group operations go through the admin API (DescribeConsumerGroups, ListConsumerGroupOffsets,
/// AlterConsumerGroupOffsets), which names the group per call: a commit carries generation -1 and an
/// empty member id, which the broker accepts only while the group has no members (it answers
/// UNKNOWN_MEMBER_ID otherwise; see Kafka's `validateOffsetCommit`), exactly as Kafka's own
/// `kafka-consumer-groups --reset-offsets` does. Building one costs a bootstrap connection (tens of
/// milliseconds on loopback), so a reset builds one per connection, not one per group or per step.
///
/// A pump thread serves the client's queue while the client lives: librdkafka delivers log lines and
/// error events there, and runs the OAUTHBEARER OIDC token refresh from it (the token request is made
/// by the thread that serves the queue); without it, a connection needing a token would wait for one
/// until its deadline. The client never subscribes, so serving the queue never returns a record.
pub struct KafkaClient {
    consumer: Arc<Client>,
    pump: Option<(Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>)>,
    deadlines: Deadlines,
}

impl Drop for KafkaClient {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.pump.take() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

impl KafkaClient {
    /// A client of `conn` whose every request has deadline `d.request`.
    ///
    /// # Errors
    /// A final [`KafkaFailure`] when librdkafka rejects the connection's properties; its reason never
    /// holds a credential of them.
    pub fn new(conn: &KafkaConnection, d: Deadlines) -> Result<Self, KafkaFailure> {
        let secrets = Secrets::of(&conn.properties);
        let mut cfg = ClientConfig::new();
        for (k, v) in &conn.properties {
            cfg.set(k, v);
        }
        // The socket timeout is the request deadline, which bounds calls that take no timeout of
        // their own.
        cfg.set("bootstrap.servers", &conn.bootstrap_servers)
            .set("client.id", CLIENT_ID)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("allow.auto.create.topics", "false")
            .set("socket.timeout.ms", d.request.as_millis().to_string())
            .set("statistics.interval.ms", STATISTICS_INTERVAL.as_millis().to_string());
        let log = ClientLog::new(&conn.bootstrap_servers, secrets.clone());
        let consumer: Client = cfg.create_with_context(log).map_err(|e| {
            KafkaFailure::configuration(
                secrets.redact(&format!("cannot build a Kafka client for {}: {e}", conn.bootstrap_servers)),
            )
        })?;
        let consumer = Arc::new(consumer);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, halt) = (Arc::clone(&consumer), Arc::clone(&stop));
        let pump = std::thread::Builder::new()
            .name("kafka-pump".into())
            .spawn(move || {
                while !halt.load(std::sync::atomic::Ordering::Relaxed) {
                    // Serves log lines, error events (to the context) and token refreshes; never a
                    // record, since the client subscribes to nothing.
                    let _ = c.poll(PUMP_INTERVAL);
                }
            })
            .map_err(|e| KafkaFailure::unavailable(format!("cannot start a Kafka client thread: {e}")))?;
        Ok(KafkaClient { consumer, pump: Some((stop, pump)), deadlines: d })
    }

    /// The requests this client sent to the brokers so far, by request type (`Metadata`,
    /// `ListOffsets`, `OffsetFetch`, ...), as librdkafka counted them at most
    /// [`STATISTICS_INTERVAL`] ago.
    pub fn requests_sent(&self) -> Requests {
        self.consumer.context().requests()
    }

    /// Whether librdkafka reported a final failure (TLS or authentication) on this client: every
    /// failure of its calls is then worded as that one, so a client kept for reuse is replaced.
    pub fn has_final_failure(&self) -> bool {
        self.consumer.context().cause().is_some()
    }

    /// Runs `f`; a failure becomes the final [`Cause`] librdkafka reported meanwhile, if any. Either
    /// way the reason holds no credential.
    fn call<T>(&self, f: impl FnOnce(&Client, Deadlines) -> Result<T, KafkaFailure>) -> Result<T, KafkaFailure> {
        let c = &*self.consumer;
        f(c, self.deadlines).map_err(|failure| match c.context().cause() {
            Some(cause) => cause,
            None => KafkaFailure { reason: c.context().redact(&failure.reason), ..failure },
        })
    }
}

/// The partitions of `topic`, from cluster metadata. Asks for every topic's metadata rather than the
/// one topic, so that a broker with `auto.create.topics.enable=true` never creates a missing one.
fn partitions(c: &Client, topic: &str, d: Deadlines) -> Result<Vec<i32>, KafkaFailure> {
    let md = c.fetch_metadata(None, d.request).map_err(|e| classify(&e))?;
    topic_partitions(&md, topic)
}

/// The partitions of `topic` in `md`, ascending.
fn topic_partitions(md: &Metadata, topic: &str) -> Result<Vec<i32>, KafkaFailure> {
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
        return Err(KafkaFailure::unknown_topic(format!("topic '{topic}' does not exist")));
    };
    if let Some(err) = t.error() {
        let code = RDKafkaErrorCode::from(err);
        return Err(KafkaFailure::new(classify_code(Some(code), "").kind, format!("topic '{topic}': {code}")));
    }
    let mut ps: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    ps.sort_unstable();
    Ok(ps)
}

/// Which end of each partition's log [`log_offsets`] asks for.
#[derive(Clone, Copy)]
enum End {
    /// The log start offset (ListOffsets with timestamp -2, "earliest").
    Start,
    /// The high watermark (ListOffsets with timestamp -1, "latest"; under `read_committed` the last
    /// stable offset, as for every reader of the topic).
    High,
}

/// One end of every partition of `ps`, in one ListOffsets request per partition leader (librdkafka's
/// offsets-for-times with the protocol's special timestamps, KIP-79), not one round trip per
/// partition.
fn log_offsets(
    c: &Client,
    topic: &str,
    ps: &[i32],
    end: End,
    d: Deadlines,
) -> Result<BTreeMap<i32, i64>, KafkaFailure> {
    let at = match end {
        End::Start => Offset::Beginning,
        End::High => Offset::End,
    };
    list_offsets(c, topic, ps, at, d)?
        .into_iter()
        .map(|(p, o)| {
            o.map(|o| (p, o)).ok_or_else(|| {
                KafkaFailure::unavailable(format!("partition {p}: Kafka gave no offset for the log's end"))
            })
        })
        .collect()
}

/// Each partition's first offset whose record's timestamp is at or after `at` (milliseconds since
/// the Unix epoch), in one ListOffsets request per partition leader (KIP-79); `None` where the
/// partition holds no such record.
fn time_offsets(
    c: &Client,
    topic: &str,
    ps: &[i32],
    at: i64,
    d: Deadlines,
) -> Result<BTreeMap<i32, Option<i64>>, KafkaFailure> {
    list_offsets(c, topic, ps, Offset::Offset(at), d)
}

/// Each partition's offset for `at` (a timestamp, or the log's start or end), in one ListOffsets
/// request per partition leader; `None` where Kafka has none.
fn list_offsets(
    c: &Client,
    topic: &str,
    ps: &[i32],
    at: Offset,
    d: Deadlines,
) -> Result<BTreeMap<i32, Option<i64>>, KafkaFailure> {
    let mut tpl = TopicPartitionList::new();
    for p in ps {
        tpl.add_partition_offset(topic, *p, at).map_err(|e| KafkaFailure::refused(e.to_string()))?;
    }
    let got = c.offsets_for_times(tpl, d.request).map_err(|e| classify(&e))?;
    let mut out = BTreeMap::new();
    for e in got.elements() {
        if let Err(err) = e.error() {
            let f = classify(&err);
            return Err(KafkaFailure::new(f.kind, format!("partition {}: {}", e.partition(), f.reason)));
        }
        out.insert(e.partition(), absolute(e.offset()));
    }
    Ok(out)
}

fn committed(c: &Client, group: &str, topic: &str, ps: &[i32], d: Deadlines) -> Result<Committed, KafkaFailure> {
    Ok(admin::list_group_offsets(c, group, topic, ps, d)?
        .into_iter()
        .map(|(p, pos)| (p, pos.map(|x| x.offset)))
        .collect())
}

/// An absolute offset, or `None` for "no committed offset". Logical offsets (beginning, end, stored)
/// never count as a committed position (case B2).
pub fn absolute(o: Offset) -> Option<i64> {
    match o {
        Offset::Offset(n) if n >= 0 => Some(n),
        _ => None,
    }
}

async fn blocking<T: Send + 'static>(
    client: Arc<KafkaClient>,
    f: impl FnOnce(&Client, Deadlines) -> Result<T, KafkaFailure> + Send + 'static,
) -> Result<T, KafkaFailure> {
    tokio::task::spawn_blocking(move || client.call(f))
        .await
        .unwrap_or_else(|e| Err(KafkaFailure::unreachable(format!("Kafka worker stopped: {e}"))))
}

/// Describes the group, lists the topic's partitions with their log start offsets and high
/// watermarks, and reads the group's committed offsets; with `at` (milliseconds since the Unix
/// epoch), also each partition's first offset at or after that instant.
///
/// # Errors
/// A classified [`KafkaFailure`]: missing topic and authorization are final; timeouts transient.
pub async fn inspect(
    client: Arc<KafkaClient>,
    target: InletTarget,
    at: Option<i64>,
) -> Result<Inspection, KafkaFailure> {
    blocking(client, move |c, d| {
        let group = target.group.as_str();
        let (state, members) = admin::describe_group(c, group, d)?;
        let ps = partitions(c, &target.topic, d)?;
        let log_start = log_offsets(c, &target.topic, &ps, End::Start, d)?;
        let high_watermark = log_offsets(c, &target.topic, &ps, End::High, d)?;
        let committed = committed(c, group, &target.topic, &ps, d)?;
        let at_time = match at {
            Some(at) => time_offsets(c, &target.topic, &ps, at, d)?,
            None => BTreeMap::new(),
        };
        Ok(Inspection { state, members, log_start, committed, high_watermark, at_time, topic_configs: BTreeMap::new() })
    })
    .await
}

/// Commits the group's own `offsets` again, unchanged, with the fence marker `metadata`, without
/// joining the group. Nothing to do when the group has no committed offset.
///
/// # Errors
/// The commit's [`KafkaFailure`]; UNKNOWN_MEMBER_ID (members present) is transient.
pub async fn fence(
    client: Arc<KafkaClient>,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
) -> Result<(), KafkaFailure> {
    if offsets.is_empty() {
        return Ok(());
    }
    write_offsets(client, target, offsets, metadata, false).await.map(drop)
}

/// Commits `offsets` with `metadata` for the group without joining it (one request for every
/// partition), then reads the committed offsets back.
///
/// # Errors
/// The commit's or the read's [`KafkaFailure`]; UNKNOWN_MEMBER_ID (members present) is transient; a
/// commit that failed on some partitions names them.
pub async fn commit(
    client: Arc<KafkaClient>,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
) -> Result<Committed, KafkaFailure> {
    write_offsets(client, target, offsets, metadata, true).await
}

/// Commits `offsets` with `metadata` for the group without joining it, and with `read_back` reads
/// the committed offsets of those partitions back (else the result is empty).
async fn write_offsets(
    client: Arc<KafkaClient>,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
    read_back: bool,
) -> Result<Committed, KafkaFailure> {
    blocking(client, move |c, d| {
        let group = target.group.as_str();
        admin::alter_group_offsets(c, group, &target.topic, &offsets, &metadata, d)?;
        if !read_back {
            return Ok(Committed::new());
        }
        let ps: Vec<i32> = offsets.keys().copied().collect();
        committed(c, group, &target.topic, &ps, d)
    })
    .await
}

/// Reads the group's committed offsets, with their commit metadata, on every partition of its topic.
///
/// # Errors
/// A classified [`KafkaFailure`].
pub async fn read_committed(client: Arc<KafkaClient>, target: InletTarget) -> Result<Positions, KafkaFailure> {
    blocking(client, move |c, d| {
        let ps = partitions(c, &target.topic, d)?;
        admin::list_group_offsets(c, target.group.as_str(), &target.topic, &ps, d)
    })
    .await
}

/// A group's state and number of members, or why it could not be described.
pub type Described = Result<(String, u32), KafkaFailure>;

/// The state and number of members of each of `groups` (see [`inspect`]), in one admin call; in the
/// order of `groups`.
///
/// # Errors
/// The outer error when the call as a whole failed; otherwise each group's own [`KafkaFailure`].
pub async fn describe_groups(client: Arc<KafkaClient>, groups: Vec<String>) -> Result<Vec<Described>, KafkaFailure> {
    blocking(client, move |c, d| {
        let names: Vec<&str> = groups.iter().map(String::as_str).collect();
        admin::describe_groups(c, &names, d)
    })
    .await
}

/// The log start offset of every partition of `topic`: one metadata request and one ListOffsets
/// request per partition leader.
///
/// # Errors
/// A classified [`KafkaFailure`]; a missing topic is final.
pub async fn log_start_offsets(client: Arc<KafkaClient>, topic: String) -> Result<BTreeMap<i32, i64>, KafkaFailure> {
    blocking(client, move |c, d| {
        let ps = partitions(c, &topic, d)?;
        log_offsets(c, &topic, &ps, End::Start, d)
    })
    .await
}

/// Per partition lag of a group: records it has still to read.
pub type Lag = BTreeMap<i32, i64>;

/// A topic's partitions and their high watermarks.
type PartitionsAndHigh = (Vec<i32>, BTreeMap<i32, i64>);

/// The lag of each `(group, topic)` of `wanted`, per partition: the high watermark minus the
/// committed offset (minus the log start offset where the group has none), never below 0.
///
/// One metadata request and one ListOffsets per topic serve every group; each group costs one
/// OffsetFetch. Results are in the order of `wanted`.
///
/// # Errors
/// The outer error when the cluster's metadata cannot be read; otherwise each group's own
/// [`KafkaFailure`] (a missing topic is final).
pub async fn lags(
    client: Arc<KafkaClient>,
    wanted: Vec<(String, String)>,
) -> Result<Vec<Result<Lag, KafkaFailure>>, KafkaFailure> {
    blocking(client, move |c, d| {
        let md = c.fetch_metadata(None, d.request).map_err(|e| classify(&e))?;
        // Per topic: its partitions and their high watermarks, looked up once.
        let mut topics: BTreeMap<&str, Result<PartitionsAndHigh, KafkaFailure>> = BTreeMap::new();
        let mut starts: BTreeMap<&str, BTreeMap<i32, i64>> = BTreeMap::new();
        let mut out = Vec::with_capacity(wanted.len());
        for (group, topic) in &wanted {
            let known = topics.entry(topic.as_str()).or_insert_with(|| {
                let ps = topic_partitions(&md, topic)?;
                let high = log_offsets(c, topic, &ps, End::High, d)?;
                Ok((ps, high))
            });
            let (ps, high) = match known {
                Ok(k) => k,
                Err(f) => {
                    out.push(Err(f.clone()));
                    continue;
                }
            };
            let committed = match committed(c, group, topic, ps, d) {
                Ok(x) => x,
                Err(f) => {
                    out.push(Err(f));
                    continue;
                }
            };
            if ps.iter().any(|p| committed.get(p).copied().flatten().is_none()) && !starts.contains_key(topic.as_str())
            {
                match log_offsets(c, topic, ps, End::Start, d) {
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

mod admin;
mod log;

use log::ClientLog;
pub use log::Requests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_offsets_are_not_positions() {
        assert_eq!(absolute(Offset::Beginning), None);
        assert_eq!(absolute(Offset::End), None);
        assert_eq!(absolute(Offset::Invalid), None);
        assert_eq!(absolute(Offset::Stored), None);
        assert_eq!(absolute(Offset::Offset(-2)), None);
        assert_eq!(absolute(Offset::Offset(-1)), None);
        assert_eq!(absolute(Offset::Offset(0)), Some(0));
        assert_eq!(absolute(Offset::Offset(50)), Some(50));
    }

    #[test]
    fn members_present_is_transient_and_says_so() {
        let e = KafkaError::ConsumerCommit(RDKafkaErrorCode::UnknownMemberId);
        let f = classify(&e);
        assert!(f.transient());
        assert!(f.reason.contains("consumers are still active"), "{}", f.reason);
        let f = classify(&KafkaError::MetadataFetch(RDKafkaErrorCode::TopicAuthorizationFailed));
        assert!(!f.transient());
    }

    #[test]
    fn admin_api_codes_are_classified_like_client_errors() {
        use rdkafka::bindings::rd_kafka_resp_err_t as E;
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, "committing the group's offsets", "");
        assert!(f.transient(), "{f:?}");
        assert!(f.reason.contains("consumers are still active"), "{}", f.reason);
        let f = admin::failure(E::RD_KAFKA_RESP_ERR__TIMED_OUT, "reading the group's committed offsets", "");
        assert!(f.transient(), "{f:?}");
        assert!(f.reason.starts_with("reading the group's committed offsets: "), "{}", f.reason);
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, "describing the consumer group", "x");
        assert!(f.transient(), "{f:?}");
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, "describing the consumer group", "");
        assert!(!f.transient(), "{f:?}");
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "committing the group's offsets", "");
        assert!(!f.transient(), "{f:?}");
    }
}
