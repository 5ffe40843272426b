//! Live coverage (`limit: 0`): the driver derives the coverage a relay should hold live from
//! the index, and the relay's machine plans it against the held groups
//! ([`crate::machine::live_coverage`]) and applies the plan atomically
//! ([`crate::machine::live_plan`]); this module logs what held a plan back and performs
//! what it hands elsewhere (the extra connections, the catch-up).

use grasp_sync_filters::{CoverageTier, TieredFilter};
use grasp_sync_ledger::{DeferReason, LivePlan, PlanRefusal};
use grasp_sync_model::{PendingItems, RelayUrl, SyncMethod};
use nostr::SubscriptionId;

use super::Actor;
use super::history::FilterCeiling;
use crate::machine::catch_up::catch_up_filters;
use crate::machine::live_coverage::Fragmented;
use crate::machine::live_plan::{PlanHeldBack, PlanOutcome};
use crate::machine::live_split::LiveSplit;

impl Actor {
    /// Makes `incoming` live on `relay` as far as its budget allows; returns the tiers left out
    /// of the live set for lack of room (historic-only tiers are not reported).
    pub(super) fn open_live(
        &mut self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
    ) -> Vec<CoverageTier> {
        let incoming = self.without_refused(relay, incoming);
        if incoming.is_empty() {
            return Vec::new();
        }
        let Some((plan, overflow)) = self.plan_live(relay, incoming) else {
            return Vec::new();
        };
        let mut deferred: Vec<CoverageTier> = plan
            .deferred
            .iter()
            .filter(|d| d.reason != DeferReason::HistoricOnly)
            .map(|d| d.tier)
            .collect();
        let opened: Vec<CoverageTier> = plan.open.iter().filter_map(|g| g.tier()).collect();
        self.note_catch_up(relay, &plan);
        if self.apply_live_plan(relay, plan) == PlanOutcome::Deferred {
            // Planning waits for a query-rate cooldown: nothing of it is live yet.
            deferred.extend(opened);
        }
        self.check_consolidation(relay);
        if !overflow.is_empty() {
            self.place_on_lanes(relay, overflow);
        }
        deferred
    }

    /// During a first sync (a store new at start, a relay that has not completed a historic
    /// sync), makes `incoming` live in new groups that carry its first historic page, as
    /// `items`' batch ([`crate::machine::live_history`]). Coverage another relay already
    /// confirmed is not carried: the store holds its events, and the usual batch asks the store
    /// first, so that they are not fetched again.
    pub(super) fn open_live_with_history(
        &mut self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
        items: &PendingItems,
    ) -> LivePage {
        let now = self.now();
        let first_sync = self.config.live_first_page
            && self.new_store
            && self
                .relays
                .get(relay)
                .is_none_or(|state| state.historic_sync_completed_at.is_none());
        if !first_sync || incoming.is_empty() || self.confirmed_elsewhere(relay, items) {
            return LivePage::NotCarried(incoming);
        }
        let Some((plan, overflow)) = self.plan_live(relay, incoming.clone()) else {
            return LivePage::NotCarried(incoming);
        };
        let ids: Vec<SubscriptionId> = plan
            .open
            .iter()
            .map(|_| self.next_subscription_id("live"))
            .collect();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return LivePage::NotCarried(incoming);
        };
        if !runtime
            .machine
            .live_page_allowed(now, &incoming, &plan, &overflow)
        {
            return LivePage::NotCarried(incoming);
        }
        let batch = self
            .pending
            .open_batch(relay, items.clone(), SyncMethod::ReqEose);
        let (applied, pages) = runtime
            .machine
            .apply_live_plan_with_history(now, plan, ids, batch, &incoming);
        log_held_back(relay, applied.held_back.as_ref());
        super::runtime::log_live_driven(relay, applied.driven, self.metrics.as_ref());
        if pages.is_empty() {
            // Not applied as planned (a cooldown, or the ledger would refuse the groups):
            // nothing carries the page, so history goes the usual way.
            self.pending.abandon_batch(relay, batch);
            return LivePage::HistoryApart;
        }
        tracing::debug!(%relay, %batch, groups = pages.carried.len(), apart = pages.apart.len(),
            "new live groups carry the first historic page");
        self.register_queued(relay, batch, pages.carried);
        if !pages.apart.is_empty()
            && !self.queue_req_groups(relay, batch, pages.apart, FilterCeiling::Learned)
        {
            self.fail_batch(relay, batch, "historic filters could not be queued");
        }
        self.check_consolidation(relay);
        LivePage::Carried
    }

    /// Whether a relay other than `relay` confirmed any of `items`.
    fn confirmed_elsewhere(&self, relay: &RelayUrl, items: &PendingItems) -> bool {
        self.relays.iter().any(|(url, state)| {
            url != relay
                && (items.repos.keys().any(|r| state.repos.contains_key(r))
                    || items
                        .root_events
                        .iter()
                        .any(|id| state.root_events.contains(id)))
        })
    }

    /// `incoming` without coverage the relay refused by policy
    /// ([`RelayMachine::live_admitted`](crate::machine::relay::RelayMachine)).
    pub(super) fn without_refused(
        &self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
    ) -> Vec<TieredFilter> {
        match self.runtimes.get(relay) {
            Some(runtime) => runtime.machine.live_admitted(incoming),
            None => incoming,
        }
    }

    /// Applies `plan` to the relay's session
    /// ([`RelayMachine::apply_live_plan`](crate::machine::relay::RelayMachine)) with fresh
    /// subscription IDs for its new groups, and logs what held it back.
    fn apply_live_plan(&mut self, relay: &RelayUrl, plan: LivePlan) -> PlanOutcome {
        for deferred in &plan.deferred {
            tracing::debug!(%relay, tier = ?deferred.tier, reason = ?deferred.reason,
                filters = deferred.filters.len(), "live coverage deferred to history");
        }
        if plan.is_noop() {
            return PlanOutcome::Applied;
        }
        let ids: Vec<SubscriptionId> = plan
            .open
            .iter()
            .map(|_| self.next_subscription_id("live"))
            .collect();
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return PlanOutcome::Deferred;
        };
        let applied = runtime.machine.apply_live_plan(now, plan, ids);
        log_held_back(relay, applied.held_back.as_ref());
        super::runtime::log_live_driven(relay, applied.driven, self.metrics.as_ref());
        applied.outcome
    }

    /// The plan for `incoming` on the session, and the core coverage it cannot hold (for the
    /// extra connections).
    fn plan_live(
        &self,
        relay: &RelayUrl,
        incoming: Vec<TieredFilter>,
    ) -> Option<(LivePlan, Vec<TieredFilter>)> {
        let planned = self.runtimes.get(relay)?.machine.plan_live(incoming)?;
        split_or_log(relay, planned)
    }
}

