//! `MemoryStore`: an in-memory `EventStore` and `SelfFeed` for the engine's unit tests, with the
//! same ingest path as the LMDB store and either the GRASP policy or an accept-all mode.

use std::sync::Arc;

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::{MemoryDatabase, MemoryDatabaseOptions};
use tokio::sync::mpsc;

use crate::boundary::{EventStore, IngestOutcome, PurgatorySource, SelfFeed};
use crate::clock::{Clock, TokioClock};
use crate::error::StoreError;
use crate::store::config::StoreConfig;
use crate::store::core::{CoreParts, PurgatoryParts, StoreCore};
use crate::store::database::GraspDatabase;
use crate::store::feed::{DEFAULT_FEED_CAPACITY, StoreFeed};
use crate::store::policy::GraspPolicy;
use crate::store::purgatory::PurgatoryStats;
use crate::store::rejected::RejectedConfig;
use crate::store::write_policy::GraspWritePolicy;

/// An unbounded in-memory store. Cheap to clone; clones share everything. Its rejected-events
/// index works as the LMDB store's, but the cold tier is not persisted.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    core: Arc<StoreCore>,
}

impl MemoryStore {
    /// An empty store applying the GRASP policy.
    pub async fn new(config: StoreConfig) -> Result<Self, StoreError> {
        Self::with_clock(config, Arc::new(TokioClock::from_system())).await
    }

    /// [`MemoryStore::new`] reading time (the `created_at` window, the rejected-events index's
    /// lifetimes) from `clock`, as an engine on the same clock does.
    pub async fn with_clock(
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        Self::with_purgatory(config, clock, None).await
    }

    /// [`MemoryStore::with_clock`] with a purgatory for announcements whose git data is
    /// absent, as [`LmdbStore::open_with_purgatory`](crate::store::LmdbStore::open_with_purgatory).
    pub async fn with_purgatory(
        config: StoreConfig,
        clock: Arc<dyn Clock>,
        purgatory: Option<PurgatoryParts>,
    ) -> Result<Self, StoreError> {
        Self::open(
            Some(GraspPolicy::new(config.policy)),
            config.rejected,
            config.feed_capacity,
            config.max_future_created_at,
            clock,
            purgatory,
        )
        .await
    }

    /// Promotes every purgatory announcement whose git data is now present; how many.
    pub async fn promote_ready(&self) -> Result<usize, StoreError> {
        self.core.promote_ready().await
    }

    /// What the purgatory holds; `None` when the store has none.
    pub fn purgatory_stats(&self) -> Option<PurgatoryStats> {
        self.core.purgatory_stats()
    }

    /// An empty store that accepts every event whose signature verifies.
    pub async fn accept_all() -> Result<Self, StoreError> {
        Self::open(
            None,
            RejectedConfig::default(),
            DEFAULT_FEED_CAPACITY,
            crate::store::config::DEFAULT_MAX_FUTURE_CREATED_AT,
            Arc::new(TokioClock::from_system()),
            None,
        )
        .await
    }

    async fn open(
        policy: Option<GraspPolicy>,
        rejected: RejectedConfig,
        feed_capacity: usize,
        max_future_created_at: std::time::Duration,
        clock: Arc<dyn Clock>,
        purgatory: Option<PurgatoryParts>,
    ) -> Result<Self, StoreError> {
        let backend = MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            max_events: None,
        });
        let core = StoreCore::open(CoreParts {
            backend: Arc::new(backend),
            policy,
            rejected,
            feed_capacity,
            cold: None,
            clock,
            max_future_created_at,
            room: None,
            purgatory,
        })
        .await?;
        Ok(Self { core })
    }

    /// The database, to serve through a `LocalRelay`.
    pub fn database(&self) -> Arc<GraspDatabase> {
        Arc::clone(self.core.database())
    }

    /// The relay write policy applying this store's policy instance.
    pub fn write_policy(&self) -> GraspWritePolicy {
        GraspWritePolicy::new(Arc::clone(&self.core))
    }

    /// Why the event was rejected, while the rejected-events index remembers it.
    pub fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        self.core.rejection_reason(id)
    }

    /// Released IDs due for fetching, as [`LmdbStore::poll_refetch`](crate::LmdbStore::poll_refetch).
    pub fn poll_refetch(&self) -> Result<Vec<(RelayUrl, Vec<EventId>)>, StoreError> {
        self.core.poll_refetch()
    }
}

impl PurgatorySource for MemoryStore {
    fn announcements_for_sync(&self) -> Vec<grasp_sync_model::PurgatoryEntry> {
        self.core.purgatory_snapshot()
    }

    fn status(&self) -> Option<PurgatoryStats> {
        self.core.purgatory_stats()
    }
}

#[async_trait]
impl EventStore for MemoryStore {
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

#[async_trait]
impl SelfFeed for MemoryStore {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        StoreFeed::new(self.database()).start().await
    }
}

#[cfg(test)]
mod tests;
