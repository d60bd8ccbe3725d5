//! Which broker coordinates each consumer group: found and kept by the operator's client itself, so
//! that every group call (describe, fetch and commit offsets) goes to the broker it names
//! (`rd_kafka_AdminOptions_set_broker`) and never through librdkafka's own coordinator lookup for
//! admin calls (`rd_kafka_coord_req`). Two reasons:
//!
//! - **That lookup can abort the process** (librdkafka 2.12, open as
//!   [confluentinc/librdkafka#4605](https://github.com/confluentinc/librdkafka/issues/4605)). A call
//!   whose timeout passes while its lookup still waits for a broker (every broker away, or the
//!   coordinator's broker away) is freed, but the waiting lookup keeps a pointer to its state. Once a
//!   broker is back, the lookup finds the call gone, frees that state and then uses it again: an
//!   assertion in `rd_kafka_enq_once_del_source_return` aborts the process. A call to a named broker
//!   instead waits for that broker's connection under its own timeout and ends cleanly; see
//!   docs/faults.md, "The broker stopped for 60 s".
//! - **librdkafka keeps at most 11 coordinators per client**, so with more groups than that on one
//!   client every call began with a FindCoordinator (see docs/performance.md, "The lag sampler's
//!   requests to the brokers").
//!
//! A group's coordinator is found by describing the group at brokers: the broker that answers
//! without NOT_COORDINATOR coordinates it (Kafka checks this for every group request). The first one
//! asked is the one the metadata points to, when it shows `__consumer_offsets`: the leader of the
//! group's partition of that topic, which is how Kafka places groups (its
//! `GroupCoordinatorService#partitionFor`). A principal without Describe on that topic does not see
//! it; then, as when that broker says no, every broker of the cluster is asked, all at once. A
//! coordinator is forgotten when a call to it fails with a timeout, a lost connection or a
//! coordinator error, and found again on the next call.
//!
//! The metadata a client read last (for a topic's partitions, a lag sample, ...) serves that first
//! guess for [`PLACEMENT_MAX_AGE`], so that the groups of a reset do not each read the cluster's
//! metadata to find their coordinators. A guess that no longer holds costs a NOT_COORDINATOR answer
//! (or, when its broker is down, the request deadline, as a known coordinator that went away does);
//! then the metadata is read again and every broker asked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flow_core::reset::{FailureKind, KafkaFailure};
use rdkafka::metadata::Metadata;

use super::admin::{self, Answer};
use super::{Described, Handle};

/// Kafka's internal topic of committed offsets and group state.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How long a lookup waits before asking every broker again when none claims a group.
const ASK_AGAIN: Duration = Duration::from_millis(500);

/// How long the placement of the metadata a client read last serves as the first guess of a
/// group's coordinator (module docs). Leaders of `__consumer_offsets` move only when a broker stops
/// or partitions are reassigned, and a wrong guess is only a detour.
const PLACEMENT_MAX_AGE: Duration = Duration::from_secs(10);

/// The coordinators a client found, by group id, and the placement of the metadata it read last.
#[derive(Default)]
pub(super) struct Coordinators {
    known: Mutex<HashMap<String, i32>>,
    placement: Mutex<Option<(Instant, Arc<Placement>)>>,
}

/// What a metadata answer says about where groups are placed: every broker of the cluster, and the
/// leader of each partition of `__consumer_offsets` when the principal may see that topic.
#[derive(Debug, PartialEq, Eq)]
struct Placement {
    brokers: Vec<i32>,
    /// The leader of each partition of `__consumer_offsets` (by partition id), and how many
    /// partitions it has; `None` when the metadata does not show the topic.
    offsets: Option<(i32, BTreeMap<i32, i32>)>,
}

impl Placement {
    fn of(md: &Metadata) -> Self {
        let brokers = md.brokers().iter().map(|b| b.id()).collect();
        let offsets = md.topics().iter().find(|t| t.name() == OFFSETS_TOPIC).and_then(|t| {
            let n = i32::try_from(t.partitions().len()).ok()?;
            Some((n, t.partitions().iter().map(|p| (p.id(), p.leader())).collect()))
        });
        Placement { brokers, offsets }
    }

    /// The broker that leads `group`'s partition of `__consumer_offsets`: how Kafka places groups.
    fn predicted(&self, group: &str) -> Option<i32> {
        let (n, leaders) = self.offsets.as_ref()?;
        leaders.get(&offsets_partition(group, *n)).copied().filter(|l| *l >= 0)
    }
}

