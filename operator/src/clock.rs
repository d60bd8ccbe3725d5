//! The wall clock of the mocked-API reset tests: one that moves with tokio's clock, so that a test
//! that pauses it (`tokio::time::pause`) passes a reset's settle, retries and deadlines in no real
//! time. Set per thread, by the test that runs the reconcile there (`crate::scenario::World`).

use std::cell::Cell;

use flow_core::reset::Timestamp;

thread_local! {
    static START: Cell<Option<(Timestamp, tokio::time::Instant)>> = const { Cell::new(None) };
}

/// From now on (on this thread), the wall clock reads `at` plus the time tokio's clock moved
/// since.
pub fn start_at(at: Timestamp) {
    START.set(Some((at, tokio::time::Instant::now())));
}

/// The wall clock, when a test set it on this thread.
pub fn now() -> Option<Timestamp> {
    let (at, since) = START.get()?;
    let ms = i64::try_from(since.elapsed().as_millis()).unwrap_or(i64::MAX);
    Some(Timestamp(at.0.saturating_add(ms)))
}
