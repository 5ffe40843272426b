//! Unit tests of the live planner: duplicate removal, tail repacking, complete-tier admission,
//! refusal, regrouping, rollback, and a property test that plans stay within their budgets.

use std::collections::BTreeSet;

use grasp_sync_filters::{CoverageTier, PackLimits, TieredFilter, pack_requests};
use nostr::{Filter, SubscriptionId};
use proptest::prelude::*;

use super::*;

/// A live filter whose payload grows with `size` (a `#d` value of that many bytes).
fn filter(name: &str, size: usize, tier: CoverageTier) -> TieredFilter {
    let value = format!("{name}{}", "x".repeat(size.saturating_sub(name.len())));
    TieredFilter::new(Filter::new().limit(0).identifier(value), tier)
}

fn essential(name: &str) -> TieredFilter {
    filter(name, 8, CoverageTier::Essential)
}

fn budget(slots: usize, max_filters: usize, max_bytes: usize) -> LiveBudget {
    LiveBudget {
        slots,
        limits: PackLimits {
            max_req_bytes: max_bytes,
            max_filters_per_req: max_filters,
        },
        persistent_bytes: None,
    }
}

/// Packs `filters` as held groups named `h0`, `h1`, ... (one group per call of `pack_requests`).
fn held(groups: &[Vec<TieredFilter>], limits: &PackLimits) -> Vec<HeldGroup> {
    groups
        .iter()
        .flat_map(|filters| pack_requests(filters.clone(), limits).expect("packable"))
        .enumerate()
        .map(|(i, group)| HeldGroup {
            subscription_id: SubscriptionId::new(format!("h{i}")),
            group: group.into(),
        })
        .collect()
}

fn ids(names: &[&str]) -> Vec<SubscriptionId> {
    names.iter().map(|n| SubscriptionId::new(*n)).collect()
}

/// The held set after executing `plan`.
fn apply(held: &[HeldGroup], plan: &LivePlan, round: usize) -> Vec<HeldGroup> {
    let closed: BTreeSet<&SubscriptionId> = plan.close.iter().collect();
    let mut after: Vec<HeldGroup> = held
        .iter()
        .filter(|h| !closed.contains(&h.subscription_id))
        .cloned()
        .collect();
    after.extend(plan.open.iter().enumerate().map(|(i, group)| HeldGroup {
        subscription_id: SubscriptionId::new(format!("r{round}-{i}")),
        group: group.into(),
    }));
    after
}

fn open_sizes(plan: &LivePlan) -> Vec<usize> {
    plan.open.iter().map(|g| g.filters.len()).collect()
}

#[test]
fn exact_duplicates_are_removed_against_held_groups_and_within_input() {
    let b = budget(20, 1, 96 * 1024);
    let held = held(&[vec![essential("a")]], &b.limits);
    let plan = plan_live(
        &held,
        vec![essential("a"), essential("b"), essential("b")],
        &b,
    )
    .expect("fits");
    assert_eq!(plan.open.len(), 1);
    assert_eq!(plan.open[0].filters, vec![essential("b")]);
    assert!(plan.close.is_empty());
}

#[test]
fn incoming_already_held_is_a_noop() {
    let b = budget(20, 10, 96 * 1024);
    let held = held(&[vec![essential("a"), essential("b")]], &b.limits);
    let plan = plan_live(&held, vec![essential("b")], &b).expect("fits");
    assert!(plan.is_noop());
    assert!(plan.admitted.is_empty());
}

/// A live filter over several `#d` values.
fn identifiers(values: &[&str], tier: CoverageTier) -> TieredFilter {
    TieredFilter::new(
        Filter::new().limit(0).identifiers(values.iter().copied()),
        tier,
    )
}

#[test]
fn coverage_held_under_another_packing_is_a_noop() {
    let b = budget(20, 10, 96 * 1024);
    let held = held(
        &[
            vec![identifiers(&["a", "b"], CoverageTier::Essential)],
            vec![identifiers(&["c"], CoverageTier::Essential)],
        ],
        &b.limits,
    );
    let asked = vec![identifiers(&["c", "b", "a"], CoverageTier::Essential)];
    let plan = plan_live(&held, asked.clone(), &b).expect("fits");
    assert!(plan.is_noop(), "{plan:?}");
    let fitted = plan_live_fitting(&held, asked, &b);
    assert!(
        fitted.plan.is_noop() && fitted.rest.is_empty(),
        "{fitted:?}"
    );
}

