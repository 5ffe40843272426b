//! Unit tests of the `RepoSyncIndex` update rules.

use super::*;
use crate::nip34::RootKind;
use crate::test_support::{announcement, coord, id, relay};

fn relays<S: FromIterator<RelayUrl>>(urls: &[&str]) -> S {
    urls.iter().map(|url| relay(url)).collect()
}

fn root(id_byte: u8, repos: &[&RepoCoordinate]) -> RootEvent {
    RootEvent {
        id: id(id_byte),
        kind: RootKind::Issue,
        author: *repos[0].owner(),
        created_at: nostr::Timestamp::from_secs(1),
        repos: repos.iter().map(|repo| (*repo).clone()).collect(),
        dropped_repos: 0,
    }
}

fn entry(announcement: RepoAnnouncement, status: ExpiryStatus) -> PurgatoryEntry {
    PurgatoryEntry {
        announcement,
        status,
    }
}

/// Checks the relays and level the index holds for `repo`.
fn check_entry(
    index: &RepoSyncIndex,
    repo: &RepoCoordinate,
    expected: Option<(&[&str], SyncLevel)>,
) {
    let got = index
        .get(repo)
        .map(|needs| (needs.relays.clone(), needs.sync_level));
    assert_eq!(
        got,
        expected.map(|(urls, level)| (relays(urls), level)),
        "{repo}"
    );
}

#[test]
fn new_announcement_adds_a_full_entry_and_dirties_its_relays() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let update = index.handle_announcement(&announcement(
        &repo,
        &["wss://a.example", "wss://b.example"],
        10,
        1,
    ));
    check_entry(
        &index,
        &repo,
        Some((&["wss://a.example", "wss://b.example"], SyncLevel::Full)),
    );
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example", "wss://b.example"])
    );
    assert_eq!(update.changed_repos, BTreeSet::from([repo]));
}

#[test]
fn newer_announcement_replaces_relay_set_and_dirties_old_and_new() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(
        &repo,
        &["wss://a.example", "wss://b.example"],
        10,
        1,
    ));
    let update = index.handle_announcement(&announcement(
        &repo,
        &["wss://b.example", "wss://c.example"],
        11,
        2,
    ));
    check_entry(
        &index,
        &repo,
        Some((&["wss://b.example", "wss://c.example"], SyncLevel::Full)),
    );
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example", "wss://b.example", "wss://c.example"])
    );
    assert_eq!(index.get(&repo).unwrap().announcement.id, id(2));
}

#[test]
fn older_announcement_is_ignored() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(&repo, &["wss://new.example"], 20, 1));
    let update = index.handle_announcement(&announcement(&repo, &["wss://old.example"], 19, 2));
    check_entry(
        &index,
        &repo,
        Some((&["wss://new.example"], SyncLevel::Full)),
    );
    assert!(update.is_empty());
    assert_eq!(update.stale_announcements, 1);
}

#[test]
fn same_created_at_goes_to_the_lowest_id() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(&repo, &["wss://high-id.example"], 20, 9));
    let update = index.handle_announcement(&announcement(&repo, &["wss://low-id.example"], 20, 3));
    check_entry(
        &index,
        &repo,
        Some((&["wss://low-id.example"], SyncLevel::Full)),
    );
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://high-id.example", "wss://low-id.example"])
    );
    let update = index.handle_announcement(&announcement(&repo, &["wss://high-id.example"], 20, 9));
    check_entry(
        &index,
        &repo,
        Some((&["wss://low-id.example"], SyncLevel::Full)),
    );
    assert_eq!(update.stale_announcements, 1);
}

#[test]
fn repeating_the_current_announcement_changes_nothing() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let current = announcement(&repo, &["wss://a.example"], 20, 1);
    index.handle_announcement(&current);
    let update = index.handle_announcement(&current);
    assert!(update.is_empty());
    assert_eq!(update.stale_announcements, 0);
}

