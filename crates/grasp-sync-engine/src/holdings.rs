//! What each relay held at its last reconciliation, kept between daily reconciliations, so a
//! daily run asks a relay one question (NIP-77 over `{}` with what it held last time) instead
//! of naming every repository and root again.
//!
//! A relay's holdings are the `(id, created_at)` of every event it held when a round over `{}`
//! last completed, whatever the acceptance policy made of them: a relay that also holds events
//! of repositories this service does not track names them once, and they are in its holdings
//! from then on. They only shape the question: a round's "have" set takes from them just the
//! events the store holds or rejected, so an event kept here and lost from the store is
//! fetched again. A rejected one the relay still holds is renewed in the rejected-events index
//! ([`EventStore::renew_rejected`](crate::EventStore::renew_rejected)), so it stays in the
//! "have" set for as long as the relay holds it. A round that finds the relay holding more
//! than [`MAX_HELD_EVENTS`], naming more new IDs than a round takes, or refusing the round
//! (strfry refuses a filter matching more events than its `maxSyncEvents`), is remembered as
//! [`Held::TooLarge`], and the relay is reconciled by named rounds until [`TOO_LARGE_PAUSE`]
//! has passed.
//!
//! Before a relay's first daily run, its holdings are learned from what it delivers and what
//! NIP-77 rounds show it holds, and added to the kept ones at each completion of its historic
//! sync.
//!
//! [`HoldingsMemory`] is where holdings live ([`FileHoldingsMemory`]: one file per relay in a
//! directory of at most [`MAX_HOLDINGS_FILES`]; [`MemoryHoldings`]: the process's memory). The
//! engine reads and writes a file memory's holdings on blocking threads: once per relay per
//! daily run or fresh start over them, and at each completion of a relay's historic sync until
//! its first daily run. The files of relays no longer tracked stay until the cap removes
//! them: at most [`MAX_HOLDINGS_FILES`] × [`MAX_HELD_EVENTS`] × 40 bytes on disk. A temporary
//! file left by a save that stopped before its rename is removed by a later save.

mod file;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use file::{FileHoldingsMemory, MAX_HOLDINGS_FILES};
use grasp_sync_model::RelayUrl;
use nostr::{EventId, Timestamp};
use thiserror::Error;

/// The most events kept for one relay. A relay holding more is reconciled by named rounds.
pub use crate::machine::holdings_round::MAX_HELD_EVENTS;

/// The most new IDs a round over `{}` takes before it ends as too large: a relay holding far
/// more than this service's coverage (a general-purpose relay listed by an announcement) would
/// otherwise be asked to name all of it.
pub const MAX_NEW_IDS_PER_ROUND: usize = 50_000;

/// Holdings learned longer ago than this are not used: the relay's events are read from the
/// store's copy of its coverage and learned again.
pub const HOLDINGS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a relay found too large is reconciled by named rounds before a round over `{}` is
/// tried again.
pub const TOO_LARGE_PAUSE: Duration = Duration::from_secs(30 * 24 * 3600);

/// One relay's holdings, and when they were learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayHoldings {
    /// When the round that learned them completed (unix time).
    pub learned_at: Timestamp,
    /// What the relay held.
    pub held: Held,
}

/// What a relay held at its last round over `{}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Its events' IDs and `created_at`, sorted by ID, unique, at most [`MAX_HELD_EVENTS`].
    Events(Vec<(EventId, Timestamp)>),
    /// More than a round over `{}` takes, or the relay refused one: named rounds until
    /// [`TOO_LARGE_PAUSE`] has passed.
    TooLarge,
}

impl RelayHoldings {
    /// `events` as learned at `learned_at`: sorted by ID and unique, or [`Held::TooLarge`]
    /// past [`MAX_HELD_EVENTS`].
    pub fn learned(learned_at: Timestamp, mut events: Vec<(EventId, Timestamp)>) -> Self {
        events.sort_unstable();
        events.dedup_by_key(|(id, _)| *id);
        let held = if events.len() > MAX_HELD_EVENTS {
            Held::TooLarge
        } else {
            Held::Events(events)
        };
        Self { learned_at, held }
    }

