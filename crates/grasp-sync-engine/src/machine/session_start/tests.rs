//! The session-start rules: the 15-minute rule and its overlap, the daily window's bounds, and
//! the budget a session opens with.

use std::time::{Duration, Instant};

use grasp_sync_ledger::SessionBudget;
use grasp_sync_model::RelayState;
use grasp_sync_model::relay_index::STATE_RETENTION_SECS;
use nostr::Timestamp;

use super::{
    DAILY_MAX, DAILY_MIN, MIN_LEARNED_SLOTS, RECONNECT_OVERLAP, SessionStart,
    budget_taught_by_refusal, daily_deadline, session_budget,
};

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// A relay state that was connected at `connected` and disconnected at `disconnected`.
fn state_of(connected: u64, disconnected: u64) -> RelayState {
    let mut state = RelayState::new(false);
    state.mark_syncing(at(connected));
    state.mark_disconnected(at(disconnected));
    state
}

#[test]
fn a_relay_never_tracked_or_never_connected_starts_fresh() {
    assert_eq!(
        SessionStart::for_relay(None, at(10_000)),
        SessionStart::First
    );
    let state = RelayState::new(false);
    assert_eq!(
        SessionStart::for_relay(Some(&state), at(10_000)),
        SessionStart::First
    );
}

#[test]
fn within_fifteen_minutes_of_the_disconnect_a_session_catches_up_from_its_last_connection_less_the_overlap()
 {
    let state = state_of(10_000, 12_000);
    let since = at(10_000 - RECONNECT_OVERLAP.as_secs());
    assert_eq!(
        SessionStart::for_relay(Some(&state), at(12_000 + STATE_RETENTION_SECS)),
        SessionStart::Quick { since }
    );
    assert_eq!(
        SessionStart::for_relay(Some(&state), at(12_000 + STATE_RETENTION_SECS + 1)),
        SessionStart::Long
    );
}

#[test]
fn the_overlap_never_reaches_before_the_epoch() {
    let state = state_of(30, 40);
    assert_eq!(
        SessionStart::for_relay(Some(&state), at(50)),
        SessionStart::Quick { since: at(0) }
    );
}

#[test]
fn the_daily_reconciliation_falls_within_its_window_whatever_is_drawn() {
    let now = Instant::now();
    let spread = (DAILY_MAX - DAILY_MIN).as_secs();
    assert_eq!(
        daily_deadline(now, |width| {
            assert_eq!(width, spread);
            0
        }),
        now + DAILY_MIN
    );
    assert_eq!(
        daily_deadline(now, |width| width - 1),
        now + DAILY_MAX - Duration::from_secs(1)
    );
    // A draw out of range is held within the window.
    assert_eq!(
        daily_deadline(now, |_| u64::MAX),
        now + DAILY_MAX - Duration::from_secs(1)
    );
}

#[test]
fn a_session_opens_with_the_advertised_budget_lowered_to_what_the_relay_taught() {
    let advertised = SessionBudget::from_nip11(Some(20));
    assert_eq!(session_budget(Some(20), None), advertised);
    assert_eq!(
        session_budget(Some(20), Some(MIN_LEARNED_SLOTS)),
        SessionBudget::from_slots(MIN_LEARNED_SLOTS)
    );
    // A learned budget never raises what the relay advertises.
    assert_eq!(session_budget(Some(20), Some(500)), advertised);
}

#[test]
fn a_refusal_teaches_the_subscriptions_held_never_fewer_than_the_minimum_and_never_more() {
    assert_eq!(budget_taught_by_refusal(20, 9), Some(9));
    assert_eq!(
        budget_taught_by_refusal(20, 1),
        Some(MIN_LEARNED_SLOTS),
        "a relay that refused with one held still gets one live group"
    );
    assert_eq!(budget_taught_by_refusal(20, 20), None);
    assert_eq!(
        budget_taught_by_refusal(8, 12),
        None,
        "a refusal never raises"
    );
    assert_eq!(budget_taught_by_refusal(MIN_LEARNED_SLOTS, 0), None);
}
