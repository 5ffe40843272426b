//! [`ExternalStore`]: the engine's `EventStore` in external mode: the engine's store core
//! ([`GuardedStore`]) over the [`RelayDatabase`], so the GRASP acceptance policy and the
//! rejected-events index (bounded, expiring, released when a dependency arrives) apply exactly
//! as in embedded mode, and only what the policy admits is published to the own relay. The
//! rejected-events cold index is persisted beside the [`HaveIndex`].

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use grasp_sync_engine::store::RejectedUsage;
use grasp_sync_engine::{Clock, EventStore, GuardedStore, IngestOutcome, StoreConfig, StoreError};
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::NostrDatabase;

use super::database::RelayDatabase;
use super::index::HaveIndex;
use super::link::OwnRelayLink;

/// The external own relay as the engine's store.
#[derive(Debug, Clone)]
pub struct ExternalStore {
    guarded: GuardedStore,
    database: Arc<RelayDatabase>,
    index: Arc<HaveIndex>,
}

impl ExternalStore {
    /// Announcements the policy accepted with `identifier` that `author` owns or maintains.
    pub fn repositories_for(
        &self,
        identifier: &str,
        author: &nostr::PublicKey,
    ) -> Result<Vec<grasp_sync_model::RepoAnnouncement>, StoreError> {
        self.guarded.repositories_for(identifier, author)
    }

    /// A store admitting events by `config`'s policy, publishing the admitted ones through
    /// `link`, remembering them in `index`, and persisting its rejected-events cold index
    /// under `index_dir`. The policy is rebuilt from what `index` holds.
    pub async fn open(
        link: Arc<OwnRelayLink>,
        index: Arc<HaveIndex>,
        index_dir: &Path,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let database = Arc::new(RelayDatabase::new(link, Arc::clone(&index)));
        let backend: Arc<dyn NostrDatabase> = Arc::clone(&database) as Arc<dyn NostrDatabase>;
        let guarded = GuardedStore::open(backend, Some(index_dir), config, clock).await?;
        Ok(Self {
            guarded,
            database,
            index,
        })
    }

    /// The local index of accepted events.
    pub fn index(&self) -> &Arc<HaveIndex> {
        &self.index
    }

    /// The store core, whose feed is the engine's self feed.
    pub fn guarded(&self) -> &GuardedStore {
        &self.guarded
    }

    /// Offers an event read from the own relay (stored there by any writer) to the policy,
    /// like a synced one but with no relay to fetch it from again; accepted, it is recorded
    /// in the index without being published back. Events already recorded are `Duplicate`.
    /// What its acceptance released is published by the next [`ExternalStore::settle`]: the
    /// reader of the relay's messages must not wait for the relay's answers to other events.
    pub async fn offer_from_relay(&self, event: &Event) -> Result<IngestOutcome, StoreError> {
        self.database
            .offering_held(event, self.guarded.offer_unsettled(event))
            .await
    }

    /// Publishes the released events whose full copy is still hot, then writes the rejected
    /// index's changes.
    pub async fn settle(&self) -> Result<(), StoreError> {
        self.guarded.settle().await
    }

    /// Why the event was rejected, while the rejected-events index remembers it.
    pub fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        self.guarded.rejection_reason(id)
    }
}

#[async_trait]
impl EventStore for ExternalStore {
    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        EventStore::poll_refetch(&self.guarded)
    }

    fn rejected_usage(&self) -> Option<RejectedUsage> {
        EventStore::rejected_usage(&self.guarded)
    }

    async fn ingest(&self, event: Event, source: &RelayUrl) -> Result<IngestOutcome, StoreError> {
        self.guarded.ingest(event, source).await
    }

    async fn renew_rejected(&self, ids: &[EventId]) -> Result<(), StoreError> {
        self.guarded.renew_rejected(ids).await
    }

    async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        self.guarded.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.guarded.negentropy_items(filter).await
    }

    async fn events_tagging(
        &self,
        roots: &[EventId],
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.guarded.events_tagging(roots, until, limit).await
    }
}

#[cfg(test)]
mod tests;
