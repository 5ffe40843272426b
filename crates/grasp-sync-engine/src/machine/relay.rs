//! One relay's sync machine ([`RelayMachine`]): every value the engine keeps about a relay
//! except the connection's handles, in one place. Its health, learned limits and ledger, the
//! current session (with its generation), the relay's named timers, refused coverage, whether
//! it speaks NIP-77 and its NIP-77 batches, the catch-up, incomplete batches, descendant
//! coverage and the extra connections.
//!
//! The driver (the actor) owns one per relay, beside the handles of its connections. It reads
//! the machine through [`RelayMachine::poll_transmit`] (what the session decided to send, in
//! order), [`RelayMachine::poll_job`] (the store reads and NIP-77 rounds decided),
//! [`RelayMachine::poll_dial`] (the connections to open) and [`RelayMachine::poll_timeout`]
//! (when the machine next wants the clock), and tells
//! it about connections and timeouts through the `handle_*` methods, with the time passed in.
//!
//! The machine is generic over what the driver queues for NIP-77 (`Round`) and parks for the
//! AUTH (`Parked`), as [`SessionState`] is.

use std::collections::BTreeMap;
use std::time::Instant;

use grasp_sync_health::RelayHealth;
use grasp_sync_ledger::{LearnedLimits, SessionBudget, SubscriptionLedger};
use grasp_sync_model::BatchId;
use nostr::{Event, EventId, SubscriptionId};

use crate::machine::catch_up::CatchUp;
use crate::machine::consolidation::Consolidation;
use crate::machine::delivered::DeliveredIds;
use crate::machine::descendant_coverage::DescendantCoverage;
use crate::machine::dials::{Dial, DialPurpose, Dials};
use crate::machine::holdings_round::{HoldingsLearning, HoldingsRound, OverHoldings};
use crate::machine::incomplete_batches::IncompleteBatches;
use crate::machine::jobs::{Job, Jobs};
use crate::machine::lanes::LiveLanes;
use crate::machine::neg_batch::NegBatch;
use crate::machine::nip77::{Nip77Support, NipListing};
use crate::machine::refused::RefusedCoverage;
use crate::machine::session::SessionState;
use crate::machine::session_start::session_budget;
use crate::machine::timers::{RelayTimer, SessionTimer, Timers};
use crate::machine::transmit::{Outbound, SessionKey};

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

/// Everything the engine knows about one relay, as state.
pub struct RelayMachine<Round, Parked> {
    /// The relay's health: pauses, backoff, refusal counts.
    pub health: RelayHealth,
    /// What the relay taught: filter ceiling, byte cap, proven filter count.
    pub learned: LearnedLimits,
    /// The ledger outlives sessions: each connection starts a new generation.
    pub ledger: Option<SubscriptionLedger>,
    /// The attempt in flight, if a dial was queued.
    pub dialing: Option<u64>,
    /// The connected session, if any: its state ends with it.
    pub session: Option<SessionState<Round, Parked>>,
    /// Counters for the status snapshot.
    pub stats: RelayStats,
    /// The relay's named timers (completion check, coverage retry, daily reconciliation).
    pub timers: Timers<RelayTimer>,
    /// The Layer 1 announcements batch of the current session.
    pub announcements_batch: Option<BatchId>,
    /// A subscription budget the relay taught us by refusing (it did not advertise one, or
    /// advertised too much); kept across sessions.
    pub learned_slots: Option<usize>,
    /// Which direct members this relay covers, and its descendant fallback state.
    pub descendants: DescendantCoverage,
    /// The negentropy side of pending batches reconciled by NIP-77.
    pub neg_batches: BTreeMap<BatchId, NegBatch>,
    /// The round over the relay's holdings (the daily run's, or a fresh start's over them),
    /// while it runs.
    pub holdings_round: Option<HoldingsRound>,
    /// Whether the session started over the relay's kept holdings, and the batch of coverage
    /// waiting for its next round.
    pub over_holdings: Option<OverHoldings>,
    /// What the relay shows it holds from its first connection in this run until its first
    /// daily run, while the driver learns it (see [`HoldingsLearning`]).
    pub learning: Option<HoldingsLearning>,
    /// Whether the relay speaks NIP-77: this session's knowledge and a verdict kept across
    /// sessions.
    pub nip77: Nip77Support,
    /// Coverage this relay refused by policy, paused on its own; kept across sessions.
    pub refused: RefusedCoverage,
    /// The queued consolidation check of the core live groups.
    pub consolidation: Consolidation,
    /// Coverage left out of the live set by the learned byte cap, and its paced catch-up.
    pub catch_up: CatchUp,
    /// What the relay delivered during its first sync, across its sessions until then.
    pub delivered: DeliveredIds,
    /// Pending batches that must not be confirmed (truncated, or with failed saves), and
    /// their retry backoffs.
    pub incomplete: IncompleteBatches,
    /// Extra connections holding the essential live coverage the session's budget cannot.
    pub lanes: LiveLanes,
    /// Store reads and NIP-77 rounds decided and not yet performed, each with the session
    /// that asked ([`Self::poll_job`]).
    pub jobs: Jobs,
    /// Dial attempts decided and not yet handed to the dial workers ([`Self::poll_dial`]).
    pub dials: Dials,
}

