//! Historic sync by grouped REQ+EOSE: batches of packed filter groups started through the
//! ledger's transient permits and both pacing gates, paged with per-filter `until` cursors, and
//! confirmed only when every subscription of the batch reached EOSE. A CLOSED, a send failure or
//! a watchdog expiry fails the whole batch: it is never confirmed and its items stay retryable.
//! Groups are packed up to the learned filter ceiling, or up to the trusted one
//! ([`FilterCeiling`]); every EOSE, live or historic, tells the learned limits that the relay
//! took that REQ's filter count.

use std::time::{Duration, Instant};

use grasp_sync_filters::{Coverage, FilterBudget};
use grasp_sync_model::{
    BatchId, PaginationState, PendingItems, RelaySyncNeeds, RelayUrl, RepoCoordinate, SyncMethod,
};
use nostr::{EventId, Filter, SubscriptionId, Timestamp};

use super::Actor;
use super::live::LivePage;
use super::runtime::{Machine, RelayRuntime};
use crate::machine::eose::EoseAnswer;
pub(super) use crate::machine::history_pages::FilterCeiling;
use crate::machine::history_pages::QueuedHistory;
use crate::machine::incomplete_batches::{Finish, Incompleteness};
use crate::machine::req_queue::{Dropped, DroppedBatch, QueueStop};
use crate::machine::timers::RelayTimer;

/// Shortest wait before failed coverage is derived again.
const RETRY_FLOOR: Duration = Duration::from_secs(1);

/// Logs a filter count an accepted REQ proved (`known`: whether the relay's ceiling is known).
fn log_proved(relay: &RelayUrl, proved: Option<usize>, known: bool) {
    if let Some(filters) = proved {
        tracing::debug!(%relay, filters, known,
            "an accepted REQ proved the relay takes this many filters per REQ");
    }
}

/// A relay's needs as the lists a [`Coverage`] borrows (no direct members).
pub(super) struct NeedsLists {
    full: Vec<RepoCoordinate>,
    state_only: Vec<RepoCoordinate>,
    roots: Vec<EventId>,
}

impl NeedsLists {
    /// The lists of `needs`.
    pub(super) fn of(needs: &RelaySyncNeeds) -> Self {
        Self {
            full: needs.full_repos().cloned().collect(),
            state_only: needs.state_only_repos().cloned().collect(),
            roots: needs.root_events.iter().copied().collect(),
        }
    }

    /// The coverage of these lists.
    pub(super) fn coverage(&self) -> Coverage<'_> {
        Coverage {
            full_repos: &self.full,
            state_only_repos: &self.state_only,
            roots: &self.roots,
            direct_members: &[],
            addressable_members: &[],
        }
    }
}

impl Actor {
    /// New work for a relay (from the three-way diff): live coverage and one historic batch,
    /// or, in a session that started over the relay's kept holdings, a round over `{}`.
    pub(super) fn handle_add_filters(&mut self, relay: &RelayUrl, needs: RelaySyncNeeds) {
        if self.add_over_holdings(relay, &needs) {
            return;
        }
        self.sync_items(relay, needs, None, true);
    }

    /// Live coverage (when `live`) and one historic batch from `since` for `needs`.
    pub(super) fn sync_items(
        &mut self,
        relay: &RelayUrl,
        needs: RelaySyncNeeds,
        since: Option<Timestamp>,
        live: bool,
    ) {
        if needs.is_empty() {
            return;
        }
        let lists = NeedsLists::of(&needs);
        let coverage = lists.coverage();
        let budget = FilterBudget::default();
        let items = PendingItems {
            repos: needs.repos,
            root_events: needs.root_events,
        };
        if live {
            match coverage.live_filters(&budget) {
                Ok(filters) => {
                    // A first sync's new live groups carry the history's first page.
                    let page = match since {
                        None => self.open_live_with_history(relay, filters, &items),
                        Some(_) => LivePage::NotCarried(filters),
                    };
                    match page {
                        LivePage::Carried => {
                            self.drive_queue(relay);
                            return;
                        }
                        LivePage::NotCarried(filters) => {
                            let _ = self.open_live(relay, filters);
                        }
                        LivePage::HistoryApart => {}
                    }
                }
                Err(error) => tracing::warn!(%relay, %error, "live filters could not be built"),
            }
        }
        match coverage.historic_filters(since, None, &budget) {
            Ok(filters) => {
                let filters = filters.into_iter().map(|f| f.filter).collect();
                // Full reconciliation tries NIP-77; a catch-up from `since` is a plain REQ.
                if since.is_none() {
                    self.open_reconciled_batch(relay, items, filters);
                } else {
                    self.open_historic_batch(relay, items, filters);
                }
            }
            Err(error) => tracing::warn!(%relay, %error, "historic filters could not be built"),
        }
        self.drive_queue(relay);
    }