impl Coordinators {
    /// Keeps the placement of `md`, which the client just read.
    pub(super) fn learn(&self, md: &Metadata) {
        let placement = Arc::new(Placement::of(md));
        *self.placement.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), placement));
    }

    /// The placement kept, if it was read at most [`PLACEMENT_MAX_AGE`] ago.
    fn placement(&self) -> Option<Arc<Placement>> {
        let kept = self.placement.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref().filter(|(at, _)| at.elapsed() <= PLACEMENT_MAX_AGE).map(|(_, p)| Arc::clone(p))
    }

    fn get(&self, group: &str) -> Option<i32> {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).get(group).copied()
    }

    fn set(&self, group: &str, broker: i32) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).insert(group.to_string(), broker);
    }

    fn forget(&self, group: &str) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).remove(group);
    }
}

/// The partition of `__consumer_offsets` that holds `group`, of `partitions`: the absolute value of
/// the group id's Java `String#hashCode` (over its UTF-16 code units), modulo the partitions; Kafka's
/// `Utils.abs` maps `i32::MIN` to 0.
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    if partitions > 0 { abs % partitions } else { 0 }
}

/// Describes each of `groups` at its coordinator, finding the coordinators not known yet (module
/// docs): the known or predicted broker first, then every broker not asked yet, in parallel, and
/// every broker again every half second while none claims a group and the request deadline lasts.
/// Results are in the order of `groups`. `md`: the cluster's metadata when the caller has it
/// already; otherwise it is read only when some coordinator is not known.
///
/// # Errors
/// A metadata request that failed while a coordinator had to be found; a group's own failure is its
/// entry's (transient when no broker answered as its coordinator).
pub(super) fn describe(h: &Handle, md: Option<&Metadata>, groups: &[&str]) -> Result<Vec<Described>, KafkaFailure> {
    let unique: BTreeSet<&str> = groups.iter().copied().collect();
    // The placement read for this call (given, or read when a guess failed), and the one kept.
    let mut fresh: Option<Arc<Placement>> = md.map(|md| Arc::new(Placement::of(md)));
    let kept = if fresh.is_none() { h.coordinators.placement() } else { None };
    let mut done: BTreeMap<&str, Described> = BTreeMap::new();
    // What a broker that gave no answer said, per group, for a group that ends without an answer.
    let mut silent: BTreeMap<&str, KafkaFailure> = BTreeMap::new();
    let mut asked: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    let deadline = Instant::now() + h.deadlines.request;
    let mut round = 0usize;
    loop {
        let mut plan: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
        for g in unique.iter().copied().filter(|g| !done.contains_key(g)) {
            let known = if round == 0 { h.coordinators.get(g) } else { None };
            let brokers = match known {
                Some(b) => vec![b],
                None => {
                    let guess = |fresh: &Option<Arc<Placement>>| {
                        (round == 0).then(|| fresh.as_ref().or(kept.as_ref()).and_then(|p| p.predicted(g))).flatten()
                    };
                    if fresh.is_none() && guess(&fresh).is_none() {
                        // Nothing kept guesses it, or a guess failed: the metadata is read (the
                        // client keeps the placement of every metadata it reads).
                        h.metadata()?;
                        fresh = h.coordinators.placement();
                    }
                    match guess(&fresh) {
                        Some(b) => vec![b],
                        None => fresh.as_ref().map(|p| p.brokers.clone()).unwrap_or_default(),
                    }
                }
            };
            for b in brokers {
                if asked.entry(g).or_default().insert(b) {
                    plan.entry(b).or_default().push(g);
                }
            }
        }
        if plan.is_empty() {
            // Every broker was asked. A group that no broker claims has a coordinator loading or
            // moving (as just after a broker started): it is asked again shortly, within the
            // call's deadline, as librdkafka's own lookup retries.
            let unclaimed = unique.iter().any(|g| !done.contains_key(g) && !silent.contains_key(g));
            if !unclaimed || Instant::now() + ASK_AGAIN >= deadline {
                break;
            }
            std::thread::sleep(ASK_AGAIN);
            asked.clear();
            round = 1;
            continue;
        }
        let plan: Vec<(i32, Vec<&str>)> = plan.into_iter().collect();
        for ((broker, asked_here), result) in plan.iter().zip(admin::describe_at_each(h, &plan)?) {
            let answers = match result {
                Ok(a) => a,
                Err(f) => vec![Answer::Silent(f); asked_here.len()],
            };
            for (g, answer) in asked_here.iter().copied().zip(answers) {
                if done.contains_key(g) {
                    continue;
                }
                match answer {
                    Answer::Coordinator(d) => {
                        if h.coordinators.get(g) != Some(*broker) {
                            tracing::debug!(group = g, broker = *broker, round, "found the group's coordinator");
                        }
                        h.coordinators.set(g, *broker);
                        done.insert(g, d);
                    }
                    Answer::Failed(f) => {
                        done.insert(g, Err(f));
                    }
                    Answer::Silent(f) => {
                        h.coordinators.forget(g);
                        silent.insert(g, f);
                    }
                    Answer::NotCoordinator => h.coordinators.forget(g),
                }
            }
        }
        round += 1;
    }
    Ok(groups
        .iter()
        .map(|g| {
            done.get(g).cloned().unwrap_or_else(|| {
                Err(silent.get(g).cloned().unwrap_or_else(|| {
                    KafkaFailure::unavailable(format!(
                        "describing the consumer group: no broker answered as the coordinator of group '{g}'"
                    ))
                }))
            })
        })
        .collect())
}

