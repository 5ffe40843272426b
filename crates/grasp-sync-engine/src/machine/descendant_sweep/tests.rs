//! The sweep's rules: one group per call in member order, one `since` per sweep, the cursor
//! moved only by a complete sweep, failed and dropped groups asked again.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::*;
use nostr::{Keys, Kind};

/// The sweep reads plain sets in these tests.
impl<T: Ord + Clone> MemberRange<T> for BTreeSet<T> {
    fn is_empty(&self) -> bool {
        BTreeSet::is_empty(self)
    }

    fn after(&self, after: Option<&T>, count: usize) -> Vec<T> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.range::<T, _>((lower, Bound::Unbounded))
            .take(count)
            .cloned()
            .collect()
    }
}

const OVERLAP: Duration = Duration::from_secs(900);

fn ids(count: usize) -> BTreeSet<EventId> {
    (0..count)
        .map(|n| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
            EventId::from_byte_array(bytes)
        })
        .collect()
}

fn coordinates(count: usize) -> BTreeSet<Coordinate> {
    let author = Keys::generate().public_key();
    (0..count)
        .map(|n| Coordinate::new(Kind::from(30_023), author).identifier(format!("member-{n}")))
        .collect()
}

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// Asks for the next group at `now` and completes it in `batch` with `success`.
fn ask(
    sweep: &mut DescendantSweep,
    now: u64,
    batch: u64,
    success: bool,
    members: (&BTreeSet<EventId>, &BTreeSet<Coordinate>),
) -> Option<SweepGroup> {
    let group = sweep.next_group(at(now), OVERLAP, members.0, members.1)?;
    sweep.sent(&group, Some(BatchId(batch)));
    sweep.handle_batch_done(BatchId(batch), success);
    Some(group)
}

#[test]
fn the_first_tick_only_sets_the_cursor_as_the_members_own_batches_cover_the_past() {
    let (members, none) = (ids(3), coordinates(0));
    let mut sweep = DescendantSweep::default();
    assert_eq!(sweep.next_group(at(10_000), OVERLAP, &members, &none), None);
    let group = sweep
        .next_group(at(10_005), OVERLAP, &members, &none)
        .expect("a group on the next tick");
    assert_eq!(group.since, at(10_000 - 900));
    assert_eq!(group.ids.len(), 3);
}

#[test]
fn one_group_per_call_covers_every_member_once_per_sweep_in_order() {
    let (members, addressable) = (ids(GROUP_IDS * 2 + 7), coordinates(GROUP_COORDINATES + 1));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(0), OVERLAP, &members, &addressable);
    let mut seen_ids = Vec::new();
    let mut seen_coordinates = Vec::new();
    let mut groups = 0;
    for tick in 1..=5 {
        let group = ask(&mut sweep, tick * 5, tick, true, (&members, &addressable))
            .expect("a group per tick");
        assert!(group.ids.len() <= GROUP_IDS);
        assert!(group.coordinates.len() <= GROUP_COORDINATES);
        assert!(group.ids.is_empty() || group.coordinates.is_empty());
        seen_ids.extend(group.ids);
        seen_coordinates.extend(group.coordinates);
        groups += 1;
    }
    assert_eq!(groups, 5, "three groups of IDs and two of coordinates");
    assert_eq!(seen_ids, members.iter().copied().collect::<Vec<_>>());
    assert_eq!(
        seen_coordinates,
        addressable.iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(sweep.completed(), 0, "the end is found on the next tick");
    assert_eq!(
        ask(&mut sweep, 30, 6, true, (&members, &addressable)),
        None,
        "the sweep rests"
    );
    let next = ask(&mut sweep, 65, 6, true, (&members, &addressable)).expect("a new sweep");
    assert_eq!(sweep.completed(), 1);
    assert_eq!(
        next.ids,
        members.iter().take(GROUP_IDS).copied().collect::<Vec<_>>()
    );
}

#[test]
fn every_group_of_a_sweep_asks_from_the_same_since_and_the_next_from_the_sweeps_start() {
    let (members, none) = (ids(GROUP_IDS + 1), coordinates(0));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(5_000), OVERLAP, &members, &none);
    let first = ask(&mut sweep, 6_000, 1, true, (&members, &none)).expect("first group");
    let second = ask(&mut sweep, 6_005, 2, true, (&members, &none)).expect("second group");
    assert_eq!(first.since, at(5_000 - 900));
    assert_eq!(second.since, first.since);
    let next_sweep = ask(&mut sweep, 6_060, 3, true, (&members, &none)).expect("next sweep");
    assert_eq!(
        next_sweep.since,
        at(6_000 - 900),
        "the cursor is the completed sweep's start"
    );
}

