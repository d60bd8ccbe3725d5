//! What the operator's lag metrics say about a consumer group (docs/observe.md, "Lag"): the records
//! it has still to read, how long ago the oldest of them was appended (estimated from the log end
//! offsets seen over time), and whether the group is under an intentional reset or rebuild.
//!
//! Time comes in as Unix milliseconds; nothing here reads a clock.

use std::collections::{BTreeSet, VecDeque};

use crate::request::ResetRequest;
use crate::reset::catching_up;
use crate::resource::{AnkkaFlowSpec, ResetStatus};
use crate::targets;

/// One partition as a group reads it: where the group is and where the log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// The offset of the next record the group reads: its committed offset, or the log start offset
    /// where it has none (what it would read if it started now).
    pub position: i64,
    /// The high watermark: the offset the next appended record gets.
    pub high_watermark: i64,
}

impl PartitionOffsets {
    /// Records the group has still to read, never below 0.
    pub fn lag(&self) -> i64 {
        (self.high_watermark - self.position).max(0)
    }
}

/// A log end offset and the first and last time it was seen, in Unix milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    offset: i64,
    first_ms: i64,
    last_ms: i64,
}

/// The log end offsets (high watermarks) one partition was seen at, over time, to estimate when a
/// record was appended. A record at offset `o` did not exist while the log ended at or below `o`
/// and did once it ended above: so it was appended between the last time the log was seen ending
/// at or below it and the first time it was seen ending above it; within that span the estimate
/// assumes records came at an even rate (linear interpolation).
///
/// Kept small: at most [`LogEndHistory::CAPACITY`] offsets, a new one only when the log end moved.
/// When full, the offset dropped is the one whose neighbours are closest in time for its age, so
/// that recent history stays fine-grained and older history coarse, reaching further back. The
/// same idea as the lookup tables of Lightbend's kafka-lag-exporter, written for this one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogEndHistory {
    seen: VecDeque<Seen>,
}

impl LogEndHistory {
    /// Log end offsets kept per partition: 32 of 24 bytes.
    pub const CAPACITY: usize = 32;

    /// Records that the log ended at `offset` at `at_ms`. A log end below the last one seen (the
    /// topic was deleted and created again, or its log truncated) starts the history anew; a time
    /// before the last one seen is ignored.
    pub fn observe(&mut self, offset: i64, at_ms: i64) {
        match self.seen.back_mut() {
            Some(last) if at_ms < last.last_ms => return,
            Some(last) if offset == last.offset => {
                last.last_ms = at_ms;
                return;
            }
            Some(last) if offset < last.offset => self.seen.clear(),
            _ => {}
        }
        self.seen.push_back(Seen { offset, first_ms: at_ms, last_ms: at_ms });
        if self.seen.len() > Self::CAPACITY {
            self.thin(at_ms);
        }
    }

    /// Drops the inner offset that costs least to lose: the one whose neighbours were seen closest
    /// together, relative to how long ago it was seen.
    fn thin(&mut self, now_ms: i64) {
        let cost = |i: usize| {
            let span = (self.seen[i + 1].first_ms - self.seen[i - 1].last_ms).max(0) as f64;
            let age = (now_ms - self.seen[i].last_ms).max(0) as f64 + 1.0;
            span / age
        };
        let drop = (1..self.seen.len() - 1).min_by(|a, b| cost(*a).total_cmp(&cost(*b)));
        if let Some(i) = drop {
            self.seen.remove(i);
        }
    }

    /// When the record at `offset` was appended, estimated in Unix milliseconds; `None` when it was
    /// not appended yet as far as the history knows (at or past the last log end seen), or nothing
    /// was seen.
    ///
    /// Older than the history (below its first offset): extrapolated back from the first offset at
    /// the average rate the history saw; with no rate to go by (one offset seen, or none appended
    /// since), the first time the first offset was seen, which is when the record existed at the
    /// latest (a lower bound of its age).
    pub fn appended_at(&self, offset: i64) -> Option<f64> {
        let last = self.seen.back()?;
        if offset >= last.offset {
            return None;
        }
        let first = self.seen.front()?;
        if offset < first.offset {
            let records = (last.offset - first.offset) as f64;
            let took = (last.first_ms - first.last_ms) as f64;
            if records > 0.0 && took > 0.0 {
                return Some(first.first_ms as f64 - (first.offset - offset) as f64 * took / records);
            }
            return Some(first.first_ms as f64);
        }
        // The first offset seen above the record, and the one before it (at or below the record).
        let above = self.seen.iter().position(|s| s.offset > offset)?;
        let (lo, hi) = (self.seen[above - 1], self.seen[above]);
        let share = (offset - lo.offset) as f64 / (hi.offset - lo.offset) as f64;
        Some(lo.last_ms as f64 + share * (hi.first_ms - lo.last_ms) as f64)
    }

