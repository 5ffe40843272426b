//! The paced catch-up for coverage a relay's learned byte cap keeps out of the live set: one
//! EOSE-closing query over all of it every catch-up interval (5 min), each from the start of the
//! previous successful one minus one minute of overlap, through the ordinary historic queue.
//! The mode is re-derived by each session's live planning; the cursor is in memory only.

use std::collections::BTreeSet;
use std::time::Instant;

use grasp_sync_ledger::{CATCH_UP_OVERLAP, DeferReason, LivePlan};
use grasp_sync_model::RelayUrl;
use nostr::Filter;

use super::Actor;

/// One relay's catch-up: the coverage it holds, the cursor and the query in flight.
#[derive(Debug, Default)]
pub(super) struct CatchUp {
    filters: BTreeSet<Filter>,
    /// The query's cursor and batch in flight.
    pub(super) query: super::cursor_query::CursorQuery,
    next_at: Option<Instant>,
}

impl CatchUp {
    /// Filters the catch-up covers.
    pub(super) fn len(&self) -> usize {
        self.filters.len()
    }

    /// Forgets the covered filters (the live set is being re-planned); the cursor stays.
    pub(super) fn clear_filters(&mut self) {
        self.filters.clear();
    }
}

/// The coverage `plan` leaves out of the live set for the byte cap (and the lower tiers
/// deferred behind it), without bounds: live filters carry `limit: 0`, the catch-up wants every
/// match. Empty when the plan needs no catch-up.
pub(super) fn catch_up_filters(plan: &LivePlan) -> Vec<Filter> {
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
        .map(|f| crate::machine::refused::without_bounds(&f.filter))
        .collect()
}

impl Actor {
    /// Records the coverage `plan` left out of the live set for the byte cap (and the lower
    /// tiers deferred behind it), so the catch-up fetches it.
    pub(super) fn note_catch_up(&mut self, relay: &RelayUrl, plan: &LivePlan) {
        let filters = catch_up_filters(plan);
        if !filters.is_empty() {
            self.hand_to_catch_up(relay, filters);
        }
    }

    /// Adds coverage no live connection holds to the catch-up: a byte cap or every
    /// connection's budget keeps it out of the live set.
    pub(super) fn hand_to_catch_up(&mut self, relay: &RelayUrl, filters: Vec<Filter>) {
        let now = self.now();
        let unix = self.clock.unix_now();
        let interval = self.config.catch_up_interval;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let catch_up = &mut runtime.catch_up;
        let before = catch_up.filters.len();
        catch_up.filters.extend(filters);
        if catch_up.filters.len() > before {
            // History up to now is fetched by the batch that brought the coverage.
            catch_up.query.start_at(unix);
            catch_up.next_at.get_or_insert(now + interval);
            tracing::info!(%relay, filters = catch_up.filters.len(),
                "coverage no live subscription holds gets a paced catch-up");
        }
    }

    /// Starts the catch-up query when it is due and none is in flight.
    pub(super) fn run_catch_up(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let interval = self.config.catch_up_interval;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let catch_up = &mut runtime.catch_up;
        if runtime.session.is_none()
            || catch_up.filters.is_empty()
            || catch_up.query.is_in_flight()
            || catch_up.next_at.is_some_and(|at| now < at)
        {
            return;
        }
        catch_up.next_at = Some(now + interval);
        let since = catch_up.query.since(CATCH_UP_OVERLAP);
        let filters: Vec<Filter> = catch_up
            .filters
            .iter()
            .map(|f| {
                let mut f = f.clone();
                f.since = since;
                f
            })
            .collect();
        runtime.stats.catch_ups += 1;
        self.open_cursor_query(relay, filters, |runtime| &mut runtime.catch_up.query);
    }

    /// A new session re-derives the mode from its own live planning.
    pub(super) fn reset_catch_up(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.catch_up = CatchUp::default();
        }
    }
}
