//! Events the store failed to save. The relay's machine decides where one belongs
//! (`RelayMachine::handle_unsaved`): a page of a pending batch keeps its batch from being
//! confirmed (the rule and its backoff: [`crate::machine::incomplete_batches`]); a failed event
//! outside any pending batch (live coverage, a retired subscription) goes to missing-event
//! recovery here, which fetches it again by ID.

use std::collections::BTreeSet;

use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{EventId, SubscriptionId};

use super::Actor;
use crate::error::StoreError;
use crate::machine::relay::Unsaved;

impl Actor {
    /// The store failed to save `id`, delivered for `subscription_id`: mark its pending
    /// batch, or hand the ID to missing-event recovery.
    pub(super) fn handle_unsaved(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        id: EventId,
        error: &StoreError,
    ) {
        let now = self.now();
        let pending = &self.pending;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let unsaved = runtime
            .machine
            .handle_unsaved(subscription_id, id, |batch| {
                pending.batches(relay).iter().any(|b| b.batch_id == batch)
            });
        match unsaved {
            Unsaved::Batch(batch) => {
                tracing::debug!(%relay, batch = batch.0, %id, %error, "a synced event was not saved; its batch stays incomplete");
            }
            Unsaved::Recover => {
                tracing::debug!(%relay, %id, %error, "a live event was not saved; it is fetched again by id");
                self.recovery.handle_failed_batch(relay, [id], now);
            }
        }
    }

    /// The failed IDs of `batch`, if the store failed to save any of its events.
    pub(super) fn unsaved_ids(
        &self,
        relay: &RelayUrl,
        batch: BatchId,
    ) -> Option<&BTreeSet<EventId>> {
        self.runtimes
            .get(relay)
            .and_then(|r| r.machine.incomplete.unsaved_ids(batch))
    }
}
