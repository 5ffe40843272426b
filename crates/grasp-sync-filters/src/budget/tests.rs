//! Unit tests of the byte accounting: JSON string costs and byte chunking.

use proptest::prelude::*;

use super::*;

fn hex_values(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{i:064x}")).collect()
}

fn array_bytes(chunk: &[String]) -> usize {
    nostr::serde_json::to_string(chunk).unwrap().len()
}

#[test]
fn hex_id_costs_sixty_seven_bytes_with_its_separator() {
    assert_eq!(json_string_bytes(&"a".repeat(64)) + 1, 67);
}

#[test]
fn escaped_characters_cost_their_escape_sequence() {
    let check = |s: &str, expected: usize| assert_eq!(json_string_bytes(s), expected, "{s:?}");
    check("", 2);
    check("a\"b", 6);
    check("\\", 4);
    check("\n\t", 6);
    check("\u{1}", 8);
    check("é", 4);
    check("/", 3);
}

#[test]
fn chunks_fill_up_to_the_array_budget_and_no_further() {
    let values = hex_values(1000);
    let chunks = chunk_by_bytes(&values, 32_731, usize::MAX, 'e').unwrap();
    assert_eq!(chunks[0].len(), 488);
    for chunk in &chunks {
        assert!(array_bytes(chunk) <= 32_731);
    }
    assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), 1000);
}

#[test]
fn value_larger_than_the_budget_is_a_typed_error() {
    let values = vec!["x".repeat(100)];
    assert_eq!(
        chunk_by_bytes(&values, 50, usize::MAX, 'd'),
        Err(FilterError::ValueTooLarge {
            tag: 'd',
            bytes: 102,
            budget: 48
        })
    );
}

#[test]
fn budget_too_small_for_any_value_is_a_typed_error() {
    assert!(matches!(
        FilterBudget::new(20).value_bytes(10, true),
        Err(FilterError::InvalidLimits(_))
    ));
}

proptest! {
    #[test]
    fn json_string_bytes_matches_the_wire_serialiser(s in any::<String>()) {
        prop_assert_eq!(json_string_bytes(&s), nostr::serde_json::to_string(&s).unwrap().len());
    }

    #[test]
    fn every_chunk_fits_and_every_value_lands_once(
        mut values in prop::collection::vec("[a-z\"\\\\\n]{1,40}", 0..200),
        budget in 90usize..600,
    ) {
        values.sort();
        values.dedup();
        let chunks = chunk_by_bytes(&values, budget, usize::MAX, 'd').unwrap();
        for chunk in &chunks {
            prop_assert!(!chunk.is_empty());
            prop_assert!(array_bytes(chunk) <= budget);
        }
        let flat: Vec<String> = chunks.concat();
        prop_assert_eq!(flat, values);
    }
}
