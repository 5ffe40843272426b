//! Benchmarks of the live planner on the gitnostr-sized set: a full plan from nothing, and an
//! incremental plan adding one root next to the complete held live set.

// `criterion_group!` generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use grasp_sync_filters::{Coverage, FilterBudget, PackLimits};
use grasp_sync_ledger::{HeldGroup, LearnedLimits, LiveBudget, SessionBudget, plan_live};
use nostr::{EventId, SubscriptionId};

#[path = "../tests/it/gitnostr.rs"]
#[allow(dead_code, unreachable_pub)]
mod gitnostr;

fn plan(c: &mut Criterion) {
    let (repos, roots) = gitnostr::gitnostr_set();
    let coverage = Coverage {
        full_repos: &repos,
        roots: &roots,
        ..Coverage::default()
    };
    let filters = coverage
        .live_filters(&FilterBudget::default())
        .expect("buildable");
    let budget = LiveBudget::new(
        &SessionBudget::from_nip11(None),
        &LearnedLimits::new(),
        PackLimits::default(),
    );
    c.bench_function("plan_live/gitnostr_full", |b| {
        b.iter(|| plan_live(&[], black_box(filters.clone()), &budget).expect("fits"))
    });

    let full = plan_live(&[], filters, &budget).expect("fits");
    let held: Vec<HeldGroup> = full
        .open
        .into_iter()
        .enumerate()
        .map(|(i, group)| HeldGroup {
            subscription_id: SubscriptionId::new(format!("l{i}")),
            group: group.into(),
        })
        .collect();
    let new_root = [EventId::from_byte_array([7; 32])];
    let extra = Coverage {
        roots: &new_root,
        ..Coverage::default()
    };
    let incoming = extra
        .live_filters(&FilterBudget::default())
        .expect("buildable");
    c.bench_function("plan_live/gitnostr_add_one_root", |b| {
        b.iter(|| plan_live(black_box(&held), black_box(incoming.clone()), &budget).expect("fits"))
    });
}

criterion_group!(benches, plan);
criterion_main!(benches);