#[test]
fn a_sweep_rests_from_its_start_before_the_next_begins() {
    let (members, none) = (ids(3), coordinates(0));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(10_000), OVERLAP, &members, &none);
    let first = ask(&mut sweep, 10_005, 1, true, (&members, &none)).expect("first sweep");
    for tick in (10_010..10_065).step_by(5) {
        assert_eq!(
            ask(&mut sweep, tick, 2, true, (&members, &none)),
            None,
            "resting at {tick}"
        );
    }
    let second = ask(&mut sweep, 10_065, 2, true, (&members, &none)).expect("second sweep");
    assert_eq!(second.ids, first.ids);
    assert_eq!(
        second.since,
        at(10_005 - 900),
        "from the rested sweep's start"
    );
    // An hour of ticks asks one group a minute, not one a tick.
    let mut asked = 0;
    for tick in (10_070..10_070 + 3_600).step_by(5) {
        asked += usize::from(ask(&mut sweep, tick, 3, true, (&members, &none)).is_some());
    }
    assert_eq!(asked, 60);
}

#[test]
fn a_failed_group_is_asked_again_and_the_cursor_does_not_move() {
    let (members, none) = (ids(GROUP_IDS + 1), coordinates(0));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(1_000), OVERLAP, &members, &none);
    let first = ask(&mut sweep, 2_000, 1, true, (&members, &none)).expect("first group");
    let failed = ask(&mut sweep, 2_005, 2, false, (&members, &none)).expect("second group");
    let again = ask(&mut sweep, 2_010, 3, true, (&members, &none)).expect("asked again");
    assert_eq!(again, failed);
    assert_ne!(again.ids, first.ids);
    let next_sweep = ask(&mut sweep, 2_060, 4, true, (&members, &none)).expect("next sweep");
    assert_eq!(next_sweep.since, at(2_000 - 900));
}

#[test]
fn a_group_in_flight_blocks_the_next_and_a_dropped_one_is_asked_again() {
    let (members, none) = (ids(5), coordinates(0));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(0), OVERLAP, &members, &none);
    let group = sweep
        .next_group(at(5), OVERLAP, &members, &none)
        .expect("group");
    sweep.sent(&group, Some(BatchId(1)));
    assert!(sweep.is_in_flight());
    assert_eq!(sweep.next_group(at(10), OVERLAP, &members, &none), None);
    // Another batch's end is not this group's.
    sweep.handle_batch_done(BatchId(2), true);
    assert!(sweep.is_in_flight());
    sweep.handle_pending_cleared();
    assert_eq!(
        sweep.next_group(at(15), OVERLAP, &members, &none),
        Some(group)
    );
}

#[test]
fn a_group_that_needs_no_request_is_done_at_once() {
    let (members, none) = (ids(GROUP_IDS + 1), coordinates(0));
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(0), OVERLAP, &members, &none);
    let first = sweep
        .next_group(at(5), OVERLAP, &members, &none)
        .expect("group");
    sweep.sent(&first, None);
    assert!(!sweep.is_in_flight());
    let second = sweep
        .next_group(at(10), OVERLAP, &members, &none)
        .expect("group");
    assert_eq!(second.ids.len(), 1);
}

#[test]
fn members_added_behind_the_position_wait_for_the_next_sweep() {
    let mut members = ids(GROUP_IDS + 1);
    let none = coordinates(0);
    let mut sweep = DescendantSweep::default();
    sweep.next_group(at(10_000), OVERLAP, &members, &none);
    ask(&mut sweep, 10_100, 1, true, (&members, &none)).expect("first group");
    // A member sorting before the position: not asked in this sweep.
    let early = EventId::from_byte_array([0; 32]);
    assert!(members.insert(early));
    let second = ask(&mut sweep, 10_105, 2, true, (&members, &none)).expect("second group");
    assert!(!second.ids.contains(&early));
    let next_sweep = ask(&mut sweep, 10_160, 3, true, (&members, &none)).expect("next sweep");
    assert_eq!(next_sweep.ids.first(), Some(&early));
    assert!(
        next_sweep.since < at(10_105),
        "the next sweep reaches back before the member was added"
    );
}

#[test]
fn without_members_nothing_is_asked() {
    let mut sweep = DescendantSweep::default();
    let (none, no_coordinates) = (ids(0), coordinates(0));
    assert_eq!(
        sweep.next_group(at(0), OVERLAP, &none, &no_coordinates),
        None
    );
    assert_eq!(
        sweep.next_group(at(5), OVERLAP, &none, &no_coordinates),
        None
    );
}
