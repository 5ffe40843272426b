//! A session's queued NIP-77 rounds and the rule that starts them
//! ([`RelayMachine::drive_negentropy`]).
//!
//! Each filter of a batch reconciled by NIP-77 waits in the session's queue as a [`NegRound`]
//! until its "have" set is read from the store, a round permit and a history slot are free,
//! and both gates allow. The rounds keep their queue order: a head still being read holds back
//! the ones behind it. The history slot is checked before the gates are asked, so a gate
//! never counts a start that then waits. While the relay's NIP-77 support is unknown only one
//! round runs, as the probe, and the others wait for its report; once the relay is known not
//! to speak NIP-77, every queued batch falls back to REQ+EOSE, as does the head's batch when
//! the reactive gate refuses NIP-77 (it is off, or a query-rate cooldown is on).
//!
//! A round decided here is queued as a [`Job::RunRound`], behind the store reads of the
//! rounds now at the head ([`prepare_ahead`]), so those are started first.

use std::collections::BTreeSet;
use std::time::Instant;

use grasp_sync_ledger::{LedgerError, NEGENTROPY_ROUND_CAP, PermitClass, ReleaseReason, StartKind};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::admission::{self, Room, StartAdmission};
use crate::machine::holdings_round::{HoldingsPlacement, HoldingsRound};
use crate::machine::jobs::{HaveSet, HaveSource, HistorySlots, Job, Jobs};
use crate::machine::neg_batch::NegBatch;
use crate::machine::nip77::{NegentropyError, NoNip77, RoundStart};
use crate::machine::relay::RelayMachine;
use crate::machine::session::SessionState;
use crate::machine::session_auth::AuthState;
use crate::machine::timers::SessionTimer;
use crate::machine::transmit::SessionKey;

#[cfg(test)]
mod tests;

/// Queued rounds per session whose "have" set is read ahead of their turn: the head of the
/// queue and the one behind it. Enough that the head is ready when the gate next opens (rounds
/// start at most one per second, a read takes milliseconds); few enough that a long queue
/// holds at most two "have" sets per relay.
pub const PREPARED_AHEAD: usize = 2;

/// A negentropy round waiting for its "have" set, a permit, a history slot and the gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegRound {
    /// The round's subscription, which the driver registers in its batch.
    pub subscription_id: SubscriptionId,
    /// Its batch.
    pub batch: BatchId,
    /// The filter it reconciles.
    pub filter: Filter,
    /// How far its "have" set is.
    pub have: Preparation,
    /// Where its "have" set is read from.
    pub source: HaveSource,
}

/// How far a queued round's "have" set is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preparation {
    /// Not asked for yet (the round is further back than [`PREPARED_AHEAD`]).
    Unread,
    /// A preparation job is reading it.
    Reading,
    /// Read: the round may start when a slot and the gates allow.
    Read(HaveSet),
}

impl NegRound {
    /// A round of `batch` over `filter`, its "have" set not asked for yet.
    pub fn new(subscription_id: SubscriptionId, batch: BatchId, filter: Filter) -> Self {
        Self {
            subscription_id,
            batch,
            filter,
            have: Preparation::Unread,
            source: HaveSource::Store,
        }
    }
}

/// One round [`RelayMachine::drive_negentropy`] started: its NEG-OPEN is queued as a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedRound {
    /// The round's subscription.
    pub subscription_id: SubscriptionId,
    /// Its batch.
    pub batch: BatchId,
    /// Whether it is the session's probe of NIP-77 support.
    pub probe: bool,
}

/// Why [`RelayMachine::drive_negentropy`] stopped starting rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegStop {
    /// The queue is empty, or its head waits: for its read, the probe's report, a released
    /// permit or a gate (whose wait is armed as [`SessionTimer::GateWait`]).
    Waiting,
    /// Every history slot is taken: a running round's report frees one.
    NoHistorySlot,
    /// The ledger refused the head a permit although the room check passed.
    NoPermit(LedgerError),
    /// The relay does not speak NIP-77: these queued batches fall back to REQ+EOSE.
    Off {
        /// Why the relay does not speak NIP-77.
        reason: NoNip77,
        /// The batches with queued rounds.
        batches: BTreeSet<BatchId>,
    },
    /// The reactive gate refuses NIP-77 now: the head's batch falls back to REQ+EOSE.
    Rejected {
        /// The head's batch.
        batch: BatchId,
    },
}

