//! [`ExternalStore`]: the engine's `EventStore` in external mode. Ingest publishes the event to
//! the own relay and waits for its `OK`: accepted is `Saved`, or `Duplicate` when the reason
//! starts `duplicate:`; refused is `Rejected` with the relay's reason, unless the reason says
//! nothing about the event (`error:`, `rate-limited:`, `auth-required:`): then, as when no
//! answer comes in time, the write failed, and the engine keeps the batch incomplete. The
//! [`HaveIndex`] answers `contains` and negentropy locally.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{EventStore, IngestOutcome, StoreError};
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Timestamp};

use super::index::HaveIndex;
use super::link::{OkReply, OwnRelayLink};

/// How long ingest waits for the own relay's `OK`.
pub const OK_DEADLINE: Duration = Duration::from_secs(10);

/// Refusal prefixes that say nothing about the event itself: a failed write, not remembered, so
/// the engine fetches the event again.
const TRANSIENT_PREFIXES: [&str; 3] = ["rate-limited:", "error:", "auth-required:"];

/// The external own relay as the engine's store.
#[derive(Debug, Clone)]
pub struct ExternalStore {
    link: Arc<OwnRelayLink>,
    index: Arc<HaveIndex>,
}

impl ExternalStore {
    /// A store writing through `link` and remembering in `index`.
    pub fn new(link: Arc<OwnRelayLink>, index: Arc<HaveIndex>) -> Self {
        Self { link, index }
    }

    /// The local index.
    pub fn index(&self) -> &Arc<HaveIndex> {
        &self.index
    }

    /// What an `OK` reply means for the engine.
    pub fn outcome(reply: &OkReply) -> Result<IngestOutcome, StoreError> {
        if reply.accepted {
            if reply.message.starts_with("duplicate:") {
                Ok(IngestOutcome::Duplicate)
            } else {
                Ok(IngestOutcome::Saved)
            }
        } else if TRANSIENT_PREFIXES
            .iter()
            .any(|p| reply.message.starts_with(p))
        {
            Err(StoreError::Backend(format!(
                "the own relay did not save the event: {}",
                reply.message
            )))
        } else {
            Ok(IngestOutcome::Rejected(reply.message.clone()))
        }
    }
}

#[async_trait]
impl EventStore for ExternalStore {
    async fn ingest(&self, event: Event, _source: &RelayUrl) -> Result<IngestOutcome, StoreError> {
        if self.index.is_seen(&event.id).await? {
            return Ok(IngestOutcome::Duplicate);
        }
        let reply = self.link.publish(&event, OK_DEADLINE).await?;
        let outcome = ExternalStore::outcome(&reply)?;
        match &outcome {
            IngestOutcome::Saved | IngestOutcome::Duplicate => {
                self.index.record_seen(&event).await?;
            }
            IngestOutcome::Rejected(reason) => {
                self.index.record_rejected(&event, reason).await?;
            }
            IngestOutcome::Deferred => {}
        }
        Ok(outcome)
    }

    async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        self.index.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.index.negentropy_items(filter).await
    }
}

#[cfg(test)]
mod tests;
