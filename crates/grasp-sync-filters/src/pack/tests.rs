//! Unit tests of REQ packing: sizes, ordering, deduplication and tier separation.

use nostr::{EventId, JsonUtil, Kind, Timestamp};
use proptest::prelude::*;

use super::*;

fn id_filter(seed: u32, ids: usize) -> Filter {
    Filter::new().events((0..ids).map(|i| {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&seed.to_be_bytes());
        bytes[4..12].copy_from_slice(&(i as u64).to_be_bytes());
        EventId::from_byte_array(bytes)
    }))
}

fn tiered(seed: u32, ids: usize, tier: CoverageTier) -> TieredFilter {
    TieredFilter::new(id_filter(seed, ids), tier)
}

/// Packs and returns each group's (tier, number of filters).
fn check(filters: Vec<TieredFilter>, limits: PackLimits, expected: &[(CoverageTier, usize)]) {
    let groups = pack_requests(filters, &limits).unwrap();
    let shape: Vec<(CoverageTier, usize)> = groups
        .iter()
        .map(|g| (g.tier().unwrap(), g.filters.len()))
        .collect();
    assert_eq!(shape, expected);
}

#[test]
fn payload_bytes_is_the_length_of_the_json_as_sent() {
    let filter = id_filter(1, 3)
        .kind(Kind::from(30617u16))
        .since(Timestamp::from(1_700_000_000))
        .limit(0)
        .custom_tag(
            nostr::SingleLetterTag::lowercase(nostr::Alphabet::D),
            "a\"b\n",
        );
    assert_eq!(filter_payload_bytes(&filter), filter.as_json().len());
}

#[test]
fn groups_never_mix_tiers() {
    use CoverageTier::*;
    check(
        vec![
            tiered(1, 1, CoreCompat),
            tiered(2, 1, Essential),
            tiered(3, 1, CoreCompat),
            tiered(4, 1, RootUppercase),
        ],
        PackLimits::default(),
        &[(Essential, 1), (RootUppercase, 1), (CoreCompat, 2)],
    );
}

#[test]
fn filter_count_ceiling_closes_groups() {
    let filters: Vec<TieredFilter> = (0..10)
        .map(|i| tiered(i, 1, CoverageTier::Essential))
        .collect();
    for (ceiling, shape) in [
        (10, vec![10]),
        (5, vec![5, 5]),
        (2, vec![2, 2, 2, 2, 2]),
        (1, vec![1; 10]),
        (3, vec![3, 3, 3, 1]),
    ] {
        let expected: Vec<_> = shape
            .into_iter()
            .map(|n| (CoverageTier::Essential, n))
            .collect();
        check(
            filters.clone(),
            PackLimits::default().with_max_filters(ceiling),
            &expected,
        );
    }
}

#[test]
fn byte_budget_closes_groups() {
    // Each filter is about 20 KB: four fit 96 KB, a fifth does not.
    let filters: Vec<TieredFilter> = (0..5)
        .map(|i| tiered(i, 300, CoverageTier::Essential))
        .collect();
    let groups = pack_requests(filters, &PackLimits::default()).unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].filters.len(), 4);
    for group in &groups {
        assert!(group.payload_bytes <= DEFAULT_MAX_REQ_BYTES);
    }
}

#[test]
fn exact_duplicates_are_removed_keeping_the_highest_priority_tier() {
    use CoverageTier::*;
    let groups = pack_requests(
        vec![
            tiered(1, 1, CoreCompat),
            tiered(1, 1, Essential),
            tiered(1, 1, Essential),
            tiered(2, 1, CoreCompat),
        ],
        &PackLimits::default(),
    )
    .unwrap();
    let tiers: Vec<Vec<CoverageTier>> = groups
        .iter()
        .map(|g| g.filters.iter().map(|f| f.tier).collect())
        .collect();
    assert_eq!(tiers, vec![vec![Essential], vec![CoreCompat]]);
}