/// What one [`RelayMachine::drive_negentropy`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegDrive {
    /// Rounds started, in order.
    pub started: Vec<StartedRound>,
    /// Why it stopped.
    pub stop: NegStop,
}

/// A round of the current session that ended ([`RelayMachine::handle_round_ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundEnded {
    /// The round's batch.
    pub batch: BatchId,
    /// It started before the session authenticated (its refusal may predate the AUTH).
    pub before_auth: bool,
}

/// Asks for the store reads of the first [`PREPARED_AHEAD`] queued rounds that have none yet.
pub fn prepare_ahead<Parked>(session: &mut SessionState<NegRound, Parked>, jobs: &mut Jobs) {
    let key = &session.key;
    for round in session.neg_queue.iter_mut().take(PREPARED_AHEAD) {
        if round.have == Preparation::Unread {
            round.have = Preparation::Reading;
            jobs.push(
                key.clone(),
                Job::ReadHaveSet {
                    subscription_id: round.subscription_id.clone(),
                    filter: round.filter.clone(),
                    source: round.source.clone(),
                },
            );
        }
    }
}

impl<Parked> RelayMachine<NegRound, Parked> {
    /// Whether the session may reconcile by NIP-77: the relay is not known not to speak it,
    /// and the reactive gate allows NIP-77 (no query-rate episode turned it off). False
    /// without a session.
    pub fn nip77_rounds_allowed(&self) -> bool {
        self.nip77.allows_rounds()
            && self
                .session
                .as_ref()
                .is_some_and(|s| s.reactive.nip77_allowed())
    }

