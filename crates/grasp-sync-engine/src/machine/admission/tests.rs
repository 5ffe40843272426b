//! The admission rule on injected time: a health pause first, then room, then the background
//! gate's one start per second, then the reactive gate's cooldown.

use std::time::{Duration, Instant};

use grasp_sync_ledger::{
    BACKGROUND_INTERVAL, BackgroundGate, GateRejection, REACTIVE_COOLDOWN, ReactiveGate, StartKind,
};

use super::{Room, StartAdmission, admit, wait_for_room};

const ROOM: Room = Room {
    residual: 3,
    held: 0,
    cap: 1,
};

fn gates(start: Instant) -> (BackgroundGate, ReactiveGate) {
    (BackgroundGate::new(start), ReactiveGate::new(start))
}

#[test]
fn a_health_pause_holds_every_start_until_it_ends() {
    let t0 = Instant::now();
    let (mut background, mut reactive) = gates(t0);
    let until = t0 + Duration::from_secs(30);
    assert_eq!(
        admit(
            t0,
            StartKind::Historic,
            Some(until),
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::WaitUntil(until)
    );
    assert_eq!(
        admit(
            until,
            StartKind::Historic,
            Some(until),
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::Ready,
        "a pause that has ended holds nothing"
    );
}

#[test]
fn a_start_waits_for_a_release_without_a_free_slot_or_under_a_held_cap() {
    let t0 = Instant::now();
    let full = Room {
        residual: 0,
        ..ROOM
    };
    assert_eq!(
        wait_for_room(t0, None, full),
        Some(StartAdmission::WaitForRelease)
    );
    let capped = Room { held: 1, ..ROOM };
    assert_eq!(
        wait_for_room(t0, None, capped),
        Some(StartAdmission::WaitForRelease)
    );
    assert_eq!(wait_for_room(t0, None, ROOM), None);
}

#[test]
fn waiting_for_room_counts_no_start_at_the_gates() {
    let t0 = Instant::now();
    let (mut background, mut reactive) = gates(t0);
    let full = Room {
        residual: 0,
        ..ROOM
    };
    assert_eq!(
        admit(
            t0,
            StartKind::Historic,
            None,
            full,
            &mut background,
            &mut reactive
        ),
        StartAdmission::WaitForRelease
    );
    assert_eq!(
        admit(
            t0,
            StartKind::Historic,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::Ready,
        "the first background start of the session is still free"
    );
}

#[test]
fn background_starts_are_one_interval_apart() {
    let t0 = Instant::now();
    let (mut background, mut reactive) = gates(t0);
    let kind = StartKind::NegentropyRound;
    assert_eq!(
        admit(t0, kind, None, ROOM, &mut background, &mut reactive),
        StartAdmission::Ready
    );
    assert_eq!(
        admit(
            t0,
            StartKind::Historic,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::WaitUntil(t0 + BACKGROUND_INTERVAL),
        "one interval per connection, whatever the kind"
    );
    assert_eq!(
        admit(
            t0 + BACKGROUND_INTERVAL,
            StartKind::Historic,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::Ready
    );
}

#[test]
fn a_reactive_cooldown_rejects_starts_after_the_background_gate() {
    let t0 = Instant::now();
    let (mut background, mut reactive) = gates(t0);
    reactive.handle_query_rate_refusal(t0);
    assert_eq!(
        admit(
            t0,
            StartKind::Historic,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::Rejected(GateRejection::Cooldown {
            until: t0 + REACTIVE_COOLDOWN
        })
    );
    assert_eq!(
        admit(
            t0,
            StartKind::NegentropyRound,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::WaitUntil(t0 + BACKGROUND_INTERVAL),
        "the rejected start cost its background interval"
    );
    let next = t0 + BACKGROUND_INTERVAL;
    assert_eq!(
        admit(
            next,
            StartKind::NegentropyRound,
            None,
            ROOM,
            &mut background,
            &mut reactive
        ),
        StartAdmission::Rejected(GateRejection::Nip77Disabled),
        "NIP-77 is off for the session after a query-rate refusal"
    );
}
