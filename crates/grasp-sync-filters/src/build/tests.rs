//! Unit tests of the layer builders: kinds, tags, tiers, windows and byte fill.

use std::collections::BTreeSet;

use nostr::{JsonUtil, PublicKey};

use super::*;
use crate::budget::DEFAULT_MAX_FILTER_BYTES;

fn pubkey(seed: u64) -> PublicKey {
    (0u64..)
        .find_map(|salt| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_be_bytes());
            bytes[8..16].copy_from_slice(&salt.to_be_bytes());
            PublicKey::from_slice(&bytes).ok()
        })
        .unwrap()
}

fn repos(n: u64) -> Vec<RepoCoordinate> {
    (0..n)
        .map(|i| RepoCoordinate::new(pubkey(i), format!("repo-{i}")).unwrap())
        .collect()
}

fn ids(n: u64) -> Vec<EventId> {
    (0..n)
        .map(|i| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&i.to_be_bytes());
            EventId::from_byte_array(bytes)
        })
        .collect()
}

/// The tag key (`#e`, `#A`, ...) and tier of each filter, deduplicated.
fn shape(filters: &[TieredFilter]) -> BTreeSet<(String, CoverageTier)> {
    filters
        .iter()
        .flat_map(|f| {
            f.filter
                .generic_tags
                .keys()
                .map(move |k| (format!("#{k}"), f.tier))
        })
        .collect()
}

fn check_shape(filters: &[TieredFilter], expected: &[(&str, CoverageTier)]) {
    let expected: BTreeSet<(String, CoverageTier)> = expected
        .iter()
        .map(|(k, t)| ((*k).to_owned(), *t))
        .collect();
    assert_eq!(shape(filters), expected);
}

const HISTORIC: Window = Window::Historic {
    since: None,
    until: None,
};

