//! [`CompactSet`]: an ordered set for the many sets that hold a few items each.
//!
//! A `BTreeSet` allocates a node of eleven slots for its first item: 384 bytes for one event
//! ID, 320 for one relay URL, 640 for one repository coordinate. A repository's relays and root
//! events, and a participant's repositories and roots, are mostly one to a few items, and there
//! are thousands of each. A `CompactSet` keeps up to [`SMALL_ITEMS`] items in a sorted vector
//! that grows one slot at a time, and moves them into a `BTreeSet` beyond that, so a set that
//! remote data makes large keeps logarithmic insertion.

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::collections::btree_set;
use std::fmt;

use crate::pack::Pack;

/// Most items kept in a sorted vector; a set with more is a `BTreeSet`.
pub const SMALL_ITEMS: usize = 16;

/// An ordered set: a sorted vector of at most [`SMALL_ITEMS`], else a `BTreeSet` (which stays
/// one if the set shrinks again). Iterates in ascending order; equal when the items are.
///
/// ```
/// use grasp_sync_model::CompactSet;
///
/// let mut relays: CompactSet<&str> = ["wss://b.example", "wss://a.example"].into_iter().collect();
/// assert!(!relays.insert("wss://a.example"));
/// assert!(relays.contains(&"wss://b.example"));
/// assert_eq!(relays.iter().copied().collect::<Vec<_>>(), ["wss://a.example", "wss://b.example"]);
/// ```
#[derive(Clone)]
pub struct CompactSet<T>(Repr<T>);

#[derive(Clone)]
enum Repr<T> {
    Small(Vec<T>),
    Large(BTreeSet<T>),
}

impl<T> Default for CompactSet<T> {
    fn default() -> Self {
        Self(Repr::Small(Vec::new()))
    }
}

impl<T: Ord> CompactSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `item`; whether it was not there yet.
    pub fn insert(&mut self, item: T) -> bool {
        let small = match &mut self.0 {
            Repr::Large(set) => return set.insert(item),
            Repr::Small(small) => small,
        };
        let Err(at) = small.binary_search(&item) else {
            return false;
        };
        if small.len() < SMALL_ITEMS {
            if small.len() == small.capacity() {
                small.reserve_exact(1);
            }
            small.insert(at, item);
        } else {
            let mut set: BTreeSet<T> = std::mem::take(small).into_iter().collect();
            set.insert(item);
            self.0 = Repr::Large(set);
        }
        true
    }

    /// Removes `item`; whether it was there.
    pub fn remove(&mut self, item: &T) -> bool {
        match &mut self.0 {
            Repr::Small(small) => match small.binary_search(item) {
                Ok(at) => {
                    small.remove(at);
                    true
                }
                Err(_) => false,
            },
            Repr::Large(set) => set.remove(item),
        }
    }

    /// Whether `item` (or an item borrowed as it, as a `&str` for a `String`) is in the set.
    pub fn contains<Q>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match &self.0 {
            Repr::Small(small) => small
                .binary_search_by(|held| held.borrow().cmp(item))
                .is_ok(),
            Repr::Large(set) => set.contains(item),
        }
    }

    /// Keeps only the items `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        match &mut self.0 {
            Repr::Small(small) => small.retain(keep),
            Repr::Large(set) => set.retain(keep),
        }
    }
}

impl<T: Ord> Pack for CompactSet<T> {
    /// Packs the `BTreeSet` of a large set; a small set is a vector already as long as it is.
    fn pack(&mut self) {
        if let Repr::Large(set) = &mut self.0 {
            set.pack();
        }
    }
}

impl<T> CompactSet<T> {
    /// How many items the set holds.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(small) => small.len(),
            Repr::Large(set) => set.len(),
        }
    }

    /// Whether the set holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items in ascending order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter(match &self.0 {
            Repr::Small(small) => IterRepr::Small(small.iter()),
            Repr::Large(set) => IterRepr::Large(set.iter()),
        })
    }
}

/// The items of a [`CompactSet`] in ascending order, by reference.
pub struct Iter<'a, T>(IterRepr<'a, T>);

enum IterRepr<'a, T> {
    Small(std::slice::Iter<'a, T>),
    Large(btree_set::Iter<'a, T>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match &mut self.0 {
            IterRepr::Small(items) => items.next(),
            IterRepr::Large(items) => items.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::Small(items) => items.size_hint(),
            IterRepr::Large(items) => items.size_hint(),
        }
    }
}

/// The items of a [`CompactSet`] in ascending order.
pub struct IntoIter<T>(IntoIterRepr<T>);

enum IntoIterRepr<T> {
    Small(std::vec::IntoIter<T>),
    Large(btree_set::IntoIter<T>),
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match &mut self.0 {
            IntoIterRepr::Small(items) => items.next(),
            IntoIterRepr::Large(items) => items.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IntoIterRepr::Small(items) => items.size_hint(),
            IntoIterRepr::Large(items) => items.size_hint(),
        }
    }
}

impl<T> IntoIterator for CompactSet<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter(match self.0 {
            Repr::Small(small) => IntoIterRepr::Small(small.into_iter()),
            Repr::Large(set) => IntoIterRepr::Large(set.into_iter()),
        })
    }
}

impl<'a, T> IntoIterator for &'a CompactSet<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: Ord> Extend<T> for CompactSet<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            self.insert(item);
        }
    }
}

impl<T: Ord> FromIterator<T> for CompactSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut set = Self::default();
        set.extend(items);
        set
    }
}

impl<T: PartialEq> PartialEq for CompactSet<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: Eq> Eq for CompactSet<T> {}

impl<T: fmt::Debug> fmt::Debug for CompactSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests;
