//! Calls of librdkafka's admin API that the safe rdkafka API lacks: the consumer-group calls
//! DescribeConsumerGroups, ListConsumerGroupOffsets and AlterConsumerGroupOffsets, and DescribeTopics
//! ([`describe_topics`]), the one call that gives a topic's id (KIP-516). Each group call names its
//! group per call, so one client serves every group of a connection, and each goes to the broker it
//! names, the group's coordinator as [`super::coordinator`] found it: never through librdkafka's own
//! coordinator lookup (see that module for why).
//!
//! DescribeConsumerGroups matters beyond convenience: rdkafka's `fetch_group_list` uses the classic
//! DescribeGroups, which does not list the members of a KIP-848 `consumer` protocol group, so such a
//! live group would describe as `Dead` with no member. librdkafka asks ConsumerGroupDescribe (KIP-848)
//! and DescribeGroups as the group needs, so both protocols report their members.
//!
//! It also reads the cluster id librdkafka learned from the cluster's metadata (`rd_kafka_clusterid`):
//! rdkafka's `fetch_cluster_id` never frees the copy librdkafka hands out for each call.
//!
//! This module is unsafe code: the workspace denies `unsafe_code`, and it allows it for itself (the
//! only other place that does is the operator's `allocator` module, for two calls). Every object librdkafka allocates for a call is owned by a guard and freed
//! whatever path is taken; librdkafka copies the request objects it is given, so they are freed right
//! after the call.

#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char};
use std::ptr;
use std::time::{Duration, Instant};

use flow_core::reset::{Position, Positions};
use rdkafka::bindings as rd;
use rdkafka::consumer::Consumer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{ClientLog, Described, GroupDescription, Handle, KafkaFailure};

/// How long one wait for an admin result lasts before the client's context is asked for a final cause.
const SLICE_MS: i32 = 100;

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

/// Sends one admin operation `op` to broker `broker` over `h`'s client: `issue` sends it (given the
/// client handle, the options and the result queue). Returns the call under way; [`finish`] waits for
/// its result. A call whose options librdkafka refuses (a negative broker id) is never sent.
///
/// The broker is named in the call's options (`rd_kafka_AdminOptions_set_broker`), so librdkafka
/// waits for a connection to that broker under the call's own timeout and sends it there; it never
/// looks a coordinator up for it.
fn start(
    h: &Handle,
    op: rd::rd_kafka_admin_op_t,
    broker: i32,
    issue: impl FnOnce(*mut rd::rd_kafka_t, *mut rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
) -> Result<Call, KafkaFailure> {
    let rk = h.client.client().native_ptr();
    let ms = i32::try_from(h.deadlines.request.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `rk` is the live handle of the client, borrowed for this call; the queue and options
    // are owned by the returned `Call`, which frees them when it drops.
    unsafe {
        let call = Call {
            queue: rd::rd_kafka_queue_new(rk),
            options: rd::rd_kafka_AdminOptions_new(rk, op),
            event: ptr::null_mut(),
        };
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(call.options, ms, errstr.as_mut_ptr(), errstr.len());
        let err = rd::rd_kafka_AdminOptions_set_broker(call.options, broker, errstr.as_mut_ptr(), errstr.len());
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(KafkaFailure::refused(format!("broker id {broker}: {}", text(errstr.as_ptr()))));
        }
        issue(rk, call.options, call.queue);
        Ok(call)
    }
}

/// Waits for the result of `call` (admin call `what`, started at `started`): the result event once
/// it arrived without a request-level error.
fn finish(h: &Handle, mut call: Call, what: &str, started: Instant) -> Result<Call, KafkaFailure> {
    // Wait in slices: a failure that no retry can cure (a TLS handshake or an authentication that
    // failed, reported to the client's context meanwhile) ends the wait at once. librdkafka ends the
    // call itself at its request timeout; the extra second only bounds a result that never comes.
    let deadline = started + h.deadlines.request + Duration::from_secs(1);
    // SAFETY: the queue is owned by `call`; the event it returns is owned by `call` from then on.
    unsafe {
        loop {
            call.event = rd::rd_kafka_queue_poll(call.queue, SLICE_MS);
            if !call.event.is_null() {
                break;
            }
            if let Some(cause) = h.client.context().cause() {
                return Err(cause);
            }
            if Instant::now() >= deadline {
                return Err(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, what, "no answer in time"));
            }
        }
        let err = rd::rd_kafka_event_error(call.event);
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(failure(err, what, &text(rd::rd_kafka_event_error_string(call.event))));
        }
    }
    Ok(call)
}

