//! Unit tests of the compact form.

use nostr::{Alphabet, EventId, Filter, Keys, Kind, SingleLetterTag, Timestamp};
use proptest::prelude::*;

use super::*;
use crate::subtract::{CoveredValues, Covering, uncovered};

fn tag(letter: Alphabet) -> SingleLetterTag {
    SingleLetterTag::lowercase(letter)
}

fn id(byte: u8) -> String {
    EventId::from_byte_array([byte; 32]).to_hex()
}

fn over(letter: Alphabet, values: &[String]) -> Filter {
    Filter::new()
        .kinds([Kind::GitPatch, Kind::GitIssue])
        .custom_tags(tag(letter), values.iter().map(String::as_str))
        .limit(0)
}

fn tiered(filter: Filter) -> TieredFilter {
    TieredFilter::new(filter, CoverageTier::Essential)
}

#[test]
fn ids_and_coordinates_are_kept_in_parts_and_other_values_as_text() {
    let coordinate = format!("30617:{}:grasp:sync", id(9));
    let values = [id(1), id(2), coordinate, "v1".to_owned()];
    let filter = tiered(over(Alphabet::E, &values));
    let compact = CompactFilter::new(&filter);
    let (_, _, kept) = compact.axis().expect("one tag list");
    assert_eq!(&*kept.ids, &[[1; 32], [2; 32]]);
    assert_eq!(
        &*kept.coordinates,
        &[CompactCoordinate {
            kind: 30617,
            author: [9; 32],
            identifier: Box::from("grasp:sync"),
        }]
    );
    assert_eq!(&*kept.text, &[Box::from("v1")]);
    assert_eq!(compact.to_tiered(), filter);
}

#[test]
fn values_that_only_look_like_coordinates_come_back_as_they_were() {
    let author = id(0xab);
    let values = [
        format!("030617:{author}:grasp"),
        format!("+30617:{author}:grasp"),
        format!("70000:{author}:grasp"),
        format!("30617:{}:grasp", author.to_uppercase()),
        format!("30617:{author}"),
        format!("30617:{}:grasp", &author[..63]),
        format!("0:{author}:"),
    ];
    let filter = tiered(over(Alphabet::A, &values));
    let compact = CompactFilter::new(&filter);
    assert_eq!(compact.to_tiered(), filter);
    let (_, _, kept) = compact.axis().expect("one tag list");
    assert_eq!(
        kept.coordinates.len(),
        1,
        "only kind 0 with an empty identifier is in parts"
    );
    assert_eq!(kept.text.len(), values.len() - 1);
}

#[test]
fn values_that_only_look_like_ids_come_back_as_they_were() {
    let upper = id(0xab).to_uppercase();
    let short = id(3)[..63].to_owned();
    let not_hex = format!("{}g", &id(4)[..63]);
    let values = [upper.clone(), short.clone(), not_hex.clone(), id(0xab)];
    let filter = tiered(over(Alphabet::E, &values));
    let compact = CompactFilter::new(&filter);
    assert_eq!(compact.to_tiered(), filter);
    let (_, _, kept) = compact.axis().expect("one tag list");
    assert_eq!(kept.ids.len(), 1, "only the lowercase ID is bytes");
    // The uppercase spelling names another value: holding one does not cover the other.
    let held = tiered(over(Alphabet::E, &[upper]));
    let asked = tiered(over(Alphabet::E, &[id(0xab)]));
    let compact_held = CompactFilter::new(&held);
    assert_eq!(uncovered([&compact_held], vec![asked.clone()]), vec![asked]);
}

#[test]
fn filters_of_every_shape_come_back_exactly() {
    let author = Keys::generate().public_key();
    let shapes = [
        Filter::new().kind(Kind::from(30617_u16)).limit(0),
        over(Alphabet::E, &[id(1)]).author(author),
        over(Alphabet::E, &[id(1)]).custom_tags(tag(Alphabet::A), ["x", "y"]),
        over(Alphabet::D, &["grasp".to_owned()])
            .remove_limit()
            .since(Timestamp::from_secs(10))
            .until(Timestamp::from_secs(20)),
        Filter::new().id(EventId::from_byte_array([5; 32])),
        Filter::new().custom_tags(tag(Alphabet::E), std::iter::empty::<&str>()),
    ];
    for shape in shapes {
        let filter = tiered(shape);
        assert_eq!(CompactFilter::new(&filter).to_tiered(), filter);
    }
}

#[test]
fn a_group_keeps_its_payload_size_and_tier() {
    let filters = vec![
        TieredFilter::new(over(Alphabet::E, &[id(1)]), CoverageTier::RootUppercase),
        TieredFilter::new(over(Alphabet::E, &[id(2)]), CoverageTier::RootUppercase),
    ];
    let group = FilterGroup {
        payload_bytes: 321,
        filters,
    };
    let compact = CompactGroup::from(&group);
    assert_eq!(compact.len(), 2);
    assert_eq!(compact.payload_bytes(), 321);
    assert_eq!(compact.tier(), Some(CoverageTier::RootUppercase));
    assert_eq!(compact.to_group(), group);
    assert_eq!(compact.to_filters(), group.to_filters());
}

