//! Unit tests of coverage subtraction.

use nostr::{Alphabet, Filter, Keys, Kind, SingleLetterTag, Timestamp};
use proptest::prelude::*;

use super::*;

fn tag(letter: Alphabet) -> SingleLetterTag {
    SingleLetterTag::lowercase(letter)
}

fn over(letter: Alphabet, values: &[&str]) -> Filter {
    Filter::new()
        .kinds([Kind::GitPatch, Kind::GitIssue])
        .custom_tags(tag(letter), values.iter().copied())
        .limit(0)
}

#[test]
fn values_spread_over_several_held_filters_are_covered() {
    let held = [over(Alphabet::E, &["a", "b"]), over(Alphabet::E, &["c"])];
    let covered = CoveredValues::of(&held);
    assert_eq!(covered.remainder(&over(Alphabet::E, &["c", "a"])), None);
    assert_eq!(
        covered.remainder(&over(Alphabet::E, &["a", "d", "c", "e"])),
        Some(over(Alphabet::E, &["d", "e"]))
    );
}

#[test]
fn another_tag_or_other_fields_do_not_cover() {
    let held = over(Alphabet::E, &["a", "b"]);
    let covered = CoveredValues::of([&held]);
    let other_tag = over(Alphabet::A, &["a"]);
    assert_eq!(covered.remainder(&other_tag), Some(other_tag));
    let other_kinds = Filter::new()
        .kind(Kind::GitPatch)
        .custom_tags(tag(Alphabet::E), ["a"])
        .limit(0);
    assert_eq!(covered.remainder(&other_kinds), Some(other_kinds));
    let historic = over(Alphabet::E, &["a"])
        .remove_limit()
        .since(Timestamp::from_secs(10));
    assert_eq!(covered.remainder(&historic), Some(historic));
}

#[test]
fn filters_of_other_shapes_are_covered_only_by_an_equal_filter() {
    let author = Keys::generate().public_key();
    let by_author = over(Alphabet::E, &["a"]).author(author);
    let two_tags = over(Alphabet::E, &["a"]).custom_tags(tag(Alphabet::A), ["x"]);
    let held = over(Alphabet::E, &["a", "b"]);
    let covered = CoveredValues::of([&held, &by_author, &two_tags]);
    assert_eq!(covered.remainder(&by_author), None);
    assert_eq!(covered.remainder(&two_tags), None);
    let other_author = over(Alphabet::E, &["a"]).author(Keys::generate().public_key());
    assert_eq!(covered.remainder(&other_author), Some(other_author));
    // A held filter with an extra condition covers less than the same filter without it.
    let narrower = CoveredValues::of([&by_author]);
    let wider = over(Alphabet::E, &["a"]);
    assert_eq!(narrower.remainder(&wider), Some(wider));
}

#[test]
fn nothing_held_covers_nothing() {
    let covered = CoveredValues::of(std::iter::empty());
    assert!(covered.is_empty());
    let asked = over(Alphabet::E, &["a"]);
    assert_eq!(covered.remainder(&asked), Some(asked));
}

/// Whether an event of `kind` tagging `value` under `letter` matches `filter`.
fn matches(filter: &Filter, letter: Alphabet, value: &str) -> bool {
    filter
        .kinds
        .as_ref()
        .is_none_or(|k| k.contains(&Kind::GitPatch))
        && filter
            .generic_tags
            .iter()
            .all(|(t, values)| *t == tag(letter) && values.contains(value))
}

proptest! {
    /// For every value, the remainder matches it exactly when the asked filter does and no held
    /// filter does: nothing asked for is lost, nothing held is asked for again.
    #[test]
    fn the_remainder_is_what_is_asked_and_not_held(
        held in prop::collection::vec(prop::collection::btree_set(0u8..12, 1..5), 0..4),
        asked in prop::collection::btree_set(0u8..12, 1..8),
    ) {
        let name = |v: &u8| format!("v{v}");
        let held: Vec<Filter> = held
            .iter()
            .map(|values| over(Alphabet::E, &values.iter().map(name).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>()))
            .collect();
        let asked_filter = over(Alphabet::E, &asked.iter().map(name).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>());
        let left = CoveredValues::of(&held).remainder(&asked_filter);
        for value in (0u8..12).map(|v| name(&v)) {
            let wanted = matches(&asked_filter, Alphabet::E, &value)
                && !held.iter().any(|h| matches(h, Alphabet::E, &value));
            let kept = left.as_ref().is_some_and(|f| matches(f, Alphabet::E, &value));
            prop_assert_eq!(wanted, kept, "value {}", value);
        }
    }
}
