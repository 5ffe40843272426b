//! `GraspDatabase`: the store's database, a `NostrDatabase` that forwards to the backend (LMDB
//! or memory), tells the store core of every successful save (so the acceptance policy records
//! an event only once it is stored) and announces every newly saved feed event, so events saved
//! by sync and events published to the embedded relay reach the self feed through one hook.
//!
//! At most [`MAX_SAVES_IN_FLIGHT`] saves reach the backend at once. The LMDB backend writes the
//! saves waiting for it in one transaction, and LMDB keeps the page buffers of a transaction
//! for reuse for as long as the database is open, never freeing them: the largest transaction
//! sets that memory. Saves of a thousand events at once (the sync's own bound) made
//! transactions that left about 30 MB of buffers at ten times the gitnostr size. Each
//! transaction also waits for the disk, so a smaller bound writes fewer events per second: the
//! bound trades one for the other (see `docs/performance.md`).

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use tokio::sync::Semaphore;

use nostr::util::BoxedFuture;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::{
    Backend, DatabaseError, DatabaseEventStatus, Events, NostrDatabase, SaveEventStatus,
};

use crate::store::core::StoreCore;
use crate::store::feed::FeedHub;

/// Most saves handed to the backend at once (see the module's documentation).
pub const MAX_SAVES_IN_FLIGHT: usize = 128;

/// The database shared by the store and the embedded relay. Give this (not the backend) to
/// `nostr_relay_builder::RelayBuilder::database`, so events published by clients reach the
/// self feed.
pub struct GraspDatabase {
    backend: Arc<dyn NostrDatabase>,
    hub: Arc<FeedHub>,
    /// The store core told of every save (weak: the core owns the database).
    core: OnceLock<Weak<StoreCore>>,
    /// A permit per save handed to the backend.
    saves: Semaphore,
}

impl GraspDatabase {
    pub(crate) fn new(backend: Arc<dyn NostrDatabase>, hub: Arc<FeedHub>) -> Self {
        Self {
            backend,
            hub,
            core: OnceLock::new(),
            saves: Semaphore::new(MAX_SAVES_IN_FLIGHT),
        }
    }

    /// Tells `core` of every successful save from now on.
    pub(crate) fn attach(&self, core: Weak<StoreCore>) {
        let _ = self.core.set(core);
    }

    /// Saves through the backend; on success the core records the acceptance, then the self
    /// feed hears of the event. The caller re-processes what the acceptance released.
    pub(crate) async fn save(&self, event: &Event) -> Result<SaveEventStatus, DatabaseError> {
        let status = {
            // The semaphore is never closed, so a permit always comes.
            let _permit = self.saves.acquire().await;
            self.backend.save_event(event).await?
        };
        if status.is_success() {
            if let Some(core) = self.core()
                && let Err(error) = core.handle_saved(event)
            {
                tracing::warn!(id = %event.id, %error, "recording a saved event in the policy failed");
            }
            self.hub.publish(event);
        }
        Ok(status)
    }

    /// The backend this database forwards to. Writing to it directly bypasses the self feed.
    pub fn backend(&self) -> &Arc<dyn NostrDatabase> {
        &self.backend
    }

    pub(crate) fn hub(&self) -> &Arc<FeedHub> {
        &self.hub
    }

    fn core(&self) -> Option<Arc<StoreCore>> {
        self.core.get().and_then(Weak::upgrade)
    }
}

impl fmt::Debug for GraspDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraspDatabase")
            .field("backend", &self.backend.backend())
            .finish_non_exhaustive()
    }
}

impl NostrDatabase for GraspDatabase {
    fn backend(&self) -> Backend {
        self.backend.backend()
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        // The embedded relay's save of an event its write policy admitted: re-process what its
        // acceptance released, and persist the rejected-events index, before the relay answers.
        Box::pin(async move {
            let status = self.save(event).await?;
            if status.is_success()
                && let Some(core) = self.core()
                && let Err(error) = core.settle().await
            {
                tracing::warn!(%error, "re-processing released rejected events failed");
            }
            Ok(status)
        })
    }

    fn check_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
        self.backend.check_id(event_id)
    }

    fn event_by_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
        self.backend.event_by_id(event_id)
    }

    fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
        self.backend.count(filter)
    }

    fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
        self.backend.query(filter)
    }

    fn negentropy_items(
        &self,
        filter: Filter,
    ) -> BoxedFuture<'_, Result<Vec<(EventId, Timestamp)>, DatabaseError>> {
        self.backend.negentropy_items(filter)
    }

    fn delete(&self, filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.backend.delete(filter)
    }

    fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.backend.wipe()
    }
}
