//! Tests of the FIFO eviction of `BoundedMap`.

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