    /// Queues one round per filter of `batch` at the back of the session's queue, under the
    /// IDs `next_id` gives, with the batch's NIP-77 side. With `check_held`, a read of how much
    /// of the batch the store holds is asked first (at most `max_held` events read; see
    /// [`super::job_reports`]). The rounds now at the head have their "have" sets asked for.
    /// Returns each round's subscription and filter, for the driver to register in the batch;
    /// `None` without a session.
    pub fn queue_negentropy_batch(
        &mut self,
        batch: BatchId,
        filters: Vec<Filter>,
        check_held: bool,
        max_held: usize,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> Option<Vec<(SubscriptionId, Filter)>> {
        let session = self.session.as_mut()?;
        let rounds: Vec<NegRound> = filters
            .iter()
            .map(|filter| NegRound::new(next_id(), batch, filter.clone()))
            .collect();
        let queued = rounds
            .iter()
            .map(|round| (round.subscription_id.clone(), round.filter.clone()))
            .collect();
        if check_held {
            self.jobs.push(
                session.key.clone(),
                Job::ReadHeld {
                    batch,
                    filters: filters.clone(),
                    max_held,
                },
            );
        }
        session.neg_queue.extend(rounds);
        self.neg_batches
            .insert(batch, NegBatch::rounds(filters, check_held, max_held));
        prepare_ahead(session, &mut self.jobs);
        Some(queued)
    }

    /// Queues a round over the relay's holdings as `batch` (the daily run's, or a fresh
    /// start's over kept holdings): one round over `{}` under the ID `subscription_id`, its
    /// "have" set read from the relay's kept holdings (where none are kept, from the store
    /// under `coverage`, the relay's coverage named, or, without `coverage`, no round). The
    /// batch has no semantic filters, so nothing falls back to a REQ over `{}`: the driver
    /// turns any failure into named rounds. `None` without a session.
    pub fn queue_holdings_round(
        &mut self,
        batch: BatchId,
        subscription_id: SubscriptionId,
        coverage: Option<Vec<Filter>>,
    ) -> Option<()> {
        let session = self.session.as_mut()?;
        session.neg_queue.push_back(NegRound {
            source: HaveSource::Holdings { coverage },
            ..NegRound::new(subscription_id.clone(), batch, Filter::new())
        });
        self.neg_batches.insert(
            batch,
            NegBatch::rounds(
                Vec::new(),
                false,
                crate::machine::neg_batch::FIRST_SYNC_MAX_HELD,
            ),
        );
        self.holdings_round = Some(HoldingsRound::new(batch, subscription_id));
        prepare_ahead(session, &mut self.jobs);
        Some(())
    }

    /// Where coverage added to a session that started over the relay's kept holdings goes
    /// ([`OverHoldings`](crate::machine::holdings_round::OverHoldings)): into the batch of the
    /// round over them while it is queued, into the next round's once it started, or into a
    /// new one. `None` when the session did not start over kept holdings.
    pub fn place_over_holdings(&self) -> Option<HoldingsPlacement> {
        let round = self.holdings_round.as_ref().map(|round| {
            let queued = self.session.as_ref().is_some_and(|session| {
                session
                    .neg_queue
                    .iter()
                    .any(|queued| queued.subscription_id == round.subscription_id)
            });
            (round, !queued)
        });
        Some(self.over_holdings.as_ref()?.handle_added(round))
    }

    /// The rounds of `batch` still queued will not start (a gate refused NIP-77, or the relay
    /// does not speak it): they leave the queue, and the batch falls back to REQ+EOSE once
    /// every round ended. Returns their subscriptions, for the driver to resolve in the batch.
    pub fn drop_queued_rounds(&mut self, batch: BatchId) -> Vec<SubscriptionId> {
        let mut dropped = Vec::new();
        if let Some(session) = self.session.as_mut() {
            session.neg_queue.retain(|round| {
                if round.batch == batch {
                    dropped.push(round.subscription_id.clone());
                    false
                } else {
                    true
                }
            });
        }
        if let Some(neg) = self.neg_batches.get_mut(&batch) {
            neg.handle_round_failed();
        }
        dropped
    }

    /// Starts the session's queued rounds at `now` while the rules allow (see the module),
    /// taking a slot of `slots` and queueing a [`Job::RunRound`] for each, read through
    /// [`RelayMachine::poll_job`]. Nothing is started without a session and a ledger.
    pub fn drive_negentropy(&mut self, now: Instant, slots: &mut HistorySlots) -> NegDrive {
        self.nip77.handle_time(now);
        let learn = self.learning.is_some();
        let jobs = &mut self.jobs;
        let mut started = Vec::new();
        let paused_until = self.health.sync_paused_until(now);
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return NegDrive {
                started,
                stop: NegStop::Waiting,
            };
        };
        let stop = loop {
            let Some(front) = session.neg_queue.front() else {
                break NegStop::Waiting;
            };
            let probe = match self.nip77.poll_round() {
                RoundStart::Normal => false,
                RoundStart::Probe => true,
                RoundStart::AfterProbe => break NegStop::Waiting, // the probe's report
                RoundStart::Off(reason) => {
                    let batches = session.neg_queue.iter().map(|round| round.batch).collect();
                    return NegDrive {
                        started,
                        stop: NegStop::Off { reason, batches },
                    };
                }
            };
            let checking_held = self
                .neg_batches
                .get(&front.batch)
                .is_some_and(|neg| neg.checking_held);
            if !matches!(front.have, Preparation::Read(_)) || checking_held {
                break NegStop::Waiting; // its read reports back
            }
            let counts = ledger.counts();
            let room = Room {
                residual: ledger.residual(),
                held: counts.negentropy_rounds(),
                cap: NEGENTROPY_ROUND_CAP.min(ledger.residual() + counts.negentropy_rounds()),
            };
            match admission::wait_for_room(now, paused_until, room) {
                Some(StartAdmission::WaitUntil(until)) => {
                    session.timers.set_earliest(SessionTimer::GateWait, until);
                    break NegStop::Waiting;
                }
                Some(_) => break NegStop::Waiting, // a release wakes the queue
                None => {}
            }
            // A history slot must be free before the gates count the start; only this loop
            // takes one, so it is still free when the round is decided below.
            if !slots.is_free() {
                break NegStop::NoHistorySlot;
            }
            let (background, reactive) = (&mut session.background, &mut session.reactive);
            match admission::pass_gates(now, StartKind::NegentropyRound, background, reactive) {
                StartAdmission::Ready => {}
                StartAdmission::WaitUntil(at) => {
                    session.timers.set_earliest(SessionTimer::GateWait, at);
                    break NegStop::Waiting;
                }
                StartAdmission::WaitForRelease => break NegStop::Waiting,
                StartAdmission::Rejected(_) => {
                    let batch = front.batch;
                    return NegDrive {
                        started,
                        stop: NegStop::Rejected { batch },
                    };
                }
            }
            let Some(NegRound {
                subscription_id,
                batch,
                filter,
                have,
                source,
            }) = session.neg_queue.pop_front()
            else {
                break NegStop::Waiting;
            };
            let have = match have {
                Preparation::Read(have) => have,
                // The head was checked to be read above; nothing in between changes it.
                unread => {
                    session.neg_queue.push_front(NegRound {
                        subscription_id,
                        batch,
                        filter,
                        have: unread,
                        source,
                    });
                    break NegStop::Waiting;
                }
            };
            let permit = match ledger.acquire(
                now,
                ledger.generation(),
                PermitClass::NegentropyRound,
                subscription_id.clone(),
            ) {
                Ok(permit) => permit,
                Err(error) => {
                    session.neg_queue.push_front(NegRound {
                        subscription_id,
                        batch,
                        filter,
                        have: Preparation::Read(have),
                        source,
                    });
                    break NegStop::NoPermit(error);
                }
            };
            if probe {
                self.nip77.handle_probe_started(subscription_id.clone());
            }
            // The reads for the rounds now at the head are queued first, so they are started
            // before this round: a store that reads synchronously must not hold up its
            // NEG-OPEN.
            prepare_ahead(session, jobs);
            let taken = slots.try_take();
            debug_assert!(taken, "the slot was free above");
            jobs.push(
                session.key.clone(),
                Job::RunRound {
                    subscription_id: subscription_id.clone(),
                    filter,
                    have,
                    probe,
                    holdings: matches!(source, HaveSource::Holdings { .. }),
                    learn,
                },
            );
            if session.auth.state() != AuthState::Authenticated {
                session.rounds_before_auth.insert(subscription_id.clone());
            }
            session
                .neg_in_flight
                .insert(subscription_id.clone(), (batch, permit));
            started.push(StartedRound {
                subscription_id,
                batch,
                probe,
            });
        };
        self.note_peak();
        NegDrive { started, stop }
    }

