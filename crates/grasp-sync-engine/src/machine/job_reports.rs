//! A background job's report as an input of the relay's machine: a queued round's have-set
//! read ([`RelayMachine::handle_have_set`]), how much of a new batch's coverage the store
//! holds ([`RelayMachine::handle_held`]), and a round's result for its batch
//! ([`RelayMachine::handle_round_result`], after [`RelayMachine::handle_round_ended`] has
//! released the round). A report of a session that has ended since, or of a round or batch
//! that is gone, changes nothing.

use std::time::Instant;

use grasp_sync_health::Refusal;
use grasp_sync_model::BatchId;
use nostr::{EventId, SubscriptionId};

use crate::machine::jobs::HaveSet;
use crate::machine::neg_batch::{HistoryRoute, RelayFacts};
use crate::machine::neg_rounds::{NegRound, Preparation};
use crate::machine::nip77::NegentropyError;
use crate::machine::refusals::LimitsLearned;
use crate::machine::relay::RelayMachine;
use crate::machine::transmit::SessionKey;

#[cfg(test)]
mod tests;

/// What a have-set read did.
#[derive(Debug, PartialEq)]
pub enum HaveSetRead {
    /// The round is no longer queued in that session (it was replaced, the batch fell back or
    /// was abandoned): nothing.
    Stale,
    /// The round's have-set is read: it may start.
    Read,
    /// The read failed: the round left the queue, and ends as a failed round of `batch`, so
    /// the batch falls back to REQ+EOSE.
    Failed {
        /// The round's batch.
        batch: BatchId,
        /// Why, as a round's error.
        error: NegentropyError,
    },
}

/// How a new batch's history goes, now that the store said how much of it it holds.
#[derive(Debug, PartialEq)]
pub struct HeldRoute {
    /// NIP-77, or REQ+EOSE for a first sync of coverage the store barely holds.
    pub route: HistoryRoute,
    /// For REQ+EOSE: the batch's rounds, taken out of the queue; the driver resolves them in
    /// the batch before it falls back.
    pub dropped: Vec<SubscriptionId>,
}

impl<Parked> RelayMachine<NegRound, Parked> {
    /// The have-set read of round `subscription_id`, which session `key` queued, finished with
    /// `have`.
    pub fn handle_have_set(
        &mut self,
        key: &SessionKey,
        subscription_id: &SubscriptionId,
        have: Result<HaveSet, NegentropyError>,
    ) -> HaveSetRead {
        let Some(session) = self.session_of_mut(key) else {
            return HaveSetRead::Stale;
        };
        let Some(index) = session
            .neg_queue
            .iter()
            .position(|round| round.subscription_id == *subscription_id)
        else {
            return HaveSetRead::Stale;
        };
        match have {
            Ok(items) => {
                if let Some(round) = session.neg_queue.get_mut(index)
                    && matches!(round.have, Preparation::Reading)
                {
                    round.have = Preparation::Read(items);
                }
                HaveSetRead::Read
            }
            Err(error) => match session.neg_queue.remove(index) {
                Some(round) => HaveSetRead::Failed {
                    batch: round.batch,
                    error,
                },
                None => HaveSetRead::Stale,
            },
        }
    }

    /// The store said which events it holds of new batch `batch`'s coverage (`held`; `None`
    /// when the read failed), for session `key`; `facts` are what the driver knows of the
    /// relay. The batch's route is decided ([`NegBatch::handle_held`](
    /// crate::machine::neg_batch::NegBatch::handle_held)); for REQ+EOSE its queued rounds are
    /// dropped. `None` for a replaced session or a batch that is gone.
    pub fn handle_held(
        &mut self,
        key: &SessionKey,
        batch: BatchId,
        held: Option<&[EventId]>,
        facts: RelayFacts,
    ) -> Option<HeldRoute> {
        let session = self.session.as_mut().filter(|s| s.key == *key)?;
        let neg = self.neg_batches.get_mut(&batch)?;
        let route = neg.handle_held(held, facts, &self.delivered);
        let mut dropped = Vec::new();
        if route == HistoryRoute::ReqEose {
            session.neg_queue.retain(|round| {
                let of_batch = round.batch == batch;
                if of_batch {
                    dropped.push(round.subscription_id.clone());
                }
                !of_batch
            });
        }
        Some(HeldRoute { route, dropped })
    }

    /// A round of `batch` ended at `now` with `result`: its diff is kept for the batch's
    /// hydration, or the batch is marked for the REQ+EOSE fallback. A query-rate refusal is
    /// also counted, pauses the relay for its rate and starts the reactive cooldown, as for a
    /// refused REQ; it is returned, with what it taught, for the driver's metrics and log.
    pub fn handle_round_result(
        &mut self,
        now: Instant,
        batch: BatchId,
        result: Result<Vec<EventId>, NegentropyError>,
    ) -> Option<(Refusal, LimitsLearned)> {
        match result {
            Ok(missing) => {
                if let Some(neg) = self.neg_batches.get_mut(&batch) {
                    neg.handle_round_diff(missing);
                }
                None
            }
            Err(error) => {
                if let Some(neg) = self.neg_batches.get_mut(&batch) {
                    neg.handle_round_failed();
                }
                match error {
                    NegentropyError::RateLimited(text) => {
                        Some(self.handle_rate_refusal(now, &text))
                    }
                    _ => None,
                }
            }
        }
    }
}
