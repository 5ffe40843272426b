//! `BoundedMap`: a map with a fixed capacity that forgets its oldest insertions first, for the
//! policy's accepted-ID and referenced-ID sets.

use std::hash::{BuildHasher, Hash, RandomState};

use hashbrown::HashTable;

/// A map holding at most `capacity` entries; inserting into a full map evicts the entry that
/// was inserted first (FIFO). Re-inserting a present key updates its value in place and does
/// not refresh its age.
///
/// Each key is stored once: the entries sit in insertion order in a vector, a ring once full,
/// and the hash table holds only their positions (four bytes each). A map with a separate
/// queue of keys for the eviction order holds every key twice; for the policy's 32-byte event
/// IDs that was a third of the map's memory.
#[derive(Debug, Clone)]
pub(crate) struct BoundedMap<K, V> {
    capacity: usize,
    /// The entries in insertion order, rotated once full: the oldest is at `oldest`.
    entries: Vec<(K, V)>,
    /// Position in `entries` of the oldest entry (0 until the map is full).
    oldest: usize,
    /// The position of each entry in `entries`, found by the hash of its key.
    positions: HashTable<u32>,
    /// Keyed hashing, so a remote party cannot choose colliding keys.
    hasher: RandomState,
}

impl<K: Eq + Hash, V> BoundedMap<K, V> {
    /// An empty map keeping at most `capacity` entries (at least one, and at most
    /// `u32::MAX`).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.clamp(1, u32::MAX as usize),
            entries: Vec::new(),
            oldest: 0,
            positions: HashTable::new(),
            hasher: RandomState::new(),
        }
    }

    /// Inserts or updates `key`, evicting the oldest entry if the map is full.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        let Self {
            capacity,
            entries,
            oldest,
            positions,
            hasher,
        } = self;
        let hash = hasher.hash_one(&key);
        if let Some(&position) = positions.find(hash, |&p| entries[p as usize].0 == key) {
            entries[position as usize].1 = value;
            return;
        }
        let position = if entries.len() < *capacity {
            if entries.len() == entries.capacity() {
                // Doubling, but never past `capacity`: a vector grown by doubling alone holds
                // up to twice the entries the map may keep.
                let more = entries.len().max(4).min(*capacity - entries.len());
                entries.reserve_exact(more);
            }
            entries.push((key, value));
            entries.len() - 1
        } else {
            let position = *oldest;
            let evicted = hasher.hash_one(&entries[position].0);
            if let Ok(found) = positions.find_entry(evicted, |&p| p as usize == position) {
                found.remove();
            }
            entries[position] = (key, value);
            *oldest = (position + 1) % *capacity;
            position
        };
        // `capacity` is at most `u32::MAX`, so every position fits.
        positions.insert_unique(hash, position as u32, |&p| {
            hasher.hash_one(&entries[p as usize].0)
        });
    }

    /// The value stored for `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        let hash = self.hasher.hash_one(key);
        self.positions
            .find(hash, |&p| self.entries[p as usize].0 == *key)
            .map(|&p| &self.entries[p as usize].1)
    }

    /// Whether `key` is present.
    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
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

    /// Number of entries the vector has room for.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.entries.capacity()
    }
}

#[cfg(test)]
mod tests;
