//! Learned relay limits kept across restarts, so a restart does not pay one refusal per hidden
//! limit again.
//!
//! What is kept, per normalised relay URL: the subscription budget a refusal taught, the lowest
//! filter-count ceiling a refusal taught (with whether it is known to be within the relay's cap
//! or only a rung of the ladder), and the retained-REQ byte cap (advertised NIP-11 values
//! are read again by every session and never kept). Each record carries when it was last
//! learned; a record older than [`EngineConfig::learned_limits_max_age`](crate::EngineConfig)
//! is not restored, so the limit is learned again. At most [`MAX_REMEMBERED_RELAYS`] records are
//! kept (the newest), because relay URLs come from remote data.
//!
//! [`RememberedRelays`] is the rules, without I/O; [`LimitsMemory`] is where records live
//! ([`FileLimitsMemory`]: one JSON file, replaced atomically). The engine loads the records at
//! start, writes them when what a relay taught changes (checked at each health tick, one write
//! at a time), and once more at shutdown.

mod file;
mod remembered;
#[cfg(test)]
mod tests;

pub use file::FileLimitsMemory;
pub use remembered::{MAX_REMEMBERED_RELAYS, RelayLimitsRecord, RememberedRelays};

use grasp_sync_model::RelayUrl;
use thiserror::Error;

/// Where learned limits are kept between runs. Both calls block; the engine makes them on a
/// blocking thread.
pub trait LimitsMemory: Send + Sync + 'static {
    /// Every record kept.
    fn load(&self) -> Result<Vec<(RelayUrl, RelayLimitsRecord)>, LimitsMemoryError>;
    /// Replaces the kept records with `records`.
    fn save(&self, records: &[(RelayUrl, RelayLimitsRecord)]) -> Result<(), LimitsMemoryError>;
}

/// A failure to read or write kept limits. Sync goes on without them: the limits are learned
/// again, at the cost of one refusal each.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LimitsMemoryError {
    /// The file could not be read or written.
    #[error("learned limits file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not a learned-limits document.
    #[error("learned limits file {path} is not readable: {source}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong with it.
        source: serde_json::Error,
    },
}
