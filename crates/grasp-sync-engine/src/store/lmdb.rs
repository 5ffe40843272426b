//! `LmdbStore`: the own relay's persistent store, an `EventStore` over LMDB that applies the
//! GRASP acceptance policy to every ingest, shares its database and policy with the embedded
//! relay, and persists the rejected-events cold index beside its database. A save that fails
//! once the map is (nearly) full is [`StoreError::Full`] (`room.rs`).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use grasp_sync_model::{PurgatoryEntry, RelayUrl, RepoAnnouncement};
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_lmdb::NostrLMDB;

use crate::boundary::{EventStore, IngestOutcome, PurgatorySource};
use crate::clock::{Clock, TokioClock};
use crate::error::StoreError;
use crate::store::cold::ColdStore;
use crate::store::config::StoreConfig;
use crate::store::core::{CoreParts, PurgatoryParts, StoreCore};
use crate::store::database::GraspDatabase;
use crate::store::feed::StoreFeed;
use crate::store::policy::GraspPolicy;
use crate::store::purgatory::PurgatoryStats;
use crate::store::write_policy::GraspWritePolicy;

mod room;

use room::DEFAULT_MAP_SIZE;
pub(crate) use room::MapRoom;

/// The LMDB-backed own store. Cheap to clone; clones share everything.
///
/// Ingests run concurrently: the policy lock is held only while deciding, never across a save,
/// so many saves are in flight at once and LMDB batches them into few transactions.
#[derive(Debug, Clone)]
pub struct LmdbStore {
    core: Arc<StoreCore>,
}

impl LmdbStore {
    /// Opens (or creates) the LMDB database in the directory `path`, rebuilds the policy from
    /// the announcements and recent events it holds, and restores the rejected-events cold
    /// index from its subdirectory [`COLD_DIRECTORY`](crate::store::COLD_DIRECTORY). Time is
    /// read from a [`TokioClock`] anchored to the system clock.
    pub async fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with_clock(path, config, Arc::new(TokioClock::from_system())).await
    }

    /// [`LmdbStore::open`] reading time (for the rejected-events index's lifetimes) from
    /// `clock`'s unix time.
    pub async fn open_with_clock(
        path: impl AsRef<Path>,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        Self::open_with_purgatory(path, config, clock, None).await
    }

    /// [`LmdbStore::open_with_clock`] holding announcements whose git data is absent in a
    /// purgatory (see [`PurgatoryParts`]) when `purgatory` is given: they are not saved, and
    /// not served, until [`LmdbStore::promote_ready`] finds their git data. The purgatory is
    /// kept in memory: after a restart, sync offers its announcements again.
    pub async fn open_with_purgatory(
        path: impl AsRef<Path>,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
        purgatory: Option<PurgatoryParts>,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let map_size = config.lmdb_map_size.unwrap_or(DEFAULT_MAP_SIZE);
        let builder = NostrLMDB::builder(path).map_size(map_size);
        let lmdb = builder
            .build()
            .map_err(|error| StoreError::Backend(error.to_string()))?;
        let cold = ColdStore::open(path, config.rejected.cold_capacity)?;
        let core = StoreCore::open(CoreParts {
            backend: Arc::new(lmdb),
            policy: Some(GraspPolicy::new(config.policy)),
            rejected: config.rejected,
            feed_capacity: config.feed_capacity,
            cold: Some(cold),
            clock,
            max_future_created_at: config.max_future_created_at,
            room: Some(MapRoom::new(path, map_size)),
            purgatory,
        })
        .await?;
        Ok(Self { core })
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

    /// Why the event was rejected, while the rejected-events index remembers it.
    pub fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        self.core.rejection_reason(id)
    }

    /// Rejected events whose dependency has arrived but whose full copy had left the hot
    /// cache: fetch these IDs by exact ID from the relay they are listed under, and offer what
    /// comes back to [`EventStore::ingest`]. Each ID is listed under every relay that sent it
    /// (up to [`MAX_SOURCES`](crate::store::MAX_SOURCES)); announcements come before states,
    /// states before other kinds. An ID that does not come back is reported again after
    /// `RejectedConfig::refetch_retry`, up to `RejectedConfig::refetch_reports` times.
    pub fn poll_refetch(&self) -> Result<Vec<(RelayUrl, Vec<EventId>)>, StoreError> {
        self.core.poll_refetch()
    }
}

impl LmdbStore {
    /// Promotes every purgatory announcement whose git data is now present (saving it, then the
    /// events it held); how many were promoted.
    pub async fn promote_ready(&self) -> Result<usize, StoreError> {
        self.core.promote_ready().await
    }

    /// What the purgatory holds; `None` when the store has none.
    pub fn purgatory_stats(&self) -> Option<PurgatoryStats> {
        self.core.purgatory_stats()
    }

    /// Announcements, accepted (`false`) or in purgatory (`true`), with `identifier` that
    /// `author` owns or maintains: the repositories a state event of `author` may describe.
    pub fn repositories_for(
        &self,
        identifier: &str,
        author: &nostr::PublicKey,
    ) -> Result<Vec<(RepoAnnouncement, bool)>, StoreError> {
        self.core.repositories_for(identifier, author)
    }
}

impl PurgatorySource for LmdbStore {
    fn announcements_for_sync(&self) -> Vec<PurgatoryEntry> {
        self.core.purgatory_snapshot()
    }

    fn status(&self) -> Option<PurgatoryStats> {
        self.core.purgatory_stats()
    }
}

#[async_trait]
impl EventStore for LmdbStore {
    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        self.core.poll_refetch().unwrap_or_else(|error| {
            tracing::warn!(%error, "the rejected-events index could not be read");
            Vec::new()
        })
    }

    fn rejected_usage(&self) -> Option<crate::store::RejectedUsage> {
        self.core.rejected_usage().ok()
    }

    async fn ingest(&self, event: Event, source: &RelayUrl) -> Result<IngestOutcome, StoreError> {
        self.core.ingest(&event, Some(source)).await
    }

    async fn renew_rejected(&self, ids: &[EventId]) -> Result<(), StoreError> {
        self.core.renew_rejected(ids).await
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

    async fn events_tagging(
        &self,
        roots: &[EventId],
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.core.events_tagging(roots, until, limit).await
    }
}

#[cfg(test)]
mod tests;
