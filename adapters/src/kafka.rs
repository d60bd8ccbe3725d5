//! Kafka side of a reset, over rdkafka (librdkafka 2.12).
//!
//! Every call builds a short-lived consumer whose `group.id` is the group being reset. It never
//! subscribes and never polls, so it never joins the group: its commits carry generation -1 and an
//! empty member id, which the broker accepts only while the group has no members (it answers
//! UNKNOWN_MEMBER_ID otherwise; see Kafka's `validateOffsetCommit`). Every blocking call runs on
//! tokio's blocking pool and has a deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use flow_core::connection::KafkaConnection;
use flow_core::reset::{Committed, Inspection, KafkaFailure, Position, Positions};
use flow_core::targets::InletTarget;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
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
    let code = e.rdkafka_error_code();
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
            format!("Kafka refused the commit because consumers are still active in the group ({e})")
        }
        _ => e.to_string(),
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

/// The operator's Kafka client.
type Client = BaseConsumer<Watch>;

/// Builds the group's client, runs `f` with it, and turns a failure into an authentication failure
/// (final) when librdkafka reported one meanwhile.
fn run<T>(
    conn: &KafkaConnection,
    group: &str,
    d: Deadlines,
    f: impl FnOnce(&Client) -> Result<T, KafkaFailure>,
) -> Result<T, KafkaFailure> {
    let c = consumer(conn, group, d)?;
    f(&c)
        .inspect_err(|_| {
            // Error events reach the context only when the client's queue is served. The client
            // never subscribes, so this poll only delivers pending events; it joins no group.
            let _ = c.poll(std::time::Duration::ZERO);
        })
        .map_err(|failure| match c.context().auth.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(reason) => KafkaFailure {
                transient: false,
                reason: format!("authentication with the Kafka cluster at {} failed: {reason}", conn.bootstrap_servers),
            },
            None => failure,
        })
}

/// A consumer with `group.id` = `group` that never subscribes. Its socket timeout is the request
/// deadline, which bounds calls that take no timeout of their own (the synchronous commit).
fn consumer(conn: &KafkaConnection, group: &str, d: Deadlines) -> Result<Client, KafkaFailure> {
    let mut cfg = ClientConfig::new();
    for (k, v) in &conn.properties {
        cfg.set(k, v);
    }
    cfg.set("bootstrap.servers", &conn.bootstrap_servers)
        .set("group.id", group)
        .set("client.id", CLIENT_ID)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        .set("socket.timeout.ms", d.request.as_millis().to_string());
    cfg.create_with_context(Watch::default()).map_err(|e| KafkaFailure {
        transient: false,
        reason: format!("cannot build a Kafka client for {}: {e}", conn.bootstrap_servers),
    })
}

/// The partitions of `topic`, from cluster metadata. Asks for every topic's metadata rather than the
/// one topic, so that a broker with `auto.create.topics.enable=true` never creates a missing one.
fn partitions(c: &Client, topic: &str, d: Deadlines) -> Result<Vec<i32>, KafkaFailure> {
    let md = c.fetch_metadata(None, d.request).map_err(|e| classify(&e))?;
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

fn positions(c: &Client, topic: &str, ps: &[i32], d: Deadlines) -> Result<Positions, KafkaFailure> {
    let mut tpl = TopicPartitionList::new();
    for p in ps {
        tpl.add_partition(topic, *p);
    }
    let got = c.committed_offsets(tpl, d.request).map_err(|e| classify(&e))?;
    let mut out = BTreeMap::new();
    for e in got.elements() {
        if let Err(err) = e.error() {
            return Err(KafkaFailure { transient: false, reason: format!("partition {}: {err}", e.partition()) });
        }
        let pos = absolute(e.offset()).map(|offset| Position { offset, metadata: e.metadata().to_string() });
        out.insert(e.partition(), pos);
    }
    Ok(out)
}

fn committed(c: &Client, topic: &str, ps: &[i32], d: Deadlines) -> Result<Committed, KafkaFailure> {
    Ok(positions(c, topic, ps, d)?.into_iter().map(|(p, pos)| (p, pos.map(|x| x.offset))).collect())
}

fn commit_with(c: &Client, topic: &str, offsets: &BTreeMap<i32, i64>, metadata: &str) -> Result<(), KafkaFailure> {
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        let mut e = tpl.add_partition(topic, *p);
        e.set_offset(Offset::Offset(*o)).map_err(|e| KafkaFailure { transient: false, reason: e.to_string() })?;
        e.set_metadata(metadata);
    }
    c.commit(&tpl, CommitMode::Sync).map_err(|e| classify(&e))
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
    f: impl FnOnce() -> Result<T, KafkaFailure> + Send + 'static,
) -> Result<T, KafkaFailure> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(KafkaFailure { transient: true, reason: format!("Kafka worker stopped: {e}") }))
}

