//! NIP-77 historic sync: each filter of a fresh-start batch is reconciled in a dry-run round
//! (a background job holding a negentropy permit from the ledger, a global history slot, and
//! passing both gates); the IDs the relay has and the store lacks are then fetched by exact-ID
//! REQs registered in the same pending batch. A round's "have" set is read from the store by a
//! preparation job while the round waits in the queue, and the slot is taken at the pacing
//! decision, so the NEG-OPEN is handed to the transport at the instant the gate counted. A
//! failed, unsupported or stalled round, or a failed store read, falls back to grouped REQ+EOSE
//! for that batch; a relay that advertises IDs it cannot serve gets the semantic fallback; what
//! stays missing goes to the missing-event recovery index. While a session does not know
//! whether its relay speaks NIP-77, its first round is a probe with a short first-answer
//! deadline and the rest wait for it; once the relay is known not to speak it (NIP-11, the
//! probe, an "unsupported" answer), the queued rounds and every later batch go REQ+EOSE.

use std::collections::BTreeSet;
use std::sync::Arc;

use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::{BatchId, PendingItems, RelayUrl, SyncMethod};
use nostr::{EventId, Filter, SubscriptionId, Timestamp};

use super::Actor;
use super::history::FilterCeiling;
use super::holdings::{holdings_diff, holdings_report, read_holdings};
use crate::boundary::EventStore;
use crate::error::StoreError;
use crate::holdings::{HoldingsMemory, MAX_NEW_IDS_PER_ROUND};
use crate::machine::descendant_coverage::MemberRecord;
use crate::machine::job_reports::{HaveSetRead, HeldRoute};
use crate::machine::jobs::{HaveSet, HaveSource, Job};
use crate::machine::neg_batch::{
    Drained, HistoryRoute, NegBatch, RelayFacts, RoundsDone, first_sync_max_held,
};
use crate::machine::neg_rounds::{NegStop, RoundEnded, prepare_ahead};
use crate::negentropy::FallbackReason;
use crate::session::{SessionHandle, SessionKey};
use crate::transport::{NegentropyError, RelaySession, RoundLimits};

/// What a background job reports to the actor.
#[derive(Debug)]
pub(crate) enum JobReport {
    /// A queued round's "have" set was read from the store, or the read failed.
    NegentropyPrepared {
        key: SessionKey,
        subscription_id: SubscriptionId,
        have: Result<HaveSet, StoreError>,
    },
    /// The events a new batch's filters match in the store, up to its
    /// [`first_sync_max_held`] (see [`EngineConfig::first_sync_by_req`](crate::EngineConfig)), or the read failed.
    CoverageHeld {
        key: SessionKey,
        batch: BatchId,
        held: Result<Vec<EventId>, StoreError>,
    },
    /// A negentropy round ended: the IDs the relay holds that the store neither holds nor
    /// rejected, or why there is no diff.
    NegentropyRound {
        key: SessionKey,
        subscription_id: SubscriptionId,
        result: Result<Vec<EventId>, NegentropyError>,
        /// What the relay holds, for a round that completed and reports it: a round over the
        /// relay's holdings (of its "have" set and of the new IDs the store holds already), or
        /// a named round while the relay's holdings are learned (of its "have" set).
        held: Option<Vec<(EventId, Timestamp)>>,
    },
    /// A round over the relay's holdings will not run: the relay was found too large for one,
    /// or the store holds more of its coverage than holdings keep.
    HoldingsDeclined {
        key: SessionKey,
        subscription_id: SubscriptionId,
    },
    /// One page of the direct members the store holds of roots the self feed brought.
    StoredMembers(Vec<MemberRecord>),
}

