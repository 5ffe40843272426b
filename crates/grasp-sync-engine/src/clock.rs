//! The engine's clock: monotonic instants for deadlines and unix timestamps for `since` filters.
//!
//! [`TokioClock`] reads tokio's clock, so `tokio::time::pause()` pauses the whole engine in tests:
//! the unix time it reports advances exactly as far as tokio's paused clock does.

use std::time::Duration;

use nostr::Timestamp;
use tokio::time::Instant;

/// Where the engine reads time.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic now, for deadlines and timers.
    fn now(&self) -> Instant;
    /// Wall-clock now, for `since`/`until` and the 15-minute rule.
    fn unix_now(&self) -> Timestamp;
}

/// Tokio's clock, anchored to the system's unix time once, at construction.
#[derive(Debug, Clone)]
pub struct TokioClock {
    anchor: Instant,
    anchor_unix: Timestamp,
}

impl TokioClock {
    /// Anchors tokio's monotonic clock to the given unix time.
    pub fn anchored_at(anchor_unix: Timestamp) -> Self {
        Self {
            anchor: Instant::now(),
            anchor_unix,
        }
    }

    /// Anchors tokio's monotonic clock to the system's current unix time.
    pub fn from_system() -> Self {
        Self::anchored_at(Timestamp::now())
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn unix_now(&self) -> Timestamp {
        let elapsed: Duration = Instant::now().saturating_duration_since(self.anchor);
        Timestamp::from_secs(self.anchor_unix.as_secs().saturating_add(elapsed.as_secs()))
    }
}
