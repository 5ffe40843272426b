//! Packing the indices at rest: the B-trees sync grows one insertion at a time (the index, each
//! relay's targets, the direct members, the participants) are rebuilt with full nodes
//! ([`Pack`](grasp_sync_model::Pack)), in about a third less memory, and each relay's
//! confirmed state shares its packed targets again.
//!
//! The indices are packed at a health tick when sync is at rest (no self-feed event buffered,
//! no save in flight, no batch pending, no relay in its historic sync) and they hold a tenth
//! more entries than when last packed. Each packing costs a pass over what it packs, and the
//! growth it waits for keeps the passes' total within a small multiple of the indices' size.

use grasp_sync_model::ConnectionStatus;

use super::Actor;

/// How much the indices must have grown since they were last packed: a tenth.
const GROWTH_DIVISOR: usize = 10;

/// How large the indices were when last packed.
#[derive(Debug, Default)]
pub(super) struct Packing {
    packed_size: usize,
}

impl Packing {
    /// Whether indices of `size` entries have grown enough since the last packing.
    fn is_due(&self, size: usize) -> bool {
        size > self.packed_size + self.packed_size / GROWTH_DIVISOR
    }
}

impl Actor {
    /// Packs the indices if sync is at rest and they grew enough since the last packing.
    pub(super) fn pack_at_rest(&mut self) {
        let size = self.index_size();
        if !self.packing.is_due(size) || !self.is_at_rest() {
            return;
        }
        self.repos.pack();
        self.targets.pack();
        self.members.pack();
        self.outbox.participants.pack();
        self.outbox.lists.pack();
        // Packing copied the targets a relay's confirmed state shared: share them again (a
        // state shares only what equals its targets).
        for (relay, target) in self.targets.targets() {
            if let Some(state) = self.relays.get_mut(relay) {
                state.share_with(target);
            }
        }
        self.packing.packed_size = size;
        tracing::debug!(entries = size, "indices packed at rest");
    }

    /// Entries of the indices that packing rebuilds.
    fn index_size(&self) -> usize {
        self.repos.len()
            + self.targets.root_ids().len()
            + self.members.len()
            + self.outbox.participants.len()
            + self.outbox.lists.len()
    }

    /// Nothing that grows the indices is in flight.
    fn is_at_rest(&self) -> bool {
        self.feed_buffer.is_empty()
            && self.ingestor.saving() == 0
            && self
                .runtimes
                .keys()
                .all(|relay| !self.pending.has_pending(relay))
            && self
                .relays
                .iter()
                .all(|(_, state)| state.connection_status != ConnectionStatus::Syncing)
    }
}

#[cfg(test)]
mod tests {
    use super::Packing;

    #[test]
    fn the_indices_are_packed_again_once_they_grew_by_a_tenth() {
        let mut packing = Packing::default();
        assert!(!packing.is_due(0), "nothing to pack");
        assert!(packing.is_due(1));
        packing.packed_size = 1_000;
        assert!(!packing.is_due(1_000));
        assert!(!packing.is_due(1_100));
        assert!(packing.is_due(1_101));
    }
}
