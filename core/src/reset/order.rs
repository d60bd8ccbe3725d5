//! Which connection a consumer group's next Kafka call goes over, so that a write the broker never
//! answered can never land after a later call of the group (docs/reset.md, "A call Kafka never
//! answered").
//!
//! A fence or a commit that ends without Kafka's answer (a timeout, a connection lost) is not gone:
//! the broker may hold it (frozen, overloaded, its socket buffer full) and carry it out later. Kafka
//! orders requests on one connection only: a broker carries out the requests of one connection one
//! after the other, in the order they were sent, and answers them in that order (the Kafka protocol
//! guide, "Network"); requests on different connections are not ordered at all. So the group is
//! *pinned* to the connection of its unanswered write: every later call of the group goes over that
//! connection, behind the write, until one of them is answered. By then the broker has carried the
//! write out (or refused it), so it can no longer land after anything that follows.
//!
//! Every write of a group already comes after an answered read of the group once a write of it went
//! unanswered (the machine inspects or recovers the group first, see `group` and `recovery`), so
//! the pin is all the ordering needs: that read is the call that waits behind the write.

use std::collections::BTreeMap;

use super::drive::KafkaCall;
use super::vocabulary::{FailureKind, Input};
impl KafkaCall {
    /// Whether the call sends a write of the group's offsets to Kafka: a fence of a group with
    /// committed offsets (a fence of a group without any sends nothing), or a commit.
    pub fn writes(&self) -> bool {
        match self {
            KafkaCall::Fence { offsets, .. } => !offsets.is_empty(),
            KafkaCall::Commit { .. } => true,
            KafkaCall::Inspect(_) | KafkaCall::Read(_) => false,
        }
    }
}

impl Input {
    /// Whether Kafka answered the call this is the result of: a result, or a failure Kafka itself
    /// answered (a coordinator error, members in the group, an authorization). A call that timed out
    /// or lost its connection ([`FailureKind::Unreachable`]) has no answer. A failure of the client
    /// itself (its TLS or authentication failed, its configuration is refused) counts as an answer:
    /// the connection it would have used is gone, so there is nothing left to wait behind (see
    /// docs/reset.md for this limit).
    pub fn answered(&self) -> bool {
        let failure = match self {
            Input::Inspected { result, .. } => result.as_ref().err(),
            Input::Fenced { result, .. } => result.as_ref().err(),
            Input::ReadBack { result, .. } => result.as_ref().err(),
            Input::Read { result, .. } => result.as_ref().err(),
            Input::Observed { .. } | Input::Tick => None,
        };
        failure.is_none_or(|f| f.kind != FailureKind::Unreachable)
    }
}

/// Per consumer group (`K`: the group, with the cluster it is on when a driver serves several),
/// the connection (`C`, whatever names one to its driver) of the group's latest write that Kafka
/// has not answered, nor any call of the group sent after it. A driver keeps one for its whole
/// process (not per request: a write of one request must not be overtaken by the next request's
/// calls) and sends each call of a group over [`Pins::connection`] when there is one.
#[derive(Clone, Debug)]
pub struct Pins<K, C> {
    pinned: BTreeMap<K, C>,
}

impl<K, C> Default for Pins<K, C> {
    fn default() -> Self {
        Pins { pinned: BTreeMap::new() }
    }
}

impl<K: Ord + Clone, C> Pins<K, C> {
    /// No group pinned.
    pub fn new() -> Self {
        Pins::default()
    }

    /// The connection the next call of `group` must go over; `None`: any.
    pub fn connection(&self, group: &K) -> Option<&C> {
        self.pinned.get(group)
    }

    /// A call of `group` that went over `conn` ended: `writes` whether it sent a write
    /// ([`KafkaCall::writes`]), `answered` whether Kafka answered it ([`Input::answered`]). An answer
    /// frees the group: whatever went before it on the connection was carried out. A write without an
    /// answer pins the group to `conn`; a read without one changes nothing.
    pub fn ended(&mut self, group: &K, conn: C, writes: bool, answered: bool) {
        if answered {
            self.pinned.remove(group);
        } else if writes {
            self.pinned.insert(group.clone(), conn);
        }
    }

    /// How many groups are pinned.
    pub fn len(&self) -> usize {
        self.pinned.len()
    }

    /// Whether no group is pinned.
    pub fn is_empty(&self) -> bool {
        self.pinned.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::GroupId;
    use crate::reset::{Committed, KafkaFailure};
    use crate::targets::InletTarget;

    fn target() -> InletTarget {
        InletTarget {
            group: GroupId::new("cart", "router", "in"),
            streamlet: "router".into(),
            inlet: "in".into(),
            topic_id: "t".into(),
            topic: "t".into(),
        }
    }

    fn group() -> GroupId {
        target().group
    }

    fn read_back(result: Result<Committed, KafkaFailure>) -> Input {
        Input::ReadBack { group: group(), result }
    }

    #[test]
    fn only_fences_that_send_offsets_and_commits_write() {
        let t = target();
        let fence = |offsets: &[(i32, i64)]| KafkaCall::Fence {
            target: t.clone(),
            offsets: offsets.iter().copied().collect(),
            metadata: "m".into(),
        };
        assert!(fence(&[(0, 5)]).writes());
        assert!(!fence(&[]).writes(), "a group without offsets is fenced without a call");
        assert!(KafkaCall::Commit { target: t.clone(), offsets: Default::default(), metadata: "m".into() }.writes());
        assert!(!KafkaCall::Inspect(t.clone()).writes());
        assert!(!KafkaCall::Read(t).writes());
    }

    #[test]
    fn a_timeout_or_a_lost_connection_is_no_answer_and_anything_kafka_said_is_one() {
        assert!(read_back(Ok(Committed::new())).answered());
        assert!(!read_back(Err(KafkaFailure::unreachable("Local: Timed out"))).answered());
        assert!(read_back(Err(KafkaFailure::unavailable("Broker: Not coordinator"))).answered());
        assert!(read_back(Err(KafkaFailure::members_present("Broker: Unknown member"))).answered());
        assert!(read_back(Err(KafkaFailure::authorization("Broker: Group authorization failed"))).answered());
    }

    #[test]
    fn an_unanswered_write_pins_its_group_until_a_call_after_it_is_answered() {
        let mut pins: Pins<GroupId, &str> = Pins::new();
        let g = group();
        // An unanswered read changes nothing, pinned or not.
        pins.ended(&g, "lane 0", false, false);
        assert_eq!(pins.connection(&g), None);
        // A fence without an answer: the group's calls go over its connection from now on.
        pins.ended(&g, "lane 3", true, false);
        assert_eq!(pins.connection(&g), Some(&"lane 3"));
        assert_eq!(pins.connection(&GroupId::new("cart", "sink", "in")), None, "one group only");
        pins.ended(&g, "lane 3", false, false);
        assert_eq!(pins.connection(&g), Some(&"lane 3"), "a read that timed out behind it proves nothing");
        // An inspection behind it was answered: the fence was carried out before it.
        pins.ended(&g, "lane 3", false, true);
        assert!(pins.is_empty());
    }
}