#[test]
fn group_payload_is_the_filters_and_their_separators() {
    let filters = vec![
        tiered(1, 2, CoverageTier::Essential),
        tiered(2, 5, CoverageTier::Essential),
    ];
    let groups = pack_requests(filters.clone(), &PackLimits::default()).unwrap();
    let expected: usize = filters.iter().map(|f| f.filter.as_json().len() + 1).sum();
    assert_eq!(groups[0].payload_bytes, expected);
}

#[test]
fn filter_larger_than_a_req_is_a_typed_error() {
    let limits = PackLimits {
        max_req_bytes: 1000,
        max_filters_per_req: 10,
    };
    let result = pack_requests(vec![tiered(1, 20, CoverageTier::Essential)], &limits);
    assert!(matches!(
        result,
        Err(FilterError::FilterTooLarge { budget: 1000, .. })
    ));
}

#[test]
fn zero_limits_are_a_typed_error() {
    let filters = vec![tiered(1, 1, CoverageTier::Essential)];
    for limits in [
        PackLimits::default().with_max_filters(0),
        PackLimits {
            max_req_bytes: 0,
            max_filters_per_req: 1,
        },
    ] {
        assert!(matches!(
            pack_requests(filters.clone(), &limits),
            Err(FilterError::InvalidLimits(_))
        ));
    }
}

#[test]
fn empty_input_packs_to_no_groups() {
    assert_eq!(
        pack_requests(Vec::new(), &PackLimits::default()),
        Ok(Vec::new())
    );
}

fn arb_tier() -> impl Strategy<Value = CoverageTier> {
    prop::sample::select(CoverageTier::ALL.to_vec())
}

proptest! {
    #[test]
    fn packing_is_invariant_under_permutation_and_within_budget(
        specs in prop::collection::vec((0u32..40, 1usize..400, arb_tier()), 0..40),
        ceiling in 1usize..12,
        seed in any::<u64>(),
    ) {
        let filters: Vec<TieredFilter> =
            specs.iter().map(|&(s, n, t)| tiered(s, n, t)).collect();
        let mut shuffled = filters.clone();
        // Deterministic shuffle from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let limits = PackLimits::default().with_max_filters(ceiling);
        let a = pack_requests(filters, &limits).unwrap();
        let b = pack_requests(shuffled, &limits).unwrap();
        prop_assert_eq!(&a, &b);
        for group in &a {
            prop_assert!(group.filters.len() <= ceiling);
            prop_assert!(group.payload_bytes <= limits.max_req_bytes);
            prop_assert!(group.filters.iter().all(|f| Some(f.tier) == group.tier()));
        }
    }
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    (
        prop::collection::vec(any::<[u8; 32]>(), 0..4),
        prop::collection::vec(any::<u16>(), 0..3),
        prop::option::of(".{0,10}"),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<usize>()),
        prop::collection::btree_map(
            (prop::sample::select(vec!['a', 'd', 'e', 'q', 'A', 'E']),),
            prop::collection::btree_set(".{0,12}", 0..4),
            0..4,
        ),
    )
        .prop_map(|(ids, kinds, search, since, until, limit, tags)| {
            let mut filter = Filter::new();
            if !ids.is_empty() {
                filter = filter.ids(ids.into_iter().map(EventId::from_byte_array));
            }
            if !kinds.is_empty() {
                filter = filter.kinds(kinds.into_iter().map(Kind::from));
            }
            filter.search = search;
            filter.since = since.map(Timestamp::from);
            filter.until = until.map(Timestamp::from);
            filter.limit = limit;
            for ((letter,), values) in tags {
                let tag = nostr::SingleLetterTag::from_char(letter).unwrap();
                filter.generic_tags.insert(tag, values);
            }
            filter
        })
}

proptest! {
    #[test]
    fn payload_bytes_always_equals_the_serialised_length(filter in arb_filter()) {
        prop_assert_eq!(filter_payload_bytes(&filter), filter.as_json().len());
    }
}