#[test]
fn only_the_values_the_held_groups_lack_are_opened() {
    let b = budget(20, 1, 96 * 1024);
    let held = held(
        &[vec![identifiers(&["a", "b"], CoverageTier::Essential)]],
        &b.limits,
    );
    let plan = plan_live(
        &held,
        vec![identifiers(&["a", "x", "b", "y"], CoverageTier::Essential)],
        &b,
    )
    .expect("fits");
    // One filter per REQ: the held group is full, so the rest opens beside it.
    assert!(plan.close.is_empty());
    let opened: Vec<TieredFilter> = plan.open.iter().flat_map(|g| g.filters.clone()).collect();
    assert_eq!(
        opened,
        vec![identifiers(&["x", "y"], CoverageTier::Essential)]
    );
}

#[test]
fn coverage_held_under_another_tier_is_opened_in_its_own() {
    let b = budget(20, 10, 96 * 1024);
    let held = held(
        &[vec![identifiers(&["a"], CoverageTier::RootUppercase)]],
        &b.limits,
    );
    let asked = identifiers(&["a"], CoverageTier::Essential);
    let plan = plan_live(&held, vec![asked.clone()], &b).expect("fits");
    let opened: Vec<TieredFilter> = plan.open.iter().flat_map(|g| g.filters.clone()).collect();
    assert_eq!(opened, vec![asked]);
}

#[test]
fn complete_mutable_tail_is_repacked_when_that_frees_a_slot() {
    let b = budget(20, 4, 96 * 1024);
    let held = held(
        &[vec![essential("a"), essential("b")], vec![essential("c")]],
        &b.limits,
    );
    let plan = plan_live(&held, vec![essential("d")], &b).expect("fits");
    assert_eq!(plan.close, ids(&["h0", "h1"]));
    assert_eq!(open_sizes(&plan), vec![4]);
    assert_eq!(plan.live_groups, 1);
}

#[test]
fn otherwise_only_the_smallest_useful_subset_is_retired() {
    let b = budget(20, 4, 96 * 1024);
    let held = held(
        &[
            vec![essential("a1"), essential("a2"), essential("a3")],
            vec![essential("b1"), essential("b2"), essential("b3")],
        ],
        &b.limits,
    );
    let plan = plan_live(&held, vec![essential("c")], &b).expect("fits");
    assert_eq!(plan.close.len(), 1, "one group absorbs the new filter");
    assert_eq!(open_sizes(&plan), vec![4]);
    assert_eq!(plan.live_groups, 2);
}

#[test]
fn no_tail_change_helps_so_new_groups_are_appended() {
    let b = budget(20, 2, 96 * 1024);
    let held = held(&[vec![essential("a"), essential("b")]], &b.limits);
    let plan = plan_live(&held, vec![essential("c"), essential("d")], &b).expect("fits");
    assert!(plan.close.is_empty(), "the held group is full");
    assert_eq!(open_sizes(&plan), vec![2]);
}

#[test]
fn full_byte_bound_groups_are_not_rebuilt_for_being_short_of_the_filter_count() {
    let b = budget(20, 10, 1000);
    let big = |n| filter(n, 440, CoverageTier::Essential);
    let held = held(&[vec![big("a"), big("b")]], &b.limits);
    assert_eq!(held.len(), 1);
    assert!(held[0].group.payload_bytes() > 1000 - 100);
    let plan = plan_live(&held, vec![filter("c", 60, CoverageTier::Essential)], &b).expect("fits");
    assert!(plan.close.is_empty(), "two of ten filters, but byte-full");
    assert_eq!(open_sizes(&plan), vec![1]);
}

#[test]
fn tiers_are_admitted_whole_in_priority_order() {
    // B = 10: 7 live slots after the margin and one transient slot.
    let b = budget(10, 1, 96 * 1024);
    let tier = |t, n: usize| -> Vec<TieredFilter> {
        (0..n).map(|i| filter(&format!("{t:?}{i}"), 8, t)).collect()
    };
    let mut incoming = tier(CoverageTier::Essential, 2);
    incoming.extend(tier(CoverageTier::RootUppercase, 3));
    incoming.extend(tier(CoverageTier::CoreCompat, 3));
    incoming.extend(tier(CoverageTier::DescendantCanonical, 1));
    let plan = plan_live(&[], incoming, &b).expect("essential fits");
    assert_eq!(
        plan.admitted,
        vec![CoverageTier::Essential, CoverageTier::RootUppercase]
    );
    assert_eq!(plan.live_groups, 5);
    let deferred: Vec<_> = plan
        .deferred
        .iter()
        .map(|d| (d.tier, d.reason, d.filters.len()))
        .collect();
    assert_eq!(
        deferred,
        vec![
            (CoverageTier::CoreCompat, DeferReason::SlotBudget, 3),
            (
                CoverageTier::DescendantCanonical,
                DeferReason::HigherTierDeferred,
                1
            ),
        ]
    );
}