#[test]
fn a_compact_filter_of_another_shape_covers_only_an_equal_filter() {
    let author = Keys::generate().public_key();
    let by_author = tiered(over(Alphabet::E, &[id(1)]).author(author));
    let compact = CompactFilter::new(&by_author);
    let mut covered = CoveredValues::default();
    covered.insert_compact(&compact);
    assert!(!covered.is_empty());
    assert_eq!(covered.remainder(&by_author.filter), None);
    let wider = over(Alphabet::E, &[id(1)]);
    assert_eq!(covered.remainder(&wider), Some(wider));
}

/// A tag value drawn from a small pool that mixes IDs, their uppercase spelling and text.
fn value(pick: u8) -> String {
    match pick % 5 {
        0 => id(pick),
        1 => id(pick).to_uppercase(),
        2 => format!("30617:{}:r{pick}", id(pick)),
        3 => format!("030617:{}:r{pick}", id(pick)),
        _ => format!("r{pick}"),
    }
}

/// A filter over `picks` under `letter`, in the tier `essential` picks, and with a second tag
/// list when `extra` is set (a shape covered only by an equal filter).
fn filter_of(letter: Alphabet, picks: &BTreeSet<u8>, essential: bool, extra: bool) -> TieredFilter {
    let mut filter = over(letter, &picks.iter().map(|p| value(*p)).collect::<Vec<_>>());
    if extra {
        filter = filter.custom_tags(tag(Alphabet::D), ["grasp"]);
    }
    let tier = if essential {
        CoverageTier::Essential
    } else {
        CoverageTier::RootUppercase
    };
    TieredFilter::new(filter, tier)
}

/// Drawn filters: letter (`#e` or `#q`), values, tier, extra tag list.
type Drawn = (bool, BTreeSet<u8>, bool, bool);

fn drawn(max: usize) -> impl Strategy<Value = Vec<Drawn>> {
    prop::collection::vec(
        (
            prop::bool::ANY,
            prop::collection::btree_set(0u8..25, 1..8),
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.2),
        ),
        0..max,
    )
}

fn filters(drawn: &[Drawn]) -> Vec<TieredFilter> {
    let letter = |e: bool| if e { Alphabet::E } else { Alphabet::Q };
    drawn
        .iter()
        .map(|(e, picks, essential, extra)| filter_of(letter(*e), picks, *essential, *extra))
        .collect()
}

/// The live coverage of many roots, as the builder makes it and the packer groups it: one list
/// of IDs per chunk, in its `#e`, `#E` and `#q` filters.
fn live_root_groups(roots: usize) -> Vec<FilterGroup> {
    let roots: Vec<EventId> = (0..roots)
        .map(|i| {
            let mut bytes = [0; 32];
            bytes[..8].copy_from_slice(&(i as u64).to_be_bytes());
            EventId::from_byte_array(bytes)
        })
        .collect();
    let filters =
        crate::root_event_tag_filters(&roots, crate::Window::Live, &crate::FilterBudget::default())
            .expect("built");
    crate::pack_requests(filters, &crate::PackLimits::default()).expect("packed")
}

#[test]
fn groups_compacted_together_keep_each_chunk_of_ids_once() {
    let groups = live_root_groups(3_000);
    let filters: usize = groups.iter().map(|g| g.filters.len()).sum();
    let chunks = filters / 3;
    assert!(chunks > 1, "the roots span several chunks");

    let mut compactor = Compactor::default();
    let compact: Vec<CompactGroup> = groups.iter().map(|g| compactor.group(g)).collect();
    assert_eq!(compactor.lists(), chunks, "each chunk's IDs are kept once");
    for (group, compact) in groups.iter().zip(&compact) {
        assert_eq!(&compact.to_group(), group);
    }
    let shared = |f: &CompactFilter| Arc::as_ptr(&f.tags[0].1);
    let lists: HashSet<*const CompactValues> = compact
        .iter()
        .flat_map(|g| g.filters().iter().map(shared))
        .collect();
    assert_eq!(lists.len(), chunks);

    // Compacted one by one, every filter keeps its own copy.
    let apart: Vec<CompactFilter> = groups
        .iter()
        .flat_map(|g| g.filters.iter().map(CompactFilter::new))
        .collect();
    let lists: HashSet<*const CompactValues> = apart.iter().map(shared).collect();
    assert_eq!(lists.len(), filters);
    let together = compact.iter().flat_map(|g| g.filters().iter());
    assert!(
        together.eq(apart.iter()),
        "sharing changes nothing the filters say"
    );
}

proptest! {
    /// Held coverage in compact form, alone or beside filters as sent, covers exactly what it
    /// covers as sent, and every filter comes back from its compact form unchanged.
    #[test]
    fn compact_held_coverage_subtracts_as_the_filters_do(
        held in drawn(5),
        asked in drawn(4),
        sent_as_is in prop::collection::vec(prop::bool::ANY, 5),
    ) {
        let held = filters(&held);
        let asked = filters(&asked);
        let compact: Vec<CompactFilter> = held.iter().map(CompactFilter::new).collect();
        for (filter, compact) in held.iter().zip(&compact) {
            prop_assert_eq!(&compact.to_tiered(), filter);
            prop_assert!(compact.same_filter(&CompactFilter::new(filter)));
        }
        let expected = uncovered(&held, asked.clone());
        prop_assert_eq!(&uncovered(&compact, asked.clone()), &expected);
        let mixed = held.iter().zip(&compact).zip(&sent_as_is).map(|((filter, compact), as_is)| {
            if *as_is { Covering::from(filter) } else { Covering::from(compact) }
        });
        prop_assert_eq!(&uncovered(mixed, asked), &expected);
    }
}
