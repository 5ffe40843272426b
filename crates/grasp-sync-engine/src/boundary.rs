//! The engine's other boundaries: the own store, the self feed, purgatory and the synced-event
//! hook. Production implementations live with the binary; tests may supply in-memory ones.

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};
use tokio::sync::mpsc;

use crate::error::StoreError;

/// What the own store did with an event offered by sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestOutcome {
    /// Newly stored.
    Saved,
    /// Already stored.
    Duplicate,
    /// Refused by the store's acceptance policy, with its NIP-01 reason.
    Rejected(String),
    /// Held back until something it depends on arrives (purgatory).
    Deferred,
}

/// The own relay's store. Every remote event reaches it only through [`EventStore::ingest`],
/// which applies the store's own acceptance policy.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Offers an event received from `source`. The event's id and signature were verified.
    async fn ingest(&self, event: Event, source: &RelayUrl) -> Result<IngestOutcome, StoreError>;

    /// Whether the store holds, or has rejected, the event: the "have" set for sync.
    async fn contains(&self, id: &EventId) -> Result<bool, StoreError>;

    /// The (id, created_at) items matching `filter`, for negentropy.
    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError>;

    /// Rejected events whose dependency has since arrived but whose full copy the store no
    /// longer holds: their IDs, by the relay that sent them, for the engine to fetch by exact ID
    /// (and offer to `ingest` again). Must be cheap: it is called from the sync actor. A store
    /// without a rejected-events index returns nothing.
    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        Vec::new()
    }

    /// The newest `limit` stored events created at or before `until` (any time when `None`)
    /// that tag one of `roots` with `e`, `E` or `q` (the roots' direct members), newest
    /// first. The engine reads them, a page at a time, when the self feed brings roots, so the
    /// descendants of members stored before a restart are covered again, live and in history,
    /// although no relay delivers those members again. A store that cannot answer returns
    /// nothing: members are then learned only as relays deliver them.
    async fn events_tagging(
        &self,
        roots: &[EventId],
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let _ = (roots, until, limit);
        Ok(Vec::new())
    }

    /// A relay still holds these events: a NIP-77 round found them there, and the store holds
    /// or rejected them. Those its rejected-events index remembers are remembered for another
    /// lifetime once half of the current one has passed, so a refused event that relays keep
    /// offering is not downloaded again when the index would have forgotten it. A store
    /// without a rejected-events index does nothing.
    async fn renew_rejected(&self, ids: &[EventId]) -> Result<(), StoreError> {
        let _ = ids;
        Ok(())
    }

    /// How full the store's rejected-events index is, for `/status` and the metrics; `None`
    /// for a store without one. Must be cheap: it is called from the sync actor.
    fn rejected_usage(&self) -> Option<crate::store::RejectedUsage> {
        None
    }
}

/// The events the own relay accepted: kinds 30617, 1617, 1618 and 1621 (not 30618).
#[async_trait]
pub trait SelfFeed: Send + Sync + 'static {
    /// Starts the feed: first everything already stored, then every newly accepted event.
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError>;
}

/// Announcements waiting in purgatory for git data: synced at `StateOnly` level.
pub trait PurgatorySource: Send + Sync + 'static {
    /// The current snapshot.
    fn announcements_for_sync(&self) -> Vec<grasp_sync_model::PurgatoryEntry>;

    /// What the purgatory holds, for `/status`; `None` by default.
    fn status(&self) -> Option<crate::store::PurgatoryStats> {
        None
    }
}

/// A purgatory that is always empty (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPurgatory;

impl PurgatorySource for NoPurgatory {
    fn announcements_for_sync(&self) -> Vec<grasp_sync_model::PurgatoryEntry> {
        Vec::new()
    }
}

/// Called with newly saved synced events, in batches (the purgatory git-data trigger).
#[async_trait]
pub trait SyncedEventHook: Send + Sync + 'static {
    /// A batch of events that sync newly saved.
    async fn events_synced(&self, events: Vec<Event>);

    /// One burst (500 ms) of synced events: those newly saved and those the store deferred
    /// (held in purgatory, not stored: a hook must not serve them). The engine calls this
    /// once per burst; by default it hands the saved ones to
    /// [`SyncedEventHook::events_synced`] and ignores the deferred ones.
    async fn burst_synced(&self, saved: Vec<Event>, deferred: Vec<Event>) {
        let _ = deferred;
        if !saved.is_empty() {
            self.events_synced(saved).await;
        }
    }
}
