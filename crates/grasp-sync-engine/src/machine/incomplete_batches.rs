//! Historic batches whose pages all arrived but which must not be confirmed: the relay
//! truncated one of their filters (one second of one value and kind held more events than it
//! returns in a page), or the store failed to save one of their events. Such a batch is
//! abandoned once drained, and its coverage is derived again after a backoff:
//! - after a truncation, 60 s, doubling with each truncated batch of the relay, up to six
//!   hours (a relay that truncates once is likely to again, and never forgets);
//! - after failed saves, 5 s, doubling with each such batch of the relay in a row, up to ten
//!   minutes, and back to 5 s once a batch of the relay confirms.
//!
//! Truncation is checked first: a batch both truncated and with failed saves is abandoned as
//! truncated. Everything here is keyed by our own batch IDs, so it is bounded by the pending
//! batches; the failed IDs kept per batch are bounded by [`UNSAVED_IDS_KEPT`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use grasp_sync_model::BatchId;
use nostr::EventId;

/// The first wait before a truncated batch's coverage is derived again.
const TRUNCATION_RETRY: Duration = Duration::from_secs(60);

/// The longest wait before a truncated batch's coverage is derived again.
const TRUNCATION_RETRY_CAP: Duration = Duration::from_secs(6 * 60 * 60);

/// The first wait before a batch with failed saves is derived again.
const UNSAVED_RETRY: Duration = Duration::from_secs(5);

/// The longest wait before a batch with failed saves is derived again.
const UNSAVED_RETRY_CAP: Duration = Duration::from_secs(10 * 60);

/// Most failed IDs remembered per batch (a recovery attempt asks for at most 300, so its
/// deliveries are always told apart; a larger batch is abandoned whatever the count).
pub const UNSAVED_IDS_KEPT: usize = 1_000;

/// Why a finished batch is abandoned instead of confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incompleteness {
    /// The relay truncated one of its filters.
    Truncated,
    /// The store failed to save this many of its events (at most [`UNSAVED_IDS_KEPT`]).
    Unsaved {
        /// How many.
        events: usize,
    },
}

/// What to do with a batch whose pages all arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Nothing is missing: confirm it.
    Confirm,
    /// Abandon it and derive its coverage again at `retry_at`.
    Abandon {
        /// Why it may not be confirmed.
        why: Incompleteness,
        /// When its coverage is derived again.
        retry_at: Instant,
    },
}

/// One relay's batches marked incomplete, and the counts their backoffs grow with.
#[derive(Debug, Default)]
pub struct IncompleteBatches {
    truncated: BTreeSet<BatchId>,
    /// Truncated batches of the relay so far.
    truncations: u32,
    unsaved: BTreeMap<BatchId, BTreeSet<EventId>>,
    /// Batches in a row abandoned for failed saves; reset by a confirmed batch.
    unsaved_streak: u32,
}

impl IncompleteBatches {
    /// The relay truncated a filter of pending `batch`.
    pub fn handle_truncated(&mut self, batch: BatchId) {
        self.truncated.insert(batch);
    }

    /// The store failed to save `id`, delivered for pending `batch`.
    pub fn handle_unsaved(&mut self, batch: BatchId, id: EventId) {
        let ids = self.unsaved.entry(batch).or_default();
        if ids.len() < UNSAVED_IDS_KEPT {
            ids.insert(id);
        }
    }

    /// The failed IDs of `batch`, if the store failed to save any of its events.
    pub fn unsaved_ids(&self, batch: BatchId) -> Option<&BTreeSet<EventId>> {
        self.unsaved.get(&batch)
    }

    /// Every page of `batch` arrived at `now`: whether it may be confirmed. The batch is
    /// forgotten either way.
    pub fn handle_finished(&mut self, batch: BatchId, now: Instant) -> Finish {
        let unsaved = self.unsaved.remove(&batch);
        if self.truncated.remove(&batch) {
            self.truncations = self.truncations.saturating_add(1);
            return Finish::Abandon {
                why: Incompleteness::Truncated,
                retry_at: now + truncation_backoff(self.truncations),
            };
        }
        if let Some(ids) = unsaved {
            self.unsaved_streak = self.unsaved_streak.saturating_add(1);
            return Finish::Abandon {
                why: Incompleteness::Unsaved { events: ids.len() },
                retry_at: now + unsaved_backoff(self.unsaved_streak),
            };
        }
        self.unsaved_streak = 0;
        Finish::Confirm
    }

    /// `batch` failed or was dropped for another reason: forget it.
    pub fn handle_failed(&mut self, batch: BatchId) {
        self.truncated.remove(&batch);
        self.unsaved.remove(&batch);
    }

    /// The relay's pending batches were all dropped.
    pub fn handle_pending_cleared(&mut self) {
        self.truncated.clear();
        self.unsaved.clear();
    }
}

/// The wait before the relay's `truncations`-th truncated batch is derived again.
fn truncation_backoff(truncations: u32) -> Duration {
    doubling(TRUNCATION_RETRY, TRUNCATION_RETRY_CAP, truncations)
}

/// The wait before the `streak`-th batch in a row with failed saves is derived again.
fn unsaved_backoff(streak: u32) -> Duration {
    doubling(UNSAVED_RETRY, UNSAVED_RETRY_CAP, streak)
}

/// `first`, doubled for each of the `nth` occurrences after the first, up to `cap`.
fn doubling(first: Duration, cap: Duration, nth: u32) -> Duration {
    let doublings = nth.saturating_sub(1).min(16);
    first.saturating_mul(1 << doublings).min(cap)
}

#[cfg(test)]
mod tests;
