//! `GuardedStore`: the store core (the GRASP policy, the rejected-events index with its
//! bounds, lifetimes and releases, the cold tier's persistence) over any `NostrDatabase`
//! backend. [`LmdbStore`](crate::LmdbStore) is this core over the embedded LMDB database; an
//! external own relay is this core over a database whose saves are publications to that
//! relay, so both modes run one acceptance path.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::NostrDatabase;

use crate::boundary::{EventStore, IngestOutcome};
use crate::clock::Clock;
use crate::error::StoreError;
use crate::store::cold::ColdStore;
use crate::store::config::StoreConfig;
use crate::store::core::{CoreParts, StoreCore};
use crate::store::database::GraspDatabase;
use crate::store::feed::StoreFeed;
use crate::store::policy::GraspPolicy;
use crate::store::rejected::RejectedUsage;

/// An [`EventStore`] applying the GRASP policy in front of `backend`. Cheap to clone; clones
/// share everything.
///
/// The backend must answer `check_id`, `event_by_id`, `query` and `negentropy_items` for the
/// events it saved (the policy is rebuilt from `query` at open), and its `save_event` must
/// return `Success` only once the event is durably held: that is when the policy records the
/// event as accepted and releases what waited for it. A save that failed for a reason unrelated
/// to the event is an error (the engine keeps the batch incomplete and fetches it again); a
/// refusal of the event itself is `Rejected`, remembered in the rejected-events index.
#[derive(Debug, Clone)]
pub struct GuardedStore {
    core: Arc<StoreCore>,
}

impl GuardedStore {
    /// Announcements the policy accepted with `identifier` that `author` owns or maintains:
    /// the repositories a state event of `author` may describe.
    pub fn repositories_for(
        &self,
        identifier: &str,
        author: &nostr::PublicKey,
    ) -> Result<Vec<grasp_sync_model::RepoAnnouncement>, StoreError> {
        Ok(self
            .core
            .repositories_for(identifier, author)?
            .into_iter()
            .map(|(announcement, _)| announcement)
            .collect())
    }

    /// Opens the store over `backend`: rebuilds the policy from what the backend holds and,
    /// when `cold_dir` is given, persists the rejected-events cold index in its subdirectory
    /// [`COLD_DIRECTORY`](crate::store::COLD_DIRECTORY) (restoring what an earlier run left
    /// there). `config.lmdb_map_size` is not used. Time is read from `clock`.
    pub async fn open(
        backend: Arc<dyn NostrDatabase>,
        cold_dir: Option<&Path>,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let cold = match cold_dir {
            Some(dir) => Some(ColdStore::open(dir, config.rejected.cold_capacity)?),
            None => None,
        };
        let core = StoreCore::open(CoreParts {
            backend,
            policy: Some(GraspPolicy::new(config.policy)),
            rejected: config.rejected,
            feed_capacity: config.feed_capacity,
            cold,
            clock,
            max_future_created_at: config.max_future_created_at,
            room: None,
            // An external own relay decides what it stores: no purgatory.
            purgatory: None,
        })
        .await?;
        Ok(Self { core })
    }

    /// The database in front of the backend: saving through it reports the event to the
    /// policy and the self feed.
    pub fn database(&self) -> Arc<GraspDatabase> {
        Arc::clone(self.core.database())
    }

    /// The self feed: what the backend holds of the feed kinds, then every event saved
    /// through this store.
    pub fn feed(&self) -> StoreFeed {
        StoreFeed::new(self.database())
    }

    /// Offers an event that did not come from a remote relay (one written to the own relay by
    /// someone else): the same path as [`EventStore::ingest`], with no relay to fetch it from
    /// again should its rejection be released after its hot copy expired.
    pub async fn offer(&self, event: &Event) -> Result<IngestOutcome, StoreError> {
        self.core.ingest(event, None).await
    }

    /// [`GuardedStore::offer`] without the follow-up work: what the event's acceptance
    /// released is re-processed, and the cold tier's writes are made, by the next
    /// [`GuardedStore::settle`] (or the next ingest). For a caller that must not wait on the
    /// backend's saves of other events, such as the reader of the backend's own messages.
    pub async fn offer_unsettled(&self, event: &Event) -> Result<IngestOutcome, StoreError> {
        self.core.ingest_one(event, None, true).await
    }

    /// Re-processes the released events whose full copy is still hot, then writes the cold
    /// tier's changes.
    pub async fn settle(&self) -> Result<(), StoreError> {
        self.core.settle().await
    }

    /// Why the event was rejected, while the rejected-events index remembers it.
    pub fn rejection_reason(&self, id: &EventId) -> Result<Option<String>, StoreError> {
        self.core.rejection_reason(id)
    }

    /// How full the rejected-events index is.
    pub fn rejected_usage(&self) -> Result<RejectedUsage, StoreError> {
        self.core.rejected_usage()
    }

    /// Released IDs due for fetching by exact ID, as
    /// [`LmdbStore::poll_refetch`](crate::LmdbStore::poll_refetch).
    pub fn poll_refetch(&self) -> Result<Vec<(RelayUrl, Vec<EventId>)>, StoreError> {
        self.core.poll_refetch()
    }
}

#[async_trait]
impl EventStore for GuardedStore {
    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        self.core.poll_refetch().unwrap_or_else(|error| {
            tracing::warn!(%error, "the rejected-events index could not be read");
            Vec::new()
        })
    }

    fn rejected_usage(&self) -> Option<RejectedUsage> {
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
