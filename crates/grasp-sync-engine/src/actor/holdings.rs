//! The daily reconciliation over a relay's holdings: when the relay is caught up (everything
//! confirmed and live, nothing pending) and not known to lack NIP-77, the daily run is one
//! round over `{}` whose "have" set is what the relay held at its last daily run, or what it
//! showed it holds during its first historic sync in this run ([`crate::holdings`]), or, where
//! nothing is kept, what the store holds of the relay's coverage.
//! The confirmed state and the live subscriptions stay as they are; only the IDs the relay
//! holds and the store lacks are fetched, by exact ID, through the acceptance policy. Any
//! failure of the round or of its fetches turns the daily run into the fresh start it
//! otherwise is (named rounds), never into a REQ over `{}`.
//!
//! A session that starts without confirmed state (a restart over a store that held events, a
//! long disconnect) asks the same round where holdings are kept for the relay: its batch holds
//! everything the relay targets, whose live coverage opens first, and confirms it once the
//! round's fetches drained. Where none are kept, or the round fails, the fresh start by named
//! rounds follows.

use std::sync::Arc;

use grasp_sync_filters::TieredFilter;
use grasp_sync_filters::{FilterBudget, Window, announcement_filter};
use grasp_sync_model::{
    BatchId, ConnectionStatus, PendingItems, RelaySyncNeeds, RelayUrl, SyncMethod,
};
use nostr::{EventId, Filter, Timestamp};

use super::Actor;
use super::history::NeedsLists;
use super::negentropy::JobReport;
use crate::boundary::EventStore;
use crate::error::StoreError;
use crate::holdings::{
    Held, HoldingsMemory, MAX_HELD_EVENTS, MAX_NEW_IDS_PER_ROUND, RelayHoldings,
};
use crate::machine::holdings_round::{HoldingsOutcome, HoldingsPlacement, OverHoldings};
use crate::machine::jobs::HaveSet;
use crate::machine::nip77::Nip77State;
use crate::session::SessionKey;

impl Actor {
    /// Starts the daily run over `relay`'s holdings if it applies (see the module); whether
    /// it started.
    pub(super) fn start_holdings_round(&mut self, relay: &RelayUrl) -> bool {
        if !self.holdings_round_applies(relay) {
            return false;
        }
        let coverage = self.named_coverage(relay);
        let batch = self
            .pending
            .open_batch(relay, PendingItems::default(), SyncMethod::Negentropy);
        if !self.queue_round_over_holdings(relay, batch, Some(coverage)) {
            return false;
        }
        tracing::info!(%relay, "daily reconciliation over the relay's holdings");
        self.drive_queue(relay);
        true
    }

