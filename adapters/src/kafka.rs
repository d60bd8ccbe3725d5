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
use flow_core::reset::{Committed, Inspection, KafkaFailure, Positions};
use flow_core::targets::InletTarget;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
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

/// Kafka's answer sorted into what the reset machine needs: transient or final, and a reason.
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
    let transient = matches!(
        code,
        Some(
            RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::RebalanceInProgress
                | RDKafkaErrorCode::UnknownMemberId
        )
    );
    let reason = match code {
        Some(RDKafkaErrorCode::UnknownMemberId | RDKafkaErrorCode::RebalanceInProgress) => {
            format!("Kafka refused the commit because consumers are still active in the group ({text})")
        }
        _ => text.to_string(),
    };
    KafkaFailure { transient, reason }
}

/// The client context of the operator's consumers: it keeps librdkafka's last authentication error.
/// librdkafka reports a SASL failure only through this callback; the calls themselves just time out,
/// which would otherwise read as a transient failure.
#[derive(Default)]
pub struct Watch {
    auth: std::sync::Mutex<Option<String>>,
}

impl Watch {
    fn remember_auth(&self, reason: &str) {
        *self.auth.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.to_string());
    }
}

impl ClientContext for Watch {
    /// librdkafka logs a failed SASL handshake (facility `FAIL`) from its broker thread, at once,
    /// while the call that needed the connection goes on until its deadline.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        if let Some(at) = log_message.find("SASL authentication error: ") {
            let reason = &log_message[at + "SASL authentication error: ".len()..];
            self.remember_auth(reason.split(" (after ").next().unwrap_or(reason));
        }
        match level {
            rdkafka::config::RDKafkaLogLevel::Debug | rdkafka::config::RDKafkaLogLevel::Info => {
                tracing::debug!(target: "librdkafka", "{fac} {log_message}")
            }
            rdkafka::config::RDKafkaLogLevel::Notice => tracing::info!(target: "librdkafka", "{fac} {log_message}"),
            rdkafka::config::RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", "{fac} {log_message}"),
            _ => tracing::error!(target: "librdkafka", "{fac} {log_message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let auth = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)
        ) || reason.contains("SASL authentication");
        if auth {
            self.remember_auth(reason);
        }
        tracing::debug!(%error, reason, "librdkafka");
    }
}

impl ConsumerContext for Watch {}

/// The consumer behind a [`KafkaClient`].
type Client = BaseConsumer<Watch>;

/// The operator's client of one Kafka connection, shared by every group that connection serves.
///
/// It has no `group.id`, never subscribes and never polls for records, so it never joins a group.
/// Group operations go through the admin API (DescribeConsumerGroups, ListConsumerGroupOffsets,
/// AlterConsumerGroupOffsets), which names the group per call: a commit carries generation -1 and an
/// empty member id, which the broker accepts only while the group has no members (it answers
/// UNKNOWN_MEMBER_ID otherwise; see Kafka's `validateOffsetCommit`), exactly as Kafka's own
/// `kafka-consumer-groups --reset-offsets` does. Building one costs a bootstrap connection (tens of
/// milliseconds on loopback), so a reset builds one per connection, not one per group or per step.
pub struct KafkaClient {
    consumer: Client,
    bootstrap_servers: String,
    deadlines: Deadlines,
}

impl KafkaClient {
    /// A client of `conn` whose every request has deadline `d.request`.
    ///
    /// # Errors
    /// A final [`KafkaFailure`] when librdkafka rejects the connection's properties.
    pub fn new(conn: &KafkaConnection, d: Deadlines) -> Result<Self, KafkaFailure> {
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
            .set("socket.timeout.ms", d.request.as_millis().to_string());
        let consumer = cfg.create_with_context(Watch::default()).map_err(|e| KafkaFailure {
            transient: false,
            reason: format!("cannot build a Kafka client for {}: {e}", conn.bootstrap_servers),
        })?;
        Ok(KafkaClient { consumer, bootstrap_servers: conn.bootstrap_servers.clone(), deadlines: d })
    }

