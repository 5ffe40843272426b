//! Applying a live plan to a session ([`RelayMachine::apply_live_plan`]): the plan's retired
//! groups are closed and its new ones opened atomically, and if admission fails the retired
//! groups are restored. New groups are admitted at once and their REQs sent through the
//! reactive gate (at once unless a query-rate episode spaces starts). During a query-rate
//! cooldown nothing changes: live coverage is re-derived when it ends
//! ([`SessionState::defer_for_cooldown`](crate::machine::session::SessionState)).

use std::collections::BTreeSet;
use std::time::Instant;

use grasp_sync_filters::{CompactGroup, Compactor};
use grasp_sync_ledger::{LedgerError, LivePlan};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::live_history::LivePages;
use crate::machine::relay::RelayMachine;
use crate::machine::session::{LiveDriven, LiveGroup, UNSENT};

#[cfg(test)]
mod tests;

/// What became of a live plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanOutcome {
    /// Its groups are held (a no-op plan too).
    Applied,
    /// The ledger would refuse its new groups (transient subscriptions hold the slots): the
    /// groups held stay as they are.
    RolledBack,
    /// Nothing changed: a query-rate cooldown, or no session.
    Deferred,
}

/// Why a plan was not applied as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanHeldBack {
    /// A query-rate cooldown runs: planning waits for its end.
    Cooldown,
    /// Asked before anything was closed, the ledger would refuse the new groups: the groups
    /// held stay, with no CLOSE and no REQ sent again.
    WouldBeRefused(LedgerError),
    /// The ledger refused the new groups after the retired ones were closed: those were
    /// admitted again.
    Refused(LedgerError),
}

/// What one [`RelayMachine::apply_live_plan`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanApplied {
    /// What became of the plan.
    pub outcome: PlanOutcome,
    /// Why it was not applied as it was, if it was not.
    pub held_back: Option<PlanHeldBack>,
    /// What the live queue did after the plan's groups were queued.
    pub driven: LiveDriven,
}

impl PlanApplied {
    fn held_back(outcome: PlanOutcome, why: Option<PlanHeldBack>) -> Self {
        Self {
            outcome,
            held_back: why,
            driven: LiveDriven::default(),
        }
    }
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// Applies `plan` to the session at `now` (see the module); its new groups take the
    /// subscription IDs `ids`, one per group, in order.
    pub fn apply_live_plan(
        &mut self,
        now: Instant,
        plan: LivePlan,
        ids: Vec<SubscriptionId>,
    ) -> PlanApplied {
        self.apply_live_plan_as(now, plan, ids, None).0
    }

    /// [`RelayMachine::apply_live_plan`], with each group the plan opens carrying the first
    /// page of `history`'s batch over its filters among `history`'s when it is applied as it
    /// was
    /// ([`crate::machine::live_history`]); returns those pages too.
    pub(crate) fn apply_live_plan_as(
        &mut self,
        now: Instant,
        plan: LivePlan,
        ids: Vec<SubscriptionId>,
        history: Option<(BatchId, &BTreeSet<Filter>)>,
    ) -> (PlanApplied, LivePages) {
        if plan.is_noop() {
            return (
                PlanApplied::held_back(PlanOutcome::Applied, None),
                LivePages::default(),
            );
        }
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return (
                PlanApplied::held_back(PlanOutcome::Deferred, None),
                LivePages::default(),
            );
        };
        if session.defer_for_cooldown(now) {
            return (
                PlanApplied::held_back(PlanOutcome::Deferred, Some(PlanHeldBack::Cooldown)),
                LivePages::default(),
            );
        }
        let released = plan
            .close
            .iter()
            .filter(|id| session.live.contains_key(*id))
            .count();
        if !plan.open.is_empty()
            && let Err(error) = ledger.check_live_admission(released, plan.open.len())
        {
            return (
                PlanApplied::held_back(
                    PlanOutcome::RolledBack,
                    Some(PlanHeldBack::WouldBeRefused(error)),
                ),
                LivePages::default(),
            );
        }
        for id in &plan.close {
            session.close_live(ledger, id, now);
        }
        // Compacted together, the groups keep each list of values they share once.
        let mut compactor = Compactor::default();
        let opened: Vec<(SubscriptionId, CompactGroup)> = ids
            .into_iter()
            .zip(plan.open.iter().map(|group| compactor.group(group)))
            .collect();
        let mut outcome = PlanOutcome::Applied;
        let mut held_back = None;
        let admitted = match ledger.admit_live(
            now,
            ledger.generation(),
            opened.iter().map(|(id, _)| id.clone()).collect(),
        ) {
            Ok(permits) => Some((opened, permits)),
            Err(error) => {
                outcome = PlanOutcome::RolledBack;
                held_back = Some(PlanHeldBack::Refused(error));
                let reopen: Vec<(SubscriptionId, CompactGroup)> = plan
                    .rollback
                    .reopen
                    .into_iter()
                    .map(|held| (held.subscription_id, held.group))
                    .collect();
                let reopen_ids: Vec<SubscriptionId> =
                    reopen.iter().map(|(id, _)| id.clone()).collect();
                ledger
                    .admit_live(now, ledger.generation(), reopen_ids)
                    .ok()
                    .map(|permits| (reopen, permits))
            }
        };
        let mut opened_ids = Vec::new();
        if let Some((groups, permits)) = admitted {
            for ((id, group), permit) in groups.into_iter().zip(permits) {
                session.live_queue.push_back(id.clone());
                session.live.insert(
                    id.clone(),
                    LiveGroup {
                        group,
                        permit,
                        sent: UNSENT,
                        history: None,
                    },
                );
                opened_ids.push(id);
            }
        }
        let pages = match history.filter(|_| outcome == PlanOutcome::Applied) {
            Some((batch, page)) => self.attach_live_pages(&opened_ids, batch, page),
            None => LivePages::default(),
        };
        let driven = self.drive_live(now);
        self.note_peak();
        (
            PlanApplied {
                outcome,
                held_back,
                driven,
            },
            pages,
        )
    }
}
