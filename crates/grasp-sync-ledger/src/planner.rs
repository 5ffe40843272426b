//! The pure live planner: given the held core groups, incoming filters and the budgets, it
//! returns the change to make ([`LivePlan`]: groups to open, groups to close, the rollback) or
//! why nothing may change ([`PlanRefusal`]).

use grasp_sync_filters::{
    CompactGroup, CoverageTier, FilterGroup, PackLimits, TieredFilter, uncovered,
};
use nostr::SubscriptionId;

use crate::error::PlanRefusal;
use crate::learned::LearnedLimits;
use crate::ledger::SessionBudget;

mod fitting;
mod tail;
#[cfg(test)]
mod tests;

pub use fitting::{FittedPlan, plan_live_fitting};

/// A live group the connection holds, with the subscription that carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldGroup {
    /// The subscription carrying the group.
    pub subscription_id: SubscriptionId,
    /// The group's filters (one tier) and payload size, in the compact form a group held for
    /// the life of a connection is kept in.
    pub group: CompactGroup,
}

/// The budgets a plan must stay within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveBudget {
    /// B, the session's subscription budget.
    pub slots: usize,
    /// REQ packing limits, with the learned filter-count ceiling applied.
    pub limits: PackLimits,
    /// Bytes persistent groups may retain (learned cap minus one transient REQ), if capped.
    pub persistent_bytes: Option<usize>,
}

impl LiveBudget {
    /// The budget of a session with `session` slots on a connection that learned `learned`,
    /// packing with `base` limits (lowered to the learned filter-count ceiling).
    pub fn new(session: &SessionBudget, learned: &LearnedLimits, base: PackLimits) -> LiveBudget {
        LiveBudget {
            slots: session.slots(),
            limits: learned.pack_limits(base),
            persistent_bytes: learned.persistent_byte_budget(base.max_req_bytes),
        }
    }

    /// Live groups allowed: B minus the reserved margin minus one transient slot.
    pub fn max_live(&self) -> usize {
        SessionBudget::from_slots(self.slots).max_live()
    }
}

/// Why incoming coverage was not made live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferReason {
    /// The tier is only ever fetched historically.
    HistoricOnly,
    /// The complete tier does not fit the live slot budget.
    SlotBudget,
    /// The complete tier does not fit the learned retained-byte budget: schedule the paced
    /// catch-up ([`CATCH_UP_INTERVAL`](crate::CATCH_UP_INTERVAL)).
    ByteBudget,
    /// A higher-priority tier was not admitted, so this one waits too.
    HigherTierDeferred,
}

/// Incoming coverage of one tier that the plan does not make live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// The tier.
    pub tier: CoverageTier,
    /// Why it stays out of the live set.
    pub reason: DeferReason,
    /// Its filters (after duplicate removal), for the historic or catch-up path.
    pub filters: Vec<TieredFilter>,
}

/// How to undo a plan whose execution failed part-way: close every group the plan opened, then
/// reopen these retired groups exactly as they were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollback {
    /// The groups the plan retires, to reopen on failure.
    pub reopen: Vec<HeldGroup>,
}

/// The change to make to the live set. Close the retired groups first, then open the new ones;
/// on failure apply [`rollback`](Self::rollback).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LivePlan {
    /// Groups to open, in tier order.
    pub open: Vec<FilterGroup>,
    /// Held subscriptions to close.
    pub close: Vec<SubscriptionId>,
    /// The undo of this plan.
    pub rollback: Rollback,
    /// Tiers whose incoming coverage is live after the plan.
    pub admitted: Vec<CoverageTier>,
    /// Incoming coverage left out of the live set, per tier.
    pub deferred: Vec<Deferred>,
    /// Live groups held after the plan.
    pub live_groups: usize,
    /// Payload bytes retained by live groups after the plan.
    pub live_bytes: usize,
}

impl LivePlan {
    /// Whether the plan changes nothing on the wire.
    pub fn is_noop(&self) -> bool {
        self.open.is_empty() && self.close.is_empty()
    }

    /// Whether coverage was left out for the byte budget, so the paced catch-up must run.
    pub fn needs_catch_up(&self) -> bool {
        self.deferred
            .iter()
            .any(|d| d.reason == DeferReason::ByteBudget)
    }
}

/// A planner bound to one session's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivePlanner {
    budget: LiveBudget,
}

impl LivePlanner {
    /// A planner for `budget`.
    pub fn new(budget: LiveBudget) -> LivePlanner {
        LivePlanner { budget }
    }

    /// The budgets plans must stay within.
    pub fn budget(&self) -> &LiveBudget {
        &self.budget
    }

    /// Plans the change for `incoming` next to `held`; see [`plan_live`].
    pub fn plan(
        &self,
        held: &[HeldGroup],
        incoming: Vec<TieredFilter>,
    ) -> Result<LivePlan, PlanRefusal> {
        plan_live(held, incoming, &self.budget)
    }
}

