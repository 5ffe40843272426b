//! [`HaveIndex`]: the local LMDB record of the events the external own relay holds *and* the
//! acceptance policy accepted: every event the relay confirmed with `OK` after the policy
//! admitted it. It is the backend of external mode's store reads (the "have" set, negentropy,
//! the authors the policy looks up, and the policy's rebuild at start), so what the relay holds
//! beyond it (events other writers put there) counts for nothing until the policy admits it.
//! Rejections live in the store's rejected-events index, not here. Not authoritative: the relay
//! is.

use std::path::Path;

use grasp_sync_engine::StoreError;
use nostr::{Event, EventId};
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use nostr_lmdb::NostrLMDB;

/// Subdirectory of the index directory holding the accepted events.
pub const ACCEPTED_DIR: &str = "accepted";

/// The "have" set of external mode.
#[derive(Debug)]
pub struct HaveIndex {
    accepted: NostrLMDB,
}

impl HaveIndex {
    /// Opens (or creates) the index in the directory `path`.
    pub fn open(path: &Path) -> Result<HaveIndex, StoreError> {
        let dir = path.join(ACCEPTED_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|error| backend(format!("creating {}: {error}", dir.display())))?;
        let accepted = NostrLMDB::open(&dir)
            .map_err(|error| backend(format!("opening {}: {error}", dir.display())))?;
        Ok(HaveIndex { accepted })
    }

    /// Records that the relay holds the accepted `event`.
    pub async fn record_accepted(&self, event: &Event) -> Result<(), StoreError> {
        self.accepted
            .save_event(event)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(())
    }

    /// Whether the relay confirmed holding the accepted event (or it was deleted since).
    pub async fn is_accepted(&self, id: &EventId) -> Result<bool, StoreError> {
        let status = self
            .accepted
            .check_id(id)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(status != DatabaseEventStatus::NotExistent)
    }

    /// The database of accepted events, for reads.
    pub(crate) fn database(&self) -> &NostrLMDB {
        &self.accepted
    }
}

fn backend(reason: impl Into<String>) -> StoreError {
    StoreError::Backend(reason.into())
}

#[cfg(test)]
mod tests;
