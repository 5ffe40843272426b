//! `SmallSet` against `BTreeSet` as the model, and its exact growth while small.

use std::collections::BTreeSet;

use super::{EXACT_GROWTH_UP_TO, SmallSet};

proptest::proptest! {
    #[test]
    fn it_holds_and_orders_what_a_btree_set_does(
        steps in proptest::collection::vec((proptest::bool::ANY, 0u8..24), 0..128),
    ) {
        let mut set = SmallSet::default();
        let mut model = BTreeSet::new();
        for (insert, item) in steps {
            if insert {
                proptest::prop_assert_eq!(set.insert(item), model.insert(item));
            } else {
                set.retain(|x| *x != item);
                model.remove(&item);
            }
            proptest::prop_assert_eq!(set.len(), model.len());
            proptest::prop_assert!(set.iter().eq(model.iter()));
            proptest::prop_assert!((0u8..24).all(|x| set.contains(&x) == model.contains(&x)));
        }
    }
}

#[test]
fn a_small_set_holds_no_spare_slots() {
    let mut set = SmallSet::default();
    for item in 0..EXACT_GROWTH_UP_TO {
        set.insert(item);
        assert_eq!(set.0.capacity(), item + 1, "after {} items", item + 1);
    }
}
