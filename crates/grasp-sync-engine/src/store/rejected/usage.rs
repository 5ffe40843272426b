//! `RejectedUsage`: how full the rejected-events index is and how often its bounds forced it
//! to forget an entry, for `/status` and the metrics.

use serde::{Deserialize, Serialize};

/// The rejected-events index's use of its bounds at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RejectedUsage {
    /// Full events in the hot cache.
    pub hot_events: usize,
    /// Most events the hot cache holds (`RejectedConfig::hot_capacity`).
    pub hot_capacity: usize,
    /// Estimated bytes of the hot cache's events.
    pub hot_bytes: usize,
    /// Most estimated bytes the hot cache holds (`RejectedConfig::hot_max_bytes`).
    pub hot_max_bytes: usize,
    /// Rejected IDs in the cold index.
    pub cold_ids: usize,
    /// Most IDs the cold index holds (`RejectedConfig::cold_capacity`).
    pub cold_capacity: usize,
    /// Hot copies dropped, since the store opened, to make room (count or bytes), before
    /// their lifetime ended.
    pub hot_evicted: u64,
    /// Cold entries forgotten, since the store opened, to make room, before their lifetime
    /// ended: sync may fetch those events again.
    pub cold_evicted: u64,
}
