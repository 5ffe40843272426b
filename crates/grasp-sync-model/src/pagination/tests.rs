//! Unit tests of per-filter pagination bookkeeping.

use nostr::{Keys, Kind};

use super::*;
use crate::test_support::signed;

#[test]
fn each_delivered_event_counts_for_every_filter_it_matches() {
    let keys = Keys::generate();
    let issues = Filter::new().kind(Kind::Custom(1621));
    let by_author = Filter::new().author(keys.public_key());
    let patches = Filter::new().kind(Kind::Custom(1617));
    let mut state = PaginationState::new([issues, by_author, patches]);
    let issue = signed(&keys, 1621, &[], 500);
    assert_eq!(state.record_event(&issue), 2);
    let counts: Vec<usize> = state
        .filters
        .iter()
        .map(|filter| filter.event_count)
        .collect();
    assert_eq!(counts, [1, 1, 0]);
}

#[test]
fn duplicates_are_counted_before_dedup() {
    let keys = Keys::generate();
    let mut state = PaginationState::new([Filter::new().kind(Kind::Custom(1621))]);
    let issue = signed(&keys, 1621, &[], 500);
    state.record_event(&issue);
    state.record_event(&issue);
    assert_eq!(state.filters[0].event_count, 2);
}

#[test]
fn min_created_at_tracks_the_oldest_matching_event() {
    let keys = Keys::generate();
    let mut filter = FilterPaginationState::new(Filter::new().kind(Kind::Custom(1621)));
    assert_eq!(filter.min_created_at, None);
    for secs in [500, 300, 400] {
        assert!(filter.record_event(&signed(&keys, 1621, &[], secs)));
    }
    assert!(
        !filter.record_event(&signed(&keys, 1617, &[], 100)),
        "a non-matching event is ignored"
    );
    assert_eq!(
        (filter.event_count, filter.min_created_at),
        (3, Some(Timestamp::from_secs(300)))
    );
}

#[test]
fn tag_filters_match_by_tag() {
    let keys = Keys::generate();
    let tagged = Filter::new().custom_tag(
        nostr::SingleLetterTag::lowercase(nostr::Alphabet::A),
        "30617:x:y",
    );
    let mut state = PaginationState::new([tagged]);
    assert_eq!(
        state.record_event(&signed(&keys, 1621, &[&["a", "30617:x:y"]], 1)),
        1
    );
    assert_eq!(
        state.record_event(&signed(&keys, 1621, &[&["a", "30617:x:z"]], 1)),
        0
    );
}
