//! The descendant fallback's sweep: on a relay where descendant live coverage does not fit,
//! the covered direct members are queried one group per maintenance tick, in member order, all
//! from the same `since`. A sweep's `since` is the start of the last complete sweep minus an
//! overlap, so the cursor advances only once every group of a sweep reached its EOSE; a failed
//! group is asked again, from where it was. A sweep starts at least [`SWEEP_REST`] after the
//! one before it started, so a relay with few members is not asked the same thing every tick.
//! Pure state: the actor supplies the members, the time and the batch results.
//!
//! Members added during a sweep are safe whichever side of the sweep's position they land on:
//! their own historic batch covers them up to the moment they were added, which is later than
//! the sweep's start, and the next sweep reaches back before it.

use std::time::Duration;

use grasp_sync_model::BatchId;
use nostr::nips::nip01::Coordinate;
use nostr::{EventId, Timestamp};

/// Direct-member event IDs per group: their `e`, `E` and `q` filters (about 27 KB each) stay
/// within the default filter byte budget, one filter per tag family.
pub const GROUP_IDS: usize = 400;
/// Addressable members per group: coordinates vary in length, so fewer than IDs.
pub const GROUP_COORDINATES: usize = 100;
/// Least time from one sweep's start to the next one's. Without it, a sweep of one group
/// would ask the relay the same REQ every maintenance tick (5 s) for as long as the daemon
/// runs, each time re-reading the overlap (15 min) of descendants. A descendant then arrives
/// within this rest plus a sweep's length.
pub const SWEEP_REST: Duration = Duration::from_secs(60);

/// Where a sweep goes on: event IDs first, then coordinates, each after the last one asked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    Ids(Option<EventId>),
    Coordinates(Option<Coordinate>),
}

/// A sweep under way.
#[derive(Debug, Clone)]
struct Sweep {
    started: Timestamp,
    since: Timestamp,
    next: Position,
}

/// Members of one kind (by ID, by coordinate) in ascending order, read from a position on.
pub trait MemberRange<T> {
    /// Whether there are none.
    fn is_empty(&self) -> bool;
    /// Up to `count` members after `after` (from the first, without it), ascending.
    fn after(&self, after: Option<&T>, count: usize) -> Vec<T>;
}

/// One group to ask for: members, and the `since` of their sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepGroup {
    /// The `since` of the group's sweep.
    pub since: Timestamp,
    /// Members of the group named by event ID.
    pub ids: Vec<EventId>,
    /// Members of the group named by coordinate.
    pub coordinates: Vec<Coordinate>,
    /// Where the sweep goes on once this group is done.
    next: Position,
}

/// The sweep's cursor, position and group in flight.
#[derive(Debug, Default)]
pub struct DescendantSweep {
    /// Start of the last complete sweep; `None` until the members' own batches set it.
    cursor: Option<Timestamp>,
    sweep: Option<Sweep>,
    /// The group's batch in flight and the position after it.
    in_flight: Option<(BatchId, Position)>,
    /// Sweeps completed.
    completed: u64,
}

impl DescendantSweep {
    /// Whether a group is in flight.
    #[cfg(test)]
    pub(crate) fn is_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Sweeps completed since the relay's descendant coverage was reset.
    #[cfg(test)]
    pub(crate) fn completed(&self) -> u64 {
        self.completed
    }

    /// The next group to ask for at `now`, or `None`: with a group in flight, without members,
    /// on the first call, which only sets the cursor to `now` (the members' own historic
    /// batches cover everything before it), or while a sweep that asked for every member rests
    /// ([`SWEEP_REST`] from its start). After the rest that sweep ends here, advancing the
    /// cursor to its start, and the next one begins. Hand the group back to [`Self::sent`]
    /// with its batch.
    pub fn next_group(
        &mut self,
        now: Timestamp,
        overlap: Duration,
        ids: &impl MemberRange<EventId>,
        coordinates: &impl MemberRange<Coordinate>,
    ) -> Option<SweepGroup> {
        if self.in_flight.is_some() || ids.is_empty() && coordinates.is_empty() {
            return None;
        }
        let Some(cursor) = self.cursor else {
            self.cursor = Some(now);
            return None;
        };
        if let Some(sweep) = &self.sweep {
            if let Some(group) = group_after(sweep, ids, coordinates) {
                return Some(group);
            }
            let rested = sweep.started.as_secs().saturating_add(SWEEP_REST.as_secs());
            if now.as_secs() < rested {
                return None;
            }
        }
        // No sweep yet, or this one asked for every member: the next starts now.
        let since = match self.sweep.take() {
            Some(done) => {
                self.cursor = Some(done.started);
                self.completed += 1;
                done.started
            }
            None => cursor,
        };
        let sweep = self.sweep.insert(Sweep {
            started: now,
            since: Timestamp::from_secs(since.as_secs().saturating_sub(overlap.as_secs())),
            next: Position::Ids(None),
        });
        group_after(sweep, ids, coordinates)
    }

    /// `group` was queued in `batch`, or needed no REQ at all (`None`, done at once).
    pub fn sent(&mut self, group: &SweepGroup, batch: Option<BatchId>) {
        match batch {
            Some(batch) => self.in_flight = Some((batch, group.next.clone())),
            None => self.advance(group.next.clone()),
        }
    }

    /// A batch ended: if it was the group in flight and it succeeded, the sweep moves past the
    /// group; a failure leaves the group at the head, to be asked again with the same `since`.
    pub fn handle_batch_done(&mut self, batch: BatchId, success: bool) {
        if let Some((_, next)) = self.in_flight.take_if(|(b, _)| *b == batch)
            && success
        {
            self.advance(next);
        }
    }

    /// The relay's pending batches were dropped: the group in flight will never finish and
    /// is asked again.
    pub fn handle_pending_cleared(&mut self) {
        self.in_flight = None;
    }

    fn advance(&mut self, next: Position) {
        if let Some(sweep) = &mut self.sweep {
            sweep.next = next;
        }
    }
}

/// The group after `sweep`'s position, with its `since`; `None` at the sweep's end.
fn group_after(
    sweep: &Sweep,
    ids: &impl MemberRange<EventId>,
    coordinates: &impl MemberRange<Coordinate>,
) -> Option<SweepGroup> {
    let (ids, coordinates, next) = take_group(&sweep.next, ids, coordinates)?;
    Some(SweepGroup {
        since: sweep.since,
        ids,
        coordinates,
        next,
    })
}

/// The group after `position`: up to [`GROUP_IDS`] IDs, or once they are exhausted up to
/// [`GROUP_COORDINATES`] coordinates, with the position after it. `None` at the sweep's end.
fn take_group(
    position: &Position,
    ids: &impl MemberRange<EventId>,
    coordinates: &impl MemberRange<Coordinate>,
) -> Option<(Vec<EventId>, Vec<Coordinate>, Position)> {
    if let Position::Ids(after) = position {
        let group = ids.after(after.as_ref(), GROUP_IDS);
        if let Some(last) = group.last() {
            let next = Position::Ids(Some(*last));
            return Some((group, Vec::new(), next));
        }
    }
    let after = match position {
        Position::Coordinates(after) => after.as_ref(),
        Position::Ids(_) => None,
    };
    let group = coordinates.after(after, GROUP_COORDINATES);
    let next = Position::Coordinates(Some(group.last()?.clone()));
    Some((Vec::new(), group, next))
}

#[cfg(test)]
mod tests;
