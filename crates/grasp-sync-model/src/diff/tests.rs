//! Unit tests of `derive_relay_targets` and the three-way diff `compute_actions`.

use nostr::Timestamp;

use super::*;
use crate::nip34::RootKind;
use crate::pending::SyncMethod;
use crate::relay_index::ConnectionStatus;
use crate::repo_index::{ExpiryStatus, PurgatoryEntry};
use crate::test_support::{announcement, coord, id, relay};

fn root(id_byte: u8, repo: &RepoCoordinate) -> crate::nip34::RootEvent {
    crate::nip34::RootEvent {
        id: id(id_byte),
        kind: RootKind::Patch,
        author: *repo.owner(),
        created_at: Timestamp::from_secs(1),
        repos: vec![repo.clone()],
        dropped_repos: 0,
    }
}

fn needs(repos: &[(&RepoCoordinate, SyncLevel)], roots: &[u8]) -> RelaySyncNeeds {
    RelaySyncNeeds {
        repos: repos
            .iter()
            .map(|(coordinate, level)| ((*coordinate).clone(), *level))
            .collect(),
        root_events: roots.iter().map(|byte| id(*byte)).collect(),
    }
}

/// A Full repository `full` on relays a and b with root events 10 and 11, and a StateOnly
/// repository `held` on relay b with root event 20.
fn sample_index() -> (RepoSyncIndex, RepoCoordinate, RepoCoordinate) {
    let mut index = RepoSyncIndex::default();
    let (full, held) = (coord(1, "full"), coord(2, "held"));
    index.handle_announcement(&announcement(
        &full,
        &["wss://a.example", "wss://b.example"],
        10,
        1,
    ));
    index.handle_root_event(&root(10, &full));
    index.handle_root_event(&root(11, &full));
    index.reconcile_purgatory(&[PurgatoryEntry {
        announcement: announcement(&held, &["wss://b.example"], 10, 2),
        status: ExpiryStatus::Active,
    }]);
    index.handle_root_event(&root(20, &held));
    (index, full, held)
}

#[test]
fn targets_invert_repositories_into_relays_partitioned_by_level() {
    let (index, full, held) = sample_index();
    let targets = derive_relay_targets(&index, None);
    let expected = BTreeMap::from([
        (
            relay("wss://a.example"),
            needs(&[(&full, SyncLevel::Full)], &[10, 11]),
        ),
        (
            relay("wss://b.example"),
            needs(
                &[(&full, SyncLevel::Full), (&held, SyncLevel::StateOnly)],
                &[10, 11],
            ),
        ),
    ]);
    assert_eq!(targets, expected);
    let b = &targets[&relay("wss://b.example")];
    assert_eq!(b.full_repos().collect::<Vec<_>>(), [&full]);
    assert_eq!(b.state_only_repos().collect::<Vec<_>>(), [&held]);
}

#[test]
fn state_only_repositories_contribute_no_root_events() {
    let (index, _, held) = sample_index();
    let targets = derive_relay_targets(&index, None);
    assert!(index.get(&held).unwrap().root_events.contains(&id(20)));
    assert!(
        targets
            .values()
            .all(|target| !target.root_events.contains(&id(20)))
    );
}

#[test]
fn own_relay_is_excluded_from_targets() {
    let (index, full, _) = sample_index();
    let targets = derive_relay_targets(&index, Some(&relay("WSS://B.example:443/")));
    let expected = BTreeMap::from([(
        relay("wss://a.example"),
        needs(&[(&full, SyncLevel::Full)], &[10, 11]),
    )]);
    assert_eq!(targets, expected);
}

fn connected(relays: &[&str]) -> RelaySyncIndex {
    let mut index = RelaySyncIndex::new();
    for url in relays {
        index
            .register(&relay(url))
            .mark_syncing(Timestamp::from_secs(1));
    }
    index
}

/// Runs the diff and compares it with `expected` (relay, needs) pairs.
fn check(
    targets: &BTreeMap<RelayUrl, RelaySyncNeeds>,
    pending: &PendingSyncIndex,
    confirmed: &RelaySyncIndex,
    expected: &[(&str, RelaySyncNeeds)],
) {
    let expected: Vec<AddFilters> = expected
        .iter()
        .map(|(url, needs)| AddFilters {
            relay: relay(url),
            needs: needs.clone(),
        })
        .collect();
    assert_eq!(compute_actions(targets, pending, confirmed), expected);
}

#[test]
fn diff_with_nothing_pending_or_confirmed_adds_every_target() {
    let (index, full, held) = sample_index();
    let targets = derive_relay_targets(&index, None);
    check(
        &targets,
        &PendingSyncIndex::new(),
        &connected(&["wss://a.example", "wss://b.example"]),
        &[
            (
                "wss://a.example",
                needs(&[(&full, SyncLevel::Full)], &[10, 11]),
            ),
            (
                "wss://b.example",
                needs(
                    &[(&full, SyncLevel::Full), (&held, SyncLevel::StateOnly)],
                    &[10, 11],
                ),
            ),
        ],
    );
}