    /// A fresh start over `relay`'s kept holdings, where it applies: a session that starts
    /// without confirmed state (the first in this run, or after a long disconnect), over a
    /// store that held events when the engine started or on a relay whose historic sync
    /// completed in this run (an empty store would make every held event new), on a relay
    /// that may get NIP-77 rounds.
    /// Everything the relay targets now is pending in one batch, reconciled by one round over
    /// `{}` whose "have" set is what the relay held at its last daily run (or showed it holds
    /// in an earlier run); its live coverage opens at once, before the round. The batch
    /// confirms it all once the round's fetches drained, where named rounds would send every
    /// filter of the coverage again. Coverage added later in the session goes the same way
    /// ([`Self::add_over_holdings`]). Without kept holdings, or on any failure of a round, the
    /// fresh start by named rounds follows. Whether it started.
    pub(super) fn start_over_holdings(&mut self, relay: &RelayUrl) -> bool {
        let store_holds_coverage = !self.new_store
            || self
                .relays
                .get(relay)
                .is_some_and(|state| state.historic_sync_completed_at.is_some());
        let applies = self.holdings.is_some()
            && store_holds_coverage
            && self.wants_repo_connection(relay)
            && self.fallbacks.nip77_enabled(relay)
            && self.runtimes.get(relay).is_some_and(|runtime| {
                let machine = &runtime.machine;
                machine.session.is_some()
                    && machine.nip77_rounds_allowed()
                    && machine.holdings_round.is_none()
            });
        if !applies {
            return false;
        }
        self.reset_for_fresh_start(relay);
        let target = self.targets.get(relay).cloned().unwrap_or_default();
        self.open_live_for(relay, &target, vec![announcement_filter(Window::Live)]);
        let Some(batch) = self.open_round_over_holdings(relay, target) else {
            return false;
        };
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.announcements_batch = Some(batch);
            runtime.machine.over_holdings = Some(OverHoldings::default());
        }
        tracing::info!(%relay, "fresh start over the relay's kept holdings");
        self.recompute(relay);
        self.drive_queue(relay);
        self.check_idle(relay);
        true
    }

    /// Coverage the index adds to a session that started over the relay's kept holdings: live
    /// at once, and its history by a round over `{}`, the queued one, the next, or a new one
    /// ([`OverHoldings`]). Whether it went so.
    pub(super) fn add_over_holdings(&mut self, relay: &RelayUrl, needs: &RelaySyncNeeds) -> bool {
        if needs.is_empty() {
            return false;
        }
        let Some(placement) = self
            .runtimes
            .get(relay)
            .and_then(|runtime| runtime.machine.place_over_holdings())
        else {
            return false;
        };
        self.open_live_for(relay, needs, Vec::new());
        let _ = self.put_over_holdings(relay, placement, needs.clone());
        self.drive_queue(relay);
        true
    }

    /// Puts `items` (none, for history that confirms no item, such as new members'
    /// descendants) where `placement` says, in a round over `relay`'s holdings: the batch of
    /// the queued round, the next round's, or a new round's. The batch that carries them, or
    /// `None` when it is gone or no round could be queued (the items are derived again later).
    pub(super) fn put_over_holdings(
        &mut self,
        relay: &RelayUrl,
        placement: HoldingsPlacement,
        items: PendingItems,
    ) -> Option<BatchId> {
        match placement {
            HoldingsPlacement::Join(batch) => match self.pending.extend_batch(relay, batch, &items)
            {
                Ok(()) => Some(batch),
                Err(error) => {
                    // Neither pending nor confirmed: the next diff derives them again.
                    tracing::debug!(%relay, %error, "the round over the relay's holdings is gone");
                    None
                }
            },
            HoldingsPlacement::OpenNext => {
                let batch = self
                    .pending
                    .open_batch(relay, items, SyncMethod::Negentropy);
                if let Some(over) = self
                    .runtimes
                    .get_mut(relay)
                    .and_then(|runtime| runtime.machine.over_holdings.as_mut())
                {
                    over.handle_next_opened(batch);
                }
                Some(batch)
            }
            HoldingsPlacement::Open => self.open_round_over_holdings(relay, items),
        }
    }

    /// Opens a batch for `items` reconciled by one round over `{}` against `relay`'s kept
    /// holdings (none kept: the round does not run, and named rounds follow).
    fn open_round_over_holdings(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
    ) -> Option<BatchId> {
        let batch = self
            .pending
            .open_batch(relay, items, SyncMethod::Negentropy);
        self.queue_round_over_holdings(relay, batch, None)
            .then_some(batch)
    }

    /// Queues the round over `relay`'s holdings that reconciles the pending `batch` (its
    /// "have" set read from the store under `coverage` where none are kept, or, without
    /// `coverage`, no round); without a session the batch is dropped, and its items are
    /// derived again later. Whether it was queued.
    fn queue_round_over_holdings(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        coverage: Option<Vec<Filter>>,
    ) -> bool {
        let subscription_id = super::new_subscription_id(&mut self.next_subscription, "held");
        let queued = self.runtimes.get_mut(relay).and_then(|runtime| {
            runtime
                .machine
                .queue_holdings_round(batch, subscription_id.clone(), coverage)
        });
        if queued.is_none() {
            let _ = self.pending.abandon_batch(relay, batch);
            return false;
        }
        self.register_queued(relay, batch, vec![(subscription_id, vec![Filter::new()])]);
        true
    }

    /// Opens live coverage for `needs`, with `live`, filters to hold beside it.
    fn open_live_for(
        &mut self,
        relay: &RelayUrl,
        needs: &RelaySyncNeeds,
        mut live: Vec<TieredFilter>,
    ) {
        if !needs.is_empty() {
            match NeedsLists::of(needs)
                .coverage()
                .live_filters(&FilterBudget::default())
            {
                Ok(filters) => live.extend(filters),
                Err(error) => tracing::warn!(%relay, %error, "live filters could not be built"),
            }
        }
        let _ = self.open_live(relay, live);
    }

    /// Whether the daily run over `relay`'s holdings applies: a holdings memory is kept, the
    /// relay is not known to lack NIP-77 and allows rounds now (no probe in flight), and it is
    /// caught up: its
    /// historic sync completed without failures, it confirmed every item it targets, and
    /// nothing is pending, queued for live coverage, left to the paced catch-up or refused.
    fn holdings_round_applies(&self, relay: &RelayUrl) -> bool {
        if self.holdings.is_none() || self.pending.has_pending(relay) {
            return false;
        }
        let Some(runtime) = self.runtimes.get(relay) else {
            return false;
        };
        let machine = &runtime.machine;
        let idle_session = machine
            .session
            .as_ref()
            .is_some_and(|s| s.live_queue.is_empty() && s.neg_queue.is_empty());
        // A relay whose NIP-77 support is not known yet gets the round as its probe.
        let caught_up_machine = idle_session
            && machine.nip77.state() != Nip77State::Probing
            && machine.nip77_rounds_allowed()
            && machine.catch_up.is_empty()
            && machine.refused.is_empty()
            && machine.holdings_round.is_none();
        let Some(state) = self.relays.get(relay) else {
            return false;
        };
        let target = self.targets.targets().get(relay);
        let confirmed_all = target.is_some_and(|target| {
            *state.repos == *target.repos && *state.root_events == *target.root_events
        });
        caught_up_machine
            && confirmed_all
            && state.announcements_synced
            && state.historic_sync_completed_at.is_some()
            && state.connection_status == ConnectionStatus::Connected
    }

    /// The relay's confirmed coverage as historic filters (announcements, repositories, root
    /// events): where no holdings are kept, the round's "have" set is what the store holds
    /// under them.
    fn named_coverage(&self, relay: &RelayUrl) -> Vec<Filter> {
        let mut filters = vec![announcement_filter(Window::since(None)).filter];
        let Some(state) = self.relays.get(relay) else {
            return filters;
        };
        let needs = grasp_sync_model::RelaySyncNeeds {
            repos: state.repos.clone(),
            root_events: state.root_events.clone(),
        };
        let lists = NeedsLists::of(&needs);
        match lists
            .coverage()
            .historic_filters(None, None, &FilterBudget::default())
        {
            Ok(named) => filters.extend(named.into_iter().map(|f| f.filter)),
            Err(error) => tracing::warn!(%relay, %error, "historic filters could not be built"),
        }
        filters
    }

    /// Whether `batch` is `relay`'s daily run over its holdings.
    pub(super) fn is_holdings_batch(&self, relay: &RelayUrl, batch: BatchId) -> bool {
        self.runtimes
            .get(relay)
            .and_then(|r| r.machine.holdings_round.as_ref())
            .is_some_and(|round| round.batch == batch)
    }

    /// A round reported what `relay` holds (`held`): the round over its holdings (`held`: of
    /// the "have" set and of the new IDs the store holds; `result`: the new IDs to fetch, or why
    /// it failed), or a named round while the relay's holdings are learned.
    pub(super) fn handle_held_report(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &nostr::SubscriptionId,
        result: &Result<Vec<EventId>, crate::transport::NegentropyError>,
        held: Option<Vec<(EventId, Timestamp)>>,
    ) {
        let Some(machine) = self.runtimes.get_mut(relay).map(|r| &mut r.machine) else {
            return;
        };
        let Some(round) = machine
            .holdings_round
            .as_mut()
            .filter(|round| round.subscription_id == *subscription_id)
        else {
            if let (Some(learning), Some(held)) = (machine.learning.as_mut(), held) {
                learning.handle_held(held);
            }
            return;
        };
        match (result, held) {
            (Ok(fetching), Some(held)) => {
                tracing::debug!(%relay, held = held.len(), new = fetching.len(),
                    "the relay's holdings are reconciled");
                round.handle_diff(held, fetching);
            }
            // A relay that names too many new IDs, or refuses the question (strfry does past
            // its `maxSyncEvents`), is not asked again for a while.
            (Err(error), _) => round.handle_failed(matches!(
                error,
                crate::transport::NegentropyError::TooManyMissing(_)
                    | crate::transport::NegentropyError::Refused(_)
            )),
            (Ok(_), None) => round.handle_failed(false),
        }
    }

    /// The round over `relay`'s holdings failed, or did not run (none kept for a fresh start
    /// over them): a fresh start by named rounds follows. A relay that named more new IDs
    /// than a round takes, or refused the round, is remembered as too large.
    pub(super) fn holdings_round_failed(&mut self, relay: &RelayUrl) {
        let outcome = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.holdings_round.take())
            .map(|mut round| {
                if !round.failed() {
                    round.handle_failed(false);
                }
                round.finish()
            });
        if outcome == Some(HoldingsOutcome::TooLarge) {
            let holdings = RelayHoldings {
                learned_at: self.clock.unix_now(),
                held: Held::TooLarge,
            };
            self.save_holdings(relay, holdings);
        }
        tracing::info!(%relay, "the round over the relay's holdings failed or did not run; reconciling by named rounds");
        self.fresh_start(relay);
    }

    /// The round over `relay`'s holdings ended (its fetches drained, or nothing was missing):
    /// what the relay holds is kept for the next one, and the round of coverage added while it
    /// ran is queued. Nothing for another batch.
    pub(super) fn finish_holdings_round(&mut self, relay: &RelayUrl, batch: BatchId) {
        if !self.is_holdings_batch(relay, batch) {
            return;
        }
        let Some(round) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.holdings_round.take())
        else {
            return;
        };
        let next = self.runtimes.get_mut(relay).and_then(|runtime| {
            runtime
                .machine
                .over_holdings
                .as_mut()
                .and_then(OverHoldings::take_next)
        });
        if let Some(next) = next
            && self.queue_round_over_holdings(relay, next, None)
        {
            self.drive_queue(relay);
        }
        let holdings = match round.finish() {
            HoldingsOutcome::Held(events) => RelayHoldings::learned(self.clock.unix_now(), events),
            HoldingsOutcome::TooLarge => RelayHoldings {
                learned_at: self.clock.unix_now(),
                held: Held::TooLarge,
            },
            HoldingsOutcome::Nothing => return,
        };
        self.save_holdings(relay, holdings);
    }

    /// Starts learning `relay`'s holdings when it connects before its first historic sync in
    /// this run completed, holdings are kept and none are being learned; learning goes on
    /// until the relay's first daily run.
    pub(super) fn start_learning_holdings(&mut self, relay: &RelayUrl) {
        let first_sync = self
            .relays
            .get(relay)
            .is_none_or(|state| state.historic_sync_completed_at.is_none());
        if self.holdings.is_none() || !first_sync {
            return;
        }
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && runtime.machine.learning.is_none()
        {
            runtime.machine.learning = Some(Default::default());
        }
    }

    /// `relay`'s historic sync completed (again: discovery may add coverage after the first
    /// completion): what it showed it holds since the last time is added to the holdings kept
    /// (which may name events outside the coverage). Learning goes on until the relay's first
    /// daily run; a relay that showed too much stops learning.
    pub(super) fn keep_learned_holdings(&mut self, relay: &RelayUrl) {
        let Some(learning) = self.runtimes.get_mut(relay).and_then(|r| {
            let learning = r.machine.learning.as_mut()?;
            Some(std::mem::take(learning))
        }) else {
            return;
        };
        let Some(learned) = learning.finish() else {
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                runtime.machine.learning = None;
            }
            return;
        };
        if learned.is_empty() {
            return;
        }
        let now = self.clock.unix_now();
        let relay = relay.clone();
        self.write_holdings(move |memory| {
            let kept = match memory.load(&relay) {
                Ok(kept) => kept.filter(|k| k.is_current(now)),
                Err(error) => {
                    tracing::warn!(%relay, %error, "the relay's holdings were not read");
                    None
                }
            };
            let holdings = match kept.map(|k| k.held) {
                Some(Held::TooLarge) => return,
                Some(Held::Events(mut events)) => {
                    events.extend(learned);
                    RelayHoldings::learned(now, events)
                }
                None => RelayHoldings::learned(now, learned),
            };
            tracing::debug!(%relay, "the relay's holdings learned during its historic sync are kept");
            if let Err(error) = memory.save(&relay, &holdings) {
                tracing::warn!(%relay, %error, "the relay's holdings were not kept");
            }
        });
    }

    /// Writes `holdings` for `relay`; a failure is logged (the next daily run learns them
    /// again).
    fn save_holdings(&self, relay: &RelayUrl, holdings: RelayHoldings) {
        let relay = relay.clone();
        self.write_holdings(move |memory| {
            if let Err(error) = memory.save(&relay, &holdings) {
                tracing::warn!(%relay, %error, "the relay's holdings were not kept");
            }
        });
    }

    /// Makes the write `call` on the holdings memory, if there is one, one write at a time: on
    /// a blocking thread, not waited for, when the memory blocks; in place when it does not.
    fn write_holdings(&self, call: impl FnOnce(&dyn HoldingsMemory) + Send + 'static) {
        let Some(memory) = self.holdings.clone() else {
            return;
        };
        let writes = Arc::clone(&self.holdings_writes);
        let blocks = memory.blocks();
        let write = move || {
            let _one_at_a_time = writes.lock();
            call(memory.as_ref());
        };
        if blocks {
            tokio::task::spawn_blocking(write);
        } else {
            write();
        }
    }
}