#[test]
fn layer_one_is_announcements_only_never_state() {
    let live = announcement_filter(Window::Live);
    assert_eq!(live.filter.as_json(), r#"{"kinds":[30617],"limit":0}"#);
    assert_eq!(live.tier, CoverageTier::Essential);
    let since = announcement_filter(Window::since(Some(Timestamp::from(1_700_000_000))));
    assert_eq!(
        since.filter.as_json(),
        r#"{"kinds":[30617],"since":1700000000}"#
    );
}

#[test]
fn state_filters_are_kind_30618_by_identifier() {
    let filters = state_filters(&["b", "a", "b"], Window::Live, &FilterBudget::default()).unwrap();
    assert_eq!(filters.len(), 1);
    assert_eq!(
        filters[0].filter.as_json(),
        r##"{"kinds":[30618],"limit":0,"#d":["a","b"]}"##
    );
    assert_eq!(filters[0].tier, CoverageTier::Essential);
}

#[test]
fn repository_references_carry_their_tiers() {
    let filters = repo_tag_filters(&repos(3), Window::Live, &FilterBudget::default()).unwrap();
    check_shape(
        &filters,
        &[
            ("#a", CoverageTier::Essential),
            ("#A", CoverageTier::CoreCompat),
            ("#q", CoverageTier::CoreCompat),
        ],
    );
}

#[test]
fn root_references_carry_their_tiers() {
    let filters = root_event_tag_filters(&ids(3), Window::Live, &FilterBudget::default()).unwrap();
    check_shape(
        &filters,
        &[
            ("#e", CoverageTier::Essential),
            ("#E", CoverageTier::RootUppercase),
            ("#q", CoverageTier::CoreCompat),
        ],
    );
}

#[test]
fn live_descendants_leave_out_the_historic_only_uppercase_tags() {
    let coordinate = Coordinate::new(Kind::from(30617u16), pubkey(1)).identifier("x");
    let live = descendant_filters(
        &ids(2),
        std::slice::from_ref(&coordinate),
        Window::Live,
        &FilterBudget::default(),
    )
    .unwrap();
    check_shape(
        &live,
        &[
            ("#e", CoverageTier::DescendantCanonical),
            ("#a", CoverageTier::DescendantCanonical),
            ("#q", CoverageTier::DescendantQuote),
        ],
    );
    let historic =
        descendant_filters(&ids(2), &[coordinate], HISTORIC, &FilterBudget::default()).unwrap();
    check_shape(
        &historic,
        &[
            ("#e", CoverageTier::DescendantCanonical),
            ("#a", CoverageTier::DescendantCanonical),
            ("#E", CoverageTier::HistoricOnly),
            ("#A", CoverageTier::HistoricOnly),
            ("#q", CoverageTier::DescendantQuote),
        ],
    );
}

#[test]
fn live_filters_have_limit_zero_and_historic_filters_have_bounds_and_no_limit() {
    let repos = repos(2);
    let roots = ids(2);
    let coverage = Coverage {
        full_repos: &repos,
        roots: &roots,
        ..Coverage::default()
    };
    let budget = FilterBudget::default();
    for f in coverage.live_filters(&budget).unwrap() {
        assert_eq!(f.filter.limit, Some(0));
        assert_eq!((f.filter.since, f.filter.until), (None, None));
    }
    let (since, until) = (Timestamp::from(10), Timestamp::from(20));
    for f in coverage
        .historic_filters(Some(since), Some(until), &budget)
        .unwrap()
    {
        assert_eq!(f.filter.limit, None);
        assert_eq!((f.filter.since, f.filter.until), (Some(since), Some(until)));
    }
}

#[test]
fn historic_batches_union_roots_with_members_and_repos_with_addressable_members() {
    let repos = repos(2);
    let roots = ids(3);
    let members: Vec<EventId> = ids(5).into_iter().skip(2).collect(); // overlaps one root
    let addressable = vec![Coordinate::new(Kind::from(30617u16), pubkey(9)).identifier("z")];
    let coverage = Coverage {
        full_repos: &repos,
        roots: &roots,
        direct_members: &members,
        addressable_members: &addressable,
        ..Coverage::default()
    };
    let filters = coverage
        .historic_filters(None, None, &FilterBudget::default())
        .unwrap();
    let e = SingleLetterTag::lowercase(Alphabet::E);
    let a = SingleLetterTag::lowercase(Alphabet::A);
    let e_filters: Vec<_> = filters
        .iter()
        .filter(|f| f.filter.generic_tags.contains_key(&e))
        .collect();
    assert_eq!(e_filters.len(), 1);
    assert_eq!(e_filters[0].filter.generic_tags[&e].len(), 5);
    assert_eq!(e_filters[0].tier, CoverageTier::Essential);
    let a_filters: Vec<_> = filters
        .iter()
        .filter(|f| f.filter.generic_tags.contains_key(&a))
        .collect();
    assert_eq!(a_filters.len(), 1);
    assert_eq!(a_filters[0].filter.generic_tags[&a].len(), 3);
}

#[test]
fn a_full_id_filter_holds_488_ids_and_fits_32_kb() {
    let filters =
        root_event_tag_filters(&ids(1000), Window::Live, &FilterBudget::default()).unwrap();
    let e = SingleLetterTag::lowercase(Alphabet::E);
    let sizes: Vec<usize> = filters
        .iter()
        .filter_map(|f| f.filter.generic_tags.get(&e).map(BTreeSet::len))
        .collect();
    assert_eq!(sizes, vec![488, 488, 24]);
    for f in &filters {
        let with_cursor = f.filter.clone().until(Timestamp::from(u64::MAX));
        assert!(with_cursor.as_json().len() < DEFAULT_MAX_FILTER_BYTES);
    }
}

#[test]
fn identifiers_are_budgeted_by_bytes_not_count() {
    let long: Vec<String> = (0..100)
        .map(|i| format!("{i:03}{}", "x".repeat(250)))
        .collect();
    let filters = state_filters(&long, Window::Live, &FilterBudget::default()).unwrap();
    let d = SingleLetterTag::lowercase(Alphabet::D);
    let counts: Vec<usize> = filters
        .iter()
        .map(|f| f.filter.generic_tags[&d].len())
        .collect();
    // 253-byte identifiers cost 256 bytes each with their separator: 127 fit in a filter.
    assert_eq!(counts, vec![100]);
    let longer: Vec<String> = (0..400)
        .map(|i| format!("{i:03}{}", "x".repeat(250)))
        .collect();
    let filters = state_filters(&longer, Window::Live, &FilterBudget::default()).unwrap();
    let counts: Vec<usize> = filters
        .iter()
        .map(|f| f.filter.generic_tags[&d].len())
        .collect();
    assert_eq!(counts, vec![127, 127, 127, 19]);
}

#[test]
fn an_identifier_larger_than_the_budget_is_a_typed_error() {
    let huge = vec!["x".repeat(40_000)];
    let result = state_filters(&huge, Window::Live, &FilterBudget::default());
    assert!(matches!(
        result,
        Err(FilterError::ValueTooLarge {
            tag: 'd',
            bytes: 40_002,
            ..
        })
    ));
}

#[test]
fn empty_inputs_build_no_filters() {
    let coverage = Coverage::default();
    assert_eq!(
        coverage.live_filters(&FilterBudget::default()),
        Ok(Vec::new())
    );
    assert_eq!(
        coverage.historic_filters(None, None, &FilterBudget::default()),
        Ok(Vec::new())
    );
}

#[test]
fn hex_ids_are_the_lowercase_hex_sent_on_the_wire() {
    for id in ids(50)
        .into_iter()
        .chain([EventId::from_byte_array([0xab; 32])])
    {
        assert_eq!(crate::budget::hex_id(&id), id.to_hex());
    }
}