#[test]
fn root_events_add_work_without_changing_relay_ownership() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(&repo, &["wss://a.example"], 10, 1));
    let update = index.handle_root_event(&root(50, &[&repo]));
    check_entry(&index, &repo, Some((&["wss://a.example"], SyncLevel::Full)));
    assert_eq!(
        index.get(&repo).unwrap().root_events,
        CompactSet::from_iter([id(50)])
    );
    assert_eq!(update.dirty_relays, relays(&["wss://a.example"]));
    let again = index.handle_root_event(&root(50, &[&repo]));
    assert!(again.is_empty(), "a known root event is no new work");
}

#[test]
fn root_events_survive_announcement_replacement() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(&repo, &["wss://a.example"], 10, 1));
    index.handle_root_event(&root(50, &[&repo]));
    index.handle_announcement(&announcement(&repo, &["wss://b.example"], 11, 2));
    assert_eq!(
        index.get(&repo).unwrap().root_events,
        CompactSet::from_iter([id(50)])
    );
}

#[test]
fn root_event_reaches_every_referenced_repository() {
    let mut index = RepoSyncIndex::default();
    let (one, two) = (coord(1, "one"), coord(2, "two"));
    index.handle_announcement(&announcement(&one, &["wss://a.example"], 10, 1));
    index.handle_announcement(&announcement(&two, &["wss://b.example"], 10, 2));
    let update = index.handle_root_event(&root(50, &[&one, &two]));
    assert!(index.get(&one).unwrap().root_events.contains(&id(50)));
    assert!(index.get(&two).unwrap().root_events.contains(&id(50)));
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example", "wss://b.example"])
    );
}

#[test]
fn root_event_before_its_announcement_takes_effect_when_it_arrives() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let update = index.handle_root_event(&root(50, &[&repo]));
    assert!(update.is_empty());
    assert!(index.get(&repo).is_none());
    assert_eq!(
        index.waiting_root_events(&repo),
        Some(&BTreeSet::from([id(50)]))
    );
    index.handle_announcement(&announcement(&repo, &["wss://a.example"], 10, 1));
    assert_eq!(
        index.get(&repo).unwrap().root_events,
        CompactSet::from_iter([id(50)])
    );
    assert_eq!(index.waiting_root_events(&repo), None);
}

#[test]
fn purgatory_announcement_is_registered_state_only() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let update = index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    check_entry(
        &index,
        &repo,
        Some((&["wss://a.example"], SyncLevel::StateOnly)),
    );
    assert_eq!(update.dirty_relays, relays(&["wss://a.example"]));
}

#[test]
fn purgatory_snapshot_replaces_state_only_relay_sets() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    let update = index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://b.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    check_entry(
        &index,
        &repo,
        Some((&["wss://b.example"], SyncLevel::StateOnly)),
    );
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example", "wss://b.example"])
    );
    let unchanged = index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://b.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    assert!(unchanged.is_empty());
}

#[test]
fn soft_expired_purgatory_entries_are_kept() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    let update = index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::SoftExpired,
    )]);
    check_entry(
        &index,
        &repo,
        Some((&["wss://a.example"], SyncLevel::StateOnly)),
    );
    assert!(update.is_empty());
}

#[test]
fn expired_or_absent_state_only_entries_are_removed() {
    let mut index = RepoSyncIndex::default();
    let (expired, absent, kept) = (coord(1, "expired"), coord(2, "absent"), coord(3, "kept"));
    index.reconcile_purgatory(&[
        entry(
            announcement(&expired, &["wss://a.example"], 10, 1),
            ExpiryStatus::Active,
        ),
        entry(
            announcement(&absent, &["wss://b.example"], 10, 2),
            ExpiryStatus::Active,
        ),
        entry(
            announcement(&kept, &["wss://c.example"], 10, 3),
            ExpiryStatus::Active,
        ),
    ]);
    let update = index.reconcile_purgatory(&[
        entry(
            announcement(&expired, &["wss://a.example"], 10, 1),
            ExpiryStatus::Expired,
        ),
        entry(
            announcement(&kept, &["wss://c.example"], 10, 3),
            ExpiryStatus::SoftExpired,
        ),
    ]);
    check_entry(&index, &expired, None);
    check_entry(&index, &absent, None);
    check_entry(
        &index,
        &kept,
        Some((&["wss://c.example"], SyncLevel::StateOnly)),
    );
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example", "wss://b.example"])
    );
    assert_eq!(update.changed_repos, BTreeSet::from([expired, absent]));
}