/// Reads the "have" set of a round over `key`'s relay's holdings: the kept holdings that are
/// current at `now`, those the store holds or rejected; where none are kept, the events the
/// store holds under `coverage`. `None` when the relay was found too large within
/// [`TOO_LARGE_PAUSE`](crate::holdings::TOO_LARGE_PAUSE), the store holds more than
/// [`MAX_HELD_EVENTS`] events under `coverage`, or none are kept and there is no `coverage`
/// (a fresh start over kept holdings): named rounds instead.
pub(super) async fn read_holdings(
    key: &SessionKey,
    coverage: Option<Vec<Filter>>,
    now: Timestamp,
    store: &Arc<dyn EventStore>,
    memory: Option<Arc<dyn HoldingsMemory>>,
) -> Option<Result<HaveSet, StoreError>> {
    let kept = match memory {
        Some(memory) => {
            let relay = key.relay.clone();
            let loaded = if memory.blocks() {
                tokio::task::spawn_blocking(move || memory.load(&relay)).await
            } else {
                Ok(memory.load(&relay))
            };
            match loaded {
                Ok(Ok(kept)) => kept.filter(|h| h.is_current(now)),
                Ok(Err(error)) => {
                    tracing::warn!(relay = %key.relay, %error, "the relay's holdings were not read; learning them again");
                    None
                }
                Err(_) => None,
            }
        }
        None => None,
    };
    let read = async {
        match kept.map(|h| h.held) {
            Some(Held::Events(events)) => {
                let mut have = Vec::with_capacity(events.len());
                for (id, created_at) in events {
                    if store.contains(&id).await? {
                        have.push((id, created_at));
                    }
                }
                Ok(Some(have))
            }
            Some(Held::TooLarge) => Ok(None),
            None => {
                let Some(coverage) = coverage else {
                    return Ok(None);
                };
                let mut have = Vec::new();
                for filter in coverage {
                    let room = (2 * MAX_HELD_EVENTS).saturating_sub(have.len());
                    have.extend(store.negentropy_items(filter.limit(room)).await?);
                    if have.len() >= 2 * MAX_HELD_EVENTS {
                        break;
                    }
                }
                have.sort_unstable();
                have.dedup_by_key(|(id, _)| *id);
                // More than a relay's holdings may hold: named rounds, as for a relay found
                // too large.
                Ok((have.len() <= MAX_HELD_EVENTS).then_some(have))
            }
        }
    };
    read.await.transpose()
}

