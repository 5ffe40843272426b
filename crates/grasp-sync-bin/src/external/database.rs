//! [`RelayDatabase`]: the external own relay as the backend of the store core. A save is a
//! publication to the relay, successful once the relay's `OK` accepts it (a `duplicate:` answer
//! included: the relay holds the event); reads are answered by the local [`HaveIndex`] of
//! accepted events, without a round trip.
//!
//! An `OK` refusal whose reason says nothing about the event (`error:`, `rate-limited:`,
//! `auth-required:`), like no answer in time or a lost connection, is a failed save: the engine
//! keeps the batch incomplete and fetches the event again. Any other refusal is a rejection of
//! the event, remembered in the rejected-events index like the policy's own.
//!
//! An event read from the relay itself is saved without publishing it back
//! ([`RelayDatabase::offering_held`]): the relay holds it already, and waiting for an `OK` while
//! the relay's messages queue behind the reader would stall both.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nostr::util::BoxedFuture;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::{
    Backend, DatabaseError, DatabaseEventStatus, Events, NostrDatabase, RejectedReason,
    SaveEventStatus,
};

use super::index::HaveIndex;
use super::link::{OkReply, OwnRelayLink};

/// How long a save waits for the own relay's `OK`.
pub const OK_DEADLINE: Duration = Duration::from_secs(10);

/// Refusal prefixes that say nothing about the event itself: a failed write, not remembered, so
/// the engine fetches the event again.
const TRANSIENT_PREFIXES: [&str; 3] = ["rate-limited:", "error:", "auth-required:"];

/// The own relay did not save an event, for a reason unrelated to the event.
#[derive(Debug, thiserror::Error)]
#[error("the own relay did not save the event: {0}")]
pub struct NotSaved(pub String);

/// The external own relay behind the store core.
pub struct RelayDatabase {
    link: Arc<OwnRelayLink>,
    index: Arc<HaveIndex>,
    /// Events being offered that the relay is known to hold (read from it): at most one per
    /// reader of the relay, for the length of its offer.
    held: Mutex<HashSet<EventId>>,
}

impl RelayDatabase {
    /// A database publishing through `link` and reading from `index`.
    pub fn new(link: Arc<OwnRelayLink>, index: Arc<HaveIndex>) -> Self {
        Self {
            link,
            index,
            held: Mutex::new(HashSet::new()),
        }
    }

    /// Runs `offer` (the store's ingest of `event`, read from the relay) with `event` marked as
    /// held by the relay, so its save records it without publishing it back.
    pub async fn offering_held<T>(
        &self,
        event: &Event,
        offer: impl std::future::Future<Output = T>,
    ) -> T {
        self.held_ids().insert(event.id);
        let result = offer.await;
        self.held_ids().remove(&event.id);
        result
    }

    /// What an `OK` reply means for the store: the save's status, or why it failed.
    pub fn save_status(reply: &OkReply) -> Result<SaveEventStatus, NotSaved> {
        if reply.accepted {
            Ok(SaveEventStatus::Success)
        } else if TRANSIENT_PREFIXES
            .iter()
            .any(|prefix| reply.message.starts_with(prefix))
        {
            Err(NotSaved(reply.message.clone()))
        } else {
            Ok(SaveEventStatus::Rejected(RejectedReason::Other))
        }
    }

    async fn save(&self, event: &Event) -> Result<SaveEventStatus, DatabaseError> {
        if self.held_ids().contains(&event.id) {
            self.index
                .record_accepted(event)
                .await
                .map_err(|error| DatabaseError::backend(NotSaved(error.to_string())))?;
            return Ok(SaveEventStatus::Success);
        }
        let reply = self
            .link
            .publish(event, OK_DEADLINE)
            .await
            .map_err(|error| DatabaseError::backend(NotSaved(error.to_string())))?;
        let status = RelayDatabase::save_status(&reply).map_err(DatabaseError::backend)?;
        if status.is_success() {
            self.index
                .record_accepted(event)
                .await
                .map_err(|error| DatabaseError::backend(NotSaved(error.to_string())))?;
        } else {
            tracing::info!(id = %event.id, reason = %reply.message, "the own relay refused an event the policy accepted");
        }
        Ok(status)
    }

    fn held_ids(&self) -> std::sync::MutexGuard<'_, HashSet<EventId>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for RelayDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayDatabase")
            .field("relay", &self.link.url())
            .finish_non_exhaustive()
    }
}

impl NostrDatabase for RelayDatabase {
    fn backend(&self) -> Backend {
        Backend::Custom("external relay".to_owned())
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        Box::pin(self.save(event))
    }

    fn check_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
        self.index.database().check_id(event_id)
    }

    fn event_by_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
        self.index.database().event_by_id(event_id)
    }

    fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
        self.index.database().count(filter)
    }

    fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
        self.index.database().query(filter)
    }

    fn negentropy_items(
        &self,
        filter: Filter,
    ) -> BoxedFuture<'_, Result<Vec<(EventId, Timestamp)>, DatabaseError>> {
        self.index.database().negentropy_items(filter)
    }

    fn delete(&self, _filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        // The relay decides what it deletes; the index follows deletion events it accepted.
        Box::pin(async { Err(DatabaseError::NotSupported) })
    }

    fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        Box::pin(async { Err(DatabaseError::NotSupported) })
    }
}

#[cfg(test)]
mod tests;
