//! Packing at production scale: REQ counts against the byte floor and packing efficiency.

use grasp_sync_filters::{
    FilterBudget, PackLimits, Window, pack_requests, repo_tag_filters, root_event_tag_filters,
};

use crate::support::{gitnostr_set, large_set, packing};

const REQ_BYTES: usize = 96 * 1024;

#[test]
fn gitnostr_set_needs_at_most_the_byte_floor_plus_one_req_per_tag_family() {
    let (repos, roots) = gitnostr_set();
    let budget = FilterBudget::default();
    let limits = PackLimits::default();
    for window in [Window::Live, Window::since(None)] {
        let coordinate_family =
            repo_tag_filters(&repos, window, &budget).expect("valid test input");
        let id_family = root_event_tag_filters(&roots, window, &budget).expect("valid test input");
        for family in [coordinate_family, id_family] {
            let figures = packing(
                &pack_requests(family, &limits).expect("valid test input"),
                REQ_BYTES,
            );
            assert!(
                figures.reqs <= figures.byte_floor + 1,
                "{figures:?} needs more than the byte floor + 1"
            );
        }
    }
}

#[test]
fn large_set_packs_at_ninety_percent_efficiency_or_better() {
    let (repos, roots) = large_set();
    let budget = FilterBudget::default();
    let mut filters = repo_tag_filters(&repos, Window::Live, &budget).expect("valid test input");
    filters
        .extend(root_event_tag_filters(&roots, Window::Live, &budget).expect("valid test input"));
    let figures = packing(
        &pack_requests(filters, &PackLimits::default()).expect("valid test input"),
        REQ_BYTES,
    );
    assert!(figures.efficiency >= 0.9, "{figures:?}");
}
