//! `RejectedIndex`: the bounded in-memory hot cache of rejected event IDs and their reasons,
//! consulted by `contains` so that sync never downloads a refused event again.

use nostr::EventId;

use crate::store::bounded::BoundedMap;

/// Default number of rejected IDs remembered (about 10 MB at worst).
pub const DEFAULT_REJECTED_CAPACITY: usize = 100_000;

/// Rejected IDs with their reasons, at most `capacity` of them; when full, the ID rejected
/// first is forgotten first. Nothing is persisted: a restart starts empty.
#[derive(Debug)]
pub(crate) struct RejectedIndex {
    entries: BoundedMap<EventId, String>,
}

impl RejectedIndex {
    /// An empty index keeping at most `capacity` IDs.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: BoundedMap::new(capacity),
        }
    }

    /// Remembers a rejection.
    pub(crate) fn handle_rejected(&mut self, id: EventId, reason: &str) {
        self.entries.insert(id, reason.to_owned());
    }

    /// Forgets a rejection (the event was accepted after all).
    pub(crate) fn handle_accepted(&mut self, id: &EventId) {
        self.entries.remove(id);
    }

    /// The reason the event was rejected, if it is remembered.
    pub(crate) fn reason(&self, id: &EventId) -> Option<&str> {
        self.entries.get(id).map(String::as_str)
    }
}