#[test]
fn diff_subtracts_pending_and_confirmed() {
    let (index, full, held) = sample_index();
    let targets = derive_relay_targets(&index, None);
    let (a, b) = (relay("wss://a.example"), relay("wss://b.example"));
    let mut confirmed = connected(&["wss://a.example", "wss://b.example"]);
    confirmed.register(&a).root_events.insert(id(10));
    confirmed
        .register(&b)
        .confirm_repo(full.clone(), SyncLevel::Full);
    let mut pending = PendingSyncIndex::new();
    pending.open_batch(
        &a,
        needs(&[(&full, SyncLevel::Full)], &[]),
        SyncMethod::ReqEose,
    );
    pending.open_batch(&b, needs(&[], &[10, 11]), SyncMethod::ReqEose);
    check(
        &targets,
        &pending,
        &confirmed,
        &[
            ("wss://a.example", needs(&[], &[11])),
            (
                "wss://b.example",
                needs(&[(&held, SyncLevel::StateOnly)], &[]),
            ),
        ],
    );
}

#[test]
fn relay_with_everything_covered_gets_no_action() {
    let (index, full, _) = sample_index();
    let targets = derive_relay_targets(&index, None);
    let a = relay("wss://a.example");
    let mut confirmed = connected(&["wss://a.example"]);
    confirmed
        .register(&a)
        .confirm_repo(full.clone(), SyncLevel::Full);
    confirmed.register(&a).root_events.extend([id(10), id(11)]);
    check(&targets, &PendingSyncIndex::new(), &confirmed, &[]);
}

#[test]
fn disconnected_and_unknown_relays_are_skipped() {
    let (index, full, _) = sample_index();
    let targets = derive_relay_targets(&index, None);
    for status in [ConnectionStatus::Disconnected, ConnectionStatus::Connecting] {
        let mut confirmed = connected(&["wss://a.example"]);
        confirmed
            .register(&relay("wss://b.example"))
            .connection_status = status;
        check(
            &targets,
            &PendingSyncIndex::new(),
            &confirmed,
            &[(
                "wss://a.example",
                needs(&[(&full, SyncLevel::Full)], &[10, 11]),
            )],
        );
    }
}

#[test]
fn every_session_status_gets_actions() {
    let (index, full, _) = sample_index();
    let targets = derive_relay_targets(&index, None);
    for status in [
        ConnectionStatus::Syncing,
        ConnectionStatus::Connected,
        ConnectionStatus::ConnectedHistoricSyncFailures,
    ] {
        let mut confirmed = RelaySyncIndex::new();
        confirmed
            .register(&relay("wss://a.example"))
            .connection_status = status;
        check(
            &targets,
            &PendingSyncIndex::new(),
            &confirmed,
            &[(
                "wss://a.example",
                needs(&[(&full, SyncLevel::Full)], &[10, 11]),
            )],
        );
    }
}

#[test]
fn state_only_to_full_upgrade_is_new_work() {
    let (mut index, _, held) = sample_index();
    let b = relay("wss://b.example");
    let mut confirmed = connected(&["wss://b.example"]);
    confirmed
        .register(&b)
        .confirm_repo(held.clone(), SyncLevel::StateOnly);
    let mut pending = PendingSyncIndex::new();
    pending.open_batch(
        &b,
        needs(&[(&held, SyncLevel::StateOnly)], &[]),
        SyncMethod::ReqEose,
    );
    let before = derive_relay_targets(&index, None);
    let actions = compute_actions(&before, &pending, &confirmed);
    assert!(
        !actions[0].needs.repos.contains_key(&held),
        "StateOnly is covered"
    );

    index.handle_announcement(&announcement(&held, &["wss://b.example"], 10, 2));
    let after = derive_relay_targets(&index, None);
    let actions = compute_actions(&after, &pending, &confirmed);
    assert_eq!(actions[0].needs.repos.get(&held), Some(&SyncLevel::Full));
    assert!(
        actions[0].needs.root_events.contains(&id(20)),
        "promotion brings the held root events"
    );
}

#[test]
fn full_coverage_covers_a_state_only_target() {
    let (index, _, held) = sample_index();
    let targets = derive_relay_targets(&index, None);
    let b = relay("wss://b.example");
    let mut confirmed = connected(&["wss://b.example"]);
    confirmed
        .register(&b)
        .confirm_repo(held.clone(), SyncLevel::Full);
    let actions = compute_actions(&targets, &PendingSyncIndex::new(), &confirmed);
    assert!(!actions[0].needs.repos.contains_key(&held));
}

#[test]
fn needs_merge_keeps_the_stronger_level() {
    let repo = coord(1, "repo");
    let mut merged = needs(&[(&repo, SyncLevel::Full)], &[1]);
    merged.extend(&needs(&[(&repo, SyncLevel::StateOnly)], &[2]));
    assert_eq!(merged, needs(&[(&repo, SyncLevel::Full)], &[1, 2]));
    assert!(merged.covers_repo(&repo, SyncLevel::StateOnly));
    assert!(!RelaySyncNeeds::default().covers_repo(&repo, SyncLevel::StateOnly));
}

#[test]
fn id_sort_key_orders_like_event_ids() {
    let mut ids: Vec<EventId> = (0..=255u8)
        .map(|n| {
            let mut bytes = [n.wrapping_mul(37); 32];
            bytes[n as usize % 32] = n;
            bytes[31] = n.wrapping_mul(11);
            EventId::from_byte_array(bytes)
        })
        .collect();
    let mut by_key = ids.clone();
    ids.sort();
    by_key.sort_by_key(id_sort_key);
    assert_eq!(ids, by_key);
}
