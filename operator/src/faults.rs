//! Fault injection for tests: stop or pause the reset driver at a named point.
//!
//! Off unless `FLOW_FAULT_CRASH_AT` or `FLOW_FAULT_PAUSE_AT` names a point. End-to-end tests use a
//! crash to prove that a crash between two effects never makes a request run twice, and a pause to
//! change the world (add a partition, delete a topic, commit as a stray consumer) between two
//! effects. The points are the boundaries between the reset machine's durable effects.

use std::time::Duration;

/// Named points.
pub const POINTS: &[&str] = &["after-intent", "after-commit", "after-outcome", "before-done"];

/// At `point`: exits with status 86 if `FLOW_FAULT_CRASH_AT` names it; sleeps
/// `FLOW_FAULT_PAUSE_SECONDS` (default 10 s) if `FLOW_FAULT_PAUSE_AT` names it. Only the task that
/// reached the point sleeps; other groups of the request go on.
pub async fn point(point: &str) {
    debug_assert!(POINTS.contains(&point));
    if std::env::var("FLOW_FAULT_CRASH_AT").is_ok_and(|p| p == point) {
        tracing::error!(point, "fault injection: crashing here on purpose");
        std::process::exit(86);
    }
    if std::env::var("FLOW_FAULT_PAUSE_AT").is_ok_and(|p| p == point) {
        let secs = std::env::var("FLOW_FAULT_PAUSE_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
        tracing::warn!(point, secs, "fault injection: pausing here on purpose");
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
}