impl Actor {
    /// Opens a batch reconciled by NIP-77, or `None` when NIP-77 is off for this session or
    /// the relay does not speak it (the caller then uses REQ+EOSE).
    pub(super) fn open_negentropy_batch(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
        filters: Vec<Filter>,
    ) -> Option<BatchId> {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.nip77.handle_time(now);
        }
        let allowed = self.fallbacks.nip77_enabled(relay)
            && self
                .runtimes
                .get(relay)
                .is_some_and(|r| r.machine.nip77_rounds_allowed());
        if !allowed || filters.is_empty() {
            return None;
        }
        let max_held = first_sync_max_held(&items);
        let batch = self
            .pending
            .open_batch(relay, items, SyncMethod::Negentropy);
        let check_held = self.config.first_sync_by_req;
        let counter = &mut self.next_subscription;
        let queued = self
            .runtimes
            .get_mut(relay)?
            .machine
            .queue_negentropy_batch(batch, filters, check_held, max_held, || {
                super::new_subscription_id(counter, "neg")
            })?;
        let rounds = queued
            .into_iter()
            .map(|(subscription_id, filter)| (subscription_id, vec![filter]))
            .collect();
        self.register_queued(relay, batch, rounds);
        Some(batch)
    }

    /// Asks for the store reads of the rounds at the head of the queue that have none yet.
    fn prepare_rounds(&mut self, relay: &RelayUrl) {
        if let Some(machine) = self.runtimes.get_mut(relay).map(|r| &mut r.machine)
            && let Some(session) = machine.session.as_mut()
        {
            prepare_ahead(session, &mut machine.jobs);
        }
    }

    /// Asks the relay's machine to start its queued rounds
    /// ([`RelayMachine::drive_negentropy`](crate::machine::relay::RelayMachine)), each queued
    /// as a [`Job::RunRound`] and started at the end of the step, then counts and logs them and
    /// falls back the batches it names: all queued ones once the relay is known not to speak
    /// NIP-77, the head's when the reactive gate refuses NIP-77.
    pub(super) fn drive_negentropy(&mut self, relay: &RelayUrl) {
        self.prepare_rounds(relay);
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let drive = runtime
            .machine
            .drive_negentropy(now, &mut self.history_slots);
        for round in &drive.started {
            self.fallbacks.handle_round_started();
            if round.probe {
                tracing::debug!(%relay, batch = round.batch.0, "negentropy probe starts");
            } else {
                tracing::debug!(%relay, batch = round.batch.0, "negentropy round starts");
            }
        }
        match drive.stop {
            NegStop::Waiting => {}
            NegStop::NoHistorySlot => {
                tracing::debug!(%relay, "negentropy round waits for a history slot");
            }
            NegStop::NoPermit(error) => {
                tracing::warn!(%relay, %error, "negentropy round could not take a permit");
            }
            NegStop::Off { reason, batches } => {
                tracing::info!(%relay, reason = reason.label(), batches = batches.len(),
                    "relay does not speak NIP-77; queued rounds fall back to REQ+EOSE");
                for batch in batches {
                    self.fall_back_rounds(relay, batch, reason.fallback_reason());
                }
                self.drive_queue(relay);
            }
            NegStop::Rejected { batch } => {
                // NIP-77 is off or a cooldown is on: the rounds left become REQ+EOSE.
                self.fallbacks.handle_query_rate_refusal(relay);
                self.fall_back_rounds(relay, batch, FallbackReason::RateLimited);
                self.drive_queue(relay);
            }
        }
    }

    /// A background job finished.
    pub(super) fn handle_job_report(&mut self, report: JobReport) {
        match report {
            JobReport::NegentropyPrepared {
                key,
                subscription_id,
                have,
            } => self.handle_have_set(&key, &subscription_id, have),
            JobReport::CoverageHeld { key, batch, held } => self.handle_held(&key, batch, held),
            JobReport::NegentropyRound {
                key,
                subscription_id,
                result,
                held,
            } => {
                // Every performed round reports once, from a replaced session too: its slot
                // is free before the drive that follows.
                self.history_slots.release();
                self.handle_held_report(&key.relay, &subscription_id, &result, held);
                self.handle_round_report(&key, &subscription_id, result);
            }
            JobReport::HoldingsDeclined {
                key,
                subscription_id,
            } => {
                let declined = self
                    .runtimes
                    .get(&key.relay)
                    .and_then(|r| r.machine.holdings_round.as_ref())
                    .is_some_and(|round| round.subscription_id == subscription_id);
                if declined {
                    self.holdings_round_failed(&key.relay);
                }
            }
            JobReport::StoredMembers(members) => self.handle_stored_members(members),
        }
    }

    /// Whether history asked of `relay` reconciles what the store holds rather than fills it:
    /// the store held events when the engine started, or the relay completed a historic sync.
    pub(super) fn reconciling(&self, relay: &RelayUrl) -> bool {
        !self.new_store
            || self
                .relays
                .get(relay)
                .is_some_and(|state| state.historic_sync_completed_at.is_some())
    }

    /// The store said how much of a new batch's coverage it holds. A batch the store barely
    /// holds is a first sync of that coverage: REQ+EOSE does it in fewer starts (several
    /// filters per REQ, where NIP-77 spends one round per filter), so the whole batch goes by
    /// REQ+EOSE and NIP-77 stays for reconciling coverage the store holds. "Barely" is fewer
    /// than [`first_sync_max_held`] events for a batch of several filters during the first
    /// sync of a store that was empty when the engine started, on a relay that has not
    /// completed a historic sync yet and delivered none of them so far (so REQ+EOSE sends
    /// again at most that many events, which other relays delivered first, to save starts;
    /// the relay's own deliveries, such as replies that tag both a repository and a root,
    /// would be pure repeats). It is none at all for a one-filter batch (one round or one
    /// REQ: nothing to save), over a store that held events at start (a restart over a
    /// complete store sends nothing again), and for a relay's reconciliations (the daily one,
    /// after a long disconnect). A batch of several filters goes by REQ+EOSE only where the
    /// relay is known to take several filters per REQ, and then packs at most what it is
    /// known to take ([`FilterCeiling::Trusted`]): the filter ceiling where that is known
    /// (advertised, stated by a refusal, or proven), else the largest REQ the relay accepted
    /// in this session; a REQ over a guessed ceiling may be refused. Otherwise, or when the
    /// read failed, the batch's rounds go ahead. Ignored for a replaced session or a batch
    /// that is gone.
    fn handle_held(
        &mut self,
        key: &SessionKey,
        batch: BatchId,
        held: Result<Vec<EventId>, StoreError>,
    ) {
        let relay = key.relay.clone();
        // REQ+EOSE saves starts only where one REQ carries several filters; it packs no more
        // than the relay is known to take, so it risks no refusal.
        let several_per_req = self
            .runtimes
            .get(&relay)
            .and_then(|r| r.machine.history_pack_limits(FilterCeiling::Trusted))
            .is_some_and(|limits| limits.max_filters_per_req > 1);
        let reconciling = self.reconciling(&relay);
        let facts = RelayFacts {
            several_per_req,
            reconciling,
        };
        let Some(runtime) = self.runtimes.get_mut(&relay) else {
            return;
        };
        let Some(HeldRoute { route, dropped }) =
            runtime
                .machine
                .handle_held(key, batch, held.as_deref().ok(), facts)
        else {
            return;
        };
        let held_count = held.as_ref().map(|ids| ids.len()).unwrap_or_default();
        if route == HistoryRoute::Nip77 {
            let filters = runtime
                .machine
                .neg_batches
                .get(&batch)
                .map_or(0, |neg| neg.filters.len());
            let delivered_here = held
                .as_ref()
                .is_ok_and(|ids| !runtime.machine.delivered.delivered_none_of(ids));
            tracing::debug!(%relay, %batch, filters, reconciling, several_per_req,
                held = held_count, delivered_here, "the batch is reconciled by NIP-77");
            self.drive_queue(&relay);
            return;
        }
        for id in &dropped {
            let _ = self.pending.resolve_subscription(&relay, id);
        }
        tracing::debug!(%relay, %batch, filters = dropped.len(), held = held_count,
            "the store barely holds this coverage: first sync by REQ+EOSE");
        self.fall_back_to_req(&relay, batch, FilterCeiling::Trusted);
    }

    /// A queued round's "have" set was read. Ignored when the round is no longer queued in
    /// that session (the session was replaced, the batch fell back or was abandoned); a failed
    /// read ends the round as a failed round, so its batch falls back to REQ+EOSE.
    fn handle_have_set(
        &mut self,
        key: &SessionKey,
        subscription_id: &SubscriptionId,
        have: Result<HaveSet, StoreError>,
    ) {
        let relay = key.relay.clone();
        let holdings_round = self
            .runtimes
            .get(&relay)
            .and_then(|r| r.machine.holdings_round.as_ref())
            .is_some_and(|round| round.subscription_id == *subscription_id);
        if holdings_round && let Err(error) = &have {
            tracing::warn!(%relay, %error, "the relay's holdings could not be read");
            self.holdings_round_failed(&relay);
            return;
        }
        let have = have.map_err(|error| NegentropyError::Protocol(format!("store: {error}")));
        let Some(runtime) = self.runtimes.get_mut(&relay) else {
            return;
        };
        match runtime.machine.handle_have_set(key, subscription_id, have) {
            HaveSetRead::Stale => {}
            HaveSetRead::Read => self.drive_queue(&relay),
            HaveSetRead::Failed { batch, error } => {
                self.round_ended(&relay, batch, subscription_id, Err(error));
            }
        }
    }

    /// A round job reported: release its permit and record its outcome; an `auth-required:`
    /// refusal goes to `auth.rs`.
    fn handle_round_report(
        &mut self,
        key: &SessionKey,
        subscription_id: &SubscriptionId,
        result: Result<Vec<EventId>, NegentropyError>,
    ) {
        let relay = key.relay.clone();
        let now = self.now();
        let Some(RoundEnded { batch, before_auth }) =
            self.runtimes.get_mut(&relay).and_then(|runtime| {
                runtime
                    .machine
                    .handle_round_ended(now, key, subscription_id, &result)
            })
        else {
            return;
        };
        if matches!(result, Err(NegentropyError::AuthRequired(_)))
            && self.is_holdings_batch(&relay, batch)
        {
            // Never parked or paused as refused coverage: a probe of that would be a REQ
            // over `{}`. The named rounds meet the relay's AUTH on their own.
            self.holdings_round_failed(&relay);
            return;
        }
        if let Err(NegentropyError::AuthRequired(text)) = &result {
            // Reconciled again by NIP-77 after the session's AUTH, or paused: never a REQ.
            self.handle_round_auth_refusal(&relay, batch, subscription_id, text, before_auth);
            self.drive_queue(&relay);
            return;
        }
        self.round_ended(&relay, batch, subscription_id, result);
    }

    /// A round of `batch` ended with `result`: keep its diff, or mark the batch for the
    /// REQ+EOSE fallback; then resolve its subscription.
    fn round_ended(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        subscription_id: &SubscriptionId,
        result: Result<Vec<EventId>, NegentropyError>,
    ) {
        if !self.runtimes.contains_key(relay) {
            return;
        }
        let now = self.now();
        let mut rate_text = None;
        match &result {
            Ok(_) => self.fallbacks.handle_round_completed(),
            Err(error) => {
                if let NegentropyError::RateLimited(text) = error {
                    rate_text = Some(text.clone());
                    self.fallbacks.handle_query_rate_refusal(relay);
                }
                if let Some(reason) = FallbackReason::from_error(error)
                    && self.fallbacks.handle_fallback(relay, reason)
                {
                    tracing::warn!(%relay, %error, "negentropy unavailable; falling back to REQ+EOSE");
                }
            }
        }
        let rate_refused = self
            .runtimes
            .get_mut(relay)
            .and_then(|runtime| runtime.machine.handle_round_result(now, batch, result));
        if let (Some((refusal, learned)), Some(text)) = (rate_refused, rate_text) {
            // Counted, a rate-limit pause and the reactive cooldown, as for a refused REQ.
            self.report_refusal(relay, &refusal, &text);
            super::refusal::log_learned(relay, learned);
        }
        if let Some(resolved) = self.pending.resolve_subscription(relay, subscription_id)
            && resolved.batch_complete
        {
            self.negentropy_rounds_done(relay, batch);
        }
        self.drive_queue(relay);
    }

    /// Every round of a batch ended: fall back, confirm, or hydrate what is missing.
    fn negentropy_rounds_done(&mut self, relay: &RelayUrl, batch: BatchId) {
        let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.neg_batches.get_mut(&batch))
        else {
            return;
        };
        let done = neg.handle_rounds_done();
        if matches!(done, RoundsDone::Fail | RoundsDone::FallBack)
            && self.is_holdings_batch(relay, batch)
        {
            // Never a REQ over `{}`: named rounds instead.
            self.holdings_round_failed(relay);
            return;
        }
        match done {
            RoundsDone::Fail => {
                self.fail_batch(relay, batch, "a negentropy round was refused by policy");
            }
            RoundsDone::FallBack => self.fall_back_to_req(relay, batch, FilterCeiling::Learned),
            RoundsDone::Confirm => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.neg_batches.remove(&batch);
                }
                self.finish_holdings_round(relay, batch);
                self.confirm(relay, batch);
            }
            RoundsDone::Hydrate(ids) => self.queue_exact_fetch(
                relay,
                batch,
                &ids,
                PermitClass::NegentropyHydration,
                StartKind::Hydration,
            ),
        }
    }

    /// Every subscription of `batch` reached EOSE: confirm it, or decide its hydration.
    pub(super) fn batch_drained(&mut self, relay: &RelayUrl, batch: BatchId) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(neg) = runtime.machine.neg_batches.remove(&batch) else {
            self.confirm(relay, batch);
            return;
        };
        if let Some((advertised, delivered, first_pass)) = neg.hydration_progress() {
            tracing::debug!(%relay, batch = batch.0, advertised, delivered, first_pass, "hydration pass done");
        }
        let holdings = self.is_holdings_batch(relay, batch);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        match neg.handle_drained() {
            Drained::Confirm => {
                self.finish_holdings_round(relay, batch);
                self.confirm(relay, batch);
            }
            Drained::SemanticFallback { .. } if holdings => {
                // The batch names no coverage to fall back to: the fresh start's named
                // batches have their semantic fallback.
                tracing::info!(%relay, "relay advertises events it does not serve by id");
                self.holdings_round_failed(relay);
            }
            Drained::RecoveryDone { pass } => {
                let residual: BTreeSet<EventId> = pass.residual().into_iter().collect();
                // Delivered but not saved is not recovered.
                let unsaved = self.unsaved_ids(relay, batch).cloned().unwrap_or_default();
                let delivered: Vec<EventId> = pass
                    .advertised()
                    .iter()
                    .filter(|id| !residual.contains(id) && !unsaved.contains(id))
                    .copied()
                    .collect();
                self.recovery.handle_attempt_result(relay, delivered, now);
                self.confirm(relay, batch);
                self.apply_recovery_outcomes();
            }
            Drained::SemanticFallback {
                next,
                advertised,
                delivered,
            } => {
                tracing::info!(%relay, advertised, delivered,
                    "relay advertises events it does not serve by id; semantic fallback");
                runtime.machine.neg_batches.insert(batch, next);
                self.fall_back_to_req(relay, batch, FilterCeiling::Learned);
            }
            Drained::Retry { next, ids } => {
                // The retry is a pass of its own over the residual: no progress in it fails
                // the batch.
                runtime.machine.neg_batches.insert(batch, next);
                self.queue_exact_fetch(relay, batch, &ids, PermitClass::Retry, StartKind::Retry);
                self.drive_queue(relay);
            }
            Drained::Failed { residual } => {
                tracing::warn!(%relay, missing = residual.len(), "hydration made no progress; ids go to recovery");
                let _ = self.pending.mark_failed(relay, batch);
                self.recovery.handle_failed_batch(relay, residual, now);
                self.finish_holdings_round(relay, batch);
                self.confirm(relay, batch);
            }
        }
    }

    /// A round of `batch` stays refused by policy (the caller paused its filter): the batch's
    /// other rounds go on by NIP-77, where a REQ for them might be refused the same way, and
    /// once they all ended the batch fails, so nothing it covers is confirmed.
    pub(super) fn hold_refused_round(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        subscription_id: &SubscriptionId,
    ) {
        if let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.neg_batches.get_mut(&batch))
        {
            neg.handle_round_refused();
        }
        if let Some(resolved) = self.pending.resolve_subscription(relay, subscription_id)
            && resolved.batch_complete
        {
            self.negentropy_rounds_done(relay, batch);
        }
    }

    /// Turns a negentropy batch into grouped REQ+EOSE over its semantic filters, at most
    /// `ceiling` filters per REQ. The daily run over a relay's holdings never falls back to
    /// REQ+EOSE (it names no coverage): it becomes the fresh start.
    fn fall_back_to_req(&mut self, relay: &RelayUrl, batch: BatchId, ceiling: FilterCeiling) {
        if self.is_holdings_batch(relay, batch) {
            self.holdings_round_failed(relay);
            return;
        }
        let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.neg_batches.remove(&batch))
        else {
            return;
        };
        if !self.queue_req_groups(relay, batch, neg.filters, ceiling) {
            // Nothing to send: the batch confirms as is.
            if self
                .pending
                .batches(relay)
                .iter()
                .any(|b| b.batch_id == batch && b.outstanding_subs.is_empty())
            {
                self.confirm(relay, batch);
            }
        }
        self.drive_queue(relay);
    }

    /// The rounds of `batch` still queued fall back (a gate refused NIP-77).
    pub(super) fn fall_back_rounds(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        reason: FallbackReason,
    ) {
        if self.fallbacks.handle_fallback(relay, reason) {
            tracing::warn!(%relay, "negentropy disabled for this session; falling back to REQ+EOSE");
        }
        let dropped = self
            .runtimes
            .get_mut(relay)
            .map(|r| r.machine.drop_queued_rounds(batch))
            .unwrap_or_default();
        let mut complete = false;
        for id in dropped {
            if let Some(resolved) = self.pending.resolve_subscription(relay, &id) {
                complete |= resolved.batch_complete;
            }
        }
        if complete {
            self.fall_back_to_req(relay, batch, FilterCeiling::Learned);
        }
    }

    /// Queues exact-ID REQs for `ids` in `batch`
    /// ([`RelayMachine::queue_exact_fetch`](crate::machine::relay::RelayMachine)) and registers
    /// them in it before anything is sent.
    fn queue_exact_fetch(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        ids: &[EventId],
        class: PermitClass,
        kind: StartKind,
    ) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let counter = &mut self.next_subscription;
        let queued = runtime
            .machine
            .queue_exact_fetch(batch, ids, class, kind, || {
                super::new_subscription_id(counter, "ids")
            });
        let queued = match queued {
            Ok(queued) => queued,
            Err(error) => {
                tracing::warn!(%relay, %error, "exact-id filters could not be built");
                return;
            }
        };
        self.register_queued(relay, batch, queued);
    }

    /// The recovery tick: start due attempts, apply promotions and expiries, and fetch rejected
    /// events the store released (their dependency arrived) from the relays that sent them.
    pub(super) fn drive_recovery(&mut self) {
        let now = self.now();
        for (relay, ids) in self.ingestor.store().poll_refetch() {
            let connected = self
                .runtimes
                .get(&relay)
                .is_some_and(|r| r.machine.session.is_some());
            if !connected || ids.is_empty() {
                continue; // the store reports them again later
            }
            let batch =
                self.pending
                    .open_batch(&relay, PendingItems::default(), SyncMethod::ReqEose);
            self.queue_exact_fetch(
                &relay,
                batch,
                &ids,
                PermitClass::ExactIdFetch,
                StartKind::Dependency,
            );
            self.drive_queue(&relay);
        }
        while let Some(attempt) = self.recovery.poll_attempt(now) {
            let relay = attempt.relay.clone();
            let connected = self
                .runtimes
                .get(&relay)
                .is_some_and(|r| r.machine.session.is_some());
            if !connected {
                self.recovery.handle_attempt_result(&relay, Vec::new(), now);
                continue;
            }
            let batch =
                self.pending
                    .open_batch(&relay, PendingItems::default(), SyncMethod::ReqEose);
            if let Some(runtime) = self.runtimes.get_mut(&relay) {
                runtime.machine.neg_batches.insert(
                    batch,
                    NegBatch::recovery(attempt.ids.iter().copied().collect()),
                );
            }
            self.queue_exact_fetch(
                &relay,
                batch,
                &attempt.ids,
                PermitClass::ExactIdFetch,
                StartKind::Retry,
            );
            self.drive_queue(&relay);
        }
        self.apply_recovery_outcomes();
    }

    fn apply_recovery_outcomes(&mut self) {
        while let Some(relay) = self.recovery.poll_promotion() {
            let state = self.relays.register(&relay);
            if state.connection_status
                == grasp_sync_model::ConnectionStatus::ConnectedHistoricSyncFailures
            {
                state.connection_status = grasp_sync_model::ConnectionStatus::Connected;
                state.batch_failed = false;
                tracing::info!(%relay, "every missing event recovered; relay promoted to connected");
            }
        }
        while let Some(expiry) = self.recovery.poll_expiry() {
            tracing::warn!(relay = %expiry.relay, dropped = expiry.ids.len(),
                "missing events not recovered after 12 attempts; left to the daily sync");
        }
    }

    /// Drops the session's negentropy work (fresh start or teardown).
    pub(super) fn abandon_negentropy(&mut self, relay: &RelayUrl) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.abandon_negentropy(now);
        }
    }

    /// Forgets the negentropy state of a failed batch.
    pub(super) fn forget_negentropy_batch(&mut self, relay: &RelayUrl, batch: BatchId) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.forget_negentropy_batch(batch);
        }
    }
}

