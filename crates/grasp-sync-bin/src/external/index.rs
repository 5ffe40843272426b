//! [`HaveIndex`]: the local record, in two small LMDB databases, of what the external own relay
//! holds and what it refused. `seen` keeps a copy of every event the relay confirmed or sent
//! (so negentropy can match filters against it); `rejected` keeps, per refused ID, a marker
//! record whose content is the relay's reason. Neither is authoritative: the relay is.

use std::path::Path;

use grasp_sync_engine::StoreError;
use nostr::{Event, EventId, Filter, Kind, Timestamp};
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use nostr_lmdb::NostrLMDB;

/// The "have" set of external mode.
#[derive(Debug)]
pub struct HaveIndex {
    seen: NostrLMDB,
    rejected: NostrLMDB,
}

impl HaveIndex {
    /// Opens (or creates) the index in the directory `path`.
    pub fn open(path: &Path) -> Result<HaveIndex, StoreError> {
        let open = |name: &str| {
            let dir = path.join(name);
            std::fs::create_dir_all(&dir)
                .map_err(|error| backend(format!("creating {}: {error}", dir.display())))?;
            NostrLMDB::open(&dir)
                .map_err(|error| backend(format!("opening {}: {error}", dir.display())))
        };
        Ok(HaveIndex {
            seen: open("seen")?,
            rejected: open("rejected")?,
        })
    }

    /// Records that the relay holds `event`.
    pub async fn record_seen(&self, event: &Event) -> Result<(), StoreError> {
        self.seen
            .save_event(event)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(())
    }

    /// Records that the relay refused `event` with `reason`.
    pub async fn record_rejected(&self, event: &Event, reason: &str) -> Result<(), StoreError> {
        // A marker under the refused ID: a regular kind, so no replacement or deletion rule
        // of the database applies to it; never served or verified.
        let marker = Event::new(
            event.id,
            event.pubkey,
            event.created_at,
            Kind::TextNote,
            [],
            reason,
            event.sig,
        );
        self.rejected
            .save_event(&marker)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(())
    }

    /// Whether the relay is known to hold (or to have deleted) the event.
    pub async fn is_seen(&self, id: &EventId) -> Result<bool, StoreError> {
        let status = self
            .seen
            .check_id(id)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(status != DatabaseEventStatus::NotExistent)
    }

    /// The relay's reason for refusing the event, if it was refused.
    pub async fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        let marker = self
            .rejected
            .event_by_id(id)
            .await
            .map_err(|error| backend(error.to_string()))?;
        Ok(marker.map(|marker| marker.content))
    }

    /// Whether the event is seen or was refused: the engine's "have" answer.
    pub async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        if self.is_seen(id).await? {
            return Ok(true);
        }
        Ok(self.rejection_reason(id).await?.is_some())
    }

    /// The seen (id, created_at) items matching `filter`.
    pub async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.seen
            .negentropy_items(filter)
            .await
            .map_err(|error| backend(error.to_string()))
    }
}

fn backend(reason: impl Into<String>) -> StoreError {
    StoreError::Backend(reason.into())
}

#[cfg(test)]
mod tests;