/// Describes the group, lists the topic's partitions and their log start offsets, and reads the
/// group's committed offsets.
///
/// # Errors
/// A classified [`KafkaFailure`]: missing topic and authorization are final; timeouts transient.
pub async fn inspect(conn: KafkaConnection, target: InletTarget, d: Deadlines) -> Result<Inspection, KafkaFailure> {
    blocking(move || {
        run(&conn, target.group.as_str(), d, |c| {
            let (state, members) = describe::group(c, target.group.as_str(), d)?;
            let ps = partitions(c, &target.topic, d)?;
            let (mut log_start, mut high_watermark) = (BTreeMap::new(), BTreeMap::new());
            for p in &ps {
                let (low, high) = c.fetch_watermarks(&target.topic, *p, d.request).map_err(|e| classify(&e))?;
                log_start.insert(*p, low);
                high_watermark.insert(*p, high);
            }
            let committed = committed(c, &target.topic, &ps, d)?;
            Ok(Inspection { state, members, log_start, committed, high_watermark })
        })
    })
    .await
}

/// Commits the group's own `offsets` again, unchanged, with the fence marker `metadata`, without
/// joining the group. Nothing to do when the group has no committed offset.
///
/// # Errors
/// The commit's [`KafkaFailure`]; UNKNOWN_MEMBER_ID (members present) is transient.
pub async fn fence(
    conn: KafkaConnection,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
    d: Deadlines,
) -> Result<(), KafkaFailure> {
    if offsets.is_empty() {
        return Ok(());
    }
    blocking(move || run(&conn, target.group.as_str(), d, |c| commit_with(c, &target.topic, &offsets, &metadata))).await
}

/// Commits `offsets` with `metadata` for the group without joining it, then reads the committed
/// offsets back.
///
/// # Errors
/// The commit's or the read's [`KafkaFailure`]; UNKNOWN_MEMBER_ID (members present) is transient.
pub async fn commit(
    conn: KafkaConnection,
    target: InletTarget,
    offsets: BTreeMap<i32, i64>,
    metadata: String,
    d: Deadlines,
) -> Result<Committed, KafkaFailure> {
    blocking(move || {
        run(&conn, target.group.as_str(), d, |c| {
            commit_with(c, &target.topic, &offsets, &metadata)?;
            let ps: Vec<i32> = offsets.keys().copied().collect();
            committed(c, &target.topic, &ps, d)
        })
    })
    .await
}

/// Reads the group's committed offsets, with their commit metadata, on every partition of its topic.
///
/// # Errors
/// A classified [`KafkaFailure`].
pub async fn read_committed(
    conn: KafkaConnection,
    target: InletTarget,
    d: Deadlines,
) -> Result<Positions, KafkaFailure> {
    blocking(move || {
        run(&conn, target.group.as_str(), d, |c| {
            let ps = partitions(c, &target.topic, d)?;
            positions(c, &target.topic, &ps, d)
        })
    })
    .await
}

/// The lag of `group` on `topic`, per partition: high watermark minus the committed offset (minus the
/// log start offset where the group has none), never below 0.
///
/// # Errors
/// A classified [`KafkaFailure`]; a missing topic is final.
pub async fn lag(
    conn: KafkaConnection,
    group: String,
    topic: String,
    d: Deadlines,
) -> Result<BTreeMap<i32, i64>, KafkaFailure> {
    blocking(move || {
        run(&conn, &group, d, |c| {
            let ps = partitions(c, &topic, d)?;
            let committed = committed(c, &topic, &ps, d)?;
            let mut out = BTreeMap::new();
            for p in ps {
                let (low, high) = c.fetch_watermarks(&topic, p, d.request).map_err(|e| classify(&e))?;
                let at = committed.get(&p).copied().flatten().unwrap_or(low);
                out.insert(p, (high - at).max(0));
            }
            Ok(out)
        })
    })
    .await
}

