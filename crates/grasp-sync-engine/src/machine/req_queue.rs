//! The rule that starts a session's queued REQs ([`RelayMachine::drive_history`]): first the
//! live groups waiting for the reactive gate, then the queued historic pages and exact-ID
//! fetches, in order, while the ledger has room and both gates allow.
//!
//! A queued start the reactive gate rejects (a query-rate cooldown), or one whose coverage a
//! policy refusal paused while it waited (unless its batch is that coverage's recovery probe),
//! is dropped with every other start of its batch, and the batch is named for the driver to
//! fail and derive again. A start that must wait for a gate arms [`SessionTimer::GateWait`];
//! one that waits for a slot is woken by the release.

use std::time::Instant;

use grasp_sync_ledger::{ClassCounts, LedgerError};
use grasp_sync_model::BatchId;
use nostr::SubscriptionId;

use crate::machine::admission::{self, Room, StartAdmission};
use crate::machine::relay::RelayMachine;
use crate::machine::session::{LiveDriven, Transient};
use crate::machine::timers::SessionTimer;
use crate::machine::transmit::Outbound;

#[cfg(test)]
mod tests;

/// One historic REQ [`RelayMachine::drive_history`] queued for sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedReq {
    /// The REQ's subscription.
    pub subscription_id: SubscriptionId,
    /// Its batch.
    pub batch: BatchId,
    /// How many filters it carries.
    pub filters: usize,
}

/// A batch whose queued starts were dropped, to be failed and derived again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DroppedBatch {
    /// The batch.
    pub batch: BatchId,
    /// Why its starts were dropped.
    pub why: Dropped,
}

/// Why a batch's queued starts were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The reactive gate rejected its head (a query-rate cooldown).
    Rejected,
    /// A policy refusal paused its coverage while it waited.
    PausedCoverage,
}

/// Why [`RelayMachine::drive_history`] stopped starting historic REQs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueStop {
    /// Nothing is queued (or there is no session).
    Empty,
    /// The head waits for a health pause or a gate until `until` (armed as
    /// [`SessionTimer::GateWait`]).
    WaitUntil(Instant),
    /// The head waits for a released slot: `residual` slots are free and `held` are taken.
    WaitForSlot {
        /// Slots free.
        residual: usize,
        /// Slots taken, by class.
        held: ClassCounts,
    },
    /// The ledger refused the head a permit although the room check passed.
    NoPermit(LedgerError),
}

/// What one [`RelayMachine::drive_history`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDrive {
    /// What the live queue did first.
    pub live: LiveDriven,
    /// Historic REQs queued for sending, in order.
    pub started: Vec<StartedReq>,
    /// Batches whose queued starts were dropped: to be failed and derived again.
    pub dropped: Vec<DroppedBatch>,
    /// Why it stopped.
    pub stop: QueueStop,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// Sends the session's queued live REQs while the reactive gate allows at `now`, counting
    /// them in the relay's statistics.
    pub fn drive_live(&mut self, now: Instant) -> LiveDriven {
        let driven = self
            .session
            .as_mut()
            .map(|session| session.drive_live(now))
            .unwrap_or_default();
        self.stats.req_starts_live += driven.sent as u64;
        driven
    }

    /// Starts the session's queued REQs at `now` (see the module). Counted in the relay's
    /// statistics; nothing starts without a session and a ledger.
    pub fn drive_history(&mut self, now: Instant) -> QueueDrive {
        let mut drive = QueueDrive {
            live: LiveDriven::default(),
            started: Vec::new(),
            dropped: Vec::new(),
            stop: QueueStop::Empty,
        };
        let paused_until = self
            .health
            .sync_paused_until(now)
            .filter(|until| *until > now);
        if self.ledger.is_none() {
            return drive;
        }
        let Some(session) = self.session.as_mut() else {
            return drive;
        };
        session.timers.cancel(SessionTimer::GateWait);
        drive.live = self.drive_live(now);
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return drive;
        };
        while let Some(front) = session.queue.front() {
            let counts = ledger.counts();
            let room = Room {
                residual: ledger.residual(),
                held: counts.transient_reqs(),
                cap: ledger.budget().transient_req_cap(),
            };
            let (background, reactive) = (&mut session.background, &mut session.reactive);
            match admission::admit(now, front.kind, paused_until, room, background, reactive) {
                StartAdmission::Ready => {}
                StartAdmission::WaitUntil(at) => {
                    session.timers.set_earliest(SessionTimer::GateWait, at);
                    drive.stop = QueueStop::WaitUntil(at);
                    break;
                }
                StartAdmission::WaitForRelease => {
                    drive.stop = QueueStop::WaitForSlot {
                        residual: room.residual,
                        held: counts,
                    };
                    break;
                }
                StartAdmission::Rejected(_) => {
                    let batch = front.batch;
                    session.queue.retain(|q| q.batch != batch);
                    drive.dropped.push(DroppedBatch {
                        batch,
                        why: Dropped::Rejected,
                    });
                    continue;
                }
            }
            let Some(start) = session.queue.pop_front() else {
                break;
            };
            // A recovery probe is what may send paused coverage.
            if !self.refused.is_probe(start.batch)
                && self
                    .refused
                    .blocks(now, &start.pagination.current_filters())
            {
                let batch = start.batch;
                session.queue.retain(|q| q.batch != batch);
                drive.dropped.push(DroppedBatch {
                    batch,
                    why: Dropped::PausedCoverage,
                });
                continue;
            }
            let permit = match ledger.acquire(
                now,
                ledger.generation(),
                start.class,
                start.subscription_id.clone(),
            ) {
                Ok(permit) => permit,
                Err(error) => {
                    session.queue.push_front(start);
                    drive.stop = QueueStop::NoPermit(error);
                    break;
                }
            };
            let filters = start.pagination.current_filters();
            let filter_count = filters.len();
            session.transmit.push(Outbound::Req {
                subscription_id: start.subscription_id.clone(),
                filters,
            });
            self.stats.req_starts_historic += 1;
            let sent = session.next_sent(&start.subscription_id, filter_count);
            drive.started.push(StartedReq {
                subscription_id: start.subscription_id.clone(),
                batch: start.batch,
                filters: filter_count,
            });
            session.transients.insert(
                start.subscription_id,
                Transient {
                    batch: start.batch,
                    permit: Some(permit),
                    pagination: start.pagination,
                    watchdog_closing: false,
                    sent,
                    exact: start.exact,
                },
            );
        }
        self.note_peak();
        drive
    }
}