/// Counters kept for the status snapshot and the closing figures.
#[derive(Debug, Default, Clone)]
pub struct RelayStats {
    /// Live REQs started.
    pub req_starts_live: u64,
    /// Historic REQs started.
    pub req_starts_historic: u64,
    /// Events the relay delivered.
    pub events_received: u64,
    /// The most subscriptions held at once.
    pub peak_subscriptions: usize,
    /// Refusals counted, by category label.
    pub refusals: BTreeMap<&'static str, u64>,
    /// Refusals of subscriptions already retired.
    pub stale_refusals: u64,
    /// Sessions connected.
    pub connections: u64,
    /// Reconnects within the 15-minute rule's quick window.
    pub quick_reconnects: u64,
    /// Reconnects after it (a fresh start).
    pub long_reconnects: u64,
    /// Daily reconciliations run.
    pub daily_reconciliations: u64,
    /// Live consolidations run.
    pub consolidations: u64,
    /// Catch-up queries opened.
    pub catch_ups: u64,
    /// Parts of historic walks the relay truncated (a filter cut short), over every batch.
    pub history_truncated: u64,
    /// Historic batches with events the store failed to save.
    pub history_unsaved: u64,
    /// Events the store did not save.
    pub unsaved_events: u64,
    /// Paging quirks the last session showed (labels from `RelayQuirks::labels`).
    pub quirks: Vec<&'static str>,
    /// The last error: a refusal's text (cut to 200 characters), a failed dial, a session's
    /// end or a failed batch.
    pub last_error: Option<String>,
}

/// What a relay's NIP-11 document says, for a new session: its limits and whether it lists
/// NIP-77 (all unknown without a document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Advertised {
    /// `limitation.max_subscriptions`.
    pub max_subscriptions: Option<u32>,
    /// `limitation.max_filters`.
    pub max_filters: Option<usize>,
    /// What `supported_nips` says of NIP-77.
    pub nip77: NipListing,
}

/// What a relay's timeout step decided, while it has no session or has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Connected: nothing to do about the connection. `probe_due` when a pause just ended
    /// (the coverage retry is armed for now, to re-derive what the pause held back).
    Connected {
        /// A pause just ended.
        probe_due: bool,
    },
    /// Not connected, and a dial may start now (no attempt in flight, health allows one).
    MayDial,
    /// Not connected, and no dial may start now.
    Waiting,
}

/// Where an event the store failed to save belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsaved {
    /// A page of this pending batch: it stays incomplete.
    Batch(BatchId),
    /// Nothing pending: the driver's missing-event recovery fetches it again by ID.
    Recover,
}

