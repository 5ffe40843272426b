//! Tests of the hydration decision, one per rule, through one `check` helper.

use std::collections::BTreeSet;

use grasp_sync_filters::{FilterBudget, MAX_IDS_PER_FILTER};
use nostr::EventId;
use proptest::prelude::*;

use super::{HydrationOutcome, HydrationPass};

fn id(n: u32) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    EventId::from_byte_array(bytes)
}

fn ids(range: std::ops::Range<u32>) -> Vec<EventId> {
    range.map(id).collect()
}

/// A pass over IDs `0..advertised` in which IDs `0..delivered` arrived.
fn pass(advertised: u32, delivered: u32) -> HydrationPass {
    let mut pass = HydrationPass::new(ids(0..advertised).into_iter().collect());
    for n in 0..delivered {
        assert!(pass.handle_delivered(id(n)));
    }
    pass
}

fn check(advertised: u32, delivered: u32, first_pass: bool, expected: HydrationOutcome) {
    assert_eq!(
        pass(advertised, delivered).decide(first_pass),
        expected,
        "advertised {advertised}, delivered {delivered}, first pass {first_pass}"
    );
}

#[test]
fn every_id_delivered_is_complete() {
    check(50, 50, true, HydrationOutcome::Complete);
    check(3, 3, false, HydrationOutcome::Complete);
    check(0, 0, true, HydrationOutcome::Complete);
}

#[test]
fn first_pass_with_20_advertised_and_at_most_10_percent_delivered_falls_back_to_semantic() {
    check(20, 0, true, HydrationOutcome::SemanticFallback);
    check(20, 2, true, HydrationOutcome::SemanticFallback);
    check(1_000, 100, true, HydrationOutcome::SemanticFallback);
}

#[test]
fn first_pass_delivering_more_than_10_percent_retries_the_residual() {
    check(20, 3, true, HydrationOutcome::RetryResidual(ids(3..20)));
    check(
        1_000,
        101,
        true,
        HydrationOutcome::RetryResidual(ids(101..1_000)),
    );
}

#[test]
fn first_pass_with_fewer_than_20_advertised_retries_even_when_nothing_arrived() {
    check(19, 0, true, HydrationOutcome::RetryResidual(ids(0..19)));
    check(1, 0, true, HydrationOutcome::RetryResidual(ids(0..1)));
}

#[test]
fn retry_without_progress_fails_the_batch_with_its_residual() {
    check(
        17,
        0,
        false,
        HydrationOutcome::Failed {
            residual: ids(0..17),
        },
    );
}

#[test]
fn semantic_fallback_is_reserved_for_the_first_pass() {
    check(
        500,
        0,
        false,
        HydrationOutcome::Failed {
            residual: ids(0..500),
        },
    );
    check(
        500,
        10,
        false,
        HydrationOutcome::RetryResidual(ids(10..500)),
    );
}

#[test]
fn retry_with_progress_retries_the_smaller_residual() {
    check(40, 39, false, HydrationOutcome::RetryResidual(ids(39..40)));
}

#[test]
fn duplicates_and_unadvertised_ids_do_not_count_as_delivered() {
    let mut pass = pass(20, 2);
    assert!(!pass.handle_delivered(id(0)));
    assert!(!pass.handle_delivered(id(999)));
    assert_eq!(pass.delivered(), 2);
    assert_eq!(pass.decide(true), HydrationOutcome::SemanticFallback);
}

#[test]
fn exact_id_filters_cover_every_id_once_with_at_most_300_per_filter() {
    let pass = pass(1_000, 0);
    let filters = pass.filters(&FilterBudget::default()).expect("filters");
    assert_eq!(filters.len(), 4);
    let mut covered = BTreeSet::new();
    for tiered in &filters {
        let in_filter = tiered.filter.ids.as_ref().expect("ids filter");
        assert!(in_filter.len() <= MAX_IDS_PER_FILTER);
        for id in in_filter {
            assert!(covered.insert(*id), "{id} in two filters");
        }
    }
    assert_eq!(&covered, pass.advertised());
}

proptest! {
    /// Whatever the relay delivers, passes end: each retry must shrink the residual, and the
    /// residual is always what was advertised and never delivered.
    #[test]
    fn passes_always_end_and_residuals_only_shrink(
        advertised in 0u32..200,
        deliveries in proptest::collection::vec(proptest::collection::vec(0u32..250, 0..80), 1..300),
    ) {
        let mut current: BTreeSet<EventId> = ids(0..advertised).into_iter().collect();
        let mut first_pass = true;
        let mut passes = 0;
        for delivered in deliveries {
            passes += 1;
            let mut pass = HydrationPass::new(current.clone());
            for n in delivered {
                pass.handle_delivered(id(n));
            }
            let residual: BTreeSet<EventId> = pass.residual().into_iter().collect();
            prop_assert!(residual.is_subset(&current));
            match pass.decide(first_pass) {
                HydrationOutcome::RetryResidual(next) => {
                    prop_assert!(!next.is_empty());
                    let next: BTreeSet<EventId> = next.into_iter().collect();
                    prop_assert_eq!(&next, &residual);
                    if !first_pass {
                        prop_assert!(next.len() < current.len());
                    }
                    current = next;
                    first_pass = false;
                }
                HydrationOutcome::Failed { residual: failed } => {
                    prop_assert!(!first_pass);
                    prop_assert_eq!(failed.len(), current.len());
                    break;
                }
                HydrationOutcome::Complete => {
                    prop_assert!(residual.is_empty());
                    break;
                }
                HydrationOutcome::SemanticFallback => {
                    prop_assert!(first_pass);
                    break;
                }
            }
        }
        prop_assert!(passes <= advertised as usize + 2);
    }
}
