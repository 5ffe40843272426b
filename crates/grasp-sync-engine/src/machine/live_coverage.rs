//! How a relay's live coverage is planned, in its machine. The driver derives the coverage
//! from the index; the machine decides what of it the session holds.
//!
//! - **Refused coverage stays out.** Coverage the relay refused by policy, paused or still
//!   suspect, is left out of every live plan: the driver passes each plan what
//!   [`RelayMachine::live_admitted`] leaves of its coverage.
//! - **Planned within the live budget.** The session's subscription budget, the learned
//!   limits and the packing limits bound every plan; what the session cannot hold is split
//!   by [`super::live_split`] between the extra connections, history and the catch-up.
//!   New coverage is planned next to the groups held, leaving out what the session or its extra
//!   connections hold already ([`RelayMachine::plan_live`]); a rebuild
//!   packs the complete set from scratch and replaces every group held, which the plan
//!   restores if admission fails ([`RelayMachine::plan_live_rebuild`]).
//! - **Consolidation.** Core groups opened one batch at a time fragment: once they exceed the
//!   complete set packed from scratch ([`RelayMachine::plan_live_from_scratch`]) by more than
//!   the margin, the set is rebuilt ([`RelayMachine::live_fragmented`], the rule in
//!   [`super::consolidation`]).
//! - **A rebuild waits.** During a query-rate cooldown, or after the ledger refused it while
//!   transient subscriptions held the slots, a rebuild is kept pending and tried again
//!   ([`RelayMachine::defer_rebuild`], [`RelayMachine::handle_rebuild_rolled_back`]).
//! - **Descendant coverage is auxiliary.** A rebuild retires it first, into the paced
//!   descendant fallback ([`RelayMachine::retire_auxiliary`]).

use std::time::{Duration, Instant};

use grasp_sync_filters::{PackLimits, TieredFilter, uncovered};
use grasp_sync_ledger::{LiveBudget, PlanRefusal};

use crate::machine::consolidation::is_fragmented;
use crate::machine::live_split::{LiveSplit, split_live};
use crate::machine::relay::RelayMachine;
use crate::machine::session::held_groups;
use crate::machine::timers::SessionTimer;

#[cfg(test)]
mod tests;

/// How long a rebuild the ledger refused waits before it is tried again: about one background
/// start, after which the transient subscriptions holding its slots may have ended.
pub const REBUILD_RETRY: Duration = Duration::from_secs(1);

/// Core live groups found fragmented against the complete set packed from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragmented {
    /// The core groups the session holds.
    pub core: usize,
    /// The groups the complete set needs when packed from scratch.
    pub baseline: usize,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// `incoming` without coverage the relay refused by policy (paused or still suspect).
    pub fn live_admitted(&self, incoming: Vec<TieredFilter>) -> Vec<TieredFilter> {
        if self.refused.is_empty() {
            return incoming;
        }
        incoming
            .into_iter()
            .flat_map(|f| {
                let tier = f.tier;
                self.refused
                    .live(vec![f.filter])
                    .into_iter()
                    .map(move |filter| TieredFilter::new(filter, tier))
            })
            .collect()
    }

    /// The session's plan for `incoming` (admitted: see [`RelayMachine::live_admitted`]) next to
    /// the groups it holds, and what goes elsewhere. `None` without a session; an error when
    /// the planner refuses for another reason than essential coverage that does not fit (then
    /// nothing is live).
    pub fn plan_live(&self, incoming: Vec<TieredFilter>) -> Option<Result<LiveSplit, PlanRefusal>> {
        let session = self.session.as_ref()?;
        let budget = self.live_budget()?;
        // What the extra connections hold is not planned again on this one.
        let incoming = uncovered(self.lanes.held_filters(), incoming);
        Some(split_live(&held_groups(&session.live), incoming, &budget))
    }

    /// The complete live set `complete` (admitted) packed from scratch, as if the session held
    /// nothing: the baseline of the consolidation check. `None` without a session; an error as
    /// [`RelayMachine::plan_live`].
    pub fn plan_live_from_scratch(
        &self,
        complete: Vec<TieredFilter>,
    ) -> Option<Result<LiveSplit, PlanRefusal>> {
        self.session.as_ref()?;
        let budget = self.live_budget()?;
        Some(split_live(&[], complete, &budget))
    }

    /// The complete live set `complete` (admitted) packed from scratch, as a plan that replaces
    /// every group the session holds and restores them if admission fails. `None` without a
    /// session; an error as [`RelayMachine::plan_live`].
    pub fn plan_live_rebuild(
        &self,
        complete: Vec<TieredFilter>,
    ) -> Option<Result<LiveSplit, PlanRefusal>> {
        let held = held_groups(&self.session.as_ref()?.live);
        let planned = self.plan_live_from_scratch(complete)?.map(|mut split| {
            split.plan.close = held.iter().map(|h| h.subscription_id.clone()).collect();
            split.plan.rollback.reopen = held;
            split
        });
        Some(planned)
    }

    /// Whether the session's core live groups are fragmented against `baseline`, the groups
    /// of the complete live set packed from scratch
    /// ([`RelayMachine::plan_live_from_scratch`]): more than `margin` groups above it. `None`
    /// without a session, or when they are not.
    pub fn live_fragmented(&self, baseline: usize, margin: usize) -> Option<Fragmented> {
        let core = self.session.as_ref()?.core_live();
        is_fragmented(core, baseline, margin).then_some(Fragmented { core, baseline })
    }

    /// The live set changed: a consolidation check is queued once the core groups pass
    /// `margin`.
    pub fn handle_live_changed(&mut self, margin: usize) {
        if let Some(session) = self.session.as_ref() {
            self.consolidation
                .handle_live_changed(session.core_live(), margin);
        }
    }

    /// Closes every auxiliary (descendant) live group at `now`: descendants fall back to paced
    /// history until the next session derives the mode again. Returns how many groups closed
    /// when that is news (some closed, or the fallback was not on yet); `None` without a
    /// session.
    pub fn retire_auxiliary(&mut self, now: Instant) -> Option<usize> {
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return None;
        };
        let closed = session.close_auxiliary(ledger, now);
        let news = closed > 0 || !self.descendants.is_constrained();
        self.descendants.set_constrained();
        news.then_some(closed)
    }

    /// Whether a rebuild of the live set must wait for the query-rate cooldown running at
    /// `now`; it is then kept pending, for the cooldown's end.
    pub fn defer_rebuild(&mut self, now: Instant) -> bool {
        self.session.as_mut().is_some_and(|session| {
            let deferred = session.defer_for_cooldown(now);
            session.rebuild_pending |= deferred;
            deferred
        })
    }

    /// The ledger refused a rebuild at `now` (transient subscriptions held the slots): the
    /// groups held stay, and the rebuild is tried again after [`REBUILD_RETRY`].
    pub fn handle_rebuild_rolled_back(&mut self, now: Instant) {
        if let Some(session) = self.session.as_mut() {
            session.rebuild_pending = true;
            session
                .timers
                .set_earliest(SessionTimer::LiveRepair, now + REBUILD_RETRY);
        }
    }

    /// The session's live budget: its ledger's budget, the learned limits and the packing
    /// limits. `None` before the first session.
    fn live_budget(&self) -> Option<LiveBudget> {
        let ledger = self.ledger.as_ref()?;
        Some(LiveBudget::new(
            &ledger.budget(),
            &self.learned,
            PackLimits::default(),
        ))
    }
}
