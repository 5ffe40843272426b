//! Splitting live coverage across connections: the largest part of the incoming coverage one
//! connection can hold next to its groups, and the rest for the next connection.

use grasp_sync_filters::TieredFilter;

use super::{DeferReason, HeldGroup, LiveBudget, LivePlan, not_held, plan_not_held};

/// What one connection takes of the incoming coverage ([`plan_live_fitting`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FittedPlan {
    /// The change that makes the fitted part live on this connection.
    pub plan: LivePlan,
    /// Incoming coverage this connection cannot hold, in admission order (tier, then filter),
    /// for the next connection.
    pub rest: Vec<TieredFilter>,
}

/// Plans as much of `incoming` as fits next to `held` within `budget`, splitting a tier where
/// [`plan_live`](super::plan_live) would admit it only whole.
///
/// The incoming filters that may be live, without the coverage held groups of their tier hold
/// already, are put in admission order (tier, then filter), exact duplicates of each other are
/// dropped, and the longest prefix whose plan
/// leaves nothing deferred is taken. Equal inputs give equal splits, so the assignment of
/// coverage to connections is deterministic. Historic-only filters are never live and appear
/// in neither part.
///
/// ```
/// use grasp_sync_filters::{CoverageTier, PackLimits, TieredFilter};
/// use grasp_sync_ledger::{LiveBudget, plan_live_fitting};
/// use nostr::Filter;
///
/// // Five slots keep two for live groups; one filter per REQ.
/// let budget = LiveBudget {
///     slots: 5,
///     limits: PackLimits { max_req_bytes: 96 * 1024, max_filters_per_req: 1 },
///     persistent_bytes: None,
/// };
/// let coverage: Vec<TieredFilter> = ["a", "b", "c"]
///     .into_iter()
///     .map(|d| TieredFilter::new(Filter::new().limit(0).identifier(d), CoverageTier::Essential))
///     .collect();
/// let first = plan_live_fitting(&[], coverage, &budget);
/// assert_eq!(first.plan.open.len(), 2);
/// let second = plan_live_fitting(&[], first.rest, &budget);
/// assert_eq!(second.plan.open.len(), 1);
/// assert!(second.rest.is_empty());
/// ```
pub fn plan_live_fitting(
    held: &[HeldGroup],
    incoming: Vec<TieredFilter>,
    budget: &LiveBudget,
) -> FittedPlan {
    let mut incoming: Vec<TieredFilter> = not_held(held, incoming)
        .into_iter()
        .filter(|f| f.tier.may_be_live())
        .collect();
    // A filter given under several tiers is kept once, under its highest.
    incoming.sort_by(|a, b| a.filter.cmp(&b.filter).then(a.tier.cmp(&b.tier)));
    incoming.dedup_by(|later, kept| later.filter == kept.filter);
    incoming.sort_by(|a, b| a.tier.cmp(&b.tier).then(a.filter.cmp(&b.filter)));

    let fits = |prefix: &[TieredFilter]| -> Option<LivePlan> {
        let plan = plan_not_held(held, prefix.to_vec(), budget).ok()?;
        plan.deferred
            .iter()
            .all(|d| d.reason == DeferReason::HistoricOnly)
            .then_some(plan)
    };
    if let Some(plan) = fits(&incoming) {
        return FittedPlan {
            plan,
            rest: Vec::new(),
        };
    }
    // `fits(&incoming[..lo])` holds (an empty prefix always fits); the whole does not.
    let (mut lo, mut hi) = (0, incoming.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(&incoming[..mid]).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let plan = fits(&incoming[..lo]).unwrap_or_else(|| LivePlan {
        live_groups: held.len(),
        live_bytes: held.iter().map(|h| h.group.payload_bytes()).sum(),
        ..LivePlan::default()
    });
    let rest = incoming.split_off(lo);
    FittedPlan { plan, rest }
}
