//! Tests of the FIFO eviction of `BoundedMap`, against a plain FIFO as the model.

use super::BoundedMap;

#[test]
fn full_map_evicts_the_oldest_insertion() {
    let mut map = BoundedMap::new(2);
    map.insert(1, "a");
    map.insert(2, "b");
    map.insert(1, "c");
    map.insert(3, "d");
    assert_eq!(map.len(), 2);
    assert_eq!(map.get(&1), None);
    assert_eq!(map.get(&2), Some(&"b"));
    assert_eq!(map.get(&3), Some(&"d"));
    map.insert(4, "e");
    map.insert(5, "f");
    assert_eq!(map.len(), 2);
    assert!(map.contains_key(&5) && map.contains_key(&4) && !map.contains_key(&3));
}

#[test]
fn the_entries_never_take_room_for_more_than_the_capacity() {
    // 100,000 is the policy's default; doubling alone would reserve 131,072 entries.
    let capacity = 100_000;
    let mut map = BoundedMap::new(capacity);
    for key in 0..capacity as u32 * 3 / 2 {
        map.insert(key, ());
        assert!(
            map.room() <= capacity,
            "room for {} after {key}",
            map.room()
        );
    }
    assert_eq!(map.len(), capacity);
    assert_eq!(map.room(), capacity);
}

proptest::proptest! {
    #[test]
    fn map_never_exceeds_capacity_and_keeps_the_newest_key(
        capacity in 1usize..8,
        keys in proptest::collection::vec(0u8..16, 0..64),
    ) {
        let mut map = BoundedMap::new(capacity);
        for key in &keys {
            map.insert(*key, ());
            proptest::prop_assert!(map.len() <= capacity);
            proptest::prop_assert!(map.contains_key(key));
        }
    }
}

/// The plainest FIFO map: entries in insertion order, the oldest evicted first.
fn model_insert(model: &mut Vec<(u8, u16)>, capacity: usize, key: u8, value: u16) {
    if let Some(entry) = model.iter_mut().find(|(k, _)| *k == key) {
        entry.1 = value;
        return;
    }
    if model.len() == capacity {
        model.remove(0);
    }
    model.push((key, value));
}

proptest::proptest! {
    #[test]
    fn map_holds_exactly_what_a_plain_fifo_holds(
        capacity in 1usize..8,
        inserts in proptest::collection::vec((0u8..16, proptest::num::u16::ANY), 0..96),
    ) {
        let mut map = BoundedMap::new(capacity);
        let mut model = Vec::new();
        for (key, value) in inserts {
            map.insert(key, value);
            model_insert(&mut model, capacity, key, value);
            proptest::prop_assert_eq!(map.len(), model.len());
            for probe in 0u8..16 {
                let expected = model.iter().find(|(k, _)| *k == probe).map(|(_, v)| v);
                proptest::prop_assert_eq!(map.get(&probe), expected, "key {}", probe);
            }
        }
    }
}
