//! NIP-77 historic sync: each filter of a fresh-start batch is reconciled in a dry-run round
//! (a background job holding a negentropy permit from the ledger and passing both gates);
//! the IDs the relay has and the store lacks are then fetched by exact-ID REQs registered in
//! the same pending batch. A failed, unsupported or stalled round falls back to grouped
//! REQ+EOSE for that batch; a relay that advertises IDs it cannot serve gets the semantic
//! fallback; what stays missing goes to the missing-event recovery index.

use std::collections::BTreeSet;
use std::sync::Arc;

use grasp_sync_filters::FilterBudget;
use grasp_sync_ledger::{
    NEGENTROPY_ROUND_CAP, PermitClass, ReleaseReason, StartDecision, StartKind,
};
use grasp_sync_model::{BatchId, PaginationState, PendingItems, RelayUrl, SyncMethod};
use nostr::{EventId, Filter, SubscriptionId};
use tokio::sync::Semaphore;

use super::Actor;
use super::runtime::QueuedStart;
use crate::boundary::EventStore;
use crate::negentropy::{FallbackReason, HydrationOutcome, HydrationPass};
use crate::session::SessionKey;
use crate::transport::{NEGENTROPY_DEADLINE, NegentropyError, RelaySession};

/// What a background job reports to the actor.
#[derive(Debug)]
pub(crate) enum JobReport {
    /// A negentropy round ended: the IDs the relay holds that the store neither holds nor
    /// rejected, or why there is no diff.
    NegentropyRound {
        key: SessionKey,
        subscription_id: SubscriptionId,
        result: Result<Vec<EventId>, NegentropyError>,
    },
}

/// A negentropy round waiting for a permit and the gates.
pub(super) struct NegRound {
    pub(super) subscription_id: SubscriptionId,
    pub(super) batch: BatchId,
    pub(super) filter: Filter,
}

/// The negentropy side of a pending batch.
pub(super) struct NegBatch {
    /// The batch's semantic filters, for the REQ+EOSE fallback.
    filters: Vec<Filter>,
    missing: BTreeSet<EventId>,
    fell_back: bool,
    phase: NegPhase,
}

enum NegPhase {
    Rounds,
    Hydrating {
        pass: HydrationPass,
        first_pass: bool,
    },
    Recovery {
        pass: HydrationPass,
    },
}

impl Actor {
    /// Opens a batch reconciled by NIP-77, or `None` when NIP-77 is off for this session (the
    /// caller then uses REQ+EOSE).
    pub(super) fn open_negentropy_batch(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
        filters: Vec<Filter>,
    ) -> Option<BatchId> {
        let allowed = self.fallbacks.nip77_enabled(relay)
            && self
                .runtimes
                .get(relay)
                .and_then(|r| r.session.as_ref())
                .is_some_and(|s| s.reactive.nip77_allowed());
        if !allowed || filters.is_empty() {
            return None;
        }
        let batch = self
            .pending
            .open_batch(relay, items, SyncMethod::Negentropy);
        let mut rounds = Vec::with_capacity(filters.len());
        for filter in &filters {
            let subscription_id = self.next_subscription_id("neg");
            let _ = self.pending.register_subscription(
                relay,
                batch,
                subscription_id.clone(),
                PaginationState::new([filter.clone()]),
            );
            rounds.push(NegRound {
                subscription_id,
                batch,
                filter: filter.clone(),
            });
        }
        let runtime = self.runtimes.get_mut(relay)?;
        runtime.neg_batches.insert(
            batch,
            NegBatch {
                filters,
                missing: BTreeSet::new(),
                fell_back: false,
                phase: NegPhase::Rounds,
            },
        );
        runtime.session.as_mut()?.neg_queue.extend(rounds);
        Some(batch)
    }