#[test]
fn expired_entry_is_not_registered() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let update = index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Expired,
    )]);
    assert!(index.is_empty());
    assert!(update.is_empty());
}

#[test]
fn full_entries_are_never_downgraded_or_pruned_by_purgatory() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.handle_announcement(&announcement(&repo, &["wss://a.example"], 10, 1));
    for status in [
        ExpiryStatus::Active,
        ExpiryStatus::SoftExpired,
        ExpiryStatus::Expired,
    ] {
        let update = index.reconcile_purgatory(&[entry(
            announcement(&repo, &["wss://other.example"], 99, 9),
            status,
        )]);
        check_entry(&index, &repo, Some((&["wss://a.example"], SyncLevel::Full)));
        assert!(update.is_empty(), "{status:?}");
    }
    let update = index.reconcile_purgatory(&[]);
    check_entry(&index, &repo, Some((&["wss://a.example"], SyncLevel::Full)));
    assert!(update.is_empty());
}

#[test]
fn promotion_upgrades_state_only_to_full() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    let held = announcement(&repo, &["wss://a.example"], 10, 1);
    index.reconcile_purgatory(&[entry(held.clone(), ExpiryStatus::Active)]);
    let update = index.handle_announcement(&held);
    check_entry(&index, &repo, Some((&["wss://a.example"], SyncLevel::Full)));
    assert_eq!(
        update.dirty_relays,
        relays(&["wss://a.example"]),
        "the level change is new work there"
    );
    assert_eq!(update.changed_repos, BTreeSet::from([repo.clone()]));
    let later = index.reconcile_purgatory(&[]);
    check_entry(&index, &repo, Some((&["wss://a.example"], SyncLevel::Full)));
    assert!(
        later.is_empty(),
        "a promoted entry is not pruned when it leaves purgatory"
    );
}

#[test]
fn promotion_by_an_older_announcement_keeps_the_newer_relays() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://new.example"], 20, 1),
        ExpiryStatus::Active,
    )]);
    index.handle_announcement(&announcement(&repo, &["wss://old.example"], 10, 2));
    check_entry(
        &index,
        &repo,
        Some((&["wss://new.example"], SyncLevel::Full)),
    );
}

#[test]
fn state_only_root_events_are_kept_but_dirty_nothing() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    let update = index.handle_root_event(&root(50, &[&repo]));
    assert!(update.dirty_relays.is_empty());
    assert_eq!(
        index.get(&repo).unwrap().root_events,
        CompactSet::from_iter([id(50)])
    );
}

#[test]
fn removed_state_only_entry_keeps_its_root_events_waiting() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[entry(
        announcement(&repo, &["wss://a.example"], 10, 1),
        ExpiryStatus::Active,
    )]);
    index.handle_root_event(&root(50, &[&repo]));
    index.reconcile_purgatory(&[]);
    assert_eq!(
        index.waiting_root_events(&repo),
        Some(&BTreeSet::from([id(50)]))
    );
    index.handle_announcement(&announcement(&repo, &["wss://a.example"], 10, 1));
    assert_eq!(
        index.get(&repo).unwrap().root_events,
        CompactSet::from_iter([id(50)])
    );
}