impl Actor {
    /// Starts the background jobs this step decided, each relay's in order, as tasks that
    /// report back on the jobs channel. A job whose session has ended since is dropped (its
    /// report would be ignored), and a dropped round gives its history slot back.
    pub(super) fn perform_jobs(&mut self) {
        for runtime in self.runtimes.values_mut() {
            while let Some((key, job)) = runtime.machine.poll_job() {
                let Some(handle) = runtime.connection_of(&key) else {
                    if matches!(job, Job::RunRound { .. }) {
                        self.history_slots.release();
                    }
                    continue;
                };
                let context = JobContext {
                    store: self.ingestor.store(),
                    jobs: self.jobs_tx.clone(),
                    holdings: self.holdings.clone(),
                    unix_now: self.clock.unix_now(),
                };
                perform_job(key, job, handle, context);
            }
        }
    }
}

/// What a job needs besides its session: the store, the channel it reports on, where relays'
/// holdings are kept, and the time it was started.
struct JobContext {
    store: Arc<dyn EventStore>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
    holdings: Option<Arc<dyn HoldingsMemory>>,
    unix_now: Timestamp,
}

/// Starts `job` of the session `key` (whose connection is `handle`) as a task that reports
/// back on `context.jobs`.
fn perform_job(key: SessionKey, job: Job, handle: &SessionHandle, context: JobContext) {
    let JobContext {
        store,
        jobs,
        holdings,
        unix_now,
    } = context;
    match job {
        Job::ReadHeld {
            batch,
            filters,
            max_held,
        } => {
            tokio::spawn(read_held(key, batch, filters, max_held, store, jobs));
        }
        Job::ReadHaveSet {
            subscription_id,
            filter,
            source: HaveSource::Store,
        } => {
            tokio::spawn(read_have_set(key, subscription_id, filter, store, jobs));
        }
        Job::ReadHaveSet {
            subscription_id,
            source: HaveSource::Holdings { coverage },
            ..
        } => {
            tokio::spawn(async move {
                let read = read_holdings(&key, coverage, unix_now, &store, holdings).await;
                let report = match read {
                    Some(have) => JobReport::NegentropyPrepared {
                        key,
                        subscription_id,
                        have,
                    },
                    None => JobReport::HoldingsDeclined {
                        key,
                        subscription_id,
                    },
                };
                let _ = jobs.send(report).await;
            });
        }
        Job::RunRound {
            subscription_id,
            filter,
            have,
            probe,
            holdings,
            learn,
        } => {
            // A round over `{}` may take a large relay longer to answer than a probe waits:
            // it gets the normal deadline even as the session's probe.
            let limits = if probe && !holdings {
                RoundLimits::PROBE
            } else {
                RoundLimits {
                    probe,
                    ..RoundLimits::NORMAL
                }
            };
            let session = handle.session();
            let round = Round {
                key,
                subscription_id,
                filter,
                have,
                limits,
            };
            if holdings {
                tokio::spawn(run_holdings_round(round, store, session, jobs));
            } else {
                tokio::spawn(run_round(round, learn, store, session, jobs));
            }
        }
    }
}

