//! `RejectedConfig`: the rejected-events index's bounds and lifetimes, and their defaults.

use std::time::Duration;

/// Default lifetime of a full event in the hot cache.
pub const DEFAULT_HOT_TTL: Duration = Duration::from_secs(10 * 60);
/// Default most events in the hot cache.
pub const DEFAULT_HOT_CAPACITY: usize = 10_000;
/// Default most bytes (estimated) of the events in the hot cache.
pub const DEFAULT_HOT_MAX_BYTES: usize = 32 * 1024 * 1024;
/// Default lifetime of an ID in the cold index.
pub const DEFAULT_COLD_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Default most IDs in the cold index.
pub const DEFAULT_COLD_CAPACITY: usize = 100_000;
/// Default time between two reports of the same released ID through `poll_refetch`.
pub const DEFAULT_REFETCH_RETRY: Duration = Duration::from_secs(10 * 60);
/// Default number of times a released ID is reported for fetching.
pub const DEFAULT_REFETCH_REPORTS: u32 = 6;
/// Most dependencies remembered per rejected event; further ones are ignored.
pub const MAX_DEPENDENCIES: usize = 8;
/// Most source relays remembered per rejected event; the oldest is dropped first.
pub const MAX_SOURCES: usize = 4;

/// Bounds and lifetimes of the rejected-events index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RejectedConfig {
    /// How long a dependency-resolvable event's full copy stays in the hot cache.
    pub hot_ttl: Duration,
    /// Most events in the hot cache (first rejected, first forgotten).
    pub hot_capacity: usize,
    /// Most bytes, estimated from content and tags, of the events in the hot cache.
    pub hot_max_bytes: usize,
    /// How long a rejected ID stays in the cold index.
    pub cold_ttl: Duration,
    /// Most IDs in the cold index (first rejected, first forgotten).
    pub cold_capacity: usize,
    /// Time between two reports of a released ID that has not come back.
    pub refetch_retry: Duration,
    /// How many times a released ID is reported before the index stops asking for it (it
    /// stays released, so negentropy may still bring it, until its cold entry expires).
    pub refetch_reports: u32,
}

impl Default for RejectedConfig {
    fn default() -> Self {
        Self {
            hot_ttl: DEFAULT_HOT_TTL,
            hot_capacity: DEFAULT_HOT_CAPACITY,
            hot_max_bytes: DEFAULT_HOT_MAX_BYTES,
            cold_ttl: DEFAULT_COLD_TTL,
            cold_capacity: DEFAULT_COLD_CAPACITY,
            refetch_retry: DEFAULT_REFETCH_RETRY,
            refetch_reports: DEFAULT_REFETCH_REPORTS,
        }
    }
}