    /// Packs `filters` into groups, opens a pending batch for `items` and queues every group.
    /// Every subscription is registered in the batch before anything is sent.
    pub(super) fn open_historic_batch(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
        filters: Vec<Filter>,
    ) -> Option<BatchId> {
        self.runtimes.get(relay)?.machine.session.as_ref()?;
        let batch = self.pending.open_batch(relay, items, SyncMethod::ReqEose);
        if !self.queue_req_groups(relay, batch, filters, FilterCeiling::Learned) {
            self.confirm(relay, batch);
        }
        Some(batch)
    }

    /// The recovery probe of a filter refused by policy: one REQ of its own, sent whatever the
    /// refused coverage says (the probe is what may send it). Returns the batch if it is
    /// pending.
    pub(super) fn open_probe_batch(&mut self, relay: &RelayUrl, filter: Filter) -> Option<BatchId> {
        self.runtimes.get(relay)?.machine.session.as_ref()?;
        let batch = self
            .pending
            .open_batch(relay, PendingItems::default(), SyncMethod::ReqEose);
        if self.queue_packed(
            relay,
            batch,
            Vec::new(),
            vec![filter],
            FilterCeiling::Learned,
        ) {
            Some(batch)
        } else {
            self.confirm(relay, batch);
            None
        }
    }