/// Plans the live change for `incoming` filters next to the `held` groups within `budget`.
///
/// Coverage the held groups of the same tier already hold is removed: a filter over one tag
/// list value by value, however the held groups spread those values
/// ([`grasp_sync_filters::uncovered`]), any other filter when a held one equals it. Exact
/// duplicates within the input are removed too. Tiers are taken
/// in priority order and each is admitted only whole: essential coverage first (refused if it
/// cannot fit), then each later tier while it fits with the margin and one transient slot kept;
/// the first tier that does not fit, and every tier after it, is deferred. Within a tier the
/// planner repacks the complete mutable tail (held groups with room left) when that frees at
/// least one slot, otherwise retires only the smallest useful subset of the tail, otherwise
/// appends new groups. Held groups that no longer fit the limits (a lowered filter-count
/// ceiling) are always regrouped.
pub fn plan_live(
    held: &[HeldGroup],
    incoming: Vec<TieredFilter>,
    budget: &LiveBudget,
) -> Result<LivePlan, PlanRefusal> {
    plan_not_held(held, not_held(held, incoming), budget)
}

/// `incoming` without the coverage the `held` groups of its tier already hold
/// ([`uncovered`]): a filter all of whose values they list is left out, one with some of
/// them keeps the others. Coverage held under another tier does not count: that tier may be
/// retired on its own.
pub(crate) fn not_held(held: &[HeldGroup], incoming: Vec<TieredFilter>) -> Vec<TieredFilter> {
    uncovered(held.iter().flat_map(|h| h.group.filters()), incoming)
}

/// [`plan_live`] for `incoming` the `held` groups do not cover (see `not_held`).
pub(crate) fn plan_not_held(
    held: &[HeldGroup],
    mut incoming: Vec<TieredFilter>,
    budget: &LiveBudget,
) -> Result<LivePlan, PlanRefusal> {
    incoming.sort_by(|a, b| a.filter.cmp(&b.filter).then(a.tier.cmp(&b.tier)));
    incoming.dedup_by(|later, kept| later.filter == kept.filter);

    let mut plan = LivePlan {
        live_groups: held.len(),
        live_bytes: held.iter().map(|h| h.group.payload_bytes()).sum(),
        ..LivePlan::default()
    };
    let max_live = budget.max_live();
    let mut stopped = false;
    for tier in CoverageTier::ALL {
        let new: Vec<TieredFilter> = incoming
            .iter()
            .filter(|f| f.tier == tier)
            .cloned()
            .collect();
        if !tier.may_be_live() {
            if !new.is_empty() {
                plan.deferred.push(Deferred {
                    tier,
                    reason: DeferReason::HistoricOnly,
                    filters: new,
                });
            }
            continue;
        }
        let held_tier: Vec<&HeldGroup> = held
            .iter()
            .filter(|h| h.group.tier() == Some(tier))
            .collect();
        if stopped {
            if !new.is_empty() {
                plan.deferred.push(Deferred {
                    tier,
                    reason: DeferReason::HigherTierDeferred,
                    filters: new,
                });
            }
            continue;
        }
        let Some(change) = tail::tier_change(&held_tier, &new, &budget.limits)? else {
            continue;
        };
        let groups = plan.live_groups + change.open.len() - change.close.len();
        let opened: usize = change.open.iter().map(|g| g.payload_bytes).sum();
        let retired: usize = change.close.iter().map(|h| h.group.payload_bytes()).sum();
        let bytes = plan.live_bytes + opened - retired;
        let reason = if groups > max_live {
            Some(DeferReason::SlotBudget)
        } else if budget.persistent_bytes.is_some_and(|cap| bytes > cap) {
            Some(DeferReason::ByteBudget)
        } else {
            None
        };
        match reason {
            None => {
                plan.live_groups = groups;
                plan.live_bytes = bytes;
                plan.open.extend(change.open);
                plan.rollback
                    .reopen
                    .extend(change.close.into_iter().cloned());
                plan.admitted.push(tier);
            }
            Some(DeferReason::SlotBudget) if tier == CoverageTier::Essential => {
                return Err(PlanRefusal::EssentialDoesNotFit {
                    needed: groups,
                    available: max_live,
                });
            }
            Some(reason) => {
                stopped = true;
                if !new.is_empty() {
                    plan.deferred.push(Deferred {
                        tier,
                        reason,
                        filters: new,
                    });
                }
            }
        }
    }
    // Close in the order the groups are held, so equal inputs give equal plans.
    let position = |h: &HeldGroup| {
        held.iter()
            .position(|g| g.subscription_id == h.subscription_id)
    };
    plan.rollback.reopen.sort_by_key(|h| position(h));
    plan.close = plan
        .rollback
        .reopen
        .iter()
        .map(|h| h.subscription_id.clone())
        .collect();
    Ok(plan)
}
