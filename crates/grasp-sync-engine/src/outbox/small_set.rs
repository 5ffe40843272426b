//! `SmallSet`: a set kept as a sorted vector, for the many sets that hold a few items each.
//!
//! A `BTreeSet` allocates a node of eleven slots for its first item: 640 bytes for one
//! 48-byte repository coordinate, 384 for one event ID. Every participant holds two such sets,
//! most with one or two items, and at ten times the gitnostr size there are about nine thousand
//! participants. A sorted vector grows one slot at a time while small and holds at most
//! [`MAX_PARTICIPATIONS`](super::MAX_PARTICIPATIONS) items here, so an insertion's shift stays
//! cheap.

/// Below this many items, the vector grows by exactly one slot at a time.
const EXACT_GROWTH_UP_TO: usize = 16;

/// A set of ordered items, iterated in ascending order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmallSet<T>(Vec<T>);

impl<T> Default for SmallSet<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: Ord> SmallSet<T> {
    /// Adds `item`; whether it was not there yet.
    pub(crate) fn insert(&mut self, item: T) -> bool {
        match self.0.binary_search(&item) {
            Ok(_) => false,
            Err(at) => {
                if self.0.len() == self.0.capacity() && self.0.len() < EXACT_GROWTH_UP_TO {
                    self.0.reserve_exact(1);
                }
                self.0.insert(at, item);
                true
            }
        }
    }

    /// Whether `item` is in the set.
    #[cfg(test)]
    pub(crate) fn contains(&self, item: &T) -> bool {
        self.0.binary_search(item).is_ok()
    }

    /// Keeps only the items `keep` accepts.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.0.retain(keep);
    }

    /// How many items the set holds.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The items in ascending order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<'a, T: Ord> IntoIterator for &'a SmallSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests;