#[test]
fn snapshot_with_several_versions_uses_the_newest_live_one() {
    let mut index = RepoSyncIndex::default();
    let repo = coord(1, "repo");
    index.reconcile_purgatory(&[
        entry(
            announcement(&repo, &["wss://old.example"], 10, 1),
            ExpiryStatus::Active,
        ),
        entry(
            announcement(&repo, &["wss://new.example"], 20, 2),
            ExpiryStatus::Active,
        ),
        entry(
            announcement(&repo, &["wss://expired.example"], 30, 3),
            ExpiryStatus::Expired,
        ),
    ]);
    check_entry(
        &index,
        &repo,
        Some((&["wss://new.example"], SyncLevel::StateOnly)),
    );
}

#[test]
fn relay_cap_bounds_each_announcement_and_reports_dropped() {
    let limits = AnnouncementLimits {
        max_relays: 2,
        ..AnnouncementLimits::default()
    };
    let mut index = RepoSyncIndex::new(limits);
    let repo = coord(1, "repo");
    let mut hostile = announcement(
        &repo,
        &[
            "wss://a.example",
            "wss://b.example",
            "wss://c.example",
            "wss://d.example",
        ],
        10,
        1,
    );
    hostile.dropped_relays = 5;
    let update = index.handle_announcement(&hostile);
    assert_eq!(index.get(&repo).unwrap().relays.len(), 2);
    assert_eq!(
        update.dropped_relays, 7,
        "2 over the index cap plus 5 the parser dropped"
    );
    assert_eq!(update.dirty_relays.len(), 2);
    let purgatory = coord(2, "held");
    let update = index.reconcile_purgatory(&[entry(
        announcement(
            &purgatory,
            &["wss://a.example", "wss://b.example", "wss://c.example"],
            10,
            2,
        ),
        ExpiryStatus::Active,
    )]);
    assert_eq!(index.get(&purgatory).unwrap().relays.len(), 2);
    assert_eq!(update.dropped_relays, 1);
}

#[test]
fn read_access_lists_repositories_and_relays() {
    let mut index = RepoSyncIndex::default();
    index.handle_announcement(&announcement(&coord(2, "b"), &["wss://y.example"], 10, 1));
    index.handle_announcement(&announcement(
        &coord(1, "a"),
        &["wss://x.example", "wss://y.example"],
        10,
        2,
    ));
    let order: Vec<&str> = index
        .iter()
        .map(|(coordinate, _)| coordinate.identifier())
        .collect();
    assert_eq!(order, ["a", "b"]);
    assert_eq!(index.len(), 2);
    let all: Vec<&str> = index.relays().into_iter().map(RelayUrl::as_str).collect();
    assert_eq!(all, ["wss://x.example", "wss://y.example"]);
}

#[test]
fn waiting_root_events_are_bounded_and_the_excess_is_counted() {
    assert_eq!(
        RepoSyncIndex::default().max_waiting_roots(),
        DEFAULT_MAX_WAITING_ROOTS
    );
    const CAP: usize = 50;
    let mut index = RepoSyncIndex::default().with_max_waiting_roots(CAP);
    let unknown = coord(9, "not-yet");
    for n in 0..(CAP as u32 + 5) {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&n.to_be_bytes());
        let root = RootEvent {
            id: EventId::from_byte_array(bytes),
            ..root(0, &[&unknown])
        };
        index.handle_root_event(&root);
    }
    let waiting = index.waiting_root_events(&unknown).expect("remembered");
    assert_eq!(waiting.len(), CAP);
    assert_eq!(index.waiting_roots_len(), CAP);
    assert_eq!(index.waiting_roots_dropped(), 5);
    // The repository arrives: its waiting roots move into it and free their places.
    index.handle_announcement(&announcement(&unknown, &["wss://a.example"], 10, 1));
    assert!(index.waiting_root_events(&unknown).is_none());
    assert_eq!(index.waiting_roots_len(), 0);
    let other = coord(8, "later");
    index.handle_root_event(&root(1, &[&other]));
    assert_eq!(
        index.waiting_root_events(&other).map(BTreeSet::len),
        Some(1)
    );
}
