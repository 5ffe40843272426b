//! `CompactSet` against `BTreeSet` as the model, across the move from vector to tree, and
//! its exact growth while small.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{CompactSet, Repr, SMALL_ITEMS};

proptest! {
    #[test]
    fn it_holds_and_orders_what_a_btree_set_does(
        steps in prop::collection::vec((0u8..3, 0u8..40), 0..200),
    ) {
        let mut set = CompactSet::default();
        let mut model = BTreeSet::new();
        for (step, item) in steps {
            match step {
                0 => prop_assert_eq!(set.insert(item), model.insert(item)),
                1 => prop_assert_eq!(set.remove(&item), model.remove(&item)),
                _ => {
                    set.retain(|x| x % 7 != item % 7);
                    model.retain(|x| x % 7 != item % 7);
                }
            }
            prop_assert_eq!(set.len(), model.len());
            prop_assert!(set.iter().eq(model.iter()));
            prop_assert!((0u8..40).all(|x| set.contains(&x) == model.contains(&x)));
        }
        prop_assert!(set.clone().into_iter().eq(model.iter().copied()));
        prop_assert_eq!(&set, &model.iter().copied().collect::<CompactSet<u8>>());
    }
}

#[test]
fn a_small_set_holds_no_spare_slots_and_a_large_one_is_a_tree() {
    let mut set = CompactSet::default();
    for item in 0..SMALL_ITEMS {
        set.insert(item);
        let Repr::Small(small) = &set.0 else {
            panic!("small at {} items", item + 1);
        };
        assert_eq!(small.capacity(), item + 1, "after {} items", item + 1);
    }
    set.insert(SMALL_ITEMS);
    assert!(
        matches!(set.0, Repr::Large(_)),
        "a tree beyond {SMALL_ITEMS}"
    );
}
