//! Refusals on an extra connection as machine inputs, on injected time: a group parked for
//! its connection's AUTH, a policy refusal that pauses one group's coverage and keeps the
//! connection, any other refusal that closes it, and messages that refuse nothing.

use std::time::Instant;

use grasp_sync_health::RefusalCategory;
use grasp_sync_ledger::{LearnedLimits, SessionBudget};
use grasp_sync_model::RelayUrl;
use nostr::SubscriptionId;

use super::*;
use crate::machine::lanes::{Dialled, LaneSession, LaneStep};
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;
use crate::machine::relay::testing::live_core as core;

type Machine = RelayMachine<(), ()>;

fn key() -> SessionKey {
    SessionKey {
        relay: RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        generation: 10,
    }
}

/// A connected relay machine with one extra connection (generation 10) that holds two live
/// groups, `live-1` and `live-2`, one filter each; it answers NIP-42 challenges when
/// `answers_auth`.
fn with_a_lane(now: Instant, answers_auth: bool) -> Machine {
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    machine.lanes.handle_overflow(vec![core(1), core(2)]);
    assert_eq!(machine.lanes.next_step(true), LaneStep::Dial);
    machine.lanes.handle_dial_started(1);
    let opened = machine.lanes.handle_dialled(
        now,
        1,
        Some(LaneSession {
            key: key(),
            budget: SessionBudget::from_slots(5),
            answers_auth,
        }),
    );
    assert!(matches!(opened, Dialled::Opened { .. }), "{opened:?}");
    let mut learned = LearnedLimits::new();
    learned.handle_advertised_filter_limit(1);
    let mut next = 0;
    let fill = machine.lanes.fill(now, &learned, || {
        next += 1;
        SubscriptionId::new(format!("live-{next}"))
    });
    assert_eq!(fill.opened, 2);
    machine
}

fn live(n: u64) -> SubscriptionId {
    SubscriptionId::new(format!("live-{n}"))
}

fn counted(machine: &Machine) -> u64 {
    machine.stats.refusals.values().sum()
}

#[test]
fn a_closed_for_a_group_the_connection_does_not_hold_refuses_nothing() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, false);
    assert!(
        machine
            .handle_lane_closed(now, &key(), &live(9), "blocked: no")
            .is_none()
    );
    assert_eq!(counted(&machine), 0, "nothing counted");
    assert_eq!(machine.lanes.live_groups(), 2);
}

#[test]
fn a_policy_refusal_pauses_that_group_only_and_the_connection_keeps_the_rest() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, false);
    let refused = machine
        .handle_lane_closed(now, &key(), &live(1), "blocked: not this repository")
        .expect("held");
    assert_eq!(refused.refusal.category, RefusalCategory::Blocked);
    assert_eq!(
        refused.outcome,
        LaneRefusalOutcome::GroupPaused {
            refused: CoverageRefused::Paused,
            group: vec![core(1)],
        }
    );
    assert_eq!(counted(&machine), 1);
    assert!(machine.lanes.owns_session(&key()), "the connection stays");
    assert_eq!(machine.lanes.live_groups(), 1);
    assert!(
        machine.refused.live(vec![core(1).filter]).is_empty(),
        "its coverage is paused by policy"
    );
    assert_eq!(
        machine.refused.live(vec![core(2).filter]),
        vec![core(2).filter],
        "the other group's coverage is not"
    );
}

#[test]
fn any_other_refusal_closes_the_connection() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, false);
    let refused = machine
        .handle_lane_closed(now, &key(), &live(2), "rate-limited: slow down")
        .expect("held");
    assert_eq!(refused.refusal.category, RefusalCategory::RateLimited);
    assert_eq!(refused.outcome, LaneRefusalOutcome::Close);
    assert_eq!(counted(&machine), 1);
    assert!(machine.refused.is_empty(), "nothing is paused by policy");
}

#[test]
fn an_auth_refusal_is_parked_on_a_connection_with_a_key_and_closes_one_without() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, true);
    machine.lanes.handle_auth_challenge(&key());
    let refused = machine
        .handle_lane_closed(now, &key(), &live(1), "auth-required: who are you")
        .expect("held");
    assert_eq!(refused.outcome, LaneRefusalOutcome::Parked);
    assert_eq!(counted(&machine), 1);
    assert_eq!(
        machine.lanes.live_groups(),
        2,
        "the parked group keeps its slot"
    );

    let mut machine = with_a_lane(now, false);
    let refused = machine
        .handle_lane_closed(now, &key(), &live(1), "auth-required: who are you")
        .expect("held");
    assert_eq!(refused.outcome, LaneRefusalOutcome::Close);
}

#[test]
fn a_notice_that_refuses_nothing_is_not_counted() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, true);
    assert!(
        machine
            .handle_lane_notice(now, &key(), "hello from the relay")
            .is_none()
    );
    assert_eq!(counted(&machine), 0);
}

#[test]
fn an_auth_notice_parks_the_oldest_unanswered_group_and_another_refusal_closes() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, true);
    machine.lanes.handle_auth_challenge(&key());
    let refused = machine
        .handle_lane_notice(now, &key(), "auth-required: sign in first")
        .expect("a refusal");
    assert_eq!(refused.outcome, LaneRefusalOutcome::Parked);
    // Both REQs were answered or parked: the next asks for nothing still waited on.
    machine.lanes.handle_eose(&key(), &live(2));
    let refused = machine
        .handle_lane_notice(now, &key(), "auth-required: sign in first")
        .expect("a refusal");
    assert_eq!(refused.outcome, LaneRefusalOutcome::Unmatched);
    let refused = machine
        .handle_lane_notice(now, &key(), "error: too many requests")
        .expect("a refusal");
    assert_eq!(refused.outcome, LaneRefusalOutcome::Close);
    assert_eq!(counted(&machine), 3);
}

#[test]
fn the_closed_of_a_group_a_notice_parked_is_not_counted_twice() {
    let now = Instant::now();
    let mut machine = with_a_lane(now, true);
    machine.lanes.handle_auth_challenge(&key());
    let notice = machine
        .handle_lane_notice(now, &key(), "auth-required: sign in first")
        .expect("a refusal");
    assert_eq!(notice.outcome, LaneRefusalOutcome::Parked);
    let closed = machine
        .handle_lane_closed(now, &key(), &live(1), "auth-required: sign in first")
        .expect("held");
    assert_eq!(closed.outcome, LaneRefusalOutcome::Parked);
    assert!(!closed.counted);
    assert_eq!(counted(&machine), 1, "one refusal, told twice");
}