/// What a round over a relay's holdings found.
pub(super) struct HoldingsDiff {
    /// What the relay holds, with `created_at`, as far as the store can tell.
    held: Vec<(EventId, Timestamp)>,
    /// The new IDs to fetch.
    fetch: Vec<EventId>,
}

/// After a round over the relay's holdings: what the relay holds (the "have" set less what it
/// lacks, and the new IDs the store already holds, with their `created_at`) and the new IDs to
/// fetch, rejected ones too (only a fetched event says its `created_at`). The rejected events
/// of the "have" set the relay still holds are renewed in the rejected-events index, so they
/// stay in the next round's "have" set. At most [`MAX_NEW_IDS_PER_ROUND`] new IDs come here:
/// the round fails past that.
pub(super) async fn holdings_diff(
    have: HaveSet,
    diff: crate::transport::NegentropyDiff,
    store: &Arc<dyn EventStore>,
) -> Result<HoldingsDiff, StoreError> {
    debug_assert!(diff.missing.len() <= MAX_NEW_IDS_PER_ROUND);
    let mut held: Vec<(EventId, Timestamp)> = have
        .into_iter()
        .filter(|(id, _)| diff.relay_lacks.binary_search(id).is_err())
        .collect();
    let still_held: Vec<EventId> = held.iter().map(|(id, _)| *id).collect();
    renew_rejected(store, &still_held).await;
    let mut stored = Vec::new();
    for chunk in diff.missing.chunks(500) {
        stored.extend(
            store
                .negentropy_items(Filter::new().ids(chunk.iter().copied()))
                .await?,
        );
    }
    stored.sort_unstable();
    let fetch = diff
        .missing
        .iter()
        .filter(|id| {
            stored
                .binary_search_by_key(*id, |(stored, _)| *stored)
                .is_err()
        })
        .copied()
        .collect();
    held.extend(stored);
    Ok(HoldingsDiff { held, fetch })
}

/// The relay still holds `ids`, which the store holds or rejected: the rejected ones are
/// remembered longer ([`EventStore::renew_rejected`]). A failure costs only a later download.
pub(super) async fn renew_rejected(store: &Arc<dyn EventStore>, ids: &[EventId]) {
    if let Err(error) = store.renew_rejected(ids).await {
        tracing::warn!(%error, "rejected events a relay still holds were not renewed");
    }
}

/// The report of a round over a relay's holdings that ended with `result`.
pub(super) fn holdings_report(
    key: SessionKey,
    subscription_id: nostr::SubscriptionId,
    result: Result<HoldingsDiff, crate::transport::NegentropyError>,
) -> JobReport {
    let (result, held) = match result {
        Ok(HoldingsDiff { held, fetch }) => (Ok(fetch), Some(held)),
        Err(error) => (Err(error), None),
    };
    JobReport::NegentropyRound {
        key,
        subscription_id,
        result,
        held,
    }
}
