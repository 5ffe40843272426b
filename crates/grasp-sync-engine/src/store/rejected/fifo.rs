//! `Fifo`: one tier's entries keyed by event ID, oldest insertion first. Removal is O(1): the
//! insertion queue is cleaned lazily and compacted when stale slots pile up.

use std::collections::{HashMap, VecDeque};

use nostr::EventId;

/// Entries in insertion order. Re-inserting an ID moves it to the back.
#[derive(Debug, Clone)]
pub(crate) struct Fifo<V> {
    entries: HashMap<EventId, (u64, V)>,
    order: VecDeque<(EventId, u64)>,
    next_seq: u64,
}

impl<V> Fifo<V> {
    /// An empty tier.
    pub(crate) fn new() -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    /// Inserts `value` as the newest entry, returning the one it replaces.
    pub(crate) fn insert(&mut self, id: EventId, value: V) -> Option<V> {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.order.push_back((id, seq));
        let old = self.entries.insert(id, (seq, value)).map(|(_, old)| old);
        self.compact();
        old
    }

    /// Removes the entry for `id`.
    pub(crate) fn remove(&mut self, id: &EventId) -> Option<V> {
        let removed = self.entries.remove(id).map(|(_, value)| value);
        self.compact();
        removed
    }

    pub(crate) fn get(&self, id: &EventId) -> Option<&V> {
        self.entries.get(id).map(|(_, value)| value)
    }

    pub(crate) fn get_mut(&mut self, id: &EventId) -> Option<&mut V> {
        self.entries.get_mut(id).map(|(_, value)| value)
    }

    /// The oldest entry still present.
    pub(crate) fn oldest(&mut self) -> Option<(EventId, &V)> {
        self.drop_stale_front();
        let (id, _) = self.order.front()?;
        self.entries.get(id).map(|(_, value)| (*id, value))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_live(&self, id: &EventId, seq: u64) -> bool {
        self.entries.get(id).is_some_and(|(live, _)| *live == seq)
    }

    fn drop_stale_front(&mut self) {
        while let Some((id, seq)) = self.order.front() {
            if self.is_live(id, *seq) {
                break;
            }
            self.order.pop_front();
        }
    }

    /// Rebuilds the queue once stale slots outnumber live entries.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let entries = &self.entries;
        self.order
            .retain(|(id, seq)| entries.get(id).is_some_and(|(live, _)| live == seq));
    }
}