/// Reads the IDs of the events the store holds that `filters` match, up to `max_held` (an
/// event two filters match is read twice), and reports them.
async fn read_held(
    key: SessionKey,
    batch: BatchId,
    filters: Vec<Filter>,
    max_held: usize,
    store: Arc<dyn EventStore>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
) {
    let mut held: Result<Vec<EventId>, StoreError> = Ok(Vec::new());
    for filter in filters {
        let Ok(ids) = &mut held else { break };
        if ids.len() >= max_held {
            break;
        }
        match store
            .negentropy_items(filter.limit(max_held - ids.len()))
            .await
        {
            Ok(items) => ids.extend(items.into_iter().map(|(id, _)| id)),
            Err(error) => held = Err(error),
        }
    }
    let _ = jobs
        .send(JobReport::CoverageHeld { key, batch, held })
        .await;
}

/// Reads a queued round's "have" set and reports it.
async fn read_have_set(
    key: SessionKey,
    subscription_id: SubscriptionId,
    filter: Filter,
    store: Arc<dyn EventStore>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
) {
    let have = store.negentropy_items(filter).await;
    // The actor may have stopped; then nobody needs the result.
    let _ = jobs
        .send(JobReport::NegentropyPrepared {
            key,
            subscription_id,
            have,
        })
        .await;
}

