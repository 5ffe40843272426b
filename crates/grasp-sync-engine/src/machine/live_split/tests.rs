//! The split of live coverage: core coverage left out for slots overflows to the extra
//! connections, descendant coverage left out goes to history, and nothing overflows when a
//! byte cap is what left coverage out.

use grasp_sync_filters::PackLimits;
use nostr::{Filter, Timestamp};

use super::*;

/// Five slots leave two live groups; one filter per REQ makes each filter a group.
fn budget(persistent_bytes: Option<usize>) -> LiveBudget {
    LiveBudget {
        slots: 5,
        limits: PackLimits {
            max_filters_per_req: 1,
            ..PackLimits::default()
        },
        persistent_bytes,
    }
}

fn filters(tier: CoverageTier, prefix: &str, n: usize) -> Vec<TieredFilter> {
    (0..n)
        .map(|i| {
            TieredFilter::new(
                Filter::new()
                    .limit(0)
                    .identifier(format!("{prefix}-{i}"))
                    .since(Timestamp::from_secs(1)),
                tier,
            )
        })
        .collect()
}

fn tiers(filters: &[TieredFilter]) -> Vec<CoverageTier> {
    filters.iter().map(|f| f.tier).collect()
}

fn deferred(plan: &LivePlan) -> Vec<(CoverageTier, DeferReason, usize)> {
    plan.deferred
        .iter()
        .map(|d| (d.tier, d.reason, d.filters.len()))
        .collect()
}

#[test]
fn coverage_that_fits_stays_on_the_session_and_overflows_nothing() {
    let split = split_live(
        &[],
        filters(CoverageTier::Essential, "repo", 2),
        &budget(None),
    )
    .expect("planned");
    assert_eq!(split.plan.open.len(), 2);
    assert!(split.overflow.is_empty());
    assert!(split.split_for.is_none());
    assert!(split.plan.deferred.is_empty());
}

#[test]
fn essential_coverage_too_large_for_the_session_is_split_and_descendants_go_to_history() {
    let mut incoming = filters(CoverageTier::Essential, "repo", 4);
    incoming.extend(filters(CoverageTier::CoreCompat, "quote", 1));
    incoming.extend(filters(CoverageTier::DescendantCanonical, "member", 2));
    let split = split_live(&[], incoming, &budget(None)).expect("planned");
    assert_eq!(split.plan.open.len(), 2, "the session takes what fits");
    assert!(matches!(
        split.split_for,
        Some(PlanRefusal::EssentialDoesNotFit { .. })
    ));
    assert_eq!(
        tiers(&split.overflow),
        [
            CoverageTier::Essential,
            CoverageTier::Essential,
            CoverageTier::CoreCompat
        ],
        "the rest of the core tiers overflow"
    );
    assert_eq!(
        deferred(&split.plan),
        [(
            CoverageTier::DescendantCanonical,
            DeferReason::SlotBudget,
            2
        )]
    );
}

#[test]
fn a_core_tier_left_out_for_slots_overflows_and_the_descendants_behind_it_wait() {
    let mut incoming = filters(CoverageTier::Essential, "repo", 1);
    incoming.extend(filters(CoverageTier::CoreCompat, "quote", 3));
    incoming.extend(filters(CoverageTier::DescendantCanonical, "member", 1));
    let split = split_live(&[], incoming, &budget(None)).expect("planned");
    assert!(split.split_for.is_none(), "essential coverage fits");
    assert_eq!(split.plan.open.len(), 1);
    assert_eq!(tiers(&split.overflow), [CoverageTier::CoreCompat; 3]);
    assert_eq!(
        deferred(&split.plan),
        [(
            CoverageTier::DescendantCanonical,
            DeferReason::HigherTierDeferred,
            1
        )]
    );
}

#[test]
fn coverage_left_out_for_a_byte_cap_goes_to_the_catch_up_not_to_other_connections() {
    let mut incoming = filters(CoverageTier::Essential, "repo", 1);
    incoming.extend(filters(CoverageTier::CoreCompat, "quote", 1));
    let one_group = split_live(
        &[],
        filters(CoverageTier::Essential, "repo", 1),
        &budget(None),
    )
    .expect("planned")
    .plan
    .live_bytes;
    let split = split_live(&[], incoming, &budget(Some(one_group))).expect("planned");
    assert_eq!(split.plan.open.len(), 1);
    assert!(split.plan.needs_catch_up());
    assert!(split.overflow.is_empty());
    assert_eq!(
        deferred(&split.plan),
        [(CoverageTier::CoreCompat, DeferReason::ByteBudget, 1)]
    );
}