/// What a due live-repair timer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveRepair {
    /// Rebuild the live groups from scratch (a consolidation or a learned byte cap waited).
    Rebuild,
    /// Re-derive the live coverage and open what is missing.
    Repair,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// A relay first tracked, with its health; nothing learned, no session.
    pub fn new(health: RelayHealth) -> Self {
        Self {
            health,
            learned: LearnedLimits::new(),
            ledger: None,
            dialing: None,
            session: None,
            stats: RelayStats::default(),
            timers: Timers::default(),
            announcements_batch: None,
            learned_slots: None,
            descendants: DescendantCoverage::default(),
            neg_batches: BTreeMap::new(),
            holdings_round: None,
            over_holdings: None,
            learning: None,
            nip77: Nip77Support::new(),
            refused: RefusedCoverage::default(),
            consolidation: Consolidation::default(),
            catch_up: CatchUp::default(),
            delivered: DeliveredIds::default(),
            incomplete: IncompleteBatches::default(),
            lanes: LiveLanes::default(),
            jobs: Jobs::default(),
            dials: Dials::default(),
        }
    }

    /// The relay's timeout step at `now`: health's timers run, and the machine says whether a
    /// connected relay's pause just ended or an unconnected one may be dialled.
    pub fn handle_tick(&mut self, now: Instant) -> Tick {
        self.health.handle_timeout(now);
        if self.session.is_some() {
            let probe_due = self.health.poll_probe(now).is_some();
            if probe_due {
                self.timers.set(RelayTimer::CoverageRetry, now);
            }
            return Tick::Connected { probe_due };
        }
        if self.dialing.is_none() && self.health.can_dial(now) {
            Tick::MayDial
        } else {
            Tick::Waiting
        }
    }

    /// The driver numbered dial attempt `attempt` for the session: it is queued for the dial
    /// workers ([`Self::poll_dial`]), and reports of any other attempt are stale.
    pub fn handle_dial_queued(&mut self, attempt: u64) {
        self.dialing = Some(attempt);
        self.dials.push(Dial {
            attempt,
            purpose: DialPurpose::Session,
        });
    }

    /// The driver numbered dial attempt `attempt` for one more extra connection: it is queued
    /// for the dial workers. Returns the connections there will then be, the session's
    /// included, and the groups waiting for one.
    pub fn handle_lane_dial_queued(&mut self, attempt: u64) -> (usize, usize) {
        self.dials.push(Dial {
            attempt,
            purpose: DialPurpose::LiveOnly,
        });
        self.lanes.handle_dial_started(attempt)
    }

    /// The dial worker began attempt `attempt` at `now` (the handshake starts).
    pub fn handle_dial_started(&mut self, attempt: u64, now: Instant) {
        if self.dialing == Some(attempt) {
            self.health.handle_connect_started(now);
        }
    }

    /// Attempt `attempt` finished: `true` if it is the one in flight, which ends it; a stale
    /// attempt's connection is the driver's to drop.
    pub fn handle_dial_finished(&mut self, attempt: u64) -> bool {
        let current = self.dialing == Some(attempt);
        if current {
            self.dialing = None;
        }
        current
    }

    /// A connection attempt failed at `now` for `reason`.
    pub fn handle_connect_failed(&mut self, now: Instant, reason: String) {
        self.health.handle_connect_failed(now);
        self.stats.last_error = Some(reason);
    }

    /// A connection opened at `now` on a relay advertising `advertised`: health, the learned
    /// limits and NIP-77 support start a new session, an advertised filter ceiling is learned,
    /// and the ledger
    /// starts its next generation under the session's budget (the advertised one, lowered to
    /// what refusals taught), which is returned. The session's state follows through
    /// [`RelayMachine::handle_session_started`].
    pub fn handle_connected(&mut self, now: Instant, advertised: Advertised) -> SessionBudget {
        self.health.handle_connected(now);
        self.learned.new_session(now);
        self.nip77.handle_session_started(now, advertised.nip77);
        if let Some(max_filters) = advertised.max_filters {
            self.learned.handle_advertised_filter_limit(max_filters);
        }
        let budget = session_budget(advertised.max_subscriptions, self.learned_slots)
            .with_learned(&self.learned);
        match self.ledger.as_mut() {
            Some(ledger) => {
                ledger.handle_reconnect(now, budget);
            }
            None => self.ledger = Some(SubscriptionLedger::new(now, budget)),
        }
        budget
    }

    /// The current session if it is `key`'s: a message or report of an ended session finds
    /// nothing.
    pub fn session_of(&self, key: &SessionKey) -> Option<&SessionState<Round, Parked>> {
        self.session.as_ref().filter(|s| s.key == *key)
    }

    /// The current session if it is `key`'s, to change.
    pub fn session_of_mut(&mut self, key: &SessionKey) -> Option<&mut SessionState<Round, Parked>> {
        self.session.as_mut().filter(|s| s.key == *key)
    }

    /// A session connected: it replaces none (the driver ends the last one first), counts as
    /// a connection, and the checks armed for the last session are dropped.
    pub fn handle_session_started(&mut self, session: SessionState<Round, Parked>) {
        debug_assert!(self.session.is_none(), "a session replaced another");
        self.session = Some(session);
        self.stats.connections += 1;
        self.timers.cancel(RelayTimer::CompletionCheck);
        self.timers.cancel(RelayTimer::CoverageRetry);
    }

    /// The session ended at `now` for `reason`: what died with the connection is cleared
    /// (the session's state, its NIP-77 batches, its announcements batch, the completion
    /// check), and health and the ledger learn of the disconnect. The driver performs what the
    /// session queued ([`RelayMachine::poll_transmit`]) before it says so.
    pub fn handle_session_ended(&mut self, now: Instant, reason: &str) {
        self.neg_batches.clear();
        self.holdings_round = None;
        self.over_holdings = None;
        self.session = None;
        self.timers.cancel(RelayTimer::CompletionCheck);
        self.announcements_batch = None;
        self.health.handle_disconnected(now);
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.handle_teardown(now);
        }
        self.stats.last_error = Some(reason.to_owned());
    }

    /// The session delivered `event` for `subscription_id`: counted; an exact-ID fetch's
    /// delivery counts for its batch's hydration; a historic page's cursor moves (a live
    /// group's first page too); the relay holds it, for its holdings while they are learned;
    /// and, when the
    /// store was new at the start (`new_store`), its ID is remembered as one this relay
    /// delivered during its first sync.
    pub fn handle_event(
        &mut self,
        subscription_id: &SubscriptionId,
        event: &Event,
        new_store: bool,
    ) {
        if let Some(session) = self.session.as_mut() {
            if let Some(transient) = session.transients.get_mut(subscription_id) {
                if transient.exact
                    && let Some(neg) = self.neg_batches.get_mut(&transient.batch)
                {
                    neg.handle_exact_delivery(event.id);
                    if let Some(round) = self
                        .holdings_round
                        .as_mut()
                        .filter(|round| round.batch == transient.batch)
                    {
                        round.handle_delivered(event);
                    }
                }
                transient.pagination.handle_event(event);
            } else if let Some(history) = session
                .live
                .get_mut(subscription_id)
                .and_then(|g| g.history.as_mut())
            {
                history.pagination.handle_event(event);
            }
        }
        self.stats.events_received += 1;
        if let Some(learning) = self.learning.as_mut() {
            learning.handle_held([(event.id, event.created_at)]);
        }
        if new_store {
            self.delivered.record(event.id);
        }
    }

    /// The store failed to save event `id`, delivered for `subscription_id`. A page (a
    /// transient one, or a live group's first page before its EOSE) of a batch
    /// still pending (`pending` says which are) marks its batch, which is then never confirmed;
    /// anything else (live coverage, a retired subscription) is returned, for the driver's
    /// missing-event recovery to fetch again by ID.
    pub fn handle_unsaved(
        &mut self,
        subscription_id: &SubscriptionId,
        id: EventId,
        pending: impl FnOnce(BatchId) -> bool,
    ) -> Unsaved {
        self.stats.unsaved_events += 1;
        let batch = self
            .session
            .as_ref()
            .and_then(|s| {
                s.transients
                    .get(subscription_id)
                    .map(|t| t.batch)
                    .or_else(|| {
                        let group = s.live.get(subscription_id)?;
                        group.history.as_ref().map(|h| h.batch)
                    })
            })
            .filter(|batch| pending(*batch));
        match batch {
            Some(batch) => {
                self.incomplete.handle_unsaved(batch, id);
                Unsaved::Batch(batch)
            }
            None => Unsaved::Recover,
        }
    }

    /// The connection sent the CLOSE of `subscription_id` at `now`: a page the watchdog gave
    /// up gives its slot back only now. Returns whether it did, so queued starts may go.
    pub fn handle_close_sent(&mut self, now: Instant, subscription_id: &SubscriptionId) -> bool {
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return false;
        };
        session.handle_close_sent(ledger, subscription_id, now)
    }

    /// The session's next message for its connection, oldest first.
    pub fn poll_transmit(&mut self) -> Option<Outbound> {
        self.session.as_mut()?.transmit.poll_transmit()
    }

    /// The next store read or NIP-77 round to perform, oldest first, with the session that
    /// asked: its report is stale once that session has ended.
    pub fn poll_job(&mut self) -> Option<(SessionKey, Job)> {
        self.jobs.poll_job()
    }

    /// Drops every job not yet performed (the relay is retired). Returns how many were NIP-77
    /// rounds, whose history slots the driver gives back.
    pub fn abandon_jobs(&mut self) -> usize {
        std::iter::from_fn(|| self.jobs.poll_job())
            .filter(|(_, job)| matches!(job, Job::RunRound { .. }))
            .count()
    }

    /// The next dial attempt to hand to the dial workers, oldest first.
    pub fn poll_dial(&mut self) -> Option<Dial> {
        self.dials.poll_dial()
    }

    /// The earliest instant this relay's machine wants the clock: its own timers, the
    /// session's timers and AUTH wait, the extra connections' AUTH waits, the ledger's next
    /// expiry, and, while connected, the end of a refused-coverage pause.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let session = self.session.as_ref();
        [
            self.timers.poll_timeout(),
            session.and_then(|s| s.timers.poll_timeout()),
            session.and_then(|s| s.auth.poll_timeout()),
            self.lanes.poll_timeout(),
            self.ledger.as_ref().and_then(|l| l.poll_timeout()),
            session.and_then(|_| self.refused.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Subscriptions held on the wire now (live groups whose REQ still waits do not count).
    pub fn held_subscriptions(&self) -> usize {
        self.session.as_ref().map_or(0, |s| s.held_subscriptions())
    }

    /// Updates the peak of held subscriptions.
    pub fn note_peak(&mut self) {
        let held = self.held_subscriptions();
        self.stats.peak_subscriptions = self.stats.peak_subscriptions.max(held);
    }

    /// Fires the coverage retry if it is due at `now` and nothing holds it back: a health
    /// pause, or refused work parked for the session's AUTH, re-arms it for when that ends.
    /// `true` when the coverage is to be derived again now.
    pub fn take_coverage_retry(&mut self, now: Instant) -> bool {
        if !self.timers.is_due(RelayTimer::CoverageRetry, now) {
            return false;
        }
        let parked = self.session.as_ref().and_then(|s| s.auth.poll_timeout());
        match self.health.sync_paused_until(now).max(parked) {
            Some(until) if until > now => {
                self.timers.set(RelayTimer::CoverageRetry, until);
                false
            }
            _ => {
                self.timers.cancel(RelayTimer::CoverageRetry);
                true
            }
        }
    }

    /// Fires the session's live-repair timer if it is due at `now`: a rebuild if one was
    /// deferred, otherwise a repair.
    pub fn take_live_repair(&mut self, now: Instant) -> Option<LiveRepair> {
        let session = self.session.as_mut()?;
        if !session.timers.take_due(SessionTimer::LiveRepair, now) {
            return None;
        }
        Some(if std::mem::take(&mut session.rebuild_pending) {
            LiveRepair::Rebuild
        } else {
            LiveRepair::Repair
        })
    }

    /// Whether queued starts should be tried at `now`: some wait (historic, NIP-77 or live)
    /// and no gate asked them to wait longer. Level-triggered, so no released slot is missed.
    pub fn wants_drive(&self, now: Instant) -> bool {
        self.session.as_ref().is_some_and(|s| {
            (!s.queue.is_empty() || !s.neg_queue.is_empty() || !s.live_queue.is_empty())
                && !s.timers.is_waiting(SessionTimer::GateWait, now)
        })
    }
}