/// A round decided by the machine: its session, subscription, filter, "have" set and limits.
struct Round {
    key: SessionKey,
    subscription_id: SubscriptionId,
    filter: Filter,
    have: HaveSet,
    limits: RoundLimits,
}

/// One dry-run round over a "have" set read beforehand, under `limits`: the NEG-OPEN goes out
/// at once, then the diff, and the IDs neither stored nor rejected (an event stored since the
/// read is dropped here). With `learn`, it also reports what the relay holds of the "have"
/// set. It holds one of the actor's history slots, taken at its pacing decision and given
/// back when this report is handled.
async fn run_round(
    round: Round,
    learn: bool,
    store: Arc<dyn EventStore>,
    session: Arc<dyn RelaySession>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
) {
    let Round {
        key,
        subscription_id,
        filter,
        have,
        limits,
    } = round;
    let mut held = None;
    let result = async {
        let kept = learn.then(|| have.clone());
        let diff = session.negentropy_diff(filter, have, limits).await?;
        held = kept.map(|have| {
            have.into_iter()
                .filter(|(id, _)| diff.relay_lacks.binary_search(id).is_err())
                .collect()
        });
        let mut unknown = Vec::with_capacity(diff.missing.len());
        let mut known = Vec::new();
        for id in diff.missing {
            if store.contains(&id).await.unwrap_or(false) {
                known.push(id);
            } else {
                unknown.push(id);
            }
        }
        // The "have" set holds stored events only; those the relay holds and the store
        // rejected come back as missing, and stay rejected for as long as the relay holds them.
        super::holdings::renew_rejected(&store, &known).await;
        Ok(unknown)
    }
    .await;
    // The actor may have stopped; then nobody needs the result.
    let _ = jobs
        .send(JobReport::NegentropyRound {
            key,
            subscription_id,
            result,
            held,
        })
        .await;
}

/// A round over the relay's holdings: like [`run_round`], taking at most
/// [`MAX_NEW_IDS_PER_ROUND`] new IDs, and reporting what the relay holds besides the IDs to
/// fetch (see [`holdings_diff`]).
async fn run_holdings_round(
    round: Round,
    store: Arc<dyn EventStore>,
    session: Arc<dyn RelaySession>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
) {
    let limits = round.limits.taking_at_most(MAX_NEW_IDS_PER_ROUND);
    let result = async {
        let diff = session
            .negentropy_diff(round.filter, round.have.clone(), limits)
            .await?;
        holdings_diff(round.have, diff, &store)
            .await
            .map_err(|error| NegentropyError::Protocol(format!("store: {error}")))
    }
    .await;
    // The actor may have stopped; then nobody needs the result.
    let _ = jobs
        .send(holdings_report(round.key, round.subscription_id, result))
        .await;
}