/// [`start`] and [`finish`] in one.
fn call(
    h: &Handle,
    op: rd::rd_kafka_admin_op_t,
    what: &str,
    broker: i32,
    issue: impl FnOnce(*mut rd::rd_kafka_t, *mut rd::rd_kafka_AdminOptions_t, *mut rd::rd_kafka_queue_t),
) -> Result<Call, KafkaFailure> {
    let started = Instant::now();
    finish(h, start(h, op, broker, issue)?, what, started)
}

/// The id of the cluster `h`'s client is connected to, as the last metadata it received gave it
/// (KIP-78: every broker of a cluster gives the same), without waiting; `None` while the client has
/// received no metadata yet.
pub(super) fn cluster_id(h: &Handle) -> Option<String> {
    let rk = h.client.client().native_ptr();
    // SAFETY: `rk` is the live handle of the client, borrowed for this call. librdkafka returns a
    // NUL-terminated copy (or null) that the caller owns and frees with `rd_kafka_mem_free`, here,
    // once it was copied.
    unsafe {
        let id = rd::rd_kafka_clusterid(rk, 0);
        if id.is_null() {
            return None;
        }
        let owned = CStr::from_ptr(id).to_string_lossy().into_owned();
        rd::rd_kafka_mem_free(rk, id.cast());
        Some(owned)
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
    if f.kind != flow_core::reset::FailureKind::MembersPresent {
        f.reason = format!("{what}: {text}");
    }
    f
}

fn group_name(group: &str) -> Result<CString, KafkaFailure> {
    CString::new(group).map_err(|_| KafkaFailure::configuration("NUL in the group id"))
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

/// What one broker answered about one group it was asked to describe.
#[derive(Clone, Debug)]
pub(super) enum Answer {
    /// The broker coordinates the group: its state and number of members, or a failure that says
    /// it is the coordinator (COORDINATOR_LOAD_IN_PROGRESS: it is loading the group).
    Coordinator(Described),
    /// The broker does not coordinate the group (NOT_COORDINATOR), or no broker does right now
    /// (COORDINATOR_NOT_AVAILABLE).
    NotCoordinator,
    /// No answer from the broker (a timeout, a lost connection): it may be the coordinator or not.
    Silent(KafkaFailure),
    /// A failure that does not depend on the broker asked (an authorization, for example).
    Failed(KafkaFailure),
}

/// Describes the groups of each `(broker, groups)` of `plan` at that broker, in one
/// DescribeConsumerGroups call per broker, all sent before any answer is awaited. Results are in the
/// order of `plan`, each group's answer in the order of its groups. librdkafka sends one request per
/// group, and for a classic group follows ConsumerGroupDescribe (KIP-848) with DescribeGroups at once
/// (`rd_kafka_DescribeConsumerGroups_response_merge`, librdkafka 2.12), to the same broker.
///
/// # Errors
/// A group id that Kafka cannot be sent (it holds a NUL). A call that failed as a whole (a timeout)
/// is its entry's error: its groups have no answer.
pub(super) fn describe_at_each(
    h: &Handle,
    plan: &[(i32, Vec<&str>)],
) -> Result<Vec<Result<Vec<Answer>, KafkaFailure>>, KafkaFailure> {
    const WHAT: &str = "describing the consumer group";
    let mut names = Vec::with_capacity(plan.len());
    for (_, groups) in plan {
        names.push(groups.iter().map(|g| group_name(g)).collect::<Result<Vec<CString>, _>>()?);
    }
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS;
    let started = Instant::now();
    let calls: Vec<Result<Call, KafkaFailure>> = plan
        .iter()
        .zip(&names)
        .map(|((broker, _), names)| {
            start(h, op, *broker, |rk, options, queue| {
                let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
                // SAFETY: live handle, options and queue; librdkafka copies the names before returning.
                unsafe { rd::rd_kafka_DescribeConsumerGroups(rk, ptrs.as_mut_ptr(), ptrs.len(), options, queue) }
            })
        })
        .collect();
    Ok(calls
        .into_iter()
        .zip(plan)
        .map(|(call, (_, groups))| finish(h, call?, WHAT, started).map(|call| answers(&call, groups)))
        .collect())
}

/// The answer about each of `groups` in the DescribeConsumerGroups result of `call`.
fn answers(call: &Call, groups: &[&str]) -> Vec<Answer> {
    const WHAT: &str = "describing the consumer group";
    use rd::rd_kafka_resp_err_t as E;
    // SAFETY: the result and the descriptions belong to `call.event`, alive while `call` is.
    unsafe {
        let result = rd::rd_kafka_event_DescribeConsumerGroups_result(call.event);
        let mut n = 0usize;
        let descs = rd::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut n);
        let descs: &[*const rd::rd_kafka_ConsumerGroupDescription_t] =
            if descs.is_null() { &[] } else { std::slice::from_raw_parts(descs, n) };
        let mut by_name = BTreeMap::new();
        for desc in descs {
            let name = text(rd::rd_kafka_ConsumerGroupDescription_group_id(*desc));
            let error = rd::rd_kafka_ConsumerGroupDescription_error(*desc);
            let answer = if error.is_null() {
                let state =
                    text(rd::rd_kafka_consumer_group_state_name(rd::rd_kafka_ConsumerGroupDescription_state(*desc)));
                let count = rd::rd_kafka_ConsumerGroupDescription_member_count(*desc);
                let member_names = (0..count.min(flow_core::reset::NAMED_MEMBERS))
                    .map(|i| rd::rd_kafka_ConsumerGroupDescription_member(*desc, i))
                    .filter(|m| !m.is_null())
                    .map(|m| {
                        let (client, host) = (
                            text(rd::rd_kafka_MemberDescription_client_id(m)),
                            text(rd::rd_kafka_MemberDescription_host(m)),
                        );
                        format!("client id '{client}' at {host}")
                    })
                    .collect();
                let members = u32::try_from(count).unwrap_or(u32::MAX);
                Answer::Coordinator(Ok(GroupDescription { state, members, member_names }))
            } else {
                let code = rd::rd_kafka_error_code(error);
                let f = || failure(code, WHAT, &text(rd::rd_kafka_error_string(error)));
                match code {
                    E::RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND => Answer::Coordinator(Ok(GroupDescription::dead())),
                    E::RD_KAFKA_RESP_ERR_NOT_COORDINATOR | E::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE => {
                        Answer::NotCoordinator
                    }
                    E::RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS => Answer::Coordinator(Err(f())),
                    _ if f().kind == flow_core::reset::FailureKind::Unreachable => Answer::Silent(f()),
                    _ => Answer::Failed(f()),
                }
            };
            by_name.insert(name, answer);
        }
        // A group the broker said nothing about does not exist.
        groups
            .iter()
            .map(|g| by_name.remove(*g).unwrap_or_else(|| Answer::Coordinator(Ok(GroupDescription::dead()))))
            .collect()
    }
}

/// One group's committed offsets to read: on partitions `ps` of `topic`, at `broker`, its
/// coordinator.
#[derive(Clone, Copy)]
pub(super) struct Ask<'a> {
    pub broker: i32,
    pub group: &'a str,
    pub topic: &'a str,
    pub ps: &'a [i32],
}

