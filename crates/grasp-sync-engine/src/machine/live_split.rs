//! How a session's live coverage is split between the session and the relay's extra
//! connections (lever 4). The ledger's planner packs what fits next to the groups the session
//! holds. What it leaves out depends on why:
//! - core coverage (repositories and roots) left out for the session's slot budget overflows
//!   to the extra connections;
//! - descendant coverage left out for slots is deferred to history, which has its own paced
//!   fallback;
//! - coverage left out for a learned byte cap goes to the paced catch-up, and then nothing
//!   overflows: the extra connections would meet the same cap.
//!
//! Essential coverage that does not fit whole is split: the session takes what fits, and the
//! core tiers behind it overflow too.

use grasp_sync_filters::{CoverageTier, TieredFilter};
use grasp_sync_ledger::{
    DeferReason, Deferred, HeldGroup, LiveBudget, LivePlan, PlanRefusal, plan_live,
    plan_live_fitting,
};

use crate::machine::lanes::lane_tier;

/// The session's share of some live coverage, and what goes elsewhere.
#[derive(Debug)]
pub struct LiveSplit {
    /// The change to the session's live set. Its deferrals hold what goes to history or to
    /// the catch-up.
    pub plan: LivePlan,
    /// Core coverage for the extra connections.
    pub overflow: Vec<TieredFilter>,
    /// Why essential coverage was split, when it did not fit the session whole.
    pub split_for: Option<PlanRefusal>,
}

/// Splits `incoming` between a session holding `held` within `budget` and the extra
/// connections. Fails only when the planner refuses for another reason than essential
/// coverage that does not fit (a packing failure): then nothing is live.
pub fn split_live(
    held: &[HeldGroup],
    incoming: Vec<TieredFilter>,
    budget: &LiveBudget,
) -> Result<LiveSplit, PlanRefusal> {
    match plan_live(held, incoming.clone(), budget) {
        Ok(mut plan) => {
            let overflow = take_overflow(&mut plan);
            Ok(LiveSplit {
                plan,
                overflow,
                split_for: None,
            })
        }
        Err(refusal @ PlanRefusal::EssentialDoesNotFit { .. }) => {
            let fitted = plan_live_fitting(held, incoming, budget);
            let mut plan = fitted.plan;
            let (overflow, descendants): (Vec<TieredFilter>, Vec<TieredFilter>) =
                fitted.rest.into_iter().partition(|f| lane_tier(f.tier));
            for tier in CoverageTier::ALL {
                let filters: Vec<TieredFilter> = descendants
                    .iter()
                    .filter(|f| f.tier == tier)
                    .cloned()
                    .collect();
                if !filters.is_empty() {
                    plan.deferred.push(Deferred {
                        tier,
                        reason: DeferReason::SlotBudget,
                        filters,
                    });
                }
            }
            Ok(LiveSplit {
                plan,
                overflow,
                split_for: Some(refusal),
            })
        }
        Err(refusal) => Err(refusal),
    }
}

/// Core coverage the plan left out for the session's slot budget (not for a learned byte
/// cap, which the catch-up serves), taken out of the plan's deferrals.
fn take_overflow(plan: &mut LivePlan) -> Vec<TieredFilter> {
    if plan.needs_catch_up() {
        return Vec::new();
    }
    let (overflow, kept): (Vec<Deferred>, Vec<Deferred>) = std::mem::take(&mut plan.deferred)
        .into_iter()
        .partition(|d| {
            matches!(
                d.reason,
                DeferReason::SlotBudget | DeferReason::HigherTierDeferred
            ) && lane_tier(d.tier)
        });
    plan.deferred = kept;
    overflow.into_iter().flat_map(|d| d.filters).collect()
}

#[cfg(test)]
mod tests;