    /// Starts queued negentropy rounds while a round permit is free and both gates allow.
    pub(super) fn drive_negentropy(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let store = self.ingestor.store();
        let jobs = self.jobs_tx.clone();
        let slots = Arc::clone(&self.history_slots);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if runtime
            .health
            .sync_paused_until(now)
            .is_some_and(|until| until > now)
        {
            return;
        }
        let (Some(session), Some(ledger)) = (runtime.session.as_mut(), runtime.ledger.as_mut())
        else {
            return;
        };
        while let Some(front) = session.neg_queue.front() {
            let counts = ledger.counts();
            let cap = NEGENTROPY_ROUND_CAP.min(ledger.residual() + counts.negentropy_rounds());
            if ledger.residual() == 0 || counts.negentropy_rounds() >= cap {
                break;
            }
            let kind = StartKind::NegentropyRound;
            let decision = match session.background.poll_start(now, kind) {
                StartDecision::Ready => session.reactive.poll_start(now, kind),
                other => other,
            };
            match decision {
                StartDecision::Ready => {}
                StartDecision::NotBefore(at) => {
                    session.gate_wait = Some(session.gate_wait.map_or(at, |w| w.min(at)));
                    break;
                }
                StartDecision::Rejected(_) => {
                    // NIP-77 is off or a cooldown is on: the rounds left become REQ+EOSE.
                    let batch = front.batch;
                    self.fallbacks.handle_query_rate_refusal(relay);
                    let relay = relay.clone();
                    self.fall_back_rounds(&relay, batch, FallbackReason::RateLimited);
                    self.drive_queue(&relay);
                    return;
                }
            }
            let Some(round) = session.neg_queue.pop_front() else {
                break;
            };
            let permit = match ledger.acquire(
                now,
                ledger.generation(),
                PermitClass::NegentropyRound,
                round.subscription_id.clone(),
            ) {
                Ok(permit) => permit,
                Err(error) => {
                    tracing::warn!(%relay, %error, "negentropy round could not take a permit");
                    session.neg_queue.push_front(round);
                    break;
                }
            };
            self.fallbacks.handle_round_started();
            tracing::debug!(%relay, batch = round.batch.0, "negentropy round starts");
            let key = session.handle.key.clone();
            tokio::spawn(run_round(
                key,
                round.subscription_id.clone(),
                round.filter,
                Arc::clone(&store),
                session.handle.session(),
                Arc::clone(&slots),
                jobs.clone(),
            ));
            session
                .neg_in_flight
                .insert(round.subscription_id, (round.batch, permit));
        }
        runtime.note_peak();
    }

    /// A background job finished.
    pub(super) fn handle_job_report(&mut self, report: JobReport) {
        let JobReport::NegentropyRound {
            key,
            subscription_id,
            result,
        } = report;
        let relay = key.relay.clone();
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(&relay) else {
            return;
        };
        let (Some(session), Some(ledger)) = (runtime.session.as_mut(), runtime.ledger.as_mut())
        else {
            return;
        };
        if session.handle.key != key {
            return; // the session it belonged to is gone, and its permit with it
        }
        let Some((batch, permit)) = session.neg_in_flight.remove(&subscription_id) else {
            return;
        };
        let _ = ledger.handle_release(now, &permit, ReleaseReason::Closed);
        match result {
            Ok(missing) => {
                self.fallbacks.handle_round_completed();
                if let Some(neg) = runtime.neg_batches.get_mut(&batch) {
                    neg.missing.extend(missing);
                }
            }
            Err(error) => {
                if let NegentropyError::RateLimited(_) = error {
                    session.reactive.handle_query_rate_refusal(now);
                    self.fallbacks.handle_query_rate_refusal(&relay);
                }
                if let Some(reason) = FallbackReason::from_error(&error) {
                    if self.fallbacks.handle_fallback(&relay, reason) {
                        tracing::warn!(%relay, %error, "negentropy unavailable; falling back to REQ+EOSE");
                    }
                }
                if let Some(neg) = runtime.neg_batches.get_mut(&batch) {
                    neg.fell_back = true;
                }
            }
        }
        if let Some(resolved) = self.pending.resolve_subscription(&relay, &subscription_id) {
            if resolved.batch_complete {
                self.negentropy_rounds_done(&relay, batch);
            }
        }
        self.drive_queue(&relay);
    }

