//! Kafka side of a reset, over rdkafka (librdkafka 2.12).
//!
//! One [`KafkaClient`] per Kafka connection serves every group read over that connection. It never
//! joins a group (see [`KafkaClient`]). Every blocking call runs on tokio's blocking pool and has a
//! deadline. Lookups are batched: one metadata request per step, one ListOffsets request per end of
//! the log for all partitions, one OffsetFetch and one OffsetCommit per group, each sent to the
//! group's coordinator as the client found and keeps it ([`coordinator`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Why librdkafka refused to build a client, naming the setting and never its value: librdkafka
/// quotes the value (`Invalid value "..." for configuration property "..."`), and rdkafka's
/// configuration error repeats it after the key.
pub(crate) fn config_rejected(e: &KafkaError) -> String {
    let named = |key: &str| {
        if flow_core::connection::properties::is_property_name(key) {
            format!("librdkafka refused the value of setting '{key}'")
        } else {
            "librdkafka refused one of the client's settings".to_string()
        }
    };
    match e {
        KafkaError::ClientConfig(_, _, key, _) => named(key),
        // `... for configuration property "<key>"`, `No such configuration property: "<key>"`
        KafkaError::ClientCreation(text) => match text.split_once("property").and_then(|(_, r)| r.split('"').nth(1)) {
            Some(key) => named(key),
            None => "librdkafka refused the client's settings".to_string(),
        },
        _ => "librdkafka could not build the client".to_string(),
    }
}

/// The consumer behind a [`KafkaClient`].
type Client = BaseConsumer<ClientLog>;

/// What one blocking call of a [`KafkaClient`] works with: its consumer, its deadlines and the group
/// coordinators it found.
struct Handle<'a> {
    client: &'a Client,
    deadlines: Deadlines,
    coordinators: &'a coordinator::Coordinators,
}

impl Handle<'_> {
    /// The cluster's metadata: its brokers and every topic the principal may describe. Asks for every
    /// topic rather than some, so that a broker with `auto.create.topics.enable=true` never creates a
    /// missing one. The client keeps where it places groups ([`coordinator`]).
    fn metadata(&self) -> Result<Metadata, KafkaFailure> {
        let md = self.client.fetch_metadata(None, self.deadlines.request).map_err(|e| classify(&e))?;
        self.coordinators.learn(&md);
        Ok(md)
    }
}

/// How often librdkafka counts what a client sent (its statistics, delivered to [`ClientLog`] by the
/// pump thread), for [`KafkaClient::requests_sent`].
pub const STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// How often the pump thread serves the client's queue.
const PUMP_INTERVAL: Duration = Duration::from_millis(100);

