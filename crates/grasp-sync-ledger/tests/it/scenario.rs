//! The gitnostr scenario: 869 repositories and 3,632 roots, generated deterministically, planned
//! live for B = 20, B = 10 and a relay that accepts three filters per REQ. Each plan must stay
//! within its budget, admit essential coverage, and never use fewer live subscriptions than the
//! byte floor of what it admitted.

use std::collections::BTreeMap;
use std::time::Instant;

use grasp_sync_filters::budget::json_string_bytes;
use grasp_sync_filters::{Coverage, CoverageTier, FilterBudget, PackLimits, TieredFilter};
use grasp_sync_ledger::{
    FilterCountOutcome, LearnedLimits, LiveBudget, LivePlan, SessionBudget, plan_live,
};

use crate::gitnostr::{REPOS, ROOTS, gitnostr_set};

/// Serialized tag-value bytes (each value's JSON string and its comma) per tag.
fn tag_value_bytes(filters: &[TieredFilter]) -> BTreeMap<char, usize> {
    let mut bytes = BTreeMap::new();
    for f in filters {
        for (tag, values) in &f.filter.generic_tags {
            let total: usize = values.iter().map(|v| json_string_bytes(v) + 1).sum();
            *bytes.entry(tag.as_char()).or_insert(0) += total;
        }
    }
    bytes
}

/// The byte floor: ceil(tag-value bytes / 96 KB), per tag family.
fn byte_floor(filters: &[TieredFilter], max_req_bytes: usize) -> BTreeMap<&'static str, usize> {
    let mut families: BTreeMap<&'static str, usize> = BTreeMap::new();
    for f in filters {
        let family = match f.filter.generic_tags.keys().next().map(|t| t.as_char()) {
            Some('d') => "d (state)",
            Some('a' | 'A') => "a/A/q (repos)",
            Some('q') if is_coordinate_family(f) => "a/A/q (repos)",
            Some(_) => "e/E/q (roots)",
            None => continue,
        };
        let bytes: usize = tag_value_bytes(std::slice::from_ref(f)).values().sum();
        *families.entry(family).or_insert(0) += bytes;
    }
    families
        .into_iter()
        .map(|(k, v)| (k, v.div_ceil(max_req_bytes)))
        .collect()
}

fn is_coordinate_family(f: &TieredFilter) -> bool {
    f.filter
        .generic_tags
        .values()
        .flatten()
        .next()
        .is_some_and(|v| v.starts_with("30617:"))
}

struct Case {
    name: &'static str,
    session: SessionBudget,
    learned: LearnedLimits,
}

fn cases() -> Vec<Case> {
    let now = Instant::now();
    let mut learned_strict = LearnedLimits::new();
    // A three-filter relay refuses 10 and then 5 filters; the ladder settles on 2.
    assert_eq!(
        learned_strict.handle_filter_count_refusal(now, Some(10)),
        FilterCountOutcome::Regroup { ceiling: 5 }
    );
    assert_eq!(
        learned_strict.handle_filter_count_refusal(now, Some(5)),
        FilterCountOutcome::Regroup { ceiling: 2 }
    );
    vec![
        Case {
            name: "B=20",
            session: SessionBudget::from_nip11(None),
            learned: LearnedLimits::new(),
        },
        Case {
            name: "B=10",
            session: SessionBudget::from_nip11(Some(10)),
            learned: LearnedLimits::new(),
        },
        Case {
            name: "B=20, 3 filters/REQ (known)",
            session: SessionBudget::from_nip11(None),
            learned: LearnedLimits::with_initial_ceiling(3),
        },
        Case {
            name: "B=20, 3 filters/REQ (learned)",
            session: SessionBudget::from_nip11(None),
            learned: learned_strict,
        },
    ]
}

fn admitted_filters(filters: &[TieredFilter], plan: &LivePlan) -> Vec<TieredFilter> {
    filters
        .iter()
        .filter(|f| plan.admitted.contains(&f.tier))
        .cloned()
        .collect()
}

#[test]
fn gitnostr_set_plans_within_budget_and_above_the_byte_floor() {
    let (repos, roots) = gitnostr_set();
    let coverage = Coverage {
        full_repos: &repos,
        roots: &roots,
        ..Coverage::default()
    };
    let filters = coverage
        .live_filters(&FilterBudget::default())
        .expect("buildable");
    let base = PackLimits::default();
    let all_floor = byte_floor(&filters, base.max_req_bytes);
    println!(
        "gitnostr set: {REPOS} repos, {ROOTS} roots, {} live filters",
        filters.len()
    );
    println!("tag-value bytes per tag: {:?}", tag_value_bytes(&filters));
    println!("byte floor of all live coverage per family: {all_floor:?}");
    for case in cases() {
        let budget = LiveBudget::new(&case.session, &case.learned, base);
        let plan = plan_live(&[], filters.clone(), &budget).expect("essential coverage fits");
        let admitted = admitted_filters(&filters, &plan);
        let floor = byte_floor(&admitted, base.max_req_bytes);
        let floor_total: usize = floor.values().sum();
        let mut per_tier: BTreeMap<String, usize> = BTreeMap::new();
        for group in &plan.open {
            *per_tier
                .entry(format!("{:?}", group.tier().expect("non-empty")))
                .or_insert(0) += 1;
        }
        println!(
            "{}: {} live subscriptions of {} allowed; per tier {:?}; deferred {:?}; \
             byte floor of admitted coverage {} {:?}; {} bytes retained",
            case.name,
            plan.live_groups,
            budget.max_live(),
            per_tier,
            plan.deferred
                .iter()
                .map(|d| (d.tier, d.reason))
                .collect::<Vec<_>>(),
            floor_total,
            floor,
            plan.live_bytes,
        );
        assert!(
            plan.admitted.contains(&CoverageTier::Essential),
            "{}",
            case.name
        );
        assert!(plan.live_groups <= budget.max_live(), "{}", case.name);
        assert!(plan.live_groups >= floor_total, "{}", case.name);
        assert!(
            plan.open
                .iter()
                .all(|g| g.filters.len() <= budget.limits.max_filters_per_req
                    && g.payload_bytes <= budget.limits.max_req_bytes),
            "{}",
            case.name
        );
        let placed: usize = plan.open.iter().map(|g| g.filters.len()).sum();
        let deferred: usize = plan.deferred.iter().map(|d| d.filters.len()).sum();
        assert_eq!(
            placed + deferred,
            filters.len(),
            "{}: every filter placed or deferred",
            case.name
        );
    }
}
