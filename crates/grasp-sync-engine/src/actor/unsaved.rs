//! Events the store failed to save: a historic batch with one is never confirmed (the rule and
//! its backoff: [`crate::machine::incomplete_batches`]). A failed event outside any pending batch (live coverage, a retired subscription)
//! goes to missing-event recovery, which fetches it again by ID.

use std::collections::BTreeSet;

use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{EventId, SubscriptionId};

use super::Actor;
use crate::error::StoreError;

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
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let batch = runtime
            .machine
            .session
            .as_ref()
            .and_then(|s| s.transients.get(subscription_id))
            .map(|t| t.batch)
            .filter(|batch| {
                self.pending
                    .batches(relay)
                    .iter()
                    .any(|b| b.batch_id == *batch)
            });
        runtime.machine.stats.unsaved_events += 1;
        match batch {
            Some(batch) => {
                runtime.machine.incomplete.handle_unsaved(batch, id);
                tracing::debug!(%relay, batch = batch.0, %id, %error, "a synced event was not saved; its batch stays incomplete");
            }
            None => {
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
