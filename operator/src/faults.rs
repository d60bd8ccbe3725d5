//! Fault injection for tests: stop, pause or fail the reset driver at a named point.
//!
//! Off unless `FLOW_FAULT_CRASH_AT`, `FLOW_FAULT_PAUSE_AT` or `FLOW_FAULT_FAIL_AT` names a point.
//! End-to-end tests use a crash to prove that a crash between two effects never makes a request run
//! twice, a pause to change the world (add a partition, delete a topic, commit as a stray consumer)
//! between two effects, and a failure to stand for a write the API server refused. The points are
//! the boundaries between the reset machine's durable effects. `FLOW_FAULT_GROUP`, when set, limits
//! the points that concern one consumer group (`before-fence`, `before-read-back`, `after-commit`) to
//! that group.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Named points.
pub const POINTS: &[&str] = &[
    "before-fence",
    "after-intent",
    "before-read-back",
    "after-commit",
    "after-outcome",
    "before-done",
    "intent-status-write",
];

/// At `point`: exits with status 86 if `FLOW_FAULT_CRASH_AT` names it; sleeps
/// `FLOW_FAULT_PAUSE_SECONDS` (default 10 s) if `FLOW_FAULT_PAUSE_AT` names it, the first
/// `FLOW_FAULT_PAUSE_TIMES` times (default: every time) in this process. Only the task that reached
/// the point sleeps; other groups of the request go on.
pub async fn point(point: &str) {
    debug_assert!(POINTS.contains(&point));
    static PAUSED: AtomicU32 = AtomicU32::new(0);
    if std::env::var("FLOW_FAULT_CRASH_AT").is_ok_and(|p| p == point) {
        tracing::error!(point, "fault injection: crashing here on purpose");
        std::process::exit(86);
    }
    if std::env::var("FLOW_FAULT_PAUSE_AT").is_ok_and(|p| p == point) {
        let times = std::env::var("FLOW_FAULT_PAUSE_TIMES").ok().and_then(|s| s.parse().ok()).unwrap_or(u32::MAX);
        if PAUSED.fetch_add(1, Ordering::SeqCst) >= times {
            return;
        }
        let secs = std::env::var("FLOW_FAULT_PAUSE_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
        tracing::warn!(point, secs, "fault injection: pausing here on purpose");
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
}

/// [`point`] for a point that concerns consumer group `group`: only if `FLOW_FAULT_GROUP` is unset
/// or names it.
pub async fn group_point(point: &str, group: &str) {
    if std::env::var("FLOW_FAULT_GROUP").is_ok_and(|g| g != group) {
        return;
    }
    self::point(point).await;
}

/// Whether the step at `point` must fail on purpose: `FLOW_FAULT_FAIL_AT` names it, and fewer than
/// `FLOW_FAULT_FAIL_TIMES` (default 1) steps failed there so far in this process.
pub fn fail(point: &str) -> bool {
    debug_assert!(POINTS.contains(&point));
    static FAILED: AtomicU32 = AtomicU32::new(0);
    if !std::env::var("FLOW_FAULT_FAIL_AT").is_ok_and(|p| p == point) {
        return false;
    }
    let times = std::env::var("FLOW_FAULT_FAIL_TIMES").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let failed = FAILED.fetch_add(1, Ordering::SeqCst) < times;
    if failed {
        tracing::warn!(point, "fault injection: failing here on purpose");
    }
    failed
}