/// OffsetFetch requests of [`list_group_offsets`] in flight at most: enough to keep the
/// coordinators busy, few enough that a lag sample of a thousand groups never holds a thousand
/// requests and answers in memory at once (see docs/performance.md, "1,000 AnkkaFlows").
const OFFSET_FETCHES_IN_FLIGHT: usize = 32;

/// Partitions at most per OffsetFetch of [`list_group_offsets`]. librdkafka matches each partition
/// of an OffsetFetch answer to its request by a linear search of the requested partitions, comparing
/// topic names (librdkafka 2.12, `rd_kafka_handle_OffsetFetch` calling
/// `rd_kafka_topic_partition_list_find`), so an answer of n partitions costs n²/2 comparisons: for a
/// group of 1,000 partitions half a million per read, which made these answers a quarter of the
/// operator's CPU in a reset of 200 such groups (docs/performance.md, "Where a large reset's CPU went").
/// In pieces of 100 it costs a tenth of that, for ten requests instead of one. A read needs no single
/// request: the pieces go over the group's one connection, behind any earlier write of the group
/// there, and the read counts as answered only once every piece is; a consumer's commit landing
/// between two pieces gives a read that mixes before and after, which the reset reads as a consumer
/// that committed meanwhile, as it would a commit landing right after one whole read
/// (docs/reset.md, "Guarantees").
const PARTITIONS_PER_OFFSET_FETCH: usize = 100;