/// What [`Actor::open_live_with_history`] did.
pub(super) enum LivePage {
    /// New live groups carry the batch's first page.
    Carried,
    /// Nothing changed: the plan could not carry the page. The coverage is given back.
    NotCarried(Vec<TieredFilter>),
    /// The live plan was tried but not applied as it was (a query-rate cooldown, or the ledger
    /// would refuse its groups), so nothing carries the page: the batch's history is still to
    /// open. The live set is as `open_live` would have left it.
    HistoryApart,
}

/// Logs why a live plan was not applied as it was.
fn log_held_back(relay: &RelayUrl, held_back: Option<&PlanHeldBack>) {
    match held_back {
        None => {}
        Some(PlanHeldBack::Cooldown) => {
            tracing::debug!(%relay, "live planning waits for the query-rate cooldown");
        }
        Some(PlanHeldBack::WouldBeRefused(error)) => {
            tracing::debug!(%relay, %error, "live admission would be refused; the groups held stay");
        }
        Some(PlanHeldBack::Refused(error)) => {
            tracing::warn!(%relay, %error, "live admission refused; restoring retired groups");
        }
    }
}

/// The plan and overflow of a split, logging why essential coverage was split; `None`,
/// logged, when the coverage could not be planned.
fn split_or_log(
    relay: &RelayUrl,
    planned: Result<LiveSplit, PlanRefusal>,
) -> Option<(LivePlan, Vec<TieredFilter>)> {
    match planned {
        Ok(split) => {
            if let Some(refusal) = &split.split_for {
                tracing::debug!(%relay, %refusal, "essential live coverage does not fit one connection");
            }
            Some((split.plan, split.overflow))
        }
        Err(refusal) => {
            tracing::warn!(%relay, %refusal, "live coverage does not fit this relay's budget");
            None
        }
    }
}

impl Actor {
    /// Re-derives complete live coverage for the relay's confirmed and pending items plus
    /// Layer 1, and opens whatever is not already held (after a live group was closed).
    pub(super) fn repair_live(&mut self, relay: &RelayUrl) {
        let filters = self.complete_live_filters(relay);
        let _ = self.open_live(relay, filters);
    }