/// Finds the coordinators of those of `groups` whose coordinator is not known yet (see
/// [`describe`]); returns the failure of each group whose coordinator could not be found.
///
/// # Errors
/// As [`describe`].
pub(super) fn find<'g>(
    h: &Handle,
    md: Option<&Metadata>,
    groups: &[&'g str],
) -> Result<BTreeMap<&'g str, KafkaFailure>, KafkaFailure> {
    let unknown: Vec<&str> = groups.iter().copied().filter(|g| h.coordinators.get(g).is_none()).collect();
    if unknown.is_empty() {
        return Ok(BTreeMap::new());
    }
    let described = describe(h, md, &unknown)?;
    Ok(unknown
        .into_iter()
        .zip(described)
        .filter(|(g, _)| h.coordinators.get(g).is_none())
        .map(|(g, d)| {
            let f = d.err().unwrap_or_else(|| {
                KafkaFailure::unavailable(format!("no broker answered as the coordinator of group '{g}'"))
            });
            (g, f)
        })
        .collect())
}

/// Runs `f` with the broker that coordinates `group`, found first when it is not known. A failure
/// of `f` that may mean the coordinator moved or went away makes it forgotten (see [`failed`]), so
/// that the next call finds it again.
///
/// # Errors
/// `f`'s failure, or why the coordinator could not be found.
pub(super) fn at<T>(
    h: &Handle,
    group: &str,
    f: impl FnOnce(i32) -> Result<T, KafkaFailure>,
) -> Result<T, KafkaFailure> {
    if let Some(failed) = find(h, None, &[group])?.remove(group) {
        return Err(failed);
    }
    let broker = h.coordinators.get(group).ok_or_else(|| {
        KafkaFailure::unavailable(format!("no broker answered as the coordinator of group '{group}'"))
    })?;
    let result = f(broker);
    if let Err(e) = &result {
        failed(h, group, e);
    }
    result
}

/// The coordinator of `group` the client knows, if any.
pub(super) fn known(h: &Handle, group: &str) -> Option<i32> {
    h.coordinators.get(group)
}

/// Forgets the coordinator of `group` when a call to it failed with `e` in a way that may mean it
/// moved or went away: a timeout, a lost connection, a coordinator error (the transient kinds, but
/// members present).
pub(super) fn failed(h: &Handle, group: &str, e: &KafkaFailure) {
    if matches!(e.kind, FailureKind::Unreachable | FailureKind::Unavailable) {
        h.coordinators.forget(group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's `String#hashCode` of a few strings, as the JVM computes it, and Kafka's placement.
    #[test]
    fn groups_are_placed_as_kafka_places_them() {
        // "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(offsets_partition("hello", 50), 99_162_322 % 50);
        assert_eq!(offsets_partition("polygenelubricants", 50), 0);
        assert_eq!(offsets_partition("", 50), 0);
        // A negative hash: "faults-broker.a.in".hashCode() == -613720693; its absolute value is used.
        assert_eq!(offsets_partition("faults-broker.a.in", 50), 613_720_693 % 50);
        // Characters outside the basic plane count as two UTF-16 code units, as in Java.
        assert_eq!(offsets_partition("\u{1F986}", 7), (0xD83Ei32 * 31 + 0xDD86) % 7);
        assert_eq!(offsets_partition("g", 0), 0);
    }

    #[test]
    fn a_placement_guesses_the_leader_of_the_groups_offsets_partition() {
        // "hello" is on partition 99162322 % 3 == 1.
        let leaders = BTreeMap::from([(0, 1), (1, 2), (2, -1)]);
        let placement = Placement { brokers: vec![1, 2], offsets: Some((3, leaders)) };
        assert_eq!(placement.predicted("hello"), Some(2));
        // A partition without a leader, and metadata that does not show the topic, guess nothing.
        // "b" (98) is on partition 2.
        assert_eq!(placement.predicted("b"), None);
        assert_eq!(Placement { brokers: vec![1], offsets: None }.predicted("hello"), None);
    }
}
