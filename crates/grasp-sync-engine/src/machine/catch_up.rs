//! The paced catch-up of one relay, for coverage no live connection holds (a learned byte cap
//! keeps it out of the live set, or every connection's budget is full): one EOSE-closing query
//! over all of it every catch-up interval, each from the start of the previous successful one
//! minus [`CATCH_UP_OVERLAP`], one in flight at a time, through the ordinary historic queue.
//!
//! The rules:
//! - coverage handed over is fetched from the moment it was handed over (the batch that brought
//!   it fetched the history before): the cursor starts there, and the first query is due one
//!   interval later;
//! - a query is due at most once an interval, only while the relay is connected, and never
//!   while one is in flight;
//! - only a successful query advances the cursor, to where it started; a failed one leaves it,
//!   so the next reaches as far back;
//! - the covered filters are re-derived by each live planning; the cursor is kept, in memory.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use grasp_sync_ledger::{CATCH_UP_OVERLAP, DeferReason, LivePlan};
use grasp_sync_model::BatchId;
use nostr::{Filter, Timestamp};

use crate::machine::refused::without_bounds;

/// One relay's catch-up: the coverage it holds, its cursor and the query in flight.
#[derive(Debug, Default)]
pub struct CatchUp {
    filters: BTreeSet<Filter>,
    /// Start of the last successful query.
    cursor: Option<Timestamp>,
    /// The query's batch in flight and the time it started.
    in_flight: Option<(BatchId, Timestamp)>,
    /// When the next query is due.
    next_at: Option<Instant>,
}

impl CatchUp {
    /// Filters the catch-up covers.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether the catch-up covers no filter.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Forgets the covered filters (the live set is being re-planned); the cursor stays.
    pub fn clear_filters(&mut self) {
        self.filters.clear();
    }

    /// Adds `filters` at `now` (`unix` on the wall clock): true when the covered set grew.
    /// Then the cursor starts at `unix` unless it is set, and the first query is due `interval`
    /// later unless one is due already.
    pub fn handle_coverage(
        &mut self,
        now: Instant,
        unix: Timestamp,
        interval: Duration,
        filters: Vec<Filter>,
    ) -> bool {
        let before = self.filters.len();
        self.filters.extend(filters);
        if self.filters.len() == before {
            return false;
        }
        self.cursor.get_or_insert(unix);
        self.next_at.get_or_insert(now + interval);
        true
    }

    /// The query due at `now`, if any: every covered filter from the cursor minus the overlap.
    /// The next one is then due `interval` later.
    pub fn poll_query(&mut self, now: Instant, interval: Duration) -> Option<Vec<Filter>> {
        if self.filters.is_empty()
            || self.in_flight.is_some()
            || self.next_at.is_some_and(|at| now < at)
        {
            return None;
        }
        self.next_at = Some(now + interval);
        let since = self
            .cursor
            .map(|c| Timestamp::from_secs(c.as_secs().saturating_sub(CATCH_UP_OVERLAP.as_secs())));
        Some(
            self.filters
                .iter()
                .map(|f| {
                    let mut f = f.clone();
                    f.since = since;
                    f
                })
                .collect(),
        )
    }

    /// The due query was opened at `unix` as `batch`, or, with `None`, had nothing to send and
    /// is complete at once, which advances the cursor.
    pub fn handle_opened(&mut self, batch: Option<BatchId>, unix: Timestamp) {
        match batch {
            Some(batch) => self.in_flight = Some((batch, unix)),
            None => self.cursor = Some(unix),
        }
    }

    /// A batch of the relay ended: if it was the query in flight, a success advances the
    /// cursor to where it started.
    pub fn handle_batch_done(&mut self, batch: BatchId, success: bool) {
        if let Some((in_flight, started)) = self.in_flight
            && in_flight == batch
        {
            self.in_flight = None;
            if success {
                self.cursor = Some(started);
            }
        }
    }

    /// The relay's pending batches were dropped: the query in flight will never end (the cursor
    /// stays where it was).
    pub fn handle_pending_cleared(&mut self) {
        self.in_flight = None;
    }
}

/// The coverage `plan` leaves out of the live set for the byte cap (and the lower tiers
/// deferred behind it), without bounds: live filters carry `limit: 0`, the catch-up wants every
/// match. Empty when the plan needs no catch-up.
pub fn catch_up_filters(plan: &LivePlan) -> Vec<Filter> {
    if !plan.needs_catch_up() {
        return Vec::new();
    }
    plan.deferred
        .iter()
        .filter(|d| {
            matches!(
                d.reason,
                DeferReason::ByteBudget | DeferReason::HigherTierDeferred
            )
        })
        .flat_map(|d| d.filters.iter())
        .map(|f| without_bounds(&f.filter))
        .collect()
}

#[cfg(test)]
mod tests;