/// The committed positions (offset and commit metadata) of each ask of `asks`, read in one
/// OffsetFetch per [`PARTITIONS_PER_OFFSET_FETCH`] partitions of it; `None` where a group has none.
/// Results are in the order of `asks`; an ask fails with the first failure of its pieces.
pub(super) fn list_group_offsets(h: &Handle, asks: &[Ask]) -> Vec<Result<Positions, KafkaFailure>> {
    let (owner, pieces) = pieces(asks, PARTITIONS_PER_OFFSET_FETCH);
    merged(asks.len(), &owner, fetch_each(h, &pieces))
}

/// `asks` in pieces of at most `size` partitions each (an ask of no partition is one piece as it
/// is), with the index of the ask each piece belongs to.
fn pieces<'a>(asks: &[Ask<'a>], size: usize) -> (Vec<usize>, Vec<Ask<'a>>) {
    let mut owner = Vec::new();
    let mut pieces = Vec::new();
    for (i, ask) in asks.iter().enumerate() {
        let chunks: Vec<&[i32]> = if ask.ps.is_empty() { vec![ask.ps] } else { ask.ps.chunks(size).collect() };
        for ps in chunks {
            owner.push(i);
            pieces.push(Ask { ps, ..*ask });
        }
    }
    (owner, pieces)
}

/// The results of `asks` asks from those of their pieces (`owner[k]`: the ask of piece `k`): every
/// piece's positions together, or the first failure among its pieces.
fn merged(
    asks: usize,
    owner: &[usize],
    results: Vec<Result<Positions, KafkaFailure>>,
) -> Vec<Result<Positions, KafkaFailure>> {
    let mut out: Vec<Result<Positions, KafkaFailure>> = (0..asks).map(|_| Ok(Positions::new())).collect();
    for (&i, got) in owner.iter().zip(results) {
        match (&mut out[i], got) {
            (Ok(all), Ok(piece)) => all.extend(piece),
            (slot @ Ok(_), Err(f)) => *slot = Err(f),
            (Err(_), _) => {}
        }
    }
    out
}

