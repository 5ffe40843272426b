//! `LmdbStore`: the own relay's persistent store, an `EventStore` over LMDB that applies the
//! GRASP acceptance policy to every ingest and shares its database and policy with the
//! embedded relay.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_lmdb::NostrLMDB;

use crate::boundary::{EventStore, IngestOutcome};
use crate::error::StoreError;
use crate::store::config::StoreConfig;
use crate::store::core::StoreCore;
use crate::store::database::GraspDatabase;
use crate::store::feed::StoreFeed;
use crate::store::policy::GraspPolicy;
use crate::store::write_policy::GraspWritePolicy;

/// The LMDB-backed own store. Cheap to clone; clones share everything.
///
/// Ingests run concurrently: the policy lock is held only while deciding, never across a save,
/// so many saves are in flight at once and LMDB batches them into few transactions.
#[derive(Debug, Clone)]
pub struct LmdbStore {
    core: Arc<StoreCore>,
}

impl LmdbStore {
    /// Opens (or creates) the LMDB database in the directory `path` and rebuilds the policy
    /// from the announcements and recent events it holds.
    pub async fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self, StoreError> {
        let lmdb = NostrLMDB::open(path).map_err(|error| StoreError::Backend(error.to_string()))?;
        let core = StoreCore::open(
            Arc::new(lmdb),
            Some(GraspPolicy::new(config.policy)),
            config.rejected_capacity,
            config.feed_capacity,
        )
        .await?;
        Ok(Self {
            core: Arc::new(core),
        })
    }

    /// The database to serve through `nostr_relay_builder::LocalRelay` (with
    /// [`LmdbStore::write_policy`]), so relay writes reach the self feed.
    pub fn database(&self) -> Arc<GraspDatabase> {
        Arc::clone(self.core.database())
    }

    /// The relay write policy applying this store's policy instance.
    pub fn write_policy(&self) -> GraspWritePolicy {
        GraspWritePolicy::new(Arc::clone(&self.core))
    }

    /// The self feed of this store.
    pub fn feed(&self) -> StoreFeed {
        StoreFeed::new(self.database())
    }

    /// Why the event was rejected, while the hot cache remembers it.
    pub fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        self.core.rejection_reason(id)
    }
}

#[async_trait]
impl EventStore for LmdbStore {
    async fn ingest(&self, event: Event, _source: &RelayUrl) -> Result<IngestOutcome, StoreError> {
        self.core.ingest(&event).await
    }

    async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        self.core.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.core.negentropy_items(filter).await
    }
}

#[cfg(test)]
mod tests;
