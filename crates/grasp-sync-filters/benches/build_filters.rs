//! Benchmark `build_filters`: building and packing live coverage for the gitnostr-sized set
//! (869 repositories, 3,632 roots) and for 100k event IDs with 20k coordinates.

// A benchmark reports its figures on standard output.
#![allow(clippy::print_stdout, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use grasp_sync_filters::{
    Coverage, FilterBudget, FilterGroup, PackLimits, Window, pack_requests, repo_tag_filters,
    root_event_tag_filters,
};
use grasp_sync_model::RepoCoordinate;
use nostr::EventId;

#[path = "../tests/it/support.rs"]
mod support;

fn build(repos: &[RepoCoordinate], roots: &[EventId]) -> Vec<FilterGroup> {
    let coverage = Coverage {
        full_repos: repos,
        roots,
        ..Coverage::default()
    };
    let filters = coverage
        .live_filters(&FilterBudget::default())
        .expect("filters");
    pack_requests(filters, &PackLimits::default()).expect("groups")
}

fn build_ids(roots: &[EventId]) -> Vec<FilterGroup> {
    let filters =
        root_event_tag_filters(roots, Window::Live, &FilterBudget::default()).expect("filters");
    pack_requests(filters, &PackLimits::default()).expect("groups")
}

fn report(name: &str, groups: &[FilterGroup]) {
    let p = support::packing(groups, PackLimits::default().max_req_bytes);
    println!(
        "{name}: {} filters, {} REQs (byte floor {}), {} payload bytes, efficiency {:.3}",
        p.filters, p.reqs, p.byte_floor, p.payload_bytes, p.efficiency
    );
}

fn build_filters(c: &mut Criterion) {
    let (gitnostr_repos, gitnostr_roots) = support::gitnostr_set();
    let (large_repos, large_roots) = support::large_set();
    report(
        "gitnostr (869 repos, 3632 roots)",
        &build(&gitnostr_repos, &gitnostr_roots),
    );
    let budget = FilterBudget::default();
    let limits = PackLimits::default();
    let coordinates = repo_tag_filters(&gitnostr_repos, Window::Live, &budget).expect("filters");
    let ids = root_event_tag_filters(&gitnostr_roots, Window::Live, &budget).expect("filters");
    report(
        "gitnostr a/A/q family",
        &pack_requests(coordinates, &limits).expect("groups"),
    );
    report(
        "gitnostr e/E/q family",
        &pack_requests(ids, &limits).expect("groups"),
    );
    report("100k ids", &build_ids(&large_roots));
    report(
        "100k ids + 20k coordinates",
        &build(&large_repos, &large_roots),
    );

    let mut group = c.benchmark_group("build_filters");
    group.sample_size(20);
    group.bench_function("gitnostr", |b| {
        b.iter(|| build(black_box(&gitnostr_repos), black_box(&gitnostr_roots)))
    });
    group.bench_function("100k_ids", |b| {
        b.iter(|| build_ids(black_box(&large_roots)))
    });
    group.bench_function("100k_ids_20k_coordinates", |b| {
        b.iter(|| build(black_box(&large_repos), black_box(&large_roots)))
    });
    group.finish();
}

criterion_group!(benches, build_filters);
criterion_main!(benches);
