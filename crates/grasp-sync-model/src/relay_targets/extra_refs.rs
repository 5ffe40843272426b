//! [`ExtraRefs`]: reference counts for the members of a set that more than one source put in,
//! so a member leaves the set only when its last source does.
//!
//! Most root events belong to one repository, so counting only the second and later references
//! keeps the counts small: a member absent from the counts has exactly one reference.

use std::collections::HashMap;

use nostr::EventId;

/// References beyond the first, per member of a set kept elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExtraRefs {
    counts: HashMap<EventId, u32>,
}

impl ExtraRefs {
    /// Records one more reference to `id`; `inserted` says whether the set did not hold it yet
    /// (its first reference).
    pub(crate) fn handle_added(&mut self, id: EventId, inserted: bool) {
        if !inserted {
            *self.counts.entry(id).or_insert(0) += 1;
        }
    }

    /// Drops one reference to `id`; whether it was the last, so the caller removes `id` from
    /// its set.
    pub(crate) fn handle_released(&mut self, id: &EventId) -> bool {
        match self.counts.get_mut(id) {
            Some(count) => {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(id);
                }
                false
            }
            None => true,
        }
    }

    /// Whether no member has more than one reference.
    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}