/// The operator's client of one Kafka connection, shared by every group that connection serves.
///
/// It never subscribes, never assigns partitions and never polls for records, so it never joins a
/// group. Group operations go through the admin API (DescribeConsumerGroups, ListConsumerGroupOffsets,
/// AlterConsumerGroupOffsets), which names the group per call: a commit carries generation -1 and an
/// empty member id, which the broker accepts only while the group has no members (it answers
/// UNKNOWN_MEMBER_ID otherwise; see Kafka's `validateOffsetCommit`), exactly as Kafka's own
/// `kafka-consumer-groups --reset-offsets` does. Each call goes to the group's coordinator, which the
/// client finds and keeps itself ([`coordinator`]). Building one costs a bootstrap connection (tens
/// of milliseconds on loopback), so a reset builds one per connection, not one per group or per step.
///
/// Its `group.id` is its home group, one of the groups it serves: librdkafka needs a client's
/// consumer group state for an OffsetFetch answer that names a coordinator error (NOT_COORDINATOR,
/// COORDINATOR_NOT_AVAILABLE), and without a `group.id` there is none, so such an answer crashed the
/// process (librdkafka 2.12, `rd_kafka_handle_OffsetFetch`;
/// [confluentinc/librdkafka#5040](https://github.com/confluentinc/librdkafka/issues/5040)). With
/// one, librdkafka looks the home group's coordinator up once (a FindCoordinator, which needs the
/// Describe on the group that every group served needs anyway) and again every
/// `coordinator.query.interval.ms` (10 minutes), and keeps a connection to it; it never joins it.
///
/// A pump thread serves the client's queue while the client lives: librdkafka delivers log lines and
/// error events there, and runs the OAUTHBEARER OIDC token refresh from it (the token request is made
/// by the thread that serves the queue); without it, a connection needing a token would wait for one
/// until its deadline. The client never subscribes, so serving the queue never returns a record.
pub struct KafkaClient {
    consumer: Arc<Client>,
    pump: Option<(Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>)>,
    deadlines: Deadlines,
    coordinators: coordinator::Coordinators,
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
    /// A client of `conn` whose every request has deadline `d.request`, with home group `home` (one of
    /// the groups it serves; see [`KafkaClient`]).
    ///
    /// # Errors
    /// A final [`KafkaFailure`] when librdkafka rejects the connection's properties; its reason never
    /// holds a credential of them.
    pub fn new(conn: &KafkaConnection, d: Deadlines, home: &str) -> Result<Self, KafkaFailure> {
        let secrets = Secrets::of(&conn.properties);
        let mut cfg = ClientConfig::new();
        for (k, v) in &conn.properties {
            cfg.set(k, v);
        }
        // The socket timeout is the request deadline, which bounds calls that take no timeout of
        // their own.
        cfg.set("bootstrap.servers", &conn.bootstrap_servers)
            .set("client.id", CLIENT_ID)
            .set("group.id", home)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("allow.auto.create.topics", "false")
            .set("socket.timeout.ms", d.request.as_millis().to_string())
            // A request that timed out leaves its connection open (librdkafka closes it by default),
            // so that the group's next call queues behind it on the same connection, where Kafka
            // carries requests out in order: a write that is never answered cannot land after it
            // (`flow_core::reset::Pins`, docs/reset.md). A late answer is dropped by its correlation
            // id. A request timed out half sent still closes the connection.
            .set("socket.max.fails", "0")
            .set("statistics.interval.ms", STATISTICS_INTERVAL.as_millis().to_string());
        let log = ClientLog::new(&conn.bootstrap_servers, secrets.clone());
        let consumer: Client = cfg.create_with_context(log).map_err(|e| {
            KafkaFailure::configuration(format!(
                "cannot build a Kafka client for {}: {}",
                conn.bootstrap_servers,
                config_rejected(&e)
            ))
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
        Ok(KafkaClient { consumer, pump: Some((stop, pump)), deadlines: d, coordinators: Default::default() })
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
    fn call<T>(&self, f: impl FnOnce(&Handle) -> Result<T, KafkaFailure>) -> Result<T, KafkaFailure> {
        let c = &*self.consumer;
        let h = Handle { client: c, deadlines: self.deadlines, coordinators: &self.coordinators };
        f(&h).map_err(|failure| c.context().explain(failure))
    }
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

/// The partitions `topic` has now, ascending, from a metadata request that names it alone
/// (DescribeTopics, which never lets a broker create a missing topic), so that what it costs does not
/// grow with the cluster's other topics.
fn partitions_now(h: &Handle, topic: &str) -> Result<Vec<i32>, KafkaFailure> {
    let mut answers = admin::describe_topics(h.client.client(), &[topic.to_string()], h.deadlines.request)?;
    let missing = || KafkaFailure::unknown_topic(format!("topic '{topic}' does not exist"));
    match answers.remove(topic) {
        // Kafka numbers a topic's partitions from 0 without gaps.
        Some(TopicAnswer::Exists { partitions, .. }) => Ok((0..partitions).collect()),
        Some(TopicAnswer::Failed(code, _)) => match classify_code(Some(code), "").kind {
            FailureKind::UnknownTopic => Err(missing()),
            kind => Err(KafkaFailure::new(kind, format!("topic '{topic}': {code}"))),
        },
        None => Err(missing()),
    }
}

/// Refuses a topic of `md` with a partition that has no leader (every replica of it is on a broker
/// that is down, or its leader is being elected): Kafka cannot list such a partition's offsets, and
/// librdkafka would only time out waiting for a leader, naming nothing. Transient, so the group is
/// looked at again until its retry bound, then fails naming the partitions.
fn has_leaders(md: &Metadata, topic: &str) -> Result<(), KafkaFailure> {
    let leaders: Vec<(i32, i32)> = md
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| (p.id(), p.leader())))
        .collect();
    leaderless(topic, &leaders).map_or(Ok(()), |reason| Err(KafkaFailure::unavailable(reason)))
}

/// Why a topic whose partitions have these (partition, leader) pairs cannot be reset, if one has no
/// leader (`-1` in Kafka's metadata).
fn leaderless(topic: &str, leaders: &[(i32, i32)]) -> Option<String> {
    let mut none: Vec<i32> = leaders.iter().filter(|(_, l)| *l < 0).map(|(p, _)| *p).collect();
    none.sort_unstable();
    match none.as_slice() {
        [] => None,
        [p] => {
            Some(format!("partition {p} of topic '{topic}' has no leader (its replicas are on brokers that are down)"))
        }
        ps => {
            let list: Vec<String> = ps.iter().map(ToString::to_string).collect();
            Some(format!(
                "partitions {} of topic '{topic}' have no leader (their replicas are on brokers that are down)",
                list.join(", ")
            ))
        }
    }
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
fn log_offsets(h: &Handle, topic: &str, ps: &[i32], end: End) -> Result<BTreeMap<i32, i64>, KafkaFailure> {
    let at = match end {
        End::Start => Offset::Beginning,
        End::High => Offset::End,
    };
    list_offsets(h, topic, ps, at)?
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
fn time_offsets(h: &Handle, topic: &str, ps: &[i32], at: i64) -> Result<BTreeMap<i32, Option<i64>>, KafkaFailure> {
    list_offsets(h, topic, ps, Offset::Offset(at))
}

/// Each partition's offset for `at` (a timestamp, or the log's start or end), in one ListOffsets
/// request per partition leader; `None` where Kafka has none.
fn list_offsets(h: &Handle, topic: &str, ps: &[i32], at: Offset) -> Result<BTreeMap<i32, Option<i64>>, KafkaFailure> {
    let mut tpl = TopicPartitionList::new();
    for p in ps {
        tpl.add_partition_offset(topic, *p, at).map_err(|e| KafkaFailure::refused(e.to_string()))?;
    }
    let got = h.client.offsets_for_times(tpl, h.deadlines.request).map_err(|e| classify(&e))?;
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

/// The group's committed positions (offsets and commit metadata) on partitions `ps` of `topic`, read
/// at its coordinator.
fn positions(h: &Handle, group: &str, topic: &str, ps: &[i32]) -> Result<Positions, KafkaFailure> {
    coordinator::at(h, group, |broker| {
        let ask = admin::Ask { broker, group, topic, ps };
        admin::list_group_offsets(h, &[ask])
            .pop()
            .unwrap_or_else(|| Err(KafkaFailure::unavailable("Kafka gave no offsets")))
    })
}

/// The group's committed offsets on partitions `ps` of `topic`.
fn committed(h: &Handle, group: &str, topic: &str, ps: &[i32]) -> Result<Committed, KafkaFailure> {
    Ok(positions(h, group, topic, ps)?.into_iter().map(|(p, pos)| (p, pos.map(|x| x.offset))).collect())
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
    f: impl FnOnce(&Handle) -> Result<T, KafkaFailure> + Send + 'static,
) -> Result<T, KafkaFailure> {
    tokio::task::spawn_blocking(move || client.call(f))
        .await
        .unwrap_or_else(|e| Err(KafkaFailure::unreachable(format!("Kafka worker stopped: {e}"))))
}

/// The Kafka calls a reset makes on one consumer group, over one connection: what the operator's
/// reset driver needs of a client, so that its reconcile tests can hand it an in-memory Kafka instead
/// of [`KafkaClient`] (the only implementation here; it calls the functions of this module).
///
/// Each call names its group and topic in `target`, ends within the client's request deadline (a
/// call Kafka never answers fails as [`flow_core::reset::FailureKind::Unreachable`]), and is
/// classified as [`classify`] says. The calls of one group are made one after the other, over one
/// client, so that Kafka carries them out in order.
pub trait ResetCalls: Send + Sync {
    /// See [`read_topic`].
    fn read_topic(self: Arc<Self>, topic: String, at: Option<i64>) -> Call<TopicRead>;

    /// See [`inspect`].
    fn inspect(self: Arc<Self>, target: InletTarget, topic: TopicRead) -> Call<Inspection>;

    /// See [`write`]: the instant the OffsetCommit was sent (once the group's coordinator was found).
    fn write(self: Arc<Self>, target: InletTarget, offsets: BTreeMap<i32, i64>, metadata: String) -> Call<Instant>;

    /// See [`list_partitions`].
    fn list_partitions(self: Arc<Self>, topic: String) -> Call<Vec<i32>>;

    /// See [`read_back`].
    fn read_back(self: Arc<Self>, target: InletTarget, partitions: Vec<i32>) -> Call<Committed>;

    /// See [`read_committed`].
    fn read_committed(self: Arc<Self>, target: InletTarget) -> Call<Positions>;

    /// Commits the group's own `offsets` again, unchanged, with the fence marker `metadata`, without
    /// joining the group: a [`ResetCalls::write`], and nothing when the group has no committed offset.
    fn fence(self: Arc<Self>, target: InletTarget, offsets: BTreeMap<i32, i64>, metadata: String) -> Call<()> {
        if offsets.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        Box::pin(futures::FutureExt::map(self.write(target, offsets, metadata), |sent| sent.map(drop)))
    }
}

/// A call of [`ResetCalls`] under way: boxed, so that the trait serves as `dyn ResetCalls`, and
/// `'static`, so that the call runs as a task of its own.
pub type Call<T> = futures::future::BoxFuture<'static, Result<T, KafkaFailure>>;

impl ResetCalls for KafkaClient {
    fn read_topic(self: Arc<Self>, topic: String, at: Option<i64>) -> Call<TopicRead> {
        Box::pin(read_topic(self, topic, at))
    }

    fn inspect(self: Arc<Self>, target: InletTarget, topic: TopicRead) -> Call<Inspection> {
        Box::pin(inspect(self, target, topic))
    }

    fn write(self: Arc<Self>, target: InletTarget, offsets: BTreeMap<i32, i64>, metadata: String) -> Call<Instant> {
        Box::pin(write(self, target, offsets, metadata))
    }

    fn list_partitions(self: Arc<Self>, topic: String) -> Call<Vec<i32>> {
        Box::pin(list_partitions(self, topic))
    }

    fn read_back(self: Arc<Self>, target: InletTarget, partitions: Vec<i32>) -> Call<Committed> {
        Box::pin(read_back(self, target, partitions))
    }

    fn read_committed(self: Arc<Self>, target: InletTarget) -> Call<Positions> {
        Box::pin(read_committed(self, target))
    }
}

/// The topic's part of an inspection, the same for every group that reads it: its partitions with
/// their log start offsets and high watermarks, and for a reset to a time each partition's first
/// offset at or after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicRead {
    /// The topic's partitions.
    pub partitions: Vec<i32>,
    /// Each partition's log start offset.
    pub log_start: BTreeMap<i32, i64>,
    /// Each partition's high watermark.
    pub high_watermark: BTreeMap<i32, i64>,
    /// For a reset to a time: each partition's first offset at or after it (empty otherwise).
    pub at_time: BTreeMap<i32, Option<i64>>,
}

/// Lists the topic's partitions, checks that each has a leader, and reads both ends of each
/// partition's log; with `at` (milliseconds since the Unix epoch), also each partition's first
/// offset at or after that instant. Nothing of a group: the groups that read the topic may share it
/// (see [`inspect`]).
///
/// # Errors
/// A classified [`KafkaFailure`]: a missing topic and authorization are final; timeouts transient.
pub async fn read_topic(client: Arc<KafkaClient>, topic: String, at: Option<i64>) -> Result<TopicRead, KafkaFailure> {
    blocking(client, move |h| {
        let md = h.metadata()?;
        let partitions = topic_partitions(&md, &topic)?;
        has_leaders(&md, &topic)?;
        let log_start = log_offsets(h, &topic, &partitions, End::Start)?;
        let high_watermark = log_offsets(h, &topic, &partitions, End::High)?;
        let at_time = match at {
            Some(at) => time_offsets(h, &topic, &partitions, at)?,
            None => BTreeMap::new(),
        };
        Ok(TopicRead { partitions, log_start, high_watermark, at_time })
    })
    .await
}

/// Describes the group and reads its committed offsets on the partitions of `topic`, a
/// [`read_topic`] of its topic made for this inspection or for one under way beside it: together,
/// what the reset learns of the group before it acts.
///
/// # Errors
/// A classified [`KafkaFailure`]: authorization is final; timeouts transient.
pub async fn inspect(
    client: Arc<KafkaClient>,
    target: InletTarget,
    topic: TopicRead,
) -> Result<Inspection, KafkaFailure> {
    blocking(client, move |h| {
        let group = target.group.as_str();
        // The metadata is read only when the group's coordinator is not known yet and no metadata the
        // client read lately guesses it.
        let GroupDescription { state, members, member_names } = coordinator::describe(h, None, &[group])?
            .pop()
            .unwrap_or_else(|| Err(KafkaFailure::unavailable("describing the consumer group: Kafka gave no answer")))?;
        let committed = committed(h, group, &target.topic, &topic.partitions)?;
        Ok(Inspection {
            state,
            members,
            member_names,
            log_start: topic.log_start,
            committed,
            high_watermark: topic.high_watermark,
            at_time: topic.at_time,
            topic_configs: BTreeMap::new(),
        })
    })
    .await
}

/// Commits `offsets` with `metadata` for the group without joining it (one request for every
/// partition), and nothing more (see [`read_back`]). Returns the instant the OffsetCommit was sent,
/// after the group's coordinator was found: a listing of the topic's partitions that started then
/// or later serves the read-back.
///
/// # Errors
/// The commit's [`KafkaFailure`]; UNKNOWN_MEMBER_ID (members present) is transient; a commit that
/// failed on some partitions names them.
pub async fn write(
    client: Arc<KafkaClient>,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
) -> Result<Instant, KafkaFailure> {
    write_offsets(client, target, offsets, metadata, false).await.map(|(sent, _)| sent)
}

/// The group's committed offsets on `partitions` of its topic (every partition it has, as a
/// [`list_partitions`] made after the [`write`] was sent found them: a partition the write did not
/// cover was added to the topic since), read at its coordinator (after the write, over the same
/// connection, so behind it).
///
/// # Errors
/// A classified [`KafkaFailure`].
pub async fn read_back(
    client: Arc<KafkaClient>,
    target: InletTarget,
    partitions: Vec<i32>,
) -> Result<Committed, KafkaFailure> {
    blocking(client, move |h| committed(h, target.group.as_str(), &target.topic, &partitions)).await
}

/// The partitions `topic` has now, ascending (see `partitions_now`).
///
/// # Errors
/// A classified [`KafkaFailure`]: a missing topic and authorization are final; timeouts transient.
pub async fn list_partitions(client: Arc<KafkaClient>, topic: String) -> Result<Vec<i32>, KafkaFailure> {
    blocking(client, move |h| partitions_now(h, &topic)).await
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
    write_offsets(client, target, offsets, metadata, true).await.map(|(_, read)| read)
}

/// Commits `offsets` with `metadata` for the group without joining it, and with `read_back` reads
/// the committed offsets of those partitions back (else the result is empty); with the instant the
/// OffsetCommit was sent.
async fn write_offsets(
    client: Arc<KafkaClient>,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
    read_back: bool,
) -> Result<(Instant, Committed), KafkaFailure> {
    blocking(client, move |h| {
        let group = target.group.as_str();
        let sent = coordinator::at(h, group, |broker| {
            let sent = Instant::now();
            admin::alter_group_offsets(h, broker, group, &target.topic, &offsets, &metadata).map(|()| sent)
        })?;
        if !read_back {
            return Ok((sent, Committed::new()));
        }
        let ps: Vec<i32> = offsets.keys().copied().collect();
        Ok((sent, committed(h, group, &target.topic, &ps)?))
    })
    .await
}

/// Reads the group's committed offsets, with their commit metadata, on every partition of its topic.
///
/// # Errors
/// A classified [`KafkaFailure`].
pub async fn read_committed(client: Arc<KafkaClient>, target: InletTarget) -> Result<Positions, KafkaFailure> {
    blocking(client, move |h| {
        let ps = partitions_now(h, &target.topic)?;
        positions(h, target.group.as_str(), &target.topic, &ps)
    })
    .await
}

/// The id of the Kafka cluster `client` is connected to (KIP-78): the same over every connection to
/// the same cluster, whatever spelling of its brokers, listener or credentials a connection uses.
/// Read from the metadata the client keeps; a client that has none yet asks for it first.
///
/// # Errors
/// A classified [`KafkaFailure`]: the cluster did not answer within the request deadline (transient),
/// or refused the client's TLS or credentials (final); or, from a broker too old to tell its id, a
/// final failure that says so.
pub async fn cluster_id(client: Arc<KafkaClient>) -> Result<String, KafkaFailure> {
    blocking(client, move |h| {
        if let Some(id) = admin::cluster_id(h) {
            return Ok(id);
        }
        h.metadata()?;
        admin::cluster_id(h).ok_or_else(|| KafkaFailure::refused("the Kafka cluster's metadata gives no cluster id"))
    })
    .await
}

/// What Kafka describes of a consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// Its state as Kafka names it (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// Its members, classic and consumer protocol alike.
    pub members: u32,
    /// Who the first [`flow_core::reset::NAMED_MEMBERS`] members are: `client id '<id>' at <host>`.
    pub member_names: Vec<String>,
}

impl GroupDescription {
    /// A group Kafka knows nothing of (GROUP_ID_NOT_FOUND, or no answer about it).
    fn dead() -> Self {
        GroupDescription { state: "Dead".into(), members: 0, member_names: vec![] }
    }
}

/// A group's description, or why it could not be described.
pub type Described = Result<GroupDescription, KafkaFailure>;

/// The state and number of members of each of `groups` (see [`inspect`]), in one admin call per
/// coordinator; in the order of `groups`.
///
/// # Errors
/// The outer error when the call as a whole failed; otherwise each group's own [`KafkaFailure`].
pub async fn describe_groups(client: Arc<KafkaClient>, groups: Vec<String>) -> Result<Vec<Described>, KafkaFailure> {
    blocking(client, move |h| {
        let names: Vec<&str> = groups.iter().map(String::as_str).collect();
        coordinator::describe(h, None, &names)
    })
    .await
}

/// The log start offset of every partition of `topic`: one metadata request and one ListOffsets
/// request per partition leader.
///
/// # Errors
/// A classified [`KafkaFailure`]; a missing topic is final.
pub async fn log_start_offsets(client: Arc<KafkaClient>, topic: String) -> Result<BTreeMap<i32, i64>, KafkaFailure> {
    blocking(client, move |h| {
        let ps = topic_partitions(&h.metadata()?, &topic)?;
        log_offsets(h, &topic, &ps, End::Start)
    })
    .await
}

mod admin;
mod coordinator;
mod lag;
mod log;

pub(crate) use admin::{TopicAnswer, describe_topics, serve_main_queue};
pub use lag::{Lag, lags};
pub(crate) use log::ClientLog;
pub use log::Requests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_without_a_leader_is_named() {
        assert_eq!(leaderless("t", &[(0, 1), (1, 2)]), None);
        assert_eq!(
            leaderless("t", &[(0, 1), (1, -1)]).as_deref(),
            Some("partition 1 of topic 't' has no leader (its replicas are on brokers that are down)")
        );
        assert_eq!(
            leaderless("t", &[(2, -1), (0, -1), (1, 1)]).as_deref(),
            Some("partitions 0, 2 of topic 't' have no leader (their replicas are on brokers that are down)")
        );
    }

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
    fn a_refused_setting_is_named_and_its_value_never_quoted() {
        let e = KafkaError::ClientCreation(
            "Invalid value \"hunter2-secret\" for configuration property \"sasl.oauthbearer.scope\"".into(),
        );
        assert_eq!(config_rejected(&e), "librdkafka refused the value of setting 'sasl.oauthbearer.scope'");
        let e = KafkaError::ClientCreation("No such configuration property: \"x.y\"".into());
        assert_eq!(config_rejected(&e), "librdkafka refused the value of setting 'x.y'");
        let e = KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
            "Invalid value".into(),
            "ssl.key.password".into(),
            "hunter2-secret".into(),
        );
        assert_eq!(config_rejected(&e), "librdkafka refused the value of setting 'ssl.key.password'");
        let e = KafkaError::ClientCreation("something with \"hunter2-secret\" in it".into());
        assert!(!config_rejected(&e).contains("hunter2"));
    }

    /// A client built from a connection whose value librdkafka refuses says which setting, with no
    /// value: librdkafka's own error quotes it.
    #[test]
    fn a_client_of_a_refused_value_names_the_setting_only() {
        let conn = KafkaConnection {
            bootstrap_servers: "127.0.0.1:1".into(),
            properties: [("security.protocol".to_string(), "not-a-protocol-hunter2".to_string())].into(),
        };
        let Err(f) = KafkaClient::new(&conn, Deadlines::default(), "g") else { panic!("a client was built") };
        assert!(f.reason.contains("'security.protocol'"), "{}", f.reason);
        assert!(!f.reason.contains("hunter2"), "{}", f.reason);
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
