//! The server's clock: UTC milliseconds since the Unix epoch, as every timestamp of the store
//! (history items, conversation boundaries, usage months and days) reads it.
//!
//! Tests move it forward without sleeping: a server started with the hidden `--test-clock`
//! flag accepts the admin-socket request `{"op":"advance-clock","ms":N}`, which adds `N`
//! milliseconds to every later reading. Without the flag the offset stays 0.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
static ADJUSTABLE: AtomicBool = AtomicBool::new(false);

/// Milliseconds since the Unix epoch (UTC), now, plus the test offset.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis() + OFFSET_MS.load(Ordering::Relaxed)
}

/// Allows [`advance`] for the life of the process (`serve --test-clock`).
pub fn make_adjustable() {
    ADJUSTABLE.store(true, Ordering::Relaxed);
}

/// Moves the clock forward by `ms` milliseconds; returns the new reading, or `None` when the
/// clock is not adjustable (the server was not started with `--test-clock`) or `ms` < 0.
pub fn advance(ms: i64) -> Option<i64> {
    if !ADJUSTABLE.load(Ordering::Relaxed) || ms < 0 {
        return None;
    }
    OFFSET_MS.fetch_add(ms, Ordering::Relaxed);
    Some(now_ms())
}
