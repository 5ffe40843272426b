//! Wire tests: the actual REQ messages of produced groups, with a 64-character subscription ID,
//! checked against every budget.

use grasp_sync_filters::{
    Coverage, DEFAULT_MAX_FILTER_BYTES, FilterBudget, FilterGroup, PackLimits, pack_requests,
};
use nostr::{ClientMessage, JsonUtil, SubscriptionId, Timestamp};

use crate::support::{Rng, addressable, event_ids, repos};

const SUBSCRIPTION_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Serialises each group as a REQ and checks sizes, budgets and the round trip.
fn check_wire(groups: &[FilterGroup], limits: &PackLimits) {
    assert_eq!(SUBSCRIPTION_ID.len(), 64);
    for group in groups {
        let filters = group.to_filters();
        let message = ClientMessage::req(SubscriptionId::new(SUBSCRIPTION_ID), filters.clone());
        let json = message.as_json();
        assert_eq!(json.len(), group.req_message_bytes(SUBSCRIPTION_ID));
        let envelope = grasp_sync_filters::req_envelope_bytes(SUBSCRIPTION_ID);
        assert!(
            json.len() - envelope <= limits.max_req_bytes,
            "REQ payload over budget"
        );
        assert!(filters.len() <= limits.max_filters_per_req);
        for filter in &filters {
            assert!(
                filter.as_json().len() < DEFAULT_MAX_FILTER_BYTES,
                "filter over budget"
            );
        }
        let parsed = ClientMessage::from_json(&json).expect("valid test input");
        assert_eq!(parsed, message);
    }
}

fn coverage_groups(limits: &PackLimits, historic: bool) -> Vec<FilterGroup> {
    let mut rng = Rng::new(7);
    let full = repos(&mut rng, 400);
    let state_only = repos(&mut rng, 100);
    let roots = event_ids(&mut rng, 2_000);
    let members = event_ids(&mut rng, 700);
    let addressable = addressable(&mut rng, 150);
    let coverage = Coverage {
        full_repos: &full,
        state_only_repos: &state_only,
        roots: &roots,
        direct_members: &members,
        addressable_members: &addressable,
    };
    let budget = FilterBudget::default();
    let filters = if historic {
        coverage
            .historic_filters(Some(Timestamp::from(1_700_000_000)), None, &budget)
            .expect("valid test input")
    } else {
        coverage.live_filters(&budget).expect("valid test input")
    };
    pack_requests(filters, limits).expect("valid test input")
}

#[test]
fn live_req_messages_fit_every_budget() {
    for ceiling in [10, 5, 2, 1] {
        let limits = PackLimits::default().with_max_filters(ceiling);
        check_wire(&coverage_groups(&limits, false), &limits);
    }
}

#[test]
fn historic_req_messages_fit_every_budget() {
    let limits = PackLimits::default();
    check_wire(&coverage_groups(&limits, true), &limits);
}

#[test]
fn a_full_next_page_still_fits_its_budget() {
    let limits = PackLimits::default();
    for group in coverage_groups(&limits, true) {
        for filter in group.to_filters() {
            let next = filter.until(Timestamp::from(u64::MAX));
            assert!(next.as_json().len() < DEFAULT_MAX_FILTER_BYTES);
        }
    }
}

#[test]
fn exact_id_req_messages_fit_every_budget() {
    let mut rng = Rng::new(3);
    let ids = event_ids(&mut rng, 5_000);
    let filters = grasp_sync_filters::exact_id_filters(&ids, &FilterBudget::default())
        .expect("valid test input");
    assert!(
        filters
            .iter()
            .all(|f| f.filter.ids.as_ref().expect("valid test input").len() <= 300)
    );
    let limits = PackLimits::default();
    check_wire(
        &pack_requests(filters, &limits).expect("valid test input"),
        &limits,
    );
}
