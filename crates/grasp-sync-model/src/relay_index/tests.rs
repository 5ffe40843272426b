//! Unit tests of `RelayState`: the 15-minute rule, confirmed state and lifecycle transitions.

use super::*;
use crate::test_support::{coord, id, relay};

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// Checks the 15-minute rule for a relay disconnected at `disconnected_at`, asked at `now`.
fn check_clear(disconnected_at: Option<u64>, now: u64, expected: bool) {
    let state = RelayState {
        disconnected_at: disconnected_at.map(at),
        ..RelayState::default()
    };
    assert_eq!(
        state.should_clear_state(at(now)),
        expected,
        "{disconnected_at:?} at {now}"
    );
}

#[test]
fn state_is_cleared_only_after_more_than_fifteen_minutes_disconnected() {
    check_clear(Some(1_000), 1_000, false);
    check_clear(Some(1_000), 1_900, false);
    check_clear(Some(1_000), 1_901, true);
    check_clear(Some(1_000), 100_000, true);
}

#[test]
fn connected_or_never_connected_relays_keep_state() {
    check_clear(None, 1_000_000, false);
}

#[test]
fn clock_going_backwards_keeps_state() {
    check_clear(Some(5_000), 1_000, false);
}

#[test]
fn clear_sync_state_forgets_only_confirmed_items() {
    let mut state = RelayState::new(true);
    state.confirm_repo(coord(1, "repo"), SyncLevel::Full);
    state.root_events.insert(id(5));
    state.announcements_synced = true;
    state.clear_sync_state();
    assert!(state.repos.is_empty() && state.root_events.is_empty());
    assert!(state.is_bootstrap && state.announcements_synced);
}

#[test]
fn confirmed_state_equal_to_the_targets_holds_their_copy_until_either_changes() {
    let mut target = RelaySyncNeeds::default();
    target.add_repo(coord(1, "repo"), SyncLevel::Full);
    target.root_events.insert(id(5));
    let mut state = RelayState::default();
    state.confirm_repo(coord(1, "repo"), SyncLevel::Full);
    assert!(!state.share_with(&target), "a root is not confirmed yet");
    assert!(state.repos.is_shared_with(&target.repos));
    assert!(!state.root_events.is_shared_with(&target.root_events));

    state.root_events.insert(id(5));
    assert!(state.share_with(&target));
    assert!(state.root_events.is_shared_with(&target.root_events));

    // A new target is not confirmed by sharing, and clearing leaves the targets alone.
    target.root_events.insert(id(6));
    assert_eq!(state.root_events, BTreeSet::from([id(5)]));
    state.clear_sync_state();
    assert_eq!(target.repos.len(), 1);
    assert_eq!(target.root_events.len(), 2);
}

#[test]
fn confirmed_level_only_rises() {
    let mut state = RelayState::default();
    let repo = coord(1, "repo");
    state.confirm_repo(repo.clone(), SyncLevel::StateOnly);
    assert!(state.covers_repo(&repo, SyncLevel::StateOnly));
    assert!(!state.covers_repo(&repo, SyncLevel::Full));
    state.confirm_repo(repo.clone(), SyncLevel::Full);
    state.confirm_repo(repo.clone(), SyncLevel::StateOnly);
    assert_eq!(state.repos[&repo], SyncLevel::Full);
    assert!(state.covers_repo(&repo, SyncLevel::StateOnly));
}

#[test]
fn only_session_states_count_as_connected() {
    let expected = [
        (ConnectionStatus::Disconnected, false, 0),
        (ConnectionStatus::Connecting, false, 1),
        (ConnectionStatus::Syncing, true, 2),
        (ConnectionStatus::Connected, true, 3),
        (ConnectionStatus::ConnectedHistoricSyncFailures, true, 4),
    ];
    for (status, connected, metric) in expected {
        assert_eq!(
            (status.is_connected(), status.metric_value()),
            (connected, metric),
            "{status:?}"
        );
    }
}

#[test]
fn session_start_resets_failure_and_records_connect_time() {
    let mut state = RelayState {
        batch_failed: true,
        disconnected_at: Some(at(5)),
        ..RelayState::default()
    };
    state.mark_connecting();
    assert_eq!(state.connection_status, ConnectionStatus::Connecting);
    state.mark_syncing(at(10));
    assert_eq!(state.connection_status, ConnectionStatus::Syncing);
    assert_eq!(
        (
            state.last_connected,
            state.disconnected_at,
            state.batch_failed
        ),
        (Some(at(10)), None, false)
    );
}

#[test]
fn historic_sync_completes_to_connected_or_with_failures() {
    for (failed, expected) in [
        (false, ConnectionStatus::Connected),
        (true, ConnectionStatus::ConnectedHistoricSyncFailures),
    ] {
        let mut state = RelayState::default();
        state.mark_syncing(at(10));
        state.batch_failed = failed;
        state.complete_historic_sync(at(20));
        assert_eq!(state.connection_status, expected);
        assert!(state.historic_sync_completed);
        assert_eq!(state.historic_sync_completed_at, Some(at(20)));
    }
}

#[test]
fn completing_outside_syncing_changes_nothing() {
    let mut state = RelayState::default();
    state.complete_historic_sync(at(20));
    assert_eq!(state, RelayState::default());
}

#[test]
fn failed_reconnect_attempts_keep_the_original_disconnect_time() {
    let mut state = RelayState::default();
    state.mark_syncing(at(10));
    state.mark_disconnected(at(100));
    state.mark_connecting();
    state.mark_disconnected(at(500));
    assert_eq!(state.disconnected_at, Some(at(100)));
    assert_eq!(state.connection_status, ConnectionStatus::Disconnected);
    assert!(state.should_clear_state(at(1_001)));
}

#[test]
fn first_failed_attempt_starts_the_window() {
    let mut state = RelayState::default();
    state.mark_connecting();
    state.mark_disconnected(at(100));
    assert_eq!(state.disconnected_at, Some(at(100)));
}

#[test]
fn index_registers_relays_once_in_url_order() {
    let mut index = RelaySyncIndex::new();
    index.register(&relay("wss://b.example")).is_bootstrap = true;
    index.register(&relay("wss://a.example"));
    assert!(
        index.register(&relay("wss://b.example")).is_bootstrap,
        "registering again keeps state"
    );
    let order: Vec<&str> = index.iter().map(|(url, _)| url.as_str()).collect();
    assert_eq!(order, ["wss://a.example", "wss://b.example"]);
    assert!(index.remove(&relay("wss://a.example")).is_some());
    assert_eq!(index.len(), 1);
}
