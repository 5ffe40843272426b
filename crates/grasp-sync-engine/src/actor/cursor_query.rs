//! A repeated EOSE-closing query with an in-memory cursor, used by the byte-cap catch-up: each
//! query starts from the previous successful one's start minus an overlap, one query is in
//! flight at a time, and only a successful batch advances the cursor.

use std::time::Duration;

use grasp_sync_model::{BatchId, PendingItems, RelayUrl};
use nostr::{Filter, Timestamp};

use super::Actor;

/// The cursor and the query in flight.
#[derive(Debug, Default)]
pub(super) struct CursorQuery {
    /// Start of the last successful query.
    cursor: Option<Timestamp>,
    /// The batch in flight and the time it started.
    in_flight: Option<(BatchId, Timestamp)>,
}

impl CursorQuery {
    /// Whether a query is in flight.
    pub(super) fn is_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Sets the cursor to `at` unless one is set (history up to `at` is covered otherwise).
    pub(super) fn start_at(&mut self, at: Timestamp) {
        self.cursor.get_or_insert(at);
    }

    /// Where the next query starts: the cursor minus `overlap`.
    pub(super) fn since(&self, overlap: Duration) -> Option<Timestamp> {
        self.cursor
            .map(|c| Timestamp::from_secs(c.as_secs().saturating_sub(overlap.as_secs())))
    }

    /// A batch ended: advance the cursor if it was this query's batch and it succeeded; a
    /// failure keeps the cursor, so the next query reaches as far back.
    pub(super) fn handle_batch_done(&mut self, batch: BatchId, success: bool) {
        if let Some((in_flight, started)) = self.in_flight {
            if in_flight == batch {
                self.in_flight = None;
                if success {
                    self.cursor = Some(started);
                }
            }
        }
    }

    /// The relay's pending batches were dropped: the query in flight will never finish (the
    /// cursor stays where it was).
    pub(super) fn handle_pending_cleared(&mut self) {
        self.in_flight = None;
    }
}

impl Actor {
    /// Opens a historic batch for `filters` and records it as the query of `query` (which the
    /// caller picks out of the relay's runtime), started now. A batch with nothing to send is
    /// complete at once and advances the cursor.
    pub(super) fn open_cursor_query(
        &mut self,
        relay: &RelayUrl,
        filters: Vec<Filter>,
        query: fn(&mut super::runtime::RelayRuntime) -> &mut CursorQuery,
    ) {
        let unix = self.clock.unix_now();
        let Some(batch) = self.open_historic_batch(relay, PendingItems::default(), filters) else {
            return;
        };
        let pending = self
            .pending
            .batches(relay)
            .iter()
            .any(|b| b.batch_id == batch);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            let query = query(runtime);
            if pending {
                query.in_flight = Some((batch, unix));
            } else {
                query.cursor = Some(unix);
            }
        }
        self.drive_queue(relay);
    }

    /// A batch ended: the descendant fallback and the catch-up learn whether it was theirs.
    pub(super) fn handle_cursor_queries_done(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        success: bool,
    ) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime
                .descendants
                .fallback
                .handle_batch_done(batch, success);
            runtime.catch_up.query.handle_batch_done(batch, success);
        }
        self.handle_outbox_batch_done(relay, batch, success);
    }
}