    /// Every round of a batch ended: fall back, confirm, or hydrate what is missing.
    fn negentropy_rounds_done(&mut self, relay: &RelayUrl, batch: BatchId) {
        let Some(neg) = self
            .runtimes
            .get(relay)
            .and_then(|r| r.neg_batches.get(&batch))
        else {
            return;
        };
        if neg.fell_back {
            self.fall_back_to_req(relay, batch);
            return;
        }
        if neg.missing.is_empty() {
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                runtime.neg_batches.remove(&batch);
            }
            self.confirm(relay, batch);
            return;
        }
        let pass = HydrationPass::new(neg.missing.clone());
        let ids: Vec<EventId> = pass.advertised().iter().copied().collect();
        self.queue_exact_fetch(
            relay,
            batch,
            &ids,
            PermitClass::NegentropyHydration,
            StartKind::Hydration,
        );
        if let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.neg_batches.get_mut(&batch))
        {
            neg.phase = NegPhase::Hydrating {
                pass,
                first_pass: true,
            };
        }
    }

    /// An exact-ID fetch delivered `id` for `batch`.
    pub(super) fn handle_exact_delivery(&mut self, relay: &RelayUrl, batch: BatchId, id: EventId) {
        if let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.neg_batches.get_mut(&batch))
        {
            match &mut neg.phase {
                NegPhase::Hydrating { pass, .. } | NegPhase::Recovery { pass } => {
                    pass.handle_delivered(id);
                }
                NegPhase::Rounds => {}
            }
        }
    }

    /// Every subscription of `batch` reached EOSE: confirm it, or decide its hydration.
    pub(super) fn batch_drained(&mut self, relay: &RelayUrl, batch: BatchId) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(neg) = runtime.neg_batches.remove(&batch) else {
            self.confirm(relay, batch);
            return;
        };
        if let NegPhase::Hydrating { pass, first_pass } = &neg.phase {
            tracing::debug!(%relay, batch = batch.0, advertised = pass.advertised().len(),
                delivered = pass.delivered(), first_pass, "hydration pass done");
        }
        match neg.phase {
            NegPhase::Rounds => {
                // REQ+EOSE fallback groups finished.
                self.confirm(relay, batch);
            }
            NegPhase::Recovery { pass } => {
                let residual: BTreeSet<EventId> = pass.residual().into_iter().collect();
                let delivered: Vec<EventId> = pass
                    .advertised()
                    .iter()
                    .filter(|id| !residual.contains(id))
                    .copied()
                    .collect();
                self.recovery.handle_attempt_result(relay, delivered, now);
                self.confirm(relay, batch);
                self.apply_recovery_outcomes();
            }
            NegPhase::Hydrating { pass, first_pass } => match pass.decide(first_pass) {
                HydrationOutcome::Complete => self.confirm(relay, batch),
                HydrationOutcome::SemanticFallback => {
                    tracing::info!(%relay, advertised = pass.advertised().len(), delivered = pass.delivered(),
                        "relay advertises events it does not serve by id; semantic fallback");
                    runtime.neg_batches.insert(
                        batch,
                        NegBatch {
                            phase: NegPhase::Rounds,
                            fell_back: true,
                            ..neg_shell(neg.filters)
                        },
                    );
                    self.fall_back_to_req(relay, batch);
                }
                HydrationOutcome::RetryResidual(ids) => {
                    // The retry is a pass of its own over the residual: no progress in it
                    // fails the batch.
                    let retry = HydrationPass::new(ids.iter().copied().collect());
                    runtime.neg_batches.insert(
                        batch,
                        NegBatch {
                            phase: NegPhase::Hydrating {
                                pass: retry,
                                first_pass: false,
                            },
                            ..neg_shell(neg.filters)
                        },
                    );
                    self.queue_exact_fetch(
                        relay,
                        batch,
                        &ids,
                        PermitClass::Retry,
                        StartKind::Retry,
                    );
                    self.drive_queue(relay);
                }
                HydrationOutcome::Failed { residual } => {
                    tracing::warn!(%relay, missing = residual.len(), "hydration made no progress; ids go to recovery");
                    let _ = self.pending.mark_failed(relay, batch);
                    self.recovery.handle_failed_batch(relay, residual, now);
                    self.confirm(relay, batch);
                }
            },
        }
    }

    /// Turns a negentropy batch into grouped REQ+EOSE over its semantic filters.
    fn fall_back_to_req(&mut self, relay: &RelayUrl, batch: BatchId) {
        let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.neg_batches.remove(&batch))
        else {
            return;
        };
        if !self.queue_req_groups(relay, batch, neg.filters) {
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
        let mut dropped = Vec::new();
        if let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
        {
            session.neg_queue.retain(|round| {
                if round.batch == batch {
                    dropped.push(round.subscription_id.clone());
                    false
                } else {
                    true
                }
            });
        }
        if let Some(neg) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.neg_batches.get_mut(&batch))
        {
            neg.fell_back = true;
        }
        let mut complete = false;
        for id in dropped {
            if let Some(resolved) = self.pending.resolve_subscription(relay, &id) {
                complete |= resolved.batch_complete;
            }
        }
        if complete {
            self.fall_back_to_req(relay, batch);
        }
    }

    /// Queues exact-ID REQs for `ids` in `batch` (registered before anything is sent).
    fn queue_exact_fetch(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        ids: &[EventId],
        class: PermitClass,
        kind: StartKind,
    ) {
        let filters = match grasp_sync_filters::exact_id_filters(ids, &FilterBudget::default()) {
            Ok(filters) => filters,
            Err(error) => {
                tracing::warn!(%relay, %error, "exact-id filters could not be built");
                return;
            }
        };
        let mut queued = Vec::new();
        for filter in filters {
            let subscription_id = self.next_subscription_id("ids");
            let filters = vec![filter.filter];
            let _ = self.pending.register_subscription(
                relay,
                batch,
                subscription_id.clone(),
                PaginationState::new(filters.clone()),
            );
            queued.push(QueuedStart {
                subscription_id,
                batch,
                class,
                kind,
                pagination: grasp_sync_filters::GroupedPagination::new(filters),
                exact: true,
            });
        }
        if let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
        {
            session.queue.extend(queued);
        }
    }

    /// The recovery tick: start due attempts, apply promotions and expiries, and fetch rejected
    /// events the store released (their dependency arrived) from the relays that sent them.
    pub(super) fn drive_recovery(&mut self) {
        let now = self.now();
        for (relay, ids) in self.ingestor.store().poll_refetch() {
            let connected = self
                .runtimes
                .get(&relay)
                .is_some_and(|r| r.session.is_some());
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
                .is_some_and(|r| r.session.is_some());
            if !connected {
                self.recovery.handle_attempt_result(&relay, Vec::new(), now);
                continue;
            }
            let batch =
                self.pending
                    .open_batch(&relay, PendingItems::default(), SyncMethod::ReqEose);
            let pass = HydrationPass::new(attempt.ids.iter().copied().collect());
            if let Some(runtime) = self.runtimes.get_mut(&relay) {
                runtime.neg_batches.insert(
                    batch,
                    NegBatch {
                        phase: NegPhase::Recovery { pass },
                        ..neg_shell(Vec::new())
                    },
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
            runtime.neg_batches.clear();
            if let (Some(session), Some(ledger)) =
                (runtime.session.as_mut(), runtime.ledger.as_mut())
            {
                session.neg_queue.clear();
                for (_, (_, permit)) in std::mem::take(&mut session.neg_in_flight) {
                    let _ = ledger.handle_release(now, &permit, ReleaseReason::Closed);
                }
            }
        }
    }

    /// Forgets the negentropy state of a failed batch.
    pub(super) fn forget_negentropy_batch(&mut self, relay: &RelayUrl, batch: BatchId) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.neg_batches.remove(&batch);
            if let Some(session) = runtime.session.as_mut() {
                session.neg_queue.retain(|round| round.batch != batch);
            }
        }
    }
}

