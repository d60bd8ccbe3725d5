//! Fault injection for tests: stop the process abruptly at a named point.
//!
//! Off unless `FLOW_FAULT_CRASH_AT` names a point. Used by end-to-end tests to prove that a crash
//! between two effects never makes a request run twice. The points are the boundaries between the
//! reset machine's durable effects.

/// Named points.
pub const POINTS: &[&str] = &["after-intent", "after-commit", "after-outcome", "before-done"];

/// Exits with status 86 if `FLOW_FAULT_CRASH_AT` equals `point`.
pub fn crash_point(point: &str) {
    if std::env::var("FLOW_FAULT_CRASH_AT").is_ok_and(|p| p == point) {
        debug_assert!(POINTS.contains(&point));
        tracing::error!(point, "fault injection: crashing here on purpose");
        std::process::exit(86);
    }
}
