//! [`Pack`]: rebuilding a B-tree that grew one insertion at a time, with full nodes.
//!
//! A B-tree grown by insertions keeps each node between half full and full: about two thirds
//! on average for keys in random order, little more than half for keys in ascending order.
//! Built from sorted items at once, every node but those along its right edge is full. The
//! indices a first sync grows (each relay's repositories and root events, the direct members)
//! then mostly stay as they are, and once packed they hold a third less memory or more.
//!
//! Packing moves the items into new nodes (no item is cloned, except where a [`Shared`] value
//! is held by another owner too) and costs one pass plus a vector of the items while it runs.

use std::collections::{BTreeMap, BTreeSet};

use crate::shared::Shared;

/// A collection that can rebuild itself in less memory, holding the same items.
///
/// ```
/// use std::collections::BTreeSet;
///
/// use grasp_sync_model::Pack;
///
/// let mut ids: BTreeSet<u64> = BTreeSet::new();
/// for n in 0..1_000u64 {
///     ids.insert(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
/// }
/// let before = ids.clone();
/// ids.pack();
/// assert_eq!(ids, before);
/// ```
pub trait Pack {
    /// Rebuilds `self` with full nodes; its items, their order and its equality stay the same.
    fn pack(&mut self);
}

impl<K: Ord, V> Pack for BTreeMap<K, V> {
    fn pack(&mut self) {
        // `FromIterator` finds the items sorted (one run, no reordering) and builds in bulk.
        *self = std::mem::take(self).into_iter().collect();
    }
}

impl<T: Ord> Pack for BTreeSet<T> {
    fn pack(&mut self) {
        *self = std::mem::take(self).into_iter().collect();
    }
}

impl<T: Pack + Clone> Pack for Shared<T> {
    /// Packs this copy in place if no other `Shared` holds it; else packs a copy, which this
    /// one then holds alone (the other owner keeps the old copy until it shares this one
    /// again, as by [`Shared::share_if_equal`]).
    fn pack(&mut self) {
        match Shared::get_mut(self) {
            Some(value) => value.pack(),
            None => {
                let mut value = T::clone(self);
                value.pack();
                *self = Shared::new(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::Pack;
    use crate::shared::Shared;

    fn scattered(n: u64) -> impl Iterator<Item = u64> {
        (0..n).map(|n| n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    #[test]
    fn a_packed_map_holds_the_same_entries_in_the_same_order() {
        let mut map: BTreeMap<u64, u64> = scattered(5_000).map(|k| (k, k / 3)).collect();
        for k in scattered(5_000).step_by(3) {
            map.remove(&k);
        }
        let before: Vec<(u64, u64)> = map.iter().map(|(k, v)| (*k, *v)).collect();
        map.pack();
        let after: Vec<(u64, u64)> = map.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(after, before);
        // Still a working map: inserts and removals after packing.
        map.insert(7, 7);
        assert_eq!(map.remove(&7), Some(7));
        assert_eq!(map.len(), before.len());
    }

    #[test]
    fn an_empty_set_packs_to_an_empty_set() {
        let mut set: BTreeSet<u64> = BTreeSet::new();
        set.pack();
        assert!(set.is_empty());
    }

    #[test]
    fn a_shared_value_packs_a_copy_and_leaves_the_other_owner_its_own() {
        let mut targets: Shared<BTreeSet<u64>> = scattered(100).collect();
        let mut confirmed: Shared<BTreeSet<u64>> = scattered(100).collect();
        assert!(confirmed.share_if_equal(&targets));
        targets.pack();
        assert!(!confirmed.is_shared_with(&targets));
        assert_eq!(*confirmed, *targets);
        assert!(confirmed.share_if_equal(&targets));
    }

    #[test]
    fn a_value_held_alone_packs_in_place() {
        let mut alone: Shared<BTreeSet<u64>> = scattered(100).collect();
        let other = alone.clone();
        drop(other);
        let before = (*alone).clone();
        alone.pack();
        assert_eq!(*alone, before);
    }
}