    /// Runs `f`, and turns its failure into an authentication failure (final) when librdkafka
    /// reported one meanwhile.
    fn call<T>(&self, f: impl FnOnce(&Client, Deadlines) -> Result<T, KafkaFailure>) -> Result<T, KafkaFailure> {
        let c = &self.consumer;
        f(c, self.deadlines)
            .inspect_err(|_| {
                // Error events reach the context only when the client's queue is served. The
                // client never subscribes, so this poll only delivers pending events.
                let _ = c.poll(Duration::ZERO);
            })
            .map_err(|failure| match c.context().auth.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                Some(reason) => KafkaFailure {
                    transient: false,
                    reason: format!(
                        "authentication with the Kafka cluster at {} failed: {reason}",
                        self.bootstrap_servers
                    ),
                },
                None => failure,
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
        return Err(KafkaFailure { transient: false, reason: format!("topic '{topic}' does not exist") });
    };
    if let Some(err) = t.error() {
        let code = RDKafkaErrorCode::from(err);
        return Err(KafkaFailure {
            transient: matches!(code, RDKafkaErrorCode::LeaderNotAvailable),
            reason: format!("topic '{topic}': {code}"),
        });
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
    let mut tpl = TopicPartitionList::new();
    let at = match end {
        End::Start => Offset::Beginning,
        End::High => Offset::End,
    };
    for p in ps {
        tpl.add_partition_offset(topic, *p, at)
            .map_err(|e| KafkaFailure { transient: false, reason: e.to_string() })?;
    }
    let got = c.offsets_for_times(tpl, d.request).map_err(|e| classify(&e))?;
    let mut out = BTreeMap::new();
    for e in got.elements() {
        if let Err(err) = e.error() {
            let f = classify(&err);
            return Err(KafkaFailure {
                transient: f.transient,
                reason: format!("partition {}: {}", e.partition(), f.reason),
            });
        }
        let Some(o) = absolute(e.offset()) else {
            return Err(KafkaFailure {
                transient: true,
                reason: format!("partition {}: Kafka gave no offset for the log's end", e.partition()),
            });
        };
        out.insert(e.partition(), o);
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
        .unwrap_or_else(|e| Err(KafkaFailure { transient: true, reason: format!("Kafka worker stopped: {e}") }))
}

/// Describes the group, lists the topic's partitions with their log start offsets and high
/// watermarks, and reads the group's committed offsets.
///
/// # Errors
/// A classified [`KafkaFailure`]: missing topic and authorization are final; timeouts transient.
pub async fn inspect(client: Arc<KafkaClient>, target: InletTarget) -> Result<Inspection, KafkaFailure> {
    blocking(client, move |c, d| {
        let group = target.group.as_str();
        let (state, members) = admin::describe_group(c, group, d)?;
        let ps = partitions(c, &target.topic, d)?;
        let log_start = log_offsets(c, &target.topic, &ps, End::Start, d)?;
        let high_watermark = log_offsets(c, &target.topic, &ps, End::High, d)?;
        let committed = committed(c, group, &target.topic, &ps, d)?;
        Ok(Inspection { state, members, log_start, committed, high_watermark })
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
    blocking(client, move |c, d| {
        admin::alter_group_offsets(c, target.group.as_str(), &target.topic, &offsets, &metadata, d)
    })
    .await
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
    blocking(client, move |c, d| {
        let group = target.group.as_str();
        admin::alter_group_offsets(c, group, &target.topic, &offsets, &metadata, d)?;
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

/// Consumer-group calls of librdkafka's admin API that the safe rdkafka API lacks:
/// DescribeConsumerGroups, ListConsumerGroupOffsets and AlterConsumerGroupOffsets. Each names its
/// group per call, so one client serves every group of a connection.
///
/// DescribeConsumerGroups matters beyond convenience: rdkafka's `fetch_group_list` uses the classic
/// DescribeGroups, which does not list the members of a KIP-848 `consumer` protocol group, so such a
/// live group would describe as `Dead` with no member. librdkafka asks ConsumerGroupDescribe (KIP-848)
/// and DescribeGroups as the group needs, so both protocols report their members.
///
/// This module is the only unsafe code of the project. Every object librdkafka allocates for a call
/// is owned by a guard and freed whatever path is taken; librdkafka copies the request objects it is
/// given, so they are freed right after the call.
mod admin {
    use std::collections::BTreeMap;
    use std::ffi::{CStr, CString, c_char};
    use std::ptr;

    use flow_core::reset::{Position, Positions};
    use rdkafka::bindings as rd;
    use rdkafka::consumer::Consumer;
    use rdkafka::types::RDKafkaErrorCode;
    use rdkafka::{Offset, TopicPartitionList};

    use super::{Client, Deadlines, KafkaFailure};

    /// The queue, options and result event of one admin call.
    struct Call {
        queue: *mut rd::rd_kafka_queue_t,
        options: *mut rd::rd_kafka_AdminOptions_t,
        event: *mut rd::rd_kafka_event_t,
    }

    impl Drop for Call {
        fn drop(&mut self) {
            // SAFETY: each pointer is null or was returned by the matching librdkafka constructor
            // and is freed exactly once, here.
            unsafe {
                if !self.event.is_null() {
                    rd::rd_kafka_event_destroy(self.event);
                }
                if !self.options.is_null() {
                    rd::rd_kafka_AdminOptions_destroy(self.options);
                }
                if !self.queue.is_null() {
                    rd::rd_kafka_queue_destroy(self.queue);
                }
            }
        }
    }

    /// Runs one admin operation `op` on `c`: `issue` sends it (given the client handle, the options
    /// and the result queue); returns the result event once it arrived without a request-level error.
    fn call(
        c: &Client,
        op: rd::rd_kafka_admin_op_t,
        what: &str,
        d: Deadlines,
        issue: impl FnOnce(*mut rd::rd_kafka_t, *mut rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
    ) -> Result<Call, KafkaFailure> {
        let rk = c.client().native_ptr();
        let ms = i32::try_from(d.request.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `rk` is the live handle of `c`, borrowed for this call; the queue and options are
        // owned by the returned `Call` (or freed by its drop on an early return).
        unsafe {
            let mut call = Call { queue: rd::rd_kafka_queue_new(rk), options: ptr::null_mut(), event: ptr::null_mut() };
            call.options = rd::rd_kafka_AdminOptions_new(rk, op);
            let mut errstr = [0 as c_char; 256];
            rd::rd_kafka_AdminOptions_set_request_timeout(call.options, ms, errstr.as_mut_ptr(), errstr.len());
            issue(rk, call.options, call.queue);
            call.event = rd::rd_kafka_queue_poll(call.queue, ms.saturating_add(1000));
            if call.event.is_null() {
                return Err(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, what, "no answer in time"));
            }
            let err = rd::rd_kafka_event_error(call.event);
            if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(failure(err, what, &text(rd::rd_kafka_event_error_string(call.event))));
            }
            Ok(call)
        }
    }

    fn text(p: *const c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: librdkafka returns NUL-terminated strings that live as long as their event.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The failure of admin call `what` with Kafka's `code` and its `reason` (the code's own text
    /// when empty), classified by [`super::classify_code`].
    pub(super) fn failure(code: rd::rd_kafka_resp_err_t, what: &str, reason: &str) -> KafkaFailure {
        let code = RDKafkaErrorCode::from(code);
        let text = if reason.is_empty() { code.to_string() } else { reason.to_string() };
        let mut f = super::classify_code(Some(code), &text);
        if !matches!(code, RDKafkaErrorCode::UnknownMemberId | RDKafkaErrorCode::RebalanceInProgress) {
            f.reason = format!("{what}: {text}");
        }
        f
    }

    fn group_name(group: &str) -> Result<CString, KafkaFailure> {
        CString::new(group).map_err(|_| KafkaFailure { transient: false, reason: "NUL in the group id".into() })
    }

    /// The single group result of a ListConsumerGroupOffsets or AlterConsumerGroupOffsets event:
    /// its per-partition list, or the group-level error.
    ///
    /// # Safety
    /// `groups` and `n` come from the matching `*_result_groups` call on a live event.
    unsafe fn only_group(
        groups: *mut *const rd::rd_kafka_group_result_t,
        n: usize,
        what: &str,
    ) -> Result<*const rd::rd_kafka_topic_partition_list_t, KafkaFailure> {
        if groups.is_null() || n == 0 {
            return Err(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__BAD_MSG, what, "Kafka returned no group"));
        }
        // SAFETY: per the contract, `groups` points at `n` >= 1 results owned by the event.
        unsafe {
            let g = *groups;
            let error = rd::rd_kafka_group_result_error(g);
            if !error.is_null() {
                return Err(failure(rd::rd_kafka_error_code(error), what, &text(rd::rd_kafka_error_string(error))));
            }
            Ok(rd::rd_kafka_group_result_partitions(g))
        }
    }

    /// The elements of a partition list owned by a live event.
    ///
    /// # Safety
    /// `list` is null or a valid list that outlives the returned slice.
    unsafe fn elements<'a>(list: *const rd::rd_kafka_topic_partition_list_t) -> &'a [rd::rd_kafka_topic_partition_t] {
        // SAFETY: per the contract; `elems` holds `cnt` initialised elements.
        unsafe {
            if list.is_null() || (*list).elems.is_null() {
                return &[];
            }
            std::slice::from_raw_parts((*list).elems, usize::try_from((*list).cnt).unwrap_or(0))
        }
    }

    /// The group's state (`Empty`, `Stable`, `Dead`, ...) and its number of members, classic and
    /// consumer protocol alike. A group that does not exist is `Dead` with no member.
    ///
    /// # Errors
    /// A [`KafkaFailure`]: timeouts and coordinator changes are transient, the rest final.
    pub fn describe_group(c: &Client, group: &str, d: Deadlines) -> Result<(String, u32), KafkaFailure> {
        const WHAT: &str = "describing the consumer group";
        let name = group_name(group)?;
        let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS;
        let call = call(c, op, WHAT, d, |rk, options, queue| {
            let mut groups = [name.as_ptr()];
            // SAFETY: live handle, options and queue; librdkafka copies the names before returning.
            unsafe { rd::rd_kafka_DescribeConsumerGroups(rk, groups.as_mut_ptr(), 1, options, queue) }
        })?;
        // SAFETY: the result and the descriptions belong to `call.event`, alive until `call` drops.
        unsafe {
            let result = rd::rd_kafka_event_DescribeConsumerGroups_result(call.event);
            let mut n = 0usize;
            let descs = rd::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut n);
            if descs.is_null() || n == 0 {
                return Ok(("Dead".into(), 0));
            }
            let desc = *descs;
            let error = rd::rd_kafka_ConsumerGroupDescription_error(desc);
            if !error.is_null() {
                let code = rd::rd_kafka_error_code(error);
                if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND {
                    return Ok(("Dead".into(), 0));
                }
                return Err(failure(code, WHAT, &text(rd::rd_kafka_error_string(error))));
            }
            let state = text(rd::rd_kafka_consumer_group_state_name(rd::rd_kafka_ConsumerGroupDescription_state(desc)));
            let members = u32::try_from(rd::rd_kafka_ConsumerGroupDescription_member_count(desc)).unwrap_or(u32::MAX);
            Ok((state, members))
        }
    }

    /// The group's committed positions (offset and commit metadata) on partitions `ps` of `topic`, in
    /// one OffsetFetch; `None` where it has none.
    ///
    /// # Errors
    /// A [`KafkaFailure`]; a partition-level error names the partition.
    pub fn list_group_offsets(
        c: &Client,
        group: &str,
        topic: &str,
        ps: &[i32],
        d: Deadlines,
    ) -> Result<Positions, KafkaFailure> {
        const WHAT: &str = "reading the group's committed offsets";
        let name = group_name(group)?;
        let mut tpl = TopicPartitionList::new();
        for p in ps {
            tpl.add_partition(topic, *p);
        }
        let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS;
        let call = call(c, op, WHAT, d, |rk, options, queue| {
            // SAFETY: `name` and `tpl` outlive the constructor, which copies both; the request
            // object is copied by the call and freed right after it.
            unsafe {
                let mut req = [rd::rd_kafka_ListConsumerGroupOffsets_new(name.as_ptr(), tpl.ptr())];
                rd::rd_kafka_ListConsumerGroupOffsets(rk, req.as_mut_ptr(), 1, options, queue);
                rd::rd_kafka_ListConsumerGroupOffsets_destroy(req[0]);
            }
        })?;
        // SAFETY: everything read belongs to `call.event`, alive until `call` drops.
        unsafe {
            let result = rd::rd_kafka_event_ListConsumerGroupOffsets_result(call.event);
            let mut n = 0usize;
            let groups = rd::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut n);
            let list = only_group(groups, n, WHAT)?;
            let mut out: Positions = ps.iter().map(|p| (*p, None)).collect();
            for e in elements(list) {
                if text(e.topic) != topic || !out.contains_key(&e.partition) {
                    continue;
                }
                if e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    return Err(failure(
                        e.err,
                        WHAT,
                        &format!("partition {}: {}", e.partition, RDKafkaErrorCode::from(e.err)),
                    ));
                }
                let metadata = if e.metadata.is_null() {
                    String::new()
                } else {
                    let bytes = std::slice::from_raw_parts(e.metadata.cast::<u8>(), e.metadata_size);
                    String::from_utf8_lossy(bytes).into_owned()
                };
                let pos = super::absolute(Offset::from_raw(e.offset)).map(|offset| Position { offset, metadata });
                out.insert(e.partition, pos);
            }
            Ok(out)
        }
    }

    /// Commits `offsets` of `topic` with commit metadata `metadata` for the group, without joining it,
    /// in one OffsetCommit; then examines every partition's result.
    ///
    /// # Errors
    /// A [`KafkaFailure`]: UNKNOWN_MEMBER_ID (members present) and other retriable codes are
    /// transient; when some partitions failed, the reason lists each with Kafka's code.
    pub fn alter_group_offsets(
        c: &Client,
        group: &str,
        topic: &str,
        offsets: &BTreeMap<i32, i64>,
        metadata: &str,
        d: Deadlines,
    ) -> Result<(), KafkaFailure> {
        const WHAT: &str = "committing the group's offsets";
        let name = group_name(group)?;
        let mut tpl = TopicPartitionList::new();
        for (p, o) in offsets {
            let mut e = tpl.add_partition(topic, *p);
            e.set_offset(Offset::Offset(*o)).map_err(|e| KafkaFailure { transient: false, reason: e.to_string() })?;
            e.set_metadata(metadata);
        }
        let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS;
        let call = call(c, op, WHAT, d, |rk, options, queue| {
            // SAFETY: as in `list_group_offsets`.
            unsafe {
                let mut req = [rd::rd_kafka_AlterConsumerGroupOffsets_new(name.as_ptr(), tpl.ptr())];
                rd::rd_kafka_AlterConsumerGroupOffsets(rk, req.as_mut_ptr(), 1, options, queue);
                rd::rd_kafka_AlterConsumerGroupOffsets_destroy(req[0]);
            }
        })?;
        // SAFETY: everything read belongs to `call.event`, alive until `call` drops.
        let failed: Vec<(i32, rd::rd_kafka_resp_err_t)> = unsafe {
            let result = rd::rd_kafka_event_AlterConsumerGroupOffsets_result(call.event);
            let mut n = 0usize;
            let groups = rd::rd_kafka_AlterConsumerGroupOffsets_result_groups(result, &mut n);
            let list = only_group(groups, n, WHAT)?;
            elements(list)
                .iter()
                .filter(|e| e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
                .map(|e| (e.partition, e.err))
                .collect()
        };
        let Some((_, first)) = failed.first() else { return Ok(()) };
        let mut f = failure(*first, WHAT, "");
        // Kafka answers UNKNOWN_MEMBER_ID on every partition when the group has members: its own
        // reason says so; otherwise list each partition and its code.
        if !f.transient || failed.iter().any(|(_, e)| e != first) || failed.len() < offsets.len() {
            let listed: Vec<String> =
                failed.iter().map(|(p, e)| format!("partition {p}: {}", RDKafkaErrorCode::from(*e))).collect();
            f.reason = format!(
                "{WHAT}: the commit failed on {} of {} partition(s) of '{topic}' ({})",
                failed.len(),
                offsets.len(),
                listed.join("; ")
            );
            f.transient = failed.iter().all(|(_, e)| failure(*e, WHAT, "").transient);
        }
        Err(f)
    }
}

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
        assert!(f.transient);
        assert!(f.reason.contains("consumers are still active"), "{}", f.reason);
        let f = classify(&KafkaError::MetadataFetch(RDKafkaErrorCode::TopicAuthorizationFailed));
        assert!(!f.transient);
    }

    #[test]
    fn admin_api_codes_are_classified_like_client_errors() {
        use rdkafka::bindings::rd_kafka_resp_err_t as E;
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, "committing the group's offsets", "");
        assert!(f.transient, "{f:?}");
        assert!(f.reason.contains("consumers are still active"), "{}", f.reason);
        let f = admin::failure(E::RD_KAFKA_RESP_ERR__TIMED_OUT, "reading the group's committed offsets", "");
        assert!(f.transient, "{f:?}");
        assert!(f.reason.starts_with("reading the group's committed offsets: "), "{}", f.reason);
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, "describing the consumer group", "x");
        assert!(f.transient, "{f:?}");
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, "describing the consumer group", "");
        assert!(!f.transient, "{f:?}");
        let f = admin::failure(E::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "committing the group's offsets", "");
        assert!(!f.transient, "{f:?}");
    }
}
