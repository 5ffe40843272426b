//! `BoundedMap`: a map with a fixed capacity that forgets its oldest insertions first, for the
//! policy's accepted-ID and referenced-ID sets.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// A map holding at most `capacity` entries; inserting into a full map evicts the entry that
/// was inserted first (FIFO). Re-inserting a present key updates its value in place and does
/// not refresh its age.
#[derive(Debug, Clone)]
pub(crate) struct BoundedMap<K, V> {
    capacity: usize,
    entries: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Eq + Hash + Clone, V> BoundedMap<K, V> {
    /// An empty map keeping at most `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Inserts or updates `key`, evicting the oldest entries beyond the capacity.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if let Some(slot) = self.entries.get_mut(&key) {
            *slot = value;
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
    }

    /// The value stored for `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key)
    }

    /// Whether `key` is present.
    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The most entries held at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests;