#[test]
fn historic_only_coverage_is_never_live() {
    let b = budget(20, 10, 96 * 1024);
    let plan = plan_live(&[], vec![filter("h", 8, CoverageTier::HistoricOnly)], &b).expect("ok");
    assert!(plan.is_noop());
    assert_eq!(plan.deferred[0].reason, DeferReason::HistoricOnly);
}

#[test]
fn essential_that_cannot_fit_opens_nothing_and_says_why() {
    let b = budget(5, 1, 96 * 1024);
    let incoming = vec![essential("a"), essential("b"), essential("c")];
    assert_eq!(
        plan_live(&[], incoming, &b),
        Err(PlanRefusal::EssentialDoesNotFit {
            needed: 3,
            available: 2
        })
    );
}

#[test]
fn plans_keep_the_margin_and_one_transient_slot() {
    let b = budget(20, 1, 96 * 1024);
    let essentials = |n: usize| {
        (0..n)
            .map(|i| essential(&format!("e{i}")))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        plan_live(&[], essentials(17), &b).map(|p| p.live_groups),
        Ok(17)
    );
    assert_eq!(
        plan_live(&[], essentials(18), &b),
        Err(PlanRefusal::EssentialDoesNotFit {
            needed: 18,
            available: 17
        })
    );
}

#[test]
fn coverage_beyond_the_learned_byte_cap_is_reported_for_catch_up() {
    let mut b = budget(20, 10, 96 * 1024);
    let plan = plan_live(&[], vec![essential("a")], &b).expect("fits");
    b.persistent_bytes = Some(plan.live_bytes + 10);
    let held = apply(&[], &plan, 0);
    let more = vec![filter("r", 50, CoverageTier::RootUppercase)];
    let capped = plan_live(&held, more.clone(), &b).expect("essential is held");
    assert!(capped.is_noop());
    assert!(capped.needs_catch_up());
    assert_eq!(capped.deferred[0].filters, more);
}

#[test]
fn held_groups_over_a_lowered_ceiling_are_regrouped() {
    let wide = budget(20, 4, 96 * 1024);
    let held = held(
        &[vec![
            essential("a"),
            essential("b"),
            essential("c"),
            essential("d"),
        ]],
        &wide.limits,
    );
    let narrow = budget(20, 2, 96 * 1024);
    let plan = plan_live(&held, vec![], &narrow).expect("fits");
    assert_eq!(plan.close, ids(&["h0"]));
    assert_eq!(open_sizes(&plan), vec![2, 2]);
}

#[test]
fn rollback_reopens_exactly_the_retired_groups() {
    let b = budget(20, 4, 96 * 1024);
    let held = held(&[vec![essential("a")], vec![essential("b")]], &b.limits);
    let plan = plan_live(&held, vec![essential("c")], &b).expect("fits");
    let reopened: Vec<_> = plan
        .rollback
        .reopen
        .iter()
        .map(|h| h.subscription_id.clone())
        .collect();
    assert_eq!(reopened, plan.close);
    assert_eq!(plan.rollback.reopen, held);
}

#[test]
fn planner_wraps_plan_live_with_its_budget() {
    let session = crate::SessionBudget::from_nip11(Some(10));
    let mut learned = crate::LearnedLimits::new();
    learned.handle_filter_count_refusal(std::time::Instant::now(), Some(3));
    let planner = LivePlanner::new(LiveBudget::new(&session, &learned, PackLimits::default()));
    assert_eq!(planner.budget().limits.max_filters_per_req, 2);
    assert_eq!(planner.budget().max_live(), 7);
    let plan = planner
        .plan(&[], vec![essential("a"), essential("b"), essential("c")])
        .expect("ok");
    assert_eq!(open_sizes(&plan), vec![2, 1]);
}

fn tiered() -> impl Strategy<Value = TieredFilter> {
    (0usize..40, 1usize..600, 0usize..6)
        .prop_map(|(name, size, tier)| filter(&format!("f{name}-"), size, CoverageTier::ALL[tier]))
}

