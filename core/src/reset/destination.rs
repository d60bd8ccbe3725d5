//! Where a request moves each consumer group, and what must hold before it moves one.
//!
//! A reset goes to each partition's log start offset ([`Destination::Earliest`]) or to the first
//! offset at or after an instant ([`Destination::Time`]).
//!
//! The destination only decides the intent of a group from its inspection
//! ([`Destination::intent`]); everything after (the fence, the durable intent, the commit with its
//! marker, the read-back, the settle and the recovery) is the same for every destination.

use std::collections::BTreeMap;

use super::group::named;
use super::vocabulary::{Inspection, Intent, Timestamp};
use crate::request::{ResetRequest, To};

/// Where the request's groups go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Each partition's log start offset.
    Earliest,
    /// Each partition's first offset whose record's timestamp is at or after this instant (the
    /// ListOffsets lookup by timestamp of KIP-79); a partition without such a record goes to its
    /// log end, as Kafka's own tool does.
    Time(Timestamp),
    /// What the request needs cannot be had: the request is refused with this reason.
    Unavailable(String),
}

impl Destination {
    /// The destination a request names.
    pub fn of(request: &ResetRequest) -> Destination {
        match &request.to {
            None => Destination::Earliest,
            Some(To::Datetime(_)) => match request.datetime_millis() {
                Some(ms) => Destination::Time(Timestamp(ms)),
                None => Destination::Unavailable("its time is not an RFC 3339 instant".into()),
            },
        }
    }

    /// The instant to look up offsets for, when the inspection needs one.
    pub fn time(&self) -> Option<Timestamp> {
        match self {
            Destination::Time(t) => Some(*t),
            _ => None,
        }
    }

    /// Where the groups went, as events and the status say it: the instant (RFC 3339, UTC). `None`
    /// for `Earliest`.
    pub fn describe(&self) -> Option<String> {
        match self {
            Destination::Earliest | Destination::Unavailable(_) => None,
            Destination::Time(t) => Some(t.rfc3339()),
        }
    }

    /// The intent of a group, from what its inspection saw.
    pub fn intent(&self, seen: &Inspection) -> Intent {
        let high = |p: &i32| seen.high_watermark.get(p).copied();
        let (goal, notes): (BTreeMap<i32, i64>, Vec<String>) = match self {
            Destination::Earliest | Destination::Unavailable(_) => (seen.log_start.clone(), vec![]),
            Destination::Time(t) => {
                let mut ends = Vec::new();
                let goal = seen
                    .log_start
                    .iter()
                    .map(|(p, start)| match seen.at_time.get(p).copied().flatten() {
                        Some(o) => (*p, o.max(*start)),
                        None => {
                            ends.push(p.to_string());
                            (*p, high(p).unwrap_or(*start))
                        }
                    })
                    .collect();
                let notes = if ends.is_empty() {
                    vec![]
                } else {
                    vec![format!(
                        "partition(s) {} have no record at or after {} and went to the log end",
                        named(&ends),
                        t.rfc3339()
                    )]
                };
                (goal, notes)
            }
        };
        let records_to_reprocess = goal.iter().map(|(p, at)| high(p).map_or(0, |high| (high - at).max(0))).sum();
        Intent::new(seen.committed.clone(), goal, records_to_reprocess).with_notes(notes)
    }
}