/// The committed positions of each ask of `asks`, in one OffsetFetch per ask, up to
/// [`OFFSET_FETCHES_IN_FLIGHT`] of them in flight (the next one sent as soon as an answer came), over
/// one result queue. Results are in the order of `asks`.
fn fetch_each(h: &Handle, asks: &[Ask]) -> Vec<Result<Positions, KafkaFailure>> {
    const WHAT: &str = "reading the group's committed offsets";
    let mut out: Vec<Option<Result<Positions, KafkaFailure>>> = asks.iter().map(|_| None).collect();
    let rk = h.client.client().native_ptr();
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS;
    let ms = i32::try_from(h.deadlines.request.as_millis()).unwrap_or(i32::MAX);
    let started = Instant::now();
    // SAFETY: `rk` is the live handle of the client, borrowed for this call. The queue and the
    // options are owned by `shared`; librdkafka copies the options, the names and the partition
    // lists at each call, so the options are changed and reused for the next one, and each request
    // object is freed right after its call. Each event polled is owned by its own guard.
    unsafe {
        let shared = Call {
            queue: rd::rd_kafka_queue_new(rk),
            options: rd::rd_kafka_AdminOptions_new(rk, op),
            event: ptr::null_mut(),
        };
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(shared.options, ms, errstr.as_mut_ptr(), errstr.len());
        let mut waiting = 0usize;
        let mut next = 0usize;
        // librdkafka ends each call at its request timeout; the extra second only bounds a result
        // that never comes (counted from the last answer, as later requests wait for earlier ones).
        // A final failure reported meanwhile (TLS, authentication) ends the wait.
        let mut deadline = started + h.deadlines.request + Duration::from_secs(1);
        let mut gone: Option<KafkaFailure> = None;
        while next < asks.len() || waiting > 0 {
            while waiting < OFFSET_FETCHES_IN_FLIGHT && next < asks.len() {
                let (i, ask) = (next, &asks[next]);
                next += 1;
                let name = match group_name(ask.group) {
                    Ok(n) => n,
                    Err(f) => {
                        out[i] = Some(Err(f));
                        continue;
                    }
                };
                let err =
                    rd::rd_kafka_AdminOptions_set_broker(shared.options, ask.broker, errstr.as_mut_ptr(), errstr.len());
                if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    out[i] = Some(Err(KafkaFailure::refused(format!(
                        "broker id {}: {}",
                        ask.broker,
                        text(errstr.as_ptr())
                    ))));
                    continue;
                }
                // The ask's index plus one names its result (a null opaque would be index 0 otherwise).
                rd::rd_kafka_AdminOptions_set_opaque(shared.options, (i + 1) as *mut std::ffi::c_void);
                let mut tpl = TopicPartitionList::new();
                for p in ask.ps {
                    tpl.add_partition(ask.topic, *p);
                }
                let mut req = [rd::rd_kafka_ListConsumerGroupOffsets_new(name.as_ptr(), tpl.ptr())];
                rd::rd_kafka_ListConsumerGroupOffsets(rk, req.as_mut_ptr(), 1, shared.options, shared.queue);
                rd::rd_kafka_ListConsumerGroupOffsets_destroy(req[0]);
                waiting += 1;
            }
            if waiting == 0 {
                break;
            }
            let event = rd::rd_kafka_queue_poll(shared.queue, SLICE_MS);
            if event.is_null() {
                gone = h.client.context().cause();
                if gone.is_none() && Instant::now() >= deadline {
                    gone =
                        Some(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, WHAT, "no answer in time"));
                }
                if gone.is_some() {
                    break;
                }
                continue;
            }
            // Owned from here on, freed when it drops.
            let one = Call { queue: ptr::null_mut(), options: ptr::null_mut(), event };
            let i = (rd::rd_kafka_event_opaque(event) as usize).wrapping_sub(1);
            if let (Some(slot @ None), Some(ask)) = (out.get_mut(i), asks.get(i)) {
                *slot = Some(positions_in(&one, ask, WHAT));
                waiting -= 1;
                deadline = Instant::now() + h.deadlines.request + Duration::from_secs(1);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(gone.clone().unwrap_or_else(|| KafkaFailure::unavailable(WHAT)))))
            .collect()
    }
}