    /// Whether these holdings decide anything at `now`: events learned within
    /// [`HOLDINGS_MAX_AGE`], or a relay found too large within [`TOO_LARGE_PAUSE`].
    pub fn is_current(&self, now: Timestamp) -> bool {
        let age = now.as_secs().saturating_sub(self.learned_at.as_secs());
        let max = match self.held {
            Held::Events(_) => HOLDINGS_MAX_AGE,
            Held::TooLarge => TOO_LARGE_PAUSE,
        };
        age < max.as_secs()
    }
}

/// Where relays' holdings are kept between runs. The engine makes the calls of a memory that
/// [`blocks`](HoldingsMemory::blocks) on a blocking thread, and those of one that does not in
/// place, in the order it makes them.
pub trait HoldingsMemory: Send + Sync + 'static {
    /// What `relay` held, if anything is kept.
    fn load(&self, relay: &RelayUrl) -> Result<Option<RelayHoldings>, HoldingsError>;
    /// Keeps `holdings` for `relay`, replacing what was kept.
    fn save(&self, relay: &RelayUrl, holdings: &RelayHoldings) -> Result<(), HoldingsError>;
    /// Whether `load` and `save` may block the calling thread (files, a database). Yes unless
    /// the memory says otherwise.
    fn blocks(&self) -> bool {
        true
    }
}

/// Holdings kept in the process's memory, for as long as it runs: the daily runs of an engine
/// without a data directory ask one question per relay, and a restarted engine that is handed
/// the same memory reconciles over them. It never blocks. At most [`MAX_HOLDINGS_FILES`]
/// relays are kept; a save past that replaces the holdings learned longest ago.
///
/// ```
/// use std::sync::Arc;
/// use grasp_sync_engine::{EngineParts, MemoryHoldings, MemoryStore, StoreConfig};
/// # use grasp_sync_engine::RelayConnector;
/// # fn parts(connector: Arc<dyn RelayConnector>, store: MemoryStore) -> EngineParts {
/// let holdings = Arc::new(MemoryHoldings::default());
/// EngineParts::new(connector, Arc::new(store.clone()), Arc::new(store))
///     .holdings_memory(holdings)
/// # }
/// ```
#[derive(Debug, Default)]
pub struct MemoryHoldings {
    kept: std::sync::Mutex<std::collections::BTreeMap<RelayUrl, RelayHoldings>>,
}

impl HoldingsMemory for MemoryHoldings {
    fn load(&self, relay: &RelayUrl) -> Result<Option<RelayHoldings>, HoldingsError> {
        Ok(self.kept().get(relay).cloned())
    }

    fn save(&self, relay: &RelayUrl, holdings: &RelayHoldings) -> Result<(), HoldingsError> {
        let mut kept = self.kept();
        if !kept.contains_key(relay) && kept.len() >= MAX_HOLDINGS_FILES {
            let oldest = kept
                .iter()
                .min_by_key(|(_, h)| h.learned_at)
                .map(|(url, _)| url.clone());
            if let Some(oldest) = oldest {
                kept.remove(&oldest);
            }
        }
        kept.insert(relay.clone(), holdings.clone());
        Ok(())
    }

    fn blocks(&self) -> bool {
        false
    }
}

impl MemoryHoldings {
    fn kept(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<RelayUrl, RelayHoldings>> {
        // A panic while the lock was held left whole entries: nothing is half written.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A failure to read or write kept holdings. The daily run goes on without them, by named
/// rounds or by learning them again.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HoldingsError {
    /// A file could not be read or written.
    #[error("relay holdings file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// A file is not a holdings file.
    #[error("relay holdings file {path} is not readable: {reason}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