    /// The complete core live set the relay should hold: Layer 1 plus the confirmed and
    /// pending items the current index still wants.
    fn complete_live_filters(&self, relay: &RelayUrl) -> Vec<TieredFilter> {
        let mut items = self.pending.pending_items(relay);
        if let Some(state) = self.relays.get(relay) {
            for (coordinate, level) in &state.repos {
                let entry = items.repos.entry(coordinate.clone()).or_insert(*level);
                *entry = (*entry).max(*level);
            }
            items.root_events.extend(state.root_events.iter().copied());
        }
        // Only what the current index still wants: ownership removal is passive, but a
        // replacement never resurrects obsolete items.
        if let Some(target) = self.targets.get(relay) {
            items
                .repos
                .retain(|coordinate, _| target.repos.contains_key(coordinate));
            items
                .root_events
                .retain(|id| target.root_events.contains(id));
        } else {
            items = grasp_sync_model::PendingItems::default();
        }
        let full: Vec<_> = items
            .repos
            .iter()
            .filter(|(_, level)| **level == grasp_sync_model::SyncLevel::Full)
            .map(|(c, _)| c.clone())
            .collect();
        let state_only: Vec<_> = items
            .repos
            .iter()
            .filter(|(_, level)| **level == grasp_sync_model::SyncLevel::StateOnly)
            .map(|(c, _)| c.clone())
            .collect();
        let roots: Vec<_> = items.root_events.iter().copied().collect();
        let coverage = grasp_sync_filters::Coverage {
            full_repos: &full,
            state_only_repos: &state_only,
            roots: &roots,
            direct_members: &[],
            addressable_members: &[],
        };
        let mut filters = vec![grasp_sync_filters::announcement_filter(
            grasp_sync_filters::Window::Live,
        )];
        match coverage.live_filters(&grasp_sync_filters::FilterBudget::default()) {
            Ok(more) => filters.extend(more),
            Err(error) => tracing::warn!(%relay, %error, "live filters could not be built"),
        }
        filters
    }

    /// Closes every auxiliary (descendant) live group; descendants fall back to paced history
    /// until the next session re-derives the mode.
    pub(super) fn retire_auxiliary(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let closed = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.retire_auxiliary(now));
        if let Some(closed) = closed {
            tracing::debug!(%relay, closed, "descendant coverage moves to paced history");
        }
    }

    /// Queues a consolidation check when the core live groups passed the margin.
    fn check_consolidation(&mut self, relay: &RelayUrl) {
        let margin = self.config.consolidation_margin;
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.handle_live_changed(margin);
        }
    }

    /// Runs a queued consolidation once the relay has no pending batch, if core live groups
    /// still exceed the baseline by more than the margin.
    pub(super) fn run_queued_consolidation(&mut self, relay: &RelayUrl) {
        let pending = self.pending.has_pending(relay);
        let due = self
            .runtimes
            .get_mut(relay)
            .is_some_and(|r| r.machine.consolidation.take_due(pending));
        if !due {
            return;
        }
        let complete = self.complete_live_filters(relay);
        let complete = self.without_refused(relay, complete);
        let Some(machine) = self.runtimes.get(relay).map(|r| &r.machine) else {
            return;
        };
        let Some((baseline, _)) = machine
            .plan_live_from_scratch(complete)
            .and_then(|planned| split_or_log(relay, planned))
        else {
            return;
        };
        let margin = self.config.consolidation_margin;
        let fragmented = machine.live_fragmented(baseline.open.len(), margin);
        if let Some(Fragmented { core, baseline }) = fragmented {
            tracing::info!(%relay, core, baseline, margin, "live coverage is fragmented; consolidating");
            self.consolidate(relay);
        }
    }

    /// Scenario 4: rebuilds live coverage from confirmed state (no historic sync), then the
    /// diff adds whatever is new.
    fn consolidate(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.stats.consolidations += 1;
        }
        self.forget_pending(relay);
        self.rebuild_live(relay);
        self.recompute(relay);
        self.drive_queue(relay);
    }

    /// Replaces the whole core live set with the complete set packed from scratch under the
    /// current budgets (a consolidation, or after a learned byte cap). Auxiliary groups are
    /// retired first and never enter the rollback; if admission fails the old groups are
    /// restored.
    pub(super) fn rebuild_live(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let deferred = self
            .runtimes
            .get_mut(relay)
            .is_some_and(|r| r.machine.defer_rebuild(now));
        if deferred {
            tracing::debug!(%relay, "the live rebuild waits for the query-rate cooldown");
            return;
        }
        self.retire_auxiliary(relay);
        let complete = self.complete_live_filters(relay);
        let complete = self.without_refused(relay, complete);
        let Some(planned) = self
            .runtimes
            .get(relay)
            .and_then(|r| r.machine.plan_live_rebuild(complete))
        else {
            return;
        };
        let Some((plan, overflow)) = split_or_log(relay, planned) else {
            tracing::warn!(%relay, "live coverage could not be planned; keeping the groups held");
            return;
        };
        let catch_up = catch_up_filters(&plan);
        match self.apply_live_plan(relay, plan) {
            PlanOutcome::Applied => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.catch_up.clear_filters();
                }
                self.hand_to_catch_up(relay, catch_up);
                // The live set was packed from scratch: the extra connections hold what the
                // session does not, packed anew on the connections already open; none stays
                // open when the session holds everything.
                if overflow.is_empty() {
                    self.close_lanes(relay);
                } else {
                    self.repack_lanes(relay, overflow);
                }
            }
            PlanOutcome::RolledBack => {
                // The ledger kept the slots transient subscriptions hold: the groups held stay
                // (and the extra connections and the catch-up with them), and the rebuild is
                // tried again once they may have been released.
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.handle_rebuild_rolled_back(now);
                }
            }
            PlanOutcome::Deferred => {}
        }
    }
}