/// The committed positions of `ask` in the ListConsumerGroupOffsets result event of `call`.
fn positions_in(call: &Call, ask: &Ask, what: &str) -> Result<Positions, KafkaFailure> {
    // SAFETY: everything read belongs to `call.event`, alive while `call` is.
    unsafe {
        let err = rd::rd_kafka_event_error(call.event);
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(failure(err, what, &text(rd::rd_kafka_event_error_string(call.event))));
        }
        let result = rd::rd_kafka_event_ListConsumerGroupOffsets_result(call.event);
        let mut n = 0usize;
        let groups = rd::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut n);
        let list = only_group(groups, n, what)?;
        let mut out: Positions = ask.ps.iter().map(|p| (*p, None)).collect();
        for e in elements(list) {
            if text(e.topic) != ask.topic || !out.contains_key(&e.partition) {
                continue;
            }
            if e.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(failure(
                    e.err,
                    what,
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
/// in one OffsetCommit to `broker`, its coordinator; then examines every partition's result.
///
/// # Errors
/// A [`KafkaFailure`]: UNKNOWN_MEMBER_ID (members present) and other retriable codes are
/// transient; when some partitions failed, the reason lists each with Kafka's code.
pub(super) fn alter_group_offsets(
    h: &Handle,
    broker: i32,
    group: &str,
    topic: &str,
    offsets: &BTreeMap<i32, i64>,
    metadata: &str,
) -> Result<(), KafkaFailure> {
    const WHAT: &str = "committing the group's offsets";
    let name = group_name(group)?;
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        let mut e = tpl.add_partition(topic, *p);
        e.set_offset(Offset::Offset(*o)).map_err(|e| KafkaFailure::refused(e.to_string()))?;
        e.set_metadata(metadata);
    }
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS;
    let call = call(h, op, WHAT, broker, |rk, options, queue| {
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
    if !f.transient() || failed.iter().any(|(_, e)| e != first) || failed.len() < offsets.len() {
        let listed: Vec<String> =
            failed.iter().map(|(p, e)| format!("partition {p}: {}", RDKafkaErrorCode::from(*e))).collect();
        f.reason = format!(
            "{WHAT}: the commit failed on {} of {} partition(s) of '{topic}' ({})",
            failed.len(),
            offsets.len(),
            listed.join("; ")
        );
        f.kind = failed.iter().map(|(_, e)| failure(*e, WHAT, "").kind).find(|k| !k.transient()).unwrap_or(f.kind);
    }
    Err(f)
}

/// What DescribeTopics said of one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TopicAnswer {
    /// The topic exists.
    Exists {
        /// Its partition count.
        partitions: i32,
        /// The replica count of its lowest partition.
        replication: i32,
        /// Its topic id (KIP-516), as the most and least significant halves of the UUID; both 0
        /// when the brokers give topics no id.
        topic_id: (i64, i64),
    },
    /// Kafka's error for the topic (UNKNOWN_TOPIC_OR_PARTITION when it does not exist).
    Failed(RDKafkaErrorCode, String),
}

/// Describes each of `names` in one DescribeTopics call over `client`, waiting at most a second
/// longer than `timeout`: partitions, replication and topic id. librdkafka sends a Metadata request
/// naming the topics with `allow_auto_topic_creation` false, so a broker with
/// `auto.create.topics.enable=true` never creates a missing one (rdkafka_admin.c,
/// `rd_kafka_admin_MetadataRequest`); every answer names its topic.
///
/// # Errors
/// A name that holds a NUL; the call failing as a whole (no broker answered in time; a final
/// failure, TLS or authentication, that the client's context reported meanwhile).
pub(crate) fn describe_topics(
    client: &rdkafka::client::Client<ClientLog>,
    names: &[String],
    timeout: Duration,
) -> Result<BTreeMap<String, TopicAnswer>, KafkaFailure> {
    const WHAT: &str = "describing the topics";
    let cnames = names
        .iter()
        .map(|n| CString::new(n.as_str()).map_err(|_| KafkaFailure::configuration("NUL in a topic name")))
        .collect::<Result<Vec<CString>, _>>()?;
    let rk = client.native_ptr();
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let op = rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS;
    let deadline = Instant::now() + timeout + Duration::from_secs(1);
    // SAFETY: `rk` is the live handle of `client`, borrowed for this call. The queue, the options
    // and the result event are owned by `call`, which frees them whatever path is taken; librdkafka
    // copies the topic collection (and the names in it) when the call is made, so the collection
    // is freed right after. Everything read from the result belongs to the event, alive until
    // `call` drops, and is copied out before.
    unsafe {
        let mut call = Call {
            queue: rd::rd_kafka_queue_new(rk),
            options: rd::rd_kafka_AdminOptions_new(rk, op),
            event: ptr::null_mut(),
        };
        let mut errstr = [0 as c_char; 256];
        rd::rd_kafka_AdminOptions_set_request_timeout(call.options, ms, errstr.as_mut_ptr(), errstr.len());
        let mut ptrs: Vec<*const c_char> = cnames.iter().map(|n| n.as_ptr()).collect();
        let topics = rd::rd_kafka_TopicCollection_of_topic_names(ptrs.as_mut_ptr(), ptrs.len());
        rd::rd_kafka_DescribeTopics(rk, topics, call.options, call.queue);
        rd::rd_kafka_TopicCollection_destroy(topics);
        loop {
            call.event = rd::rd_kafka_queue_poll(call.queue, SLICE_MS);
            if !call.event.is_null() {
                break;
            }
            if let Some(cause) = client.context().cause() {
                return Err(cause);
            }
            if Instant::now() >= deadline {
                return Err(failure(rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TIMED_OUT, WHAT, "no answer in time"));
            }
        }
        let err = rd::rd_kafka_event_error(call.event);
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(failure(err, WHAT, &text(rd::rd_kafka_event_error_string(call.event))));
        }
        let result = rd::rd_kafka_event_DescribeTopics_result(call.event);
        let mut n = 0usize;
        let descs = rd::rd_kafka_DescribeTopics_result_topics(result, &mut n);
        let descs: &[*const rd::rd_kafka_TopicDescription_t] =
            if descs.is_null() { &[] } else { std::slice::from_raw_parts(descs, n) };
        let mut out = BTreeMap::new();
        for desc in descs.iter().filter(|d| !d.is_null()) {
            let name = text(rd::rd_kafka_TopicDescription_name(*desc));
            let error = rd::rd_kafka_TopicDescription_error(*desc);
            let code = if error.is_null() {
                rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            } else {
                rd::rd_kafka_error_code(error)
            };
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                out.insert(
                    name,
                    TopicAnswer::Failed(RDKafkaErrorCode::from(code), text(rd::rd_kafka_error_string(error))),
                );
                continue;
            }
            let mut np = 0usize;
            let parts = rd::rd_kafka_TopicDescription_partitions(*desc, &mut np);
            let parts: &[*const rd::rd_kafka_TopicPartitionInfo_t] =
                if parts.is_null() { &[] } else { std::slice::from_raw_parts(parts, np) };
            let first =
                parts.iter().filter(|p| !p.is_null()).min_by_key(|p| rd::rd_kafka_TopicPartitionInfo_partition(**p));
            let replication = first.map_or(0, |p| {
                let mut nr = 0usize;
                rd::rd_kafka_TopicPartitionInfo_replicas(*p, &mut nr);
                i32::try_from(nr).unwrap_or(i32::MAX)
            });
            let id = rd::rd_kafka_TopicDescription_topic_id(*desc);
            let topic_id = if id.is_null() {
                (0, 0)
            } else {
                (rd::rd_kafka_Uuid_most_significant_bits(id), rd::rd_kafka_Uuid_least_significant_bits(id))
            };
            out.insert(
                name,
                TopicAnswer::Exists {
                    partitions: i32::try_from(parts.len()).unwrap_or(i32::MAX),
                    replication,
                    topic_id,
                },
            );
        }
        Ok(out)
    }
}

/// A reference to a client's main queue, handed to the thread that serves it.
struct MainQueue(*mut rdkafka::bindings::rd_kafka_queue_t);

// SAFETY: librdkafka's queues may be polled from any thread; the reference is used by one thread,
// which destroys it before the client it belongs to is destroyed (`crate::topics::TopicAdmin`'s `Drop`).
unsafe impl Send for MainQueue {}

impl Drop for MainQueue {
    /// Gives the reference back: when the thread serving it ends, or when it could not be started.
    fn drop(&mut self) {
        // SAFETY: the reference taken by `serve_main_queue`, destroyed once, here.
        unsafe { rdkafka::bindings::rd_kafka_queue_destroy(self.0) };
    }
}

/// How long one poll of the main queue waits.
const PUMP_INTERVAL: Duration = std::time::Duration::from_millis(100);

/// Serves `admin`'s main queue until `stop` (`crate::topics::TopicAdmin`'s): each log line and error
/// event goes to its [`super::ClientLog`]
/// (which logs it, credentials taken out, and keeps a final cause); anything else is dropped.
pub(crate) fn serve_main_queue(
    admin: &rdkafka::admin::AdminClient<super::ClientLog>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    use rdkafka::bindings as rd;
    use rdkafka::client::ClientContext;
    let log = std::sync::Arc::clone(admin.inner().context());
    // SAFETY: the client is alive; the reference taken here is destroyed when `MainQueue` drops.
    let queue = MainQueue(unsafe { rd::rd_kafka_queue_get_main(admin.inner().native_ptr()) });
    std::thread::Builder::new().name("kafka-admin-pump".into()).spawn(move || {
        let queue = queue;
        let ms = i32::try_from(PUMP_INTERVAL.as_millis()).unwrap_or(100);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: the queue reference is alive until destroyed below; each event polled is
            // read, then destroyed, here; the strings read from it are copied before.
            unsafe {
                let event = rd::rd_kafka_queue_poll(queue.0, ms);
                if event.is_null() {
                    continue;
                }
                match rd::rd_kafka_event_type(event) {
                    rd::RD_KAFKA_EVENT_LOG => {
                        let (mut fac, mut text, mut level) = (std::ptr::null(), std::ptr::null(), 0);
                        if rd::rd_kafka_event_log(event, &mut fac, &mut text, &mut level) == 0
                            && !fac.is_null()
                            && !text.is_null()
                        {
                            let fac = std::ffi::CStr::from_ptr(fac).to_string_lossy().into_owned();
                            let text = std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned();
                            log.log(log_level(level), fac.trim(), text.trim());
                        }
                    }
                    rd::RD_KAFKA_EVENT_ERROR => {
                        let code = rd::rd_kafka_event_error(event);
                        let reason = rd::rd_kafka_event_error_string(event);
                        let reason = if reason.is_null() {
                            String::new()
                        } else {
                            std::ffi::CStr::from_ptr(reason).to_string_lossy().into_owned()
                        };
                        log.error(rdkafka::error::KafkaError::Global(code.into()), reason.trim());
                    }
                    _ => {}
                }
                rd::rd_kafka_event_destroy(event);
            }
        }
        // The reference is destroyed as `queue` drops.
    })
}