    /// The round `subscription_id` of session `key` ended at `now` with `result`: NIP-77
    /// support learns from it (even when its batch was abandoned since: a probe's end is what
    /// the rounds behind it wait for), and its permit goes back to the ledger. `None` for a
    /// round of an ended session, or one no longer in flight.
    pub fn handle_round_ended<T>(
        &mut self,
        now: Instant,
        key: &SessionKey,
        subscription_id: &SubscriptionId,
        result: &Result<T, NegentropyError>,
    ) -> Option<RoundEnded> {
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return None;
        };
        if session.key != *key {
            return None; // the session it belonged to is gone, and its permit with it
        }
        self.nip77.handle_round_ended(now, subscription_id, result);
        let before_auth = session.rounds_before_auth.remove(subscription_id);
        let (batch, permit) = session.neg_in_flight.remove(subscription_id)?;
        let _ = ledger.handle_release(now, &permit, ReleaseReason::Closed);
        Some(RoundEnded { batch, before_auth })
    }

    /// Drops the session's NIP-77 work at `now` (a fresh start or a teardown): every batch's
    /// rounds, queued or in flight, whose permits go back to the ledger, and the batch that
    /// waited for the next round over the relay's holdings.
    pub fn abandon_negentropy(&mut self, now: Instant) {
        self.neg_batches.clear();
        self.holdings_round = None;
        if let Some(over) = self.over_holdings.as_mut() {
            over.take_next();
        }
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return;
        };
        session.neg_queue.clear();
        session.rounds_before_auth.clear();
        for (_, (_, permit)) in std::mem::take(&mut session.neg_in_flight) {
            let _ = ledger.handle_release(now, &permit, ReleaseReason::Closed);
        }
    }

    /// Forgets the NIP-77 side of `batch` (it failed): its state and its queued rounds.
    pub fn forget_negentropy_batch(&mut self, batch: BatchId) {
        self.neg_batches.remove(&batch);
        if let Some(session) = self.session.as_mut() {
            session.neg_queue.retain(|round| round.batch != batch);
        }
    }
}
