//! Unit tests of `PendingSyncIndex`: batch ids, subscriptions, pagination and `confirm_batch`.

use nostr::{Filter, Keys, Kind};

use super::*;
use crate::relay_index::ConnectionStatus;
use crate::repo_index::SyncLevel;
use crate::test_support::{coord, id, relay, signed};

fn items(repos: &[(u8, SyncLevel)], roots: &[u8]) -> PendingItems {
    PendingItems {
        repos: repos
            .iter()
            .map(|(owner, level)| (coord(*owner, "repo"), *level))
            .collect(),
        root_events: roots.iter().map(|byte| id(*byte)).collect(),
    }
}

fn sub(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

#[test]
fn batch_ids_increase_across_relays_and_are_never_reused() {
    let mut pending = PendingSyncIndex::new();
    let (a, b) = (relay("wss://a.example"), relay("wss://b.example"));
    let first = pending.open_batch(&a, items(&[], &[1]), SyncMethod::Negentropy);
    let second = pending.open_batch(&b, items(&[], &[2]), SyncMethod::ReqEose);
    let mut confirmed = RelaySyncIndex::new();
    pending
        .confirm_batch(&b, second, &mut confirmed, Timestamp::from_secs(1))
        .unwrap();
    let third = pending.open_batch(&b, items(&[], &[3]), SyncMethod::ReqEose);
    assert_eq!((first, second, third), (BatchId(1), BatchId(2), BatchId(3)));
}

#[test]
fn batch_completes_when_its_last_subscription_resolves() {
    let mut pending = PendingSyncIndex::new();
    let a = relay("wss://a.example");
    let batch = pending.open_batch(&a, items(&[(1, SyncLevel::Full)], &[]), SyncMethod::ReqEose);
    let pages = PaginationState::new([Filter::new().kind(Kind::Custom(1621))]);
    pending
        .register_subscription(&a, batch, sub("s1"), pages.clone())
        .unwrap();
    pending
        .register_subscription(&a, batch, sub("s2"), pages.clone())
        .unwrap();
    assert_eq!(pending.batch_of(&a, &sub("s2")), Some(batch));
    let first = pending.resolve_subscription(&a, &sub("s1")).unwrap();
    assert_eq!((first.batch_id, first.batch_complete), (batch, false));
    assert_eq!(first.pagination, Some(pages));
    let last = pending.resolve_subscription(&a, &sub("s2")).unwrap();
    assert!(last.batch_complete);
    assert_eq!(
        pending.resolve_subscription(&a, &sub("s2")),
        None,
        "already resolved"
    );
    assert_eq!(pending.batch_of(&a, &sub("s1")), None);
}

#[test]
fn delivered_events_feed_the_subscription_pagination() {
    let mut pending = PendingSyncIndex::new();
    let a = relay("wss://a.example");
    let batch = pending.open_batch(&a, items(&[], &[1]), SyncMethod::ReqEose);
    let pages = PaginationState::new([Filter::new().kind(Kind::Custom(1621))]);
    pending
        .register_subscription(&a, batch, sub("s1"), pages)
        .unwrap();
    let event = signed(&Keys::generate(), 1621, &[], 42);
    assert_eq!(pending.record_event(&a, &sub("s1"), &event), Some(1));
    assert_eq!(pending.record_event(&a, &sub("unknown"), &event), None);
    let resolved = pending.resolve_subscription(&a, &sub("s1")).unwrap();
    let progress = &resolved.pagination.unwrap().filters[0];
    assert_eq!(
        (progress.event_count, progress.min_created_at),
        (1, Some(Timestamp::from_secs(42)))
    );
}

#[test]
fn confirm_batch_moves_items_into_confirmed_state() {
    let mut pending = PendingSyncIndex::new();
    let mut confirmed = RelaySyncIndex::new();
    let a = relay("wss://a.example");
    confirmed.register(&a).mark_syncing(Timestamp::from_secs(1));
    let first = pending.open_batch(
        &a,
        items(&[(1, SyncLevel::Full), (2, SyncLevel::StateOnly)], &[7]),
        SyncMethod::ReqEose,
    );
    let second = pending.open_batch(&a, items(&[], &[8]), SyncMethod::Negentropy);
    let outcome = pending
        .confirm_batch(&a, first, &mut confirmed, Timestamp::from_secs(5))
        .unwrap();
    assert_eq!(
        outcome,
        ConfirmOutcome {
            failed: false,
            relay_idle: false
        }
    );
    let state = confirmed.get(&a).unwrap();
    assert_eq!(state.repos[&coord(1, "repo")], SyncLevel::Full);
    assert_eq!(state.repos[&coord(2, "repo")], SyncLevel::StateOnly);
    assert_eq!(state.root_events, BTreeSet::from([id(7)]));
    assert_eq!(state.last_batch_confirmed_at, Some(Timestamp::from_secs(5)));
    assert_eq!(pending.batches(&a).len(), 1);
    let outcome = pending
        .confirm_batch(&a, second, &mut confirmed, Timestamp::from_secs(6))
        .unwrap();
    assert!(outcome.relay_idle);
    assert!(!pending.has_pending(&a));
    assert!(!confirmed.get(&a).unwrap().batch_failed);
}

#[test]
fn failed_batch_still_confirms_its_items_and_records_the_failure() {
    let mut pending = PendingSyncIndex::new();
    let mut confirmed = RelaySyncIndex::new();
    let a = relay("wss://a.example");
    confirmed.register(&a).mark_syncing(Timestamp::from_secs(1));
    let batch = pending.open_batch(
        &a,
        items(&[(1, SyncLevel::Full)], &[7]),
        SyncMethod::Negentropy,
    );
    pending.mark_failed(&a, batch).unwrap();
    let outcome = pending
        .confirm_batch(&a, batch, &mut confirmed, Timestamp::from_secs(5))
        .unwrap();
    assert_eq!(
        outcome,
        ConfirmOutcome {
            failed: true,
            relay_idle: true
        }
    );
    let state = confirmed.get_mut(&a).unwrap();
    assert!(state.batch_failed);
    assert!(state.covers_repo(&coord(1, "repo"), SyncLevel::Full));
    state.complete_historic_sync(Timestamp::from_secs(11));
    assert_eq!(
        state.connection_status,
        ConnectionStatus::ConnectedHistoricSyncFailures
    );
}

#[test]
fn confirming_upgrades_a_state_only_repository_to_full() {
    let mut pending = PendingSyncIndex::new();
    let mut confirmed = RelaySyncIndex::new();
    let a = relay("wss://a.example");
    confirmed
        .register(&a)
        .confirm_repo(coord(1, "repo"), SyncLevel::StateOnly);
    let batch = pending.open_batch(&a, items(&[(1, SyncLevel::Full)], &[]), SyncMethod::ReqEose);
    pending
        .confirm_batch(&a, batch, &mut confirmed, Timestamp::from_secs(5))
        .unwrap();
    assert_eq!(
        confirmed.get(&a).unwrap().repos[&coord(1, "repo")],
        SyncLevel::Full
    );
}

#[test]
fn unknown_batches_are_typed_errors() {
    let mut pending = PendingSyncIndex::new();
    let mut confirmed = RelaySyncIndex::new();
    let (a, b) = (relay("wss://a.example"), relay("wss://b.example"));
    let batch = pending.open_batch(&a, items(&[], &[1]), SyncMethod::ReqEose);
    let now = Timestamp::from_secs(1);
    assert_eq!(
        pending.confirm_batch(&b, batch, &mut confirmed, now),
        Err(ModelError::UnknownBatch(batch))
    );
    assert_eq!(
        pending.confirm_batch(&a, BatchId(99), &mut confirmed, now),
        Err(ModelError::UnknownBatch(BatchId(99)))
    );
    assert_eq!(
        pending.mark_failed(&b, batch),
        Err(ModelError::UnknownBatch(batch))
    );
    let pages = PaginationState::new([]);
    assert_eq!(
        pending.register_subscription(&b, batch, sub("s"), pages),
        Err(ModelError::UnknownBatch(batch))
    );
    assert!(
        confirmed.is_empty(),
        "a refused confirmation registers nothing"
    );
    pending
        .confirm_batch(&a, batch, &mut confirmed, now)
        .unwrap();
    assert_eq!(
        pending.confirm_batch(&a, batch, &mut confirmed, now),
        Err(ModelError::UnknownBatch(batch))
    );
}

#[test]
fn clearing_a_relay_drops_all_its_batches_only() {
    let mut pending = PendingSyncIndex::new();
    let (a, b) = (relay("wss://a.example"), relay("wss://b.example"));
    pending.open_batch(&a, items(&[], &[1]), SyncMethod::ReqEose);
    pending.open_batch(&a, items(&[], &[2]), SyncMethod::ReqEose);
    pending.open_batch(&b, items(&[], &[3]), SyncMethod::ReqEose);
    assert_eq!(pending.clear_relay(&a).len(), 2);
    assert!(!pending.has_pending(&a));
    assert!(pending.has_pending(&b));
    let left: Vec<&RelayUrl> = pending.relays().collect();
    assert_eq!(left, [&b]);
}

#[test]
fn pending_items_are_the_union_of_batches_at_the_strongest_level() {
    let mut pending = PendingSyncIndex::new();
    let a = relay("wss://a.example");
    pending.open_batch(
        &a,
        items(
            &[(1, SyncLevel::StateOnly), (2, SyncLevel::StateOnly)],
            &[1],
        ),
        SyncMethod::ReqEose,
    );
    pending.open_batch(
        &a,
        items(&[(1, SyncLevel::Full)], &[2]),
        SyncMethod::ReqEose,
    );
    assert_eq!(
        pending.pending_items(&a),
        items(&[(1, SyncLevel::Full), (2, SyncLevel::StateOnly)], &[1, 2])
    );
    assert!(
        pending
            .pending_items(&relay("wss://none.example"))
            .is_empty()
    );
}

#[test]
fn abandoned_batch_confirms_nothing_and_its_items_become_new_work_again() {
    let mut pending = PendingSyncIndex::new();
    let a = relay("wss://a.example");
    let kept = pending.open_batch(
        &a,
        items(&[(1, SyncLevel::Full)], &[1]),
        SyncMethod::ReqEose,
    );
    let failed = pending.open_batch(
        &a,
        items(&[(2, SyncLevel::Full)], &[2]),
        SyncMethod::ReqEose,
    );
    let abandoned = pending.abandon_batch(&a, failed).expect("pending batch");
    assert_eq!(abandoned.batch_id, failed);
    assert!(
        pending.abandon_batch(&a, failed).is_none(),
        "abandoning twice is a no-op"
    );
    assert_eq!(
        pending.pending_items(&a),
        items(&[(1, SyncLevel::Full)], &[1])
    );
    let mut confirmed = RelaySyncIndex::new();
    pending
        .confirm_batch(&a, kept, &mut confirmed, Timestamp::from_secs(1))
        .unwrap();
    let state = confirmed.get(&a).unwrap();
    assert!(!state.covers_repo(&coord(2, "repo"), SyncLevel::Full));
    assert!(!state.root_events.contains(&id(2)));
    assert!(!state.batch_failed);
    assert!(!pending.has_pending(&a));
}

#[test]
fn items_added_to_a_pending_batch_are_confirmed_with_it() {
    let mut pending = PendingSyncIndex::new();
    let a = relay("wss://a.example");
    let batch = pending.open_batch(
        &a,
        items(&[(1, SyncLevel::StateOnly)], &[1]),
        SyncMethod::Negentropy,
    );
    pending
        .extend_batch(
            &a,
            batch,
            &items(&[(1, SyncLevel::Full), (2, SyncLevel::Full)], &[2]),
        )
        .unwrap();
    assert_eq!(
        pending.extend_batch(&a, BatchId(99), &items(&[], &[3])),
        Err(ModelError::UnknownBatch(BatchId(99)))
    );
    let mut confirmed = RelaySyncIndex::new();
    pending
        .confirm_batch(&a, batch, &mut confirmed, Timestamp::from_secs(1))
        .unwrap();
    let state = confirmed.get(&a).unwrap();
    assert!(state.covers_repo(&coord(1, "repo"), SyncLevel::Full));
    assert!(state.covers_repo(&coord(2, "repo"), SyncLevel::Full));
    assert!(state.root_events.contains(&id(1)) && state.root_events.contains(&id(2)));
    assert!(!state.root_events.contains(&id(3)));
}