/// librdkafka's log level (syslog's numbers) as rdkafka names it.
fn log_level(level: i32) -> rdkafka::config::RDKafkaLogLevel {
    use rdkafka::config::RDKafkaLogLevel as L;
    match level {
        0 => L::Emerg,
        1 => L::Alert,
        2 => L::Critical,
        3 => L::Error,
        4 => L::Warning,
        5 => L::Notice,
        6 => L::Info,
        _ => L::Debug,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_core::reset::Position;

    fn ask<'a>(group: &'a str, ps: &'a [i32]) -> Ask<'a> {
        Ask { broker: 1, group, topic: "t", ps }
    }

    fn at(ps: &[i32], offset: i64) -> Positions {
        ps.iter().map(|p| (*p, Some(Position { offset, metadata: String::new() }))).collect()
    }

    #[test]
    fn asks_are_read_in_pieces_and_put_together_again() {
        let many: Vec<i32> = (0..250).collect();
        let asks = [ask("a", &many), ask("b", &[]), ask("c", &[7])];
        let (owner, pieces) = pieces(&asks, 100);
        assert_eq!(owner, vec![0, 0, 0, 1, 2]);
        let sizes: Vec<usize> = pieces.iter().map(|p| p.ps.len()).collect();
        assert_eq!(sizes, vec![100, 100, 50, 0, 1]);
        assert!(pieces.iter().zip(&owner).all(|(p, i)| p.group == asks[*i].group));
        let results = pieces.iter().map(|p| Ok(at(p.ps, 5))).collect();
        let out = merged(asks.len(), &owner, results);
        assert_eq!(out[0], Ok(at(&many, 5)), "every partition of the first ask, once");
        assert_eq!(out[1], Ok(Positions::new()));
        assert_eq!(out[2], Ok(at(&[7], 5)));
    }

    #[test]
    fn an_ask_with_a_failed_piece_fails_with_its_first_failure_and_alone() {
        let many: Vec<i32> = (0..201).collect();
        let asks = [ask("a", &many), ask("b", &[1, 2])];
        let (owner, pieces) = pieces(&asks, 100);
        assert_eq!(owner, vec![0, 0, 0, 1]);
        let results = vec![
            Ok(at(pieces[0].ps, 1)),
            Err(KafkaFailure::unavailable("second piece")),
            Err(KafkaFailure::refused("third piece")),
            Ok(at(pieces[3].ps, 1)),
        ];
        let out = merged(asks.len(), &owner, results);
        assert_eq!(out[0].as_ref().map_err(|f| f.reason.as_str()), Err("second piece"));
        assert_eq!(out[1], Ok(at(&[1, 2], 1)));
    }
}
