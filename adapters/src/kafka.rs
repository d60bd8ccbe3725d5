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

/// A failure that no retry of the same call can cure, as librdkafka reported it to the client's
/// context: the calls themselves only time out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cause {
    /// The TLS handshake failed: the broker's certificate was not trusted (wrong CA, wrong name), or
    /// the broker refused the client's certificate (unknown CA, expired).
    Tls(String),
    /// SASL authentication failed: wrong username or password, a rejected token, or no token at all
    /// (the OAuth token endpoint refused the client or could not be reached).
    Authentication(String),
}

/// The client context of the operator's consumers. It keeps the first [`Cause`] librdkafka reports,
/// and hands librdkafka's log lines to `tracing` with every credential of the client's configuration
/// taken out.
pub struct Watch {
    bootstrap_servers: String,
    secrets: Secrets,
    cause: std::sync::Mutex<Option<Cause>>,
}

impl Watch {
    fn new(bootstrap_servers: &str, secrets: Secrets) -> Self {
        Watch { bootstrap_servers: bootstrap_servers.to_string(), secrets, cause: std::sync::Mutex::new(None) }
    }

    fn remember(&self, cause: Cause) {
        let mut known = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        if known.is_none() {
            *known = Some(cause);
        }
    }

    /// The final failure librdkafka reported so far, if any, worded for the user.
    pub(crate) fn cause(&self) -> Option<KafkaFailure> {
        let cause = self.cause.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        let at = &self.bootstrap_servers;
        let (kind, reason) = match cause {
            Cause::Tls(r) => (FailureKind::Configuration, format!("TLS with the Kafka cluster at {at} failed: {r}")),
            Cause::Authentication(r) => {
                (FailureKind::Authentication, format!("authentication with the Kafka cluster at {at} failed: {r}"))
            }
        };
        Some(KafkaFailure::new(kind, self.secrets.redact(&reason)))
    }

    /// Sorts one librdkafka report (a log line or an error event's text) into a [`Cause`], if it is
    /// one.
    fn sort(&self, text: &str) {
        if let Some(cause) = cause_of(text) {
            self.remember(cause);
        }
    }
}

/// The [`Cause`] a librdkafka log line or error text reports, if any. librdkafka words them as
/// `<broker>: SSL handshake failed: <OpenSSL's reason> (after <n>ms in state <state>)`, `<broker>:
/// SASL authentication error: <broker's reason> (after ...)` and `Failed to acquire SASL OAUTHBEARER
/// token: <reason>`; the broker name and the timing are left out.
fn cause_of(text: &str) -> Option<Cause> {
    let after = |marker: &str| {
        text.find(marker).map(|at| {
            let rest = &text[at + marker.len()..];
            rest.split(" (after ").next().unwrap_or(rest).trim().to_string()
        })
    };
    if let Some(r) = after("SSL handshake failed: ") {
        return Some(Cause::Tls(tls_reason(&r)));
    }
    // TLS 1.3: the broker checks the client's certificate after the client thinks the handshake
    // done, and answers with an alert on the first read ("Receive failed: ...:ssl/tls alert bad
    // certificate: SSL alert number 42").
    if text.contains("alert") && (text.contains("SSL routines") || text.contains("SSL alert number")) {
        let r =
            after("Receive failed: ").or_else(|| after("SSL transport error: ")).unwrap_or_else(|| text.to_string());
        return Some(Cause::Tls(tls_reason(&r)));
    }
    if let Some(r) = after("SASL authentication error: ") {
        return Some(Cause::Authentication(r));
    }
    if let Some(r) = after("Failed to acquire SASL OAUTHBEARER token: ") {
        return Some(Cause::Authentication(format!("no OAUTHBEARER token: {r}")));
    }
    None
}

/// OpenSSL's reason with the meaning a user needs put first.
fn tls_reason(openssl: &str) -> String {
    let l = openssl.to_ascii_lowercase();
    let meaning = if l.contains("certificate verify failed") || l.contains("could not be verified") {
        "the broker's certificate is not signed by a CA the client trusts (ssl.ca.pem / ssl.ca.location) or does not name the broker"
    } else if l.contains("certificate expired") {
        "the broker refused the client's certificate: it has expired"
    } else if l.contains("unknown ca") || l.contains("bad certificate") {
        "the broker refused the client's certificate: it is not signed by a CA the broker trusts, or none was sent"
    } else if l.contains("certificate unknown") {
        // what a Java broker answers for a certificate its CA signed that fails validation
        "the broker refused the client's certificate: it has expired, is not valid yet, or is not for client authentication"
    } else if l.contains("certificate required") {
        "the broker requires a client certificate (ssl.certificate.pem and ssl.key.pem)"
    } else if l.contains("bad decrypt") || l.contains("ssl.key") {
        "the client's private key cannot be read (a wrong ssl.key.password?)"
    } else {
        return openssl.to_string();
    };
    format!("{meaning} ({openssl})")
}