    /// Historic sync for a fresh start: NIP-77 when the session allows it, else REQ+EOSE.
    pub(super) fn open_reconciled_batch(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
        filters: Vec<Filter>,
    ) -> Option<BatchId> {
        // Coverage refused by policy is settled by REQs, where a refusal names its filters.
        let refused = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.refused.affects(&filters));
        if refused {
            return self.open_historic_batch(relay, items, filters);
        }
        match self.open_negentropy_batch(relay, items.clone(), filters.clone()) {
            Some(batch) => Some(batch),
            None => self.open_historic_batch(relay, items, filters),
        }
    }

    /// Queues `filters` as historic pages of `batch`, as far as the relay's refused coverage
    /// admits them, packed into REQs of at most `ceiling` filters
    /// ([`RelayMachine::queue_history`](crate::machine::relay::RelayMachine)), and registers
    /// every page in the batch. Returns whether anything was queued.
    pub(super) fn queue_req_groups(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        filters: Vec<Filter>,
        ceiling: FilterCeiling,
    ) -> bool {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return false;
        };
        let counter = &mut self.next_subscription;
        let queued = runtime
            .machine
            .queue_history(now, batch, filters, ceiling, || {
                super::new_subscription_id(counter, "hist")
            });
        self.register_pages(relay, batch, queued)
    }

    /// Queues `together` packed into REQs of at most `ceiling` filters and each of `alone` in
    /// a REQ of its own, as historic pages of `batch`
    /// ([`RelayMachine::queue_packed`](crate::machine::relay::RelayMachine)), and registers
    /// every page in the batch. Returns whether anything was queued.
    fn queue_packed(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        together: Vec<Filter>,
        alone: Vec<Filter>,
        ceiling: FilterCeiling,
    ) -> bool {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return false;
        };
        let counter = &mut self.next_subscription;
        let queued = runtime
            .machine
            .queue_packed(batch, together, alone, ceiling, || {
                super::new_subscription_id(counter, "hist")
            });
        self.register_pages(relay, batch, queued)
    }

    /// Registers the pages the relay's machine queued in `batch`; logs what it could not
    /// pack. Returns whether any page was queued.
    fn register_pages(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        queued: Option<QueuedHistory>,
    ) -> bool {
        let Some(queued) = queued else {
            return false;
        };
        if let Some(error) = &queued.failed {
            tracing::warn!(%relay, %error, "historic filters could not be packed");
        }
        for error in &queued.suspects_failed {
            tracing::warn!(%relay, %error, "a suspect filter could not be packed");
        }
        let any = !queued.pages.is_empty();
        self.register_queued(relay, batch, queued.pages);
        any
    }

    /// Registers in `batch` each page the relay's machine queued for it (its subscription and
    /// filters), before anything is sent, so the batch cannot confirm before they ran.
    pub(super) fn register_queued(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        pages: Vec<(SubscriptionId, Vec<Filter>)>,
    ) {
        for (subscription_id, filters) in pages {
            // Registering in a batch that is pending cannot fail.
            let _ = self.pending.register_subscription(
                relay,
                batch,
                subscription_id,
                PaginationState::new(filters),
            );
        }
    }

    /// Starts queued REQs while a slot is free and both gates allow
    /// ([`RelayMachine::drive_history`](crate::machine::relay::RelayMachine)), fails the batches
    /// it dropped, then drives the NIP-77 rounds.
    pub(super) fn drive_queue(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let drive = runtime.machine.drive_history(now);
        super::runtime::log_live_driven(relay, drive.live, self.metrics.as_ref());
        for started in &drive.started {
            tracing::debug!(%relay, subscription = %started.subscription_id, filters = started.filters, batch = ?started.batch, "historic REQ starts");
            if let Some(metrics) = &self.metrics {
                metrics.record_req("historic");
            }
        }
        match drive.stop {
            QueueStop::Empty => {}
            QueueStop::WaitUntil(at) => {
                tracing::debug!(%relay, wait_ms = at.saturating_duration_since(now).as_millis() as u64, "queue waits for a health pause or a gate");
            }
            QueueStop::WaitForSlot { residual, held } => {
                tracing::debug!(%relay, residual, ?held, "queue waits for a slot");
            }
            QueueStop::NoPermit(error) => {
                tracing::debug!(%relay, %error, "no transient slot; waiting for a release");
            }
        }
        for DroppedBatch { batch, why } in drive.dropped {
            match why {
                Dropped::Rejected => tracing::debug!(%relay, batch = batch.0,
                    "queued start rejected; its batch will be re-derived"),
                Dropped::PausedCoverage => tracing::debug!(%relay, batch = batch.0,
                    "queued start holds coverage paused since; its batch will be re-derived"),
            }
            self.fail_batch(
                relay,
                batch,
                "queued start rejected during a rate-limit cooldown",
            );
        }
        self.drive_negentropy(relay);
        self.recompute_if_queue_drained(relay);
    }

    /// EOSE on a subscription held: the relay took its REQ's filter count (taught to the
    /// learned limits). A live one stays open; a transient one is closed, its slot released,
    /// and it pages or finishes. An EOSE for a subscription no longer held (refused, retired)
    /// proves nothing.
    pub(super) fn handle_eose(&mut self, relay: &RelayUrl, subscription_id: &SubscriptionId) {
        let now = self.now();
        let counter = &mut self.next_subscription;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(answer) = runtime.machine.handle_eose(now, subscription_id, || {
            super::new_subscription_id(counter, "page")
        }) else {
            return;
        };
        let known = runtime.machine.learned.ceiling_known();
        let page = match answer {
            EoseAnswer::Live { proved } => {
                log_proved(relay, proved, known);
                return; // live subscriptions stay open
            }
            EoseAnswer::Page(page) => page,
        };
        log_proved(relay, page.proved, known);
        for quirk in &page.learned_quirks {
            tracing::info!(%relay, quirk, "learned how the relay pages; paging adapts for the session");
            if let Some(metrics) = &self.metrics {
                metrics.record_quirk(quirk);
            }
        }
        // Every next page is registered before the finished one resolves, so the batch cannot
        // confirm in between.
        self.register_queued(relay, page.batch, page.next);
        if !page.truncated.is_empty() {
            self.handle_truncation(relay, page.batch, &page.truncated);
        }
        if let Some(resolved) = self.pending.resolve_subscription(relay, subscription_id)
            && resolved.batch_complete
        {
            self.batch_drained(relay, resolved.batch_id);
        }
        if page.settled {
            // Suspect coverage proved innocent: it may be live again.
            self.repair_live(relay);
        }
        self.drive_queue(relay);
    }

    /// Queues again, as historic pages of their batch, the pages of live groups that ended
    /// before their EOSE ([`crate::machine::live_history`]), registers them and resolves the
    /// ended ones; a batch whose page could not be queued again fails.
    pub(super) fn requeue_ended_live_pages(&mut self) {
        let now = self.now();
        let relays: Vec<RelayUrl> = self.runtimes.keys().cloned().collect();
        for relay in relays {
            let counter = &mut self.next_subscription;
            let Some(runtime) = self.runtimes.get_mut(&relay) else {
                continue;
            };
            let pending = &self.pending;
            let ended = runtime.machine.requeue_ended_live_pages(
                now,
                |batch| pending.batches(&relay).iter().any(|b| b.batch_id == batch),
                || super::new_subscription_id(counter, "hist"),
            );
            if ended.is_empty() {
                continue;
            }
            for (page, queued) in ended {
                // A batch an earlier page of this loop failed is gone, its pages with it.
                let pending = self
                    .pending
                    .batches(&relay)
                    .iter()
                    .any(|b| b.batch_id == page.batch);
                if !pending {
                    continue;
                }
                tracing::debug!(%relay, batch = %page.batch, subscription = %page.subscription_id,
                    "a live group ended before its page's EOSE; the page goes to history");
                if !self.register_pages(&relay, page.batch, queued) {
                    self.fail_batch(
                        &relay,
                        page.batch,
                        "a live group's page could not be queued as history",
                    );
                    continue;
                }
                if let Some(resolved) = self
                    .pending
                    .resolve_subscription(&relay, &page.subscription_id)
                    && resolved.batch_complete
                {
                    self.batch_drained(&relay, resolved.batch_id);
                }
            }
            self.drive_queue(&relay);
        }
    }

    /// Parts of a batch's history the relay cannot page through: the batch is marked so it
    /// is never confirmed, and the parts are counted and logged.
    fn handle_truncation(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        truncated: &[grasp_sync_filters::Truncation],
    ) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if self
            .pending
            .batches(relay)
            .iter()
            .any(|b| b.batch_id == batch)
        {
            runtime.machine.incomplete.handle_truncated(batch);
        }
        runtime.machine.stats.history_truncated += truncated.len() as u64;
        for cut in truncated {
            tracing::warn!(%relay, at = %cut.at, delivered = cut.delivered, part = ?cut.part,
                "history truncated: one second of one value and kind holds more events than the relay returns in a page; the batch stays incomplete");
        }
        if let Some(metrics) = &self.metrics {
            metrics.record_truncated(truncated.len() as u64);
        }
    }

    /// Moves a finished batch into confirmed state, unless one of its filters was truncated
    /// or the store failed to save one of its events: then it is abandoned and its coverage
    /// retried after the truncation or the failed-save backoff.
    pub(super) fn confirm(&mut self, relay: &RelayUrl, batch: BatchId) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && let Finish::Abandon { why, retry_at } =
                runtime.machine.incomplete.handle_finished(batch, now)
        {
            let reason = match why {
                Incompleteness::Truncated => "history truncated by the relay's page size",
                Incompleteness::Unsaved { events } => {
                    runtime.machine.stats.history_unsaved += 1;
                    tracing::warn!(%relay, batch = batch.0, unsaved = events,
                        retry_in_s = (retry_at - now).as_secs(),
                        "the store failed to save events of a historic batch; the batch stays incomplete");
                    "the store failed to save events of the batch"
                }
            };
            self.fail_batch(relay, batch, reason);
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                // Each retry of an unreachable second, or of a store that keeps failing,
                // is spaced further apart.
                runtime
                    .machine
                    .timers
                    .set(RelayTimer::CoverageRetry, retry_at);
            }
            return;
        }
        let unix = self.clock.unix_now();
        let outcome = match self
            .pending
            .confirm_batch(relay, batch, &mut self.relays, unix)
        {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::debug!(%relay, %error, "batch already gone");
                return;
            }
        };
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && runtime.machine.announcements_batch == Some(batch)
        {
            runtime.machine.announcements_batch = None;
            self.relays.register(relay).announcements_synced = true;
        }
        self.handle_batch_ended(relay, batch, true);
        if outcome.relay_idle {
            self.check_idle(relay);
        }
    }

    /// A historic batch ended, confirmed or failed: every machine of the relay that waits on
    /// one of its batches hears of it (the catch-up, the descendant coverage and its fallback,
    /// the probes of refused coverage), then participant discovery.
    fn handle_batch_ended(&mut self, relay: &RelayUrl, batch: BatchId, success: bool) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.catch_up.handle_batch_done(batch, success);
            runtime
                .machine
                .descendants
                .handle_batch_done(batch, success, &self.members);
            runtime
                .machine
                .refused
                .handle_batch_done(batch, success, now);
        }
        self.handle_outbox_batch_done(relay, batch, success);
    }

    /// Fails a batch: closes its other subscriptions, drops its queued starts, removes it from
    /// pending without confirming, and schedules the coverage to be derived again. The batch
    /// of a round over the relay's holdings, failed by one of its fetches (a refusal, a page
    /// left unanswered), is the fresh start by named rounds, as any failure of its round is.
    pub(super) fn fail_batch(&mut self, relay: &RelayUrl, batch: BatchId, why: &str) {
        let now = self.now();
        let holdings = self.is_holdings_batch(relay, batch);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if let (Some(session), Some(ledger)) = (
            runtime.machine.session.as_mut(),
            runtime.machine.ledger.as_mut(),
        ) {
            session.close_pages(ledger, Some(batch), now);
        }
        if runtime.machine.announcements_batch == Some(batch) {
            runtime.machine.announcements_batch = None;
        }
        runtime.machine.incomplete.handle_failed(batch);
        let pause_end = runtime.machine.health.sync_paused_until(now).unwrap_or(now);
        let retry = pause_end.max(now + RETRY_FLOOR);
        runtime
            .machine
            .timers
            .set_earliest(RelayTimer::CoverageRetry, retry);
        runtime.machine.stats.last_error = Some(why.to_owned());
        self.forget_negentropy_batch(relay, batch);
        self.recovery.handle_unrelated_failure(relay);
        // Participant discovery keeps its own backoff; it is not the relay's history.
        let discovery = self.outbox.refusal_scope(relay, batch).is_some();
        self.handle_batch_ended(relay, batch, false);
        if self.pending.abandon_batch(relay, batch).is_some() && !discovery {
            self.relays.register(relay).batch_failed = true;
            tracing::info!(%relay, %why, "historic batch failed; it will be retried");
        }
        if holdings {
            self.holdings_round_failed(relay);
            return;
        }
        self.check_idle(relay);
        self.drive_queue(relay);
    }

    /// Re-derives coverage after a failure or a pause: Layer 1 if it never completed, then the
    /// three-way diff.
    pub(super) fn retry_coverage(&mut self, relay: &RelayUrl) {
        if !self.wants_repo_connection(relay) {
            return; // participant discovery retries on its own deadlines
        }
        let needs_announcements = self.runtimes.get(relay).is_some_and(|r| {
            r.machine.session.is_some() && r.machine.announcements_batch.is_none()
        }) && self
            .relays
            .get(relay)
            .is_some_and(|s| !s.announcements_synced);
        if needs_announcements {
            let filters = vec![
                grasp_sync_filters::announcement_filter(grasp_sync_filters::Window::since(None))
                    .filter,
            ];
            let batch = self.open_reconciled_batch(relay, PendingItems::default(), filters);
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                runtime.machine.announcements_batch = batch;
            }
        }
        self.recompute(relay);
        self.drive_queue(relay);
    }

    /// The 120 s watchdog: CLOSE only the stuck subscription, fail its batch, pause requests.
    /// The slot is released once the CLOSE was handed to the connection.
    pub(super) fn handle_watchdog(&mut self, relay: &RelayUrl, now: Instant) {
        let expired = match self.runtimes.get_mut(relay) {
            Some(RelayRuntime {
                machine:
                    Machine {
                        session: Some(session),
                        ledger: Some(ledger),
                        ..
                    },
                ..
            }) => session.handle_watchdog(ledger, now),
            _ => Vec::new(),
        };
        // A silent discovery query backs off its own discovery work (its batch's failure), not
        // the relay's history.
        let repository_work = expired
            .iter()
            .any(|batch| self.outbox.refusal_scope(relay, *batch).is_none());
        if repository_work && let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime
                .machine
                .health
                .handle_failure(grasp_sync_health::PauseKind::Request, now);
        }
        for batch in expired {
            self.fail_batch(
                relay,
                batch,
                &format!(
                    "a historic request saw no EOSE within {} s",
                    grasp_sync_ledger::WATCHDOG_TIMEOUT.as_secs()
                ),
            );
        }
    }

    /// The watchdog's CLOSE was sent: now its slot may be released.
    pub(super) fn handle_close_sent(&mut self, relay: &RelayUrl, subscription_id: &SubscriptionId) {
        let now = self.now();
        let released = self
            .runtimes
            .get_mut(relay)
            .is_some_and(|r| r.machine.handle_close_sent(now, subscription_id));
        if released {
            self.drive_queue(relay);
        }
    }
}

impl Actor {
    /// Closes every transient subscription and drops every queued start of the session (a
    /// fresh start on a live connection replaces all historic work).
    pub(super) fn abandon_transients(&mut self, relay: &RelayUrl) {
        self.abandon_negentropy(relay);
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let (Some(session), Some(ledger)) = (
            runtime.machine.session.as_mut(),
            runtime.machine.ledger.as_mut(),
        ) else {
            return;
        };
        session.close_pages(ledger, None, now);
    }
}