proptest! {
    #[test]
    fn a_plan_never_exceeds_the_budgets_it_was_given(
        slots in 0usize..16,
        max_filters in 1usize..6,
        max_bytes in 700usize..3000,
        cap in proptest::option::of(0usize..8000),
        batches in proptest::collection::vec(proptest::collection::vec(tiered(), 0..12), 1..4),
    ) {
        let budget = LiveBudget {
            slots,
            limits: PackLimits { max_req_bytes: max_bytes, max_filters_per_req: max_filters },
            persistent_bytes: cap,
        };
        let mut live: Vec<HeldGroup> = Vec::new();
        for (round, batch) in batches.into_iter().enumerate() {
            let Ok(plan) = plan_live(&live, batch.clone(), &budget) else { continue };
            let after = apply(&live, &plan, round);
            prop_assert_eq!(after.len(), plan.live_groups);
            prop_assert!(after.len() <= budget.max_live());
            let bytes: usize = after.iter().map(|h| h.group.payload_bytes()).sum();
            prop_assert_eq!(bytes, plan.live_bytes);
            if let Some(cap) = cap {
                prop_assert!(bytes <= cap);
            }
            for group in &plan.open {
                prop_assert!(group.filters.len() <= max_filters);
                prop_assert!(group.payload_bytes <= max_bytes);
            }
            let live_filters: BTreeSet<Filter> =
                after.iter().flat_map(|h| h.group.to_filters()).collect();
            let deferred: BTreeSet<&Filter> =
                plan.deferred.iter().flat_map(|d| d.filters.iter().map(|f| &f.filter)).collect();
            for f in &batch {
                prop_assert!(live_filters.contains(&f.filter) || deferred.contains(&f.filter));
            }
            live = after;
        }
    }
}

#[test]
fn essential_too_big_for_one_connection_is_split_across_connections() {
    // Two live groups per connection (5 slots less the margin and a transient slot).
    let b = budget(5, 1, 96 * 1024);
    let incoming: Vec<TieredFilter> = ["e", "d", "c", "b", "a"].map(essential).to_vec();
    let first = plan_live_fitting(&[], incoming.clone(), &b);
    assert_eq!(first.plan.open.len(), 2);
    assert!(first.plan.deferred.is_empty());
    assert_eq!(
        first.rest,
        vec![essential("c"), essential("d"), essential("e")]
    );
    let second = plan_live_fitting(&[], first.rest.clone(), &b);
    assert_eq!(second.plan.open.len(), 2);
    assert_eq!(second.rest, vec![essential("e")]);
    let third = plan_live_fitting(&[], second.rest, &b);
    assert!(third.rest.is_empty());
    // The same input splits the same way.
    assert_eq!(plan_live_fitting(&[], incoming, &b), first);
}

#[test]
fn a_fitting_plan_fills_the_room_left_next_to_held_groups_and_keeps_tier_order() {
    let b = budget(6, 1, 96 * 1024);
    let held = held(&[vec![essential("h")]], &b.limits);
    let incoming = vec![
        filter("u", 8, CoverageTier::RootUppercase),
        essential("a"),
        essential("b"),
        filter("q", 8, CoverageTier::HistoricOnly),
    ];
    let fitted = plan_live_fitting(&held, incoming, &b);
    // Three live groups fit: the held one and the two essential filters.
    assert_eq!(fitted.plan.live_groups, 3);
    assert_eq!(fitted.plan.admitted, vec![CoverageTier::Essential]);
    // The lower tier waits for the next connection; historic-only coverage is never live.
    assert_eq!(
        fitted.rest,
        vec![filter("u", 8, CoverageTier::RootUppercase)]
    );
}

#[test]
fn coverage_that_fits_whole_is_planned_as_plan_live_plans_it() {
    let b = budget(20, 2, 96 * 1024);
    let incoming = vec![essential("a"), essential("b"), essential("c")];
    let fitted = plan_live_fitting(&[], incoming.clone(), &b);
    assert_eq!(Ok(fitted.plan), plan_live(&[], incoming, &b));
    assert!(fitted.rest.is_empty());
}

proptest! {
    #[test]
    fn connections_filled_in_turn_hold_every_live_filter_once_within_budget(
        slots in 4usize..10,
        max_filters in 1usize..4,
        incoming in proptest::collection::vec(tiered(), 0..40),
    ) {
        let budget = LiveBudget {
            slots,
            limits: PackLimits { max_req_bytes: 4000, max_filters_per_req: max_filters },
            persistent_bytes: None,
        };
        let mut rest: Vec<TieredFilter> =
            incoming.iter().filter(|f| f.tier.may_be_live()).cloned().collect();
        let mut placed: Vec<Filter> = Vec::new();
        for _ in 0..100 {
            if rest.is_empty() {
                break;
            }
            let fitted = plan_live_fitting(&[], rest, &budget);
            prop_assert!(fitted.plan.live_groups <= budget.max_live());
            // Every filter here fits a group alone, so each connection takes something.
            prop_assert!(!fitted.plan.open.is_empty());
            placed.extend(fitted.plan.open.iter().flat_map(|g| g.filters.iter().map(|f| f.filter.clone())));
            rest = fitted.rest;
        }
        prop_assert!(rest.is_empty());
        let wanted: BTreeSet<Filter> = incoming
            .iter()
            .filter(|f| f.tier.may_be_live())
            .map(|f| f.filter.clone())
            .collect();
        let unique: BTreeSet<Filter> = placed.iter().cloned().collect();
        prop_assert_eq!(unique.len(), placed.len());
        prop_assert_eq!(unique, wanted);
    }
}
