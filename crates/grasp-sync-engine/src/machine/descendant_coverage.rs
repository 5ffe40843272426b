//! Direct-member descendants as data. Events that directly tag one of our root events are
//! *direct members*; every relay that syncs a member's root covers the member's descendants
//! (events tagging the member). This module decides:
//! - which members are remembered: every one seen, with its root, up to [`MAX_MEMBERS`];
//! - which members a relay does not cover yet: those whose root it syncs;
//! - what a relay's historic batch for new members leaves behind: confirmed, they stay
//!   covered; failed, they are uncovered, so the next maintenance tick covers them again;
//! - when the paced fallback sweeps: only on a relay whose descendant live coverage did not
//!   fit (*constrained*), one group of covered members at a time
//!   ([`crate::machine::descendant_sweep`]), with 15 minutes of overlap.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use grasp_sync_model::BatchId;
use nostr::nips::nip01::Coordinate;
use nostr::{Event, EventId, TagKind, Timestamp};

use crate::machine::descendant_sweep::{DescendantSweep, SweepGroup};

/// Most direct members remembered; beyond it new members are ignored.
pub const MAX_MEMBERS: usize = 200_000;

/// Overlap of the fallback query with the previous successful one.
const FALLBACK_OVERLAP: Duration = Duration::from_secs(15 * 60);

/// Every direct member seen, with the root it tags: members found on one relay are queried on
/// every relay that syncs their root.
#[derive(Debug, Default)]
pub struct DirectMembers {
    ids: BTreeMap<EventId, EventId>,
    coordinates: BTreeMap<Coordinate, EventId>,
    full: bool,
}

/// What became of a member handed to [`DirectMembers::record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// It is a member now.
    New,
    /// The cap was reached; `first` is true the first time it turns one away.
    Full {
        /// The first time it turns one away.
        first: bool,
    },
}

impl DirectMembers {
    /// Whether `id` is a member already.
    pub fn contains(&self, id: &EventId) -> bool {
        self.ids.contains_key(id)
    }

    /// Remembers `id` (and its `coordinate`, for an addressable event) as a member tagging
    /// `root`, unless [`MAX_MEMBERS`] are remembered.
    pub fn record(
        &mut self,
        id: EventId,
        coordinate: Option<Coordinate>,
        root: EventId,
    ) -> Recorded {
        if self.ids.len() + self.coordinates.len() >= MAX_MEMBERS {
            let first = !self.full;
            self.full = true;
            return Recorded::Full { first };
        }
        self.ids.insert(id, root);
        if let Some(coordinate) = coordinate {
            self.coordinates.insert(coordinate, root);
        }
        Recorded::New
    }
}

/// Members a relay is to cover, by ID and by coordinate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Direct members named by event ID.
    pub ids: Vec<EventId>,
    /// Direct members named by coordinate (addressable events).
    pub coordinates: Vec<Coordinate>,
}

impl Members {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.coordinates.is_empty()
    }
}

/// One relay's descendant coverage: which members it covers, the historic batches in flight
/// for new ones, and the fallback sweep. A new session starts from the default: every member
/// is covered again, and the mode is derived again from the session's own capacity.
#[derive(Debug, Default)]
pub struct DescendantCoverage {
    covered_ids: BTreeSet<EventId>,
    covered_coordinates: BTreeSet<Coordinate>,
    /// Descendant live coverage did not fit: history runs on the fallback cadence.
    constrained: bool,
    fallback: DescendantSweep,
    /// Historic batches in flight for new members, with the members they cover.
    batches: BTreeMap<BatchId, Members>,
}

impl DescendantCoverage {
    /// Whether descendant coverage runs on the paced fallback.
    pub fn is_constrained(&self) -> bool {
        self.constrained
    }

    /// Moves descendant coverage to the paced fallback.
    pub fn set_constrained(&mut self) {
        self.constrained = true;
    }

    /// The members whose root is one of `roots` (the relay's) that the relay does not cover
    /// yet. They count as covered from here on; hand their batch to
    /// [`Self::handle_batch_opened`].
    pub fn take_uncovered(
        &mut self,
        members: &DirectMembers,
        roots: &BTreeSet<EventId>,
    ) -> Members {
        let ids: Vec<EventId> = members
            .ids
            .iter()
            .filter(|(id, root)| roots.contains(root) && !self.covered_ids.contains(id))
            .map(|(id, _)| *id)
            .collect();
        let coordinates: Vec<Coordinate> = members
            .coordinates
            .iter()
            .filter(|(c, root)| roots.contains(root) && !self.covered_coordinates.contains(c))
            .map(|(c, _)| c.clone())
            .collect();
        self.covered_ids.extend(ids.iter().copied());
        self.covered_coordinates.extend(coordinates.iter().cloned());
        Members { ids, coordinates }
    }

    /// The historic batch for `members` (from [`Self::take_uncovered`]) is pending.
    pub fn handle_batch_opened(&mut self, batch: BatchId, members: Members) {
        self.batches.insert(batch, members);
    }

    /// A historic batch ended: a failed batch for new members uncovers them; a fallback
    /// group's batch moves the sweep on, or leaves its group at the head.
    pub fn handle_batch_done(&mut self, batch: BatchId, success: bool) {
        self.fallback.handle_batch_done(batch, success);
        let Some(members) = self.batches.remove(&batch) else {
            return;
        };
        if !success {
            for id in &members.ids {
                self.covered_ids.remove(id);
            }
            for coordinate in &members.coordinates {
                self.covered_coordinates.remove(coordinate);
            }
        }
    }

    /// The relay's pending batches were dropped: the fallback group in flight is asked again.
    pub fn handle_pending_cleared(&mut self) {
        self.fallback.handle_pending_cleared();
    }

    /// On a constrained relay, the fallback sweep's next group of covered members at `now`;
    /// hand it back to [`Self::handle_fallback_sent`] with its batch.
    pub fn poll_fallback(&mut self, now: Timestamp) -> Option<SweepGroup> {
        if !self.constrained {
            return None;
        }
        self.fallback.next_group(
            now,
            FALLBACK_OVERLAP,
            &self.covered_ids,
            &self.covered_coordinates,
        )
    }

    /// `group` was queued in `batch`, or needed no REQ (`None`).
    pub fn handle_fallback_sent(&mut self, group: &SweepGroup, batch: Option<BatchId>) {
        self.fallback.sent(group, batch);
    }
}

/// The first of `roots` that `event` tags with `e`, `E` or `q`: the root that makes it a
/// direct member.
pub fn tagged_root(event: &Event, roots: &HashSet<EventId>) -> Option<EventId> {
    event.tags.iter().find_map(|tag| {
        let thread_tag = matches!(tag.kind(), TagKind::SingleLetter(letter)
            if matches!(letter.as_char(), 'e' | 'E' | 'q'));
        if !thread_tag {
            return None;
        }
        tag.content()
            .and_then(|value| EventId::from_hex(value).ok())
            .filter(|id| roots.contains(id))
    })
}

#[cfg(test)]
mod tests;