    /// The partition's lag in seconds at `now_ms` for a group at `offsets`: how long ago the next
    /// record it reads was appended, 0 when it has read everything. Observe the partition's high
    /// watermark first.
    pub fn lag_seconds(&self, offsets: PartitionOffsets, now_ms: i64) -> f64 {
        if offsets.lag() == 0 {
            return 0.0;
        }
        match self.appended_at(offsets.position) {
            Some(at) => ((now_ms as f64 - at) / 1000.0).max(0.0),
            None => 0.0,
        }
    }
}

/// The consumer groups of a pipeline that are under an intentional reset or rebuild, whose lag is
/// expected and says nothing about the health of their streamlets: every group a pending request
/// (not a dry run) selects, from when it is written; then each group it reset, until the group has
/// caught up (its lag first seen at 0). A group whose reset failed, or that a refused or dry-run
/// request named, is not. `request` and `done` are the request and done annotations, `status` the
/// pipeline's `status.reset`.
pub fn rebuilding(
    spec: &AnkkaFlowSpec,
    request: Option<&str>,
    done: Option<&str>,
    status: Option<&ResetStatus>,
) -> BTreeSet<String> {
    let pending = request.and_then(|r| ResetRequest::parse(r).ok()).filter(|r| done != Some(r.id.as_str()));
    if let Some(r) = pending {
        if r.dry_run {
            return BTreeSet::new();
        }
        return targets::select(spec, &r.streamlets)
            .map(|ts| ts.into_iter().flat_map(|t| t.inlets).map(|i| i.group.to_string()).collect())
            .unwrap_or_default();
    }
    status
        .filter(|s| !s.dry_run)
        .map(|s| catching_up(s).into_iter().map(|i| s.groups[i].group.clone()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{GroupStage, GroupStatus, RequestPhase};
    use crate::targets::tests::cart;

    const S: i64 = 1000;

    fn at(offset: i64, high_watermark: i64) -> PartitionOffsets {
        PartitionOffsets { position: offset, high_watermark }
    }

    #[test]
    fn a_record_is_dated_between_the_last_look_below_it_and_the_first_above_it() {
        let mut h = LogEndHistory::default();
        // The log ends at 100 from 0 s to 50 s (idle), then at 200 at 60 s.
        h.observe(100, 0);
        h.observe(100, 50 * S);
        h.observe(200, 60 * S);
        // Records 100..200 came between 50 s and 60 s, not from 0 s on.
        assert_eq!(h.appended_at(100), Some(50_000.0));
        assert_eq!(h.appended_at(150), Some(55_000.0));
        assert_eq!(h.appended_at(200), None, "not appended yet");
        assert_eq!(h.lag_seconds(at(150, 200), 70 * S), 15.0);
        assert_eq!(h.lag_seconds(at(200, 200), 70 * S), 0.0, "read everything");
        assert_eq!(h.lag_seconds(at(250, 200), 70 * S), 0.0, "a position past the end");
    }

    #[test]
    fn a_record_older_than_the_history_is_dated_at_its_average_rate() {
        let mut h = LogEndHistory::default();
        h.observe(1000, 100 * S);
        h.observe(1100, 110 * S);
        h.observe(1200, 120 * S);
        // 10 records/s: record 0 came 100 s before the first look.
        assert_eq!(h.appended_at(0), Some(0.0));
        assert_eq!(h.lag_seconds(at(0, 1200), 130 * S), 130.0);
        // One look only: the record existed by then, at least.
        let mut h = LogEndHistory::default();
        h.observe(1000, 100 * S);
        h.observe(1000, 200 * S);
        assert_eq!(h.lag_seconds(at(0, 1000), 230 * S), 130.0);
        assert_eq!(LogEndHistory::default().lag_seconds(at(0, 1000), 230 * S), 0.0, "nothing seen");
    }

    #[test]
    fn a_log_that_starts_again_or_a_late_look_resets_or_is_ignored() {
        let mut h = LogEndHistory::default();
        h.observe(500, 10 * S);
        h.observe(600, 20 * S);
        h.observe(40, 30 * S);
        assert_eq!(h.seen.len(), 1, "a topic created again starts a new history");
        h.observe(90, 25 * S);
        assert_eq!(h.seen.len(), 1, "a look older than the last one is ignored");
    }

    #[test]
    fn the_history_stays_small_and_reaches_further_back_the_longer_it_runs() {
        let mut h = LogEndHistory::default();
        // A day of a steady 10 records/s, seen every 10 s.
        let day = 86_400;
        for t in (0..=day).step_by(10) {
            h.observe(t * 10, t * S);
        }
        assert_eq!(h.seen.len(), LogEndHistory::CAPACITY);
        assert_eq!(h.seen.front().map(|s| s.offset), Some(0), "the oldest look stays");
        // Recent looks are closer together than old ones.
        let gaps: Vec<i64> = h.seen.iter().zip(h.seen.iter().skip(1)).map(|(a, b)| b.first_ms - a.last_ms).collect();
        assert!(gaps[gaps.len() - 1] < gaps[1], "{gaps:?}");
        // At a steady rate every estimate is exact, however coarse the history.
        let now = day * S;
        for (behind_s, offset) in [(5, (day - 5) * 10), (3_600, (day - 3_600) * 10), (day, 0)] {
            let got = h.lag_seconds(at(offset, day * 10), now);
            assert!((got - behind_s as f64).abs() < 1e-6, "{behind_s} s behind: {got}");
        }
    }

    const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

    fn request(extra: &str) -> String {
        format!(r#"{{"id":"{ID}"{extra}}}"#)
    }

    fn done_status(groups: &[(&str, GroupStage, bool)]) -> ResetStatus {
        ResetStatus {
            id: ID.into(),
            phase: RequestPhase::Done,
            groups: groups
                .iter()
                .map(|(g, outcome, caught_up)| GroupStatus {
                    group: g.to_string(),
                    outcome: *outcome,
                    caught_up_at: caught_up.then(|| "2026-11-29T16:22:09.118Z".to_string()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn names(set: BTreeSet<String>) -> Vec<String> {
        set.into_iter().collect()
    }

    #[test]
    fn a_pending_request_marks_the_groups_it_selects_from_when_it_is_written() {
        let spec = cart(0);
        assert_eq!(names(rebuilding(&spec, Some(&request("")), None, None)), ["cart.router.in", "cart.sink.in"]);
        let one = request(r#","streamlets":["router"]"#);
        assert_eq!(names(rebuilding(&spec, Some(&one), None, None)), ["cart.router.in"]);
        let rebuild = request(r#","rebuild":true"#);
        assert_eq!(names(rebuilding(&spec, Some(&rebuild), Some("an-older-id"), None)).len(), 2);
        // A dry run moves nothing; a malformed request or one naming no streamlet there is refused.
        assert!(rebuilding(&spec, Some(&request(r#","dryRun":true"#)), None, None).is_empty());
        assert!(rebuilding(&spec, Some("{"), None, None).is_empty());
        assert!(rebuilding(&spec, Some(&request(r#","streamlets":["nope"]"#)), None, None).is_empty());
        assert!(rebuilding(&spec, None, None, None).is_empty());
    }

    #[test]
    fn a_done_request_marks_the_groups_it_reset_until_they_caught_up() {
        let spec = cart(0);
        let status = done_status(&[
            ("cart.router.in", GroupStage::Reset, false),
            ("cart.sink.in", GroupStage::Reset, true),
            ("cart.other.in", GroupStage::Failed, false),
        ]);
        let req = request("");
        assert_eq!(names(rebuilding(&spec, Some(&req), Some(ID), Some(&status))), ["cart.router.in"]);
        let dry = ResetStatus { dry_run: true, ..status.clone() };
        assert!(rebuilding(&spec, Some(&req), Some(ID), Some(&dry)).is_empty());
        let refused = ResetStatus { phase: RequestPhase::Refused, ..status };
        assert!(rebuilding(&spec, Some(&req), Some(ID), Some(&refused)).is_empty());
    }

    #[test]
    fn offsets_lag_is_never_negative() {
        assert_eq!(at(7, 10).lag(), 3);
        assert_eq!(at(12, 10).lag(), 0);
    }
}