/// Describing a consumer group through librdkafka's DescribeConsumerGroups, which the safe rdkafka
/// API lacks (its `fetch_group_list` uses the classic DescribeGroups, which does not list the members
/// of a KIP-848 `consumer` protocol group: such a live group would describe as `Dead` with no member).
/// librdkafka asks ConsumerGroupDescribe (KIP-848) and DescribeGroups as the group needs, so both
/// protocols report their members. This module is the only unsafe code of the project; each pointer
/// it holds is freed by a guard, whatever path is taken.
mod describe {
    use std::ffi::{CStr, CString, c_char};
    use std::ptr;

    use rdkafka::bindings as rd;
    use rdkafka::consumer::Consumer;
    use rdkafka::types::RDKafkaErrorCode;

    use super::{Client, Deadlines, KafkaFailure};

    /// Frees what librdkafka allocated for one describe call.
    struct Guard {
        queue: *mut rd::rd_kafka_queue_t,
        options: *mut rd::rd_kafka_AdminOptions_t,
        event: *mut rd::rd_kafka_event_t,
    }

    impl Drop for Guard {
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

    fn text(p: *const c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: librdkafka returns NUL-terminated strings that live as long as their event.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn failure(code: rd::rd_kafka_resp_err_t, reason: String) -> KafkaFailure {
        let code = RDKafkaErrorCode::from(code);
        let transient = matches!(
            code,
            RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotCoordinator
        );
        KafkaFailure { transient, reason: format!("describing the consumer group: {reason}") }
    }

    /// The group's state (`Empty`, `Stable`, `Dead`, ...) and its number of members, classic and
    /// consumer protocol alike. A group that does not exist is `Dead` with no member.
    ///
    /// # Errors
    /// A [`KafkaFailure`]: timeouts and coordinator changes are transient, the rest final.
    pub fn group(c: &Client, group: &str, d: Deadlines) -> Result<(String, u32), KafkaFailure> {
        let rk = c.client().native_ptr();
        let name = CString::new(group).map_err(|_| {
            failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__INVALID_ARG, "NUL in the group id".into())
        })?;
        let ms = i32::try_from(d.request.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `rk` is the live handle of `c`, borrowed for this call; every object created here
        // is owned by `guard` and freed when it drops; `name` outlives the call that reads it.
        unsafe {
            let mut guard =
                Guard { queue: rd::rd_kafka_queue_new(rk), options: ptr::null_mut(), event: ptr::null_mut() };
            guard.options =
                rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
            let mut errstr = [0 as c_char; 256];
            rd::rd_kafka_AdminOptions_set_request_timeout(guard.options, ms, errstr.as_mut_ptr(), errstr.len());
            let mut groups = [name.as_ptr()];
            rd::rd_kafka_DescribeConsumerGroups(rk, groups.as_mut_ptr(), 1, guard.options, guard.queue);
            guard.event = rd::rd_kafka_queue_poll(guard.queue, ms.saturating_add(1000));
            if guard.event.is_null() {
                return Err(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, "no answer in time".into()));
            }
            let err = rd::rd_kafka_event_error(guard.event);
            if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(failure(err, text(rd::rd_kafka_event_error_string(guard.event))));
            }
            let result = rd::rd_kafka_event_DescribeConsumerGroups_result(guard.event);
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
                return Err(failure(code, text(rd::rd_kafka_error_string(error))));
            }
            let state = text(rd::rd_kafka_consumer_group_state_name(rd::rd_kafka_ConsumerGroupDescription_state(desc)));
            let members = u32::try_from(rd::rd_kafka_ConsumerGroupDescription_member_count(desc)).unwrap_or(u32::MAX);
            Ok((state, members))
        }
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
}
