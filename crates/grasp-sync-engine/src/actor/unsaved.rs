//! Events the store failed to save: a historic batch with one is never confirmed. It is
//! abandoned once drained, like a truncated batch, and its coverage derived again after a
//! backoff that doubles with each such batch of the relay in a row and resets when a batch
//! confirms. A failed event outside any pending batch (live coverage, a retired subscription)
//! goes to missing-event recovery, which fetches it again by ID.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{EventId, SubscriptionId};

use super::Actor;
use crate::error::StoreError;

/// The first wait before a batch with failed saves is derived again; it doubles with each
/// such batch of the relay in a row, up to [`UNSAVED_RETRY_CAP`].
const UNSAVED_RETRY: Duration = Duration::from_secs(5);

/// The longest wait before a batch with failed saves is derived again.
const UNSAVED_RETRY_CAP: Duration = Duration::from_secs(10 * 60);

/// Most failed IDs remembered per batch (a recovery attempt asks for at most 300, so its
/// deliveries are always told apart; a larger batch is abandoned whatever the count).
const UNSAVED_IDS_KEPT: usize = 1_000;

/// The wait before the `streak`-th batch in a row with failed saves is derived again.
pub(super) fn unsaved_backoff(streak: u32) -> Duration {
    let doublings = streak.saturating_sub(1).min(16);
    UNSAVED_RETRY
        .saturating_mul(1 << doublings)
        .min(UNSAVED_RETRY_CAP)
}

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
            .session
            .as_ref()
            .and_then(|s| s.state.transients.get(subscription_id))
            .map(|t| t.batch)
            .filter(|batch| {
                self.pending
                    .batches(relay)
                    .iter()
                    .any(|b| b.batch_id == *batch)
            });
        runtime.stats.unsaved_events += 1;
        match batch {
            Some(batch) => {
                let ids = runtime.unsaved_batches.entry(batch).or_default();
                if ids.len() < UNSAVED_IDS_KEPT {
                    ids.insert(id);
                }
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
            .and_then(|r| r.unsaved_batches.get(&batch))
    }
}
