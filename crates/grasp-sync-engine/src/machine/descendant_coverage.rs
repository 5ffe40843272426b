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
//!
//! Every member gets a slot, its place in the order members were first seen, and a relay
//! keeps the slots it covers as bits: 25 KB per relay at [`MAX_MEMBERS`], where a set of the
//! members' IDs per relay took about 50 bytes a member.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Bound;
use std::time::Duration;

use grasp_sync_model::{BatchId, Pack};
use nostr::nips::nip01::Coordinate;
use nostr::{Event, EventId, PublicKey, TagKind, Timestamp};

use crate::machine::descendant_sweep::{DescendantSweep, MemberRange, SweepGroup};
use crate::machine::slot_set::SlotSet;

/// Most direct members remembered; beyond it new members are ignored.
pub const MAX_MEMBERS: usize = 200_000;

/// Overlap of the fallback query with the previous successful one.
const FALLBACK_OVERLAP: Duration = Duration::from_secs(15 * 60);

/// Every direct member seen, with the root it tags: members found on one relay are queried on
/// every relay that syncs their root.
#[derive(Debug, Default)]
pub struct DirectMembers {
    ids: BTreeMap<EventId, Member>,
    coordinates: BTreeMap<Coordinate, Member>,
    full: bool,
}

/// A member's root, and its slot: how many members of its kind (by ID, by coordinate) were
/// seen before it. Members are never forgotten, so a slot is never given twice.
#[derive(Debug, Clone, Copy)]
struct Member {
    root: EventId,
    slot: u32,
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
    /// Rebuilds the members' B-trees with full nodes ([`Pack`]); the members do not change.
    pub fn pack(&mut self) {
        self.ids.pack();
        self.coordinates.pack();
    }

    /// How many members are remembered, by ID and by coordinate.
    pub fn len(&self) -> usize {
        self.ids.len() + self.coordinates.len()
    }

    /// Whether no member is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

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
        remember(&mut self.ids, id, root);
        if let Some(coordinate) = coordinate {
            remember(&mut self.coordinates, coordinate, root);
        }
        Recorded::New
    }
}

/// Records `member` as tagging `root`: a new member takes the next slot; a known one keeps its
/// slot and takes the latest root.
fn remember<K: Ord>(members: &mut BTreeMap<K, Member>, member: K, root: EventId) {
    // At most `MAX_MEMBERS` plus one per kind, so the count fits.
    let slot = members.len() as u32;
    members
        .entry(member)
        .and_modify(|known| known.root = root)
        .or_insert(Member { root, slot });
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
    /// The slots of the members by ID the relay covers.
    covered_ids: SlotSet,
    /// The slots of the members by coordinate the relay covers.
    covered_coordinates: SlotSet,
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
        Members {
            ids: take_uncovered(&members.ids, &mut self.covered_ids, roots),
            coordinates: take_uncovered(&members.coordinates, &mut self.covered_coordinates, roots),
        }
    }

    /// The historic batch for `members` (from [`Self::take_uncovered`]) is pending. Members
    /// whose history joins a batch already carrying others (a round over the relay's kept
    /// holdings) are added to them.
    pub fn handle_batch_opened(&mut self, batch: BatchId, members: Members) {
        let carried = self.batches.entry(batch).or_default();
        carried.ids.extend(members.ids);
        carried.coordinates.extend(members.coordinates);
    }

    /// A historic batch ended: a failed batch for new members uncovers them (`members` gives
    /// their slots); a fallback group's batch moves the sweep on, or leaves its group at the
    /// head.
    pub fn handle_batch_done(&mut self, batch: BatchId, success: bool, members: &DirectMembers) {
        self.fallback.handle_batch_done(batch, success);
        let Some(batch) = self.batches.remove(&batch) else {
            return;
        };
        if !success {
            self.uncover(&batch, members);
        }
    }

    /// The relay's pending batches were dropped (a fresh start, a session's end): the members
    /// of the historic batches in flight are uncovered, so the next maintenance tick covers
    /// them again, and the fallback group in flight is asked again.
    pub fn handle_pending_cleared(&mut self, members: &DirectMembers) {
        for batch in std::mem::take(&mut self.batches).into_values() {
            self.uncover(&batch, members);
        }
        self.fallback.handle_pending_cleared();
    }

    /// `batch`'s members are no longer covered.
    fn uncover(&mut self, batch: &Members, members: &DirectMembers) {
        for member in batch.ids.iter().filter_map(|id| members.ids.get(id)) {
            self.covered_ids.remove(member.slot);
        }
        for member in batch
            .coordinates
            .iter()
            .filter_map(|c| members.coordinates.get(c))
        {
            self.covered_coordinates.remove(member.slot);
        }
    }

    /// On a constrained relay, the fallback sweep's next group of covered `members` at `now`;
    /// hand it back to [`Self::handle_fallback_sent`] with its batch.
    pub fn poll_fallback(&mut self, now: Timestamp, members: &DirectMembers) -> Option<SweepGroup> {
        if !self.constrained {
            return None;
        }
        self.fallback.next_group(
            now,
            FALLBACK_OVERLAP,
            &Covered {
                members: &members.ids,
                slots: &self.covered_ids,
            },
            &Covered {
                members: &members.coordinates,
                slots: &self.covered_coordinates,
            },
        )
    }

    /// `group` was queued in `batch`, or needed no REQ (`None`).
    pub fn handle_fallback_sent(&mut self, group: &SweepGroup, batch: Option<BatchId>) {
        self.fallback.sent(group, batch);
    }
}

/// The members whose root is one of `roots` and whose slot `covered` lacks, in member order;
/// their slots are added to `covered`.
fn take_uncovered<K: Ord + Clone>(
    members: &BTreeMap<K, Member>,
    covered: &mut SlotSet,
    roots: &BTreeSet<EventId>,
) -> Vec<K> {
    members
        .iter()
        .filter(|(_, member)| roots.contains(&member.root) && covered.insert(member.slot))
        .map(|(key, _)| key.clone())
        .collect()
}

/// The members of one kind a relay covers, for the sweep.
struct Covered<'a, K> {
    members: &'a BTreeMap<K, Member>,
    slots: &'a SlotSet,
}

impl<K: Ord + Clone> MemberRange<K> for Covered<'_, K> {
    fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn after(&self, after: Option<&K>, count: usize) -> Vec<K> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.members
            .range::<K, _>((lower, Bound::Unbounded))
            .filter(|(_, member)| self.slots.contains(member.slot))
            .take(count)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// What the engine remembers of a direct member: its ID, its coordinate when it is
/// addressable, the root it tags and its author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// The member.
    pub id: EventId,
    /// Its coordinate, for an addressable member.
    pub coordinate: Option<Coordinate>,
    /// The root it tags.
    pub root: EventId,
    /// Its author.
    pub author: PublicKey,
}

impl MemberRecord {
    /// `event` as a direct member: it tags one of `roots` with `e`, `E` or `q` and is not one
    /// of them itself.
    pub fn of(event: &Event, roots: &HashSet<EventId>) -> Option<Self> {
        if roots.contains(&event.id) {
            return None;
        }
        let root = tagged_root(event, roots)?;
        let coordinate = event
            .kind
            .is_addressable()
            .then(|| event.tags.identifier())
            .flatten()
            .map(|identifier| Coordinate::new(event.kind, event.pubkey).identifier(identifier));
        Some(Self {
            id: event.id,
            coordinate,
            root,
            author: event.pubkey,
        })
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