fn neg_shell(filters: Vec<Filter>) -> NegBatch {
    NegBatch {
        filters,
        missing: BTreeSet::new(),
        fell_back: false,
        phase: NegPhase::Rounds,
    }
}

/// One dry-run round: the store's items for the filter, the diff, and the IDs neither stored
/// nor rejected. Runs outside the actor, at most eight at once across relays.
async fn run_round(
    key: SessionKey,
    subscription_id: SubscriptionId,
    filter: Filter,
    store: Arc<dyn EventStore>,
    session: Arc<dyn RelaySession>,
    slots: Arc<Semaphore>,
    jobs: tokio::sync::mpsc::Sender<JobReport>,
) {
    let result = async {
        let _slot = slots
            .acquire_owned()
            .await
            .map_err(|_| NegentropyError::NotConnected)?;
        let have = store
            .negentropy_items(filter.clone())
            .await
            .map_err(|error| NegentropyError::Protocol(format!("store: {error}")))?;
        let diff = session
            .negentropy_diff(filter, have, NEGENTROPY_DEADLINE)
            .await?;
        let mut unknown = Vec::with_capacity(diff.missing.len());
        for id in diff.missing {
            if !store.contains(&id).await.unwrap_or(false) {
                unknown.push(id);
            }
        }
        Ok(unknown)
    }
    .await;
    // The actor may have stopped; then nobody needs the result.
    let _ = jobs
        .send(JobReport::NegentropyRound {
            key,
            subscription_id,
            result,
        })
        .await;
}
