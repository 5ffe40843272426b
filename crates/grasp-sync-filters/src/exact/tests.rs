//! Unit tests of exact-ID fetch filters.

use super::*;

fn ids(n: u64) -> Vec<EventId> {
    (0..n)
        .map(|i| {
            let mut bytes = [0u8; 32];
            bytes[24..].copy_from_slice(&i.to_be_bytes());
            EventId::from_byte_array(bytes)
        })
        .collect()
}

fn sizes(ids: &[EventId], budget: FilterBudget) -> Vec<usize> {
    exact_id_filters(ids, &budget)
        .unwrap()
        .iter()
        .map(|f| f.filter.ids.as_ref().map_or(0, |ids| ids.len()))
        .collect()
}

#[test]
fn exact_id_filters_hold_at_most_300_ids() {
    assert_eq!(
        sizes(&ids(1000), FilterBudget::default()),
        vec![300, 300, 300, 100]
    );
}

#[test]
fn a_smaller_byte_budget_lowers_the_ids_per_filter() {
    // 10 bytes of `{"ids":[]}`, a separator, and 67 bytes per ID.
    let budget = FilterBudget::new(11 + 67 * 100);
    assert_eq!(sizes(&ids(250), budget), vec![100, 100, 50]);
}

#[test]
fn exact_id_filters_cover_each_id_once() {
    let mut input = ids(700);
    input.extend(ids(50));
    let covered: Vec<EventId> = exact_id_filters(&input, &FilterBudget::default())
        .unwrap()
        .into_iter()
        .flat_map(|f| f.filter.ids.unwrap_or_default())
        .collect();
    let mut expected = ids(700);
    expected.sort();
    assert_eq!(covered, expected);
}
