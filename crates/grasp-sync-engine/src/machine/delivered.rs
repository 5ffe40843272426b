//! The event IDs one relay delivered, across its sessions, while its first sync may still trade
//! NIP-77 rounds for REQ+EOSE: the store's held events that this relay sent itself would be
//! sent again by a REQ, so they keep a batch on NIP-77.

use std::collections::HashSet;

use nostr::EventId;

/// Most IDs remembered per relay; past it, the relay's batches stay on NIP-77.
pub const MAX_DELIVERED_IDS: usize = 50_000;

/// IDs a relay delivered during its first sync, bounded by [`MAX_DELIVERED_IDS`].
#[derive(Debug, Default)]
pub struct DeliveredIds {
    ids: HashSet<EventId>,
    overflowed: bool,
    retired: bool,
}

impl DeliveredIds {
    /// Remembers `id`, unless the set is full or retired.
    pub fn record(&mut self, id: EventId) {
        if self.retired || self.overflowed {
            return;
        }
        if self.ids.len() >= MAX_DELIVERED_IDS {
            self.overflowed = true;
            self.ids = HashSet::new();
            return;
        }
        self.ids.insert(id);
    }

    /// Whether this relay certainly delivered none of `ids` in this session: false once the
    /// set overflowed or was retired, since it no longer knows.
    pub fn delivered_none_of(&self, ids: &[EventId]) -> bool {
        !self.overflowed && !self.retired && !ids.iter().any(|id| self.ids.contains(id))
    }

    /// The relay's first sync is over: forget the IDs and remember no more.
    pub fn retire(&mut self) {
        self.retired = true;
        self.ids = HashSet::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId::from_byte_array([n; 32])
    }

    #[test]
    fn knows_only_what_it_recorded_until_it_overflows_or_retires() {
        let mut delivered = DeliveredIds::default();
        delivered.record(id(1));
        assert!(!delivered.delivered_none_of(&[id(2), id(1)]));
        assert!(delivered.delivered_none_of(&[id(2), id(3)]));
        delivered.retire();
        delivered.record(id(4));
        assert!(
            !delivered.delivered_none_of(&[id(2)]),
            "a retired set knows nothing"
        );
    }

    #[test]
    fn an_overflowed_set_claims_nothing() {
        let mut delivered = DeliveredIds::default();
        for n in 0..=MAX_DELIVERED_IDS {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
            delivered.record(EventId::from_byte_array(bytes));
        }
        assert!(!delivered.delivered_none_of(&[id(9)]));
    }
}