impl ClientContext for Watch {
    /// librdkafka's log lines: delivered whenever the client's queue is served (the client's pump
    /// thread does it), scrubbed of credentials, then logged. A failed TLS handshake (facility `FAIL`)
    /// and a failed SASL authentication reach the context only here, or as an error event.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.sort(log_message);
        let line = self.secrets.redact(log_message);
        match level {
            rdkafka::config::RDKafkaLogLevel::Debug | rdkafka::config::RDKafkaLogLevel::Info => {
                tracing::debug!(target: "librdkafka", "{fac} {line}")
            }
            rdkafka::config::RDKafkaLogLevel::Notice => tracing::info!(target: "librdkafka", "{fac} {line}"),
            rdkafka::config::RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", "{fac} {line}"),
            _ => tracing::error!(target: "librdkafka", "{fac} {line}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.sort(reason);
        if self.cause.lock().unwrap_or_else(|p| p.into_inner()).is_none()
            && matches!(
                error.rdkafka_error_code(),
                Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)
            )
        {
            self.remember(Cause::Authentication(reason.to_string()));
        }
        let (error, reason) = (self.secrets.redact(&error.to_string()), self.secrets.redact(reason));
        tracing::debug!(%error, reason, "librdkafka");
    }
}

impl ConsumerContext for Watch {}

/// The consumer behind a [`KafkaClient`].
type Client = BaseConsumer<Watch>;

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
            .set("socket.timeout.ms", d.request.as_millis().to_string());
        let watch = Watch::new(&conn.bootstrap_servers, secrets.clone());
        let consumer: Client = cfg.create_with_context(watch).map_err(|e| {
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
            None => KafkaFailure { reason: c.context().secrets.redact(&failure.reason), ..failure },
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
    let mut tpl = TopicPartitionList::new();
    let at = match end {
        End::Start => Offset::Beginning,
        End::High => Offset::End,
    };
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
        let Some(o) = absolute(e.offset()) else {
            return Err(KafkaFailure::unavailable(format!(
                "partition {}: Kafka gave no offset for the log's end",
                e.partition()
            )));
        };
        out.insert(e.partition(), o);
    }
    Ok(out)
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
    let mut tpl = TopicPartitionList::new();
    for p in ps {
        tpl.add_partition_offset(topic, *p, Offset::Offset(at)).map_err(|e| KafkaFailure::refused(e.to_string()))?;
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

    /// librdkafka's own wording, as logged on the test bed's listeners.
    #[test]
    fn final_causes_from_librdkafka_reports() {
        let tls = |t: &str| match cause_of(t) {
            Some(Cause::Tls(r)) => r,
            other => panic!("{t}: {other:?}"),
        };
        let auth = |t: &str| match cause_of(t) {
            Some(Cause::Authentication(r)) => r,
            other => panic!("{t}: {other:?}"),
        };
        let r = tls(
            "ssl://127.0.0.1:19100/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after 4ms in state SSL_HANDSHAKE)",
        );
        assert!(r.starts_with("the broker's certificate is not signed by a CA the client trusts"), "{r}");
        assert!(!r.contains("after 4ms"), "{r}");
        let r = tls(
            "ssl://127.0.0.1:19101/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert certificate unknown: SSL alert number 46 (after 130ms in state APIVERSION_QUERY)",
        );
        assert!(r.contains("expired") && r.ends_with("SSL alert number 46)"), "{r}");
        let r = tls(
            "ssl://127.0.0.1:19101/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate: SSL alert number 42 (after 1ms in state APIVERSION_QUERY)",
        );
        assert!(r.contains("not signed by a CA the broker trusts"), "{r}");
        let r = auth(
            "sasl_ssl://127.0.0.1:19102/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)",
        );
        assert_eq!(
            r,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
        );
        let r = auth(
            "Failed to acquire SASL OAUTHBEARER token: Failed to retrieve OIDC token from \"http://127.0.0.1:19110/token\": 401",
        );
        assert!(r.starts_with("no OAUTHBEARER token: "), "{r}");
        assert_eq!(
            cause_of("ssl://127.0.0.1:19100/bootstrap: Connect to ipv4#127.0.0.1:19100 failed: Connection refused"),
            None
        );
        assert_eq!(cause_of("Disconnected (after 2ms in state UP)"), None);
    }

    #[test]
    fn a_cause_is_worded_for_the_user_and_holds_no_secret() {
        let w = Watch::new("kafka:9093", Secrets::from_values(["hunter2-secret".to_string()]));
        assert_eq!(w.cause(), None);
        w.sort("x: SASL authentication error: bad password hunter2-secret (after 1ms in state AUTH_REQ)");
        w.sort("x: SSL handshake failed: later (after 1ms in state SSL_HANDSHAKE)");
        let f = w.cause().expect("a cause");
        assert!(!f.transient());
        assert_eq!(f.reason, "authentication with the Kafka cluster at kafka:9093 failed: bad password [redacted]");
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
