//! `GraspDatabase`: the store's database, a `NostrDatabase` that forwards to the backend (LMDB
//! or memory) and announces every newly saved feed event, so events saved by sync and events
//! published to the embedded relay reach the self feed through one hook.

use std::fmt;
use std::sync::Arc;

use nostr::util::BoxedFuture;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::{
    Backend, DatabaseError, DatabaseEventStatus, Events, NostrDatabase, SaveEventStatus,
};

use crate::store::feed::FeedHub;

/// The database shared by the store and the embedded relay. Give this (not the backend) to
/// `nostr_relay_builder::RelayBuilder::database`, so events published by clients reach the
/// self feed.
pub struct GraspDatabase {
    backend: Arc<dyn NostrDatabase>,
    hub: Arc<FeedHub>,
}

impl GraspDatabase {
    pub(crate) fn new(backend: Arc<dyn NostrDatabase>, hub: Arc<FeedHub>) -> Self {
        Self { backend, hub }
    }

    /// The backend this database forwards to. Writing to it directly bypasses the self feed.
    pub fn backend(&self) -> &Arc<dyn NostrDatabase> {
        &self.backend
    }

    pub(crate) fn hub(&self) -> &Arc<FeedHub> {
        &self.hub
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
        Box::pin(async move {
            let status = self.backend.save_event(event).await?;
            if status.is_success() {
                self.hub.publish(event);
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
