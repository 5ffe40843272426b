//! Tests of the purgatory: holding, dependents, the soft expiry, revival within the 24-hour
//! window and expiry after it, the caps, and the store path on paused tokio time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use grasp_sync_model::{
    AnnouncementLimits, ExpiryStatus, RelayUrl, RepoAnnouncement, RepoCoordinate,
};
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use nostr::{Event, Keys, SecretKey, Timestamp};

use super::{GitDataProbe, Hold, Purgatory, PurgatoryConfig};
use crate::boundary::{EventStore, IngestOutcome, PurgatorySource};
use crate::clock::TokioClock;
use crate::store::{MemoryStore, PurgatoryParts, StoreConfig};
use nostr_database::NostrDatabase;

const SERVICE: &str = "wss://relay.example.com";
const MINUTE: u64 = 60;
const HOUR: u64 = 3600;

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).expect("valid secret key"))
}

fn announcement_event(owner: &Keys, identifier: &str, created_at: u64) -> Event {
    nip34::announcement(
        owner,
        &Announcement {
            identifier: identifier.to_owned(),
            name: identifier.to_owned(),
            relays: vec![SERVICE.to_owned(), "wss://elsewhere.example.org".to_owned()],
            clone: vec![format!(
                "https://relay.example.com/{}/{identifier}.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(created_at),
        },
    )
    .expect("announcement")
}

fn parsed(event: &Event) -> RepoAnnouncement {
    RepoAnnouncement::from_event(event, &AnnouncementLimits::default()).expect("parses")
}

fn state(owner: &Keys, identifier: &str, created_at: u64) -> Event {
    nip34::repo_state(
        owner,
        identifier,
        &[("refs/heads/main".to_owned(), "a".repeat(40))],
        Timestamp::from_secs(created_at),
    )
    .expect("state")
}

fn config() -> PurgatoryConfig {
    PurgatoryConfig {
        max_announcements: 2,
        max_held_per_repo: 2,
        soft_ttl: Duration::from_secs(30 * MINUTE),
        revival_window: Duration::from_secs(24 * HOUR),
    }
}

/// The status of the one entry at `at`, or `None` once it is gone.
fn status_at(purgatory: &mut Purgatory, at: u64) -> Option<ExpiryStatus> {
    purgatory
        .snapshot(Timestamp::from_secs(at))
        .first()
        .map(|entry| entry.status)
}

#[test]
fn an_entry_is_active_then_soft_expired_then_expired_after_the_revival_window() {
    let owner = keys(1);
    let event = announcement_event(&owner, "repo", 100);
    let mut purgatory = Purgatory::new(config());
    assert_eq!(
        purgatory.hold_announcement(Timestamp::from_secs(1_000), parsed(&event), &event),
        Hold::Held
    );
    for (at, expected) in [
        (1_000, Some(ExpiryStatus::Active)),
        (1_000 + 30 * MINUTE - 1, Some(ExpiryStatus::Active)),
        (1_000 + 30 * MINUTE, Some(ExpiryStatus::SoftExpired)),
        (1_000 + 24 * HOUR - 1, Some(ExpiryStatus::SoftExpired)),
        (1_000 + 24 * HOUR, None),
    ] {
        assert_eq!(status_at(&mut purgatory, at), expected, "at {at}");
    }
    assert_eq!(purgatory.stats(Timestamp::from_secs(0)).expired, 1);
    assert!(
        !purgatory.contains(&event.id),
        "an expired entry is forgotten"
    );
}

#[test]
fn a_state_event_within_the_window_revives_a_soft_expired_entry() {
    let owner = keys(1);
    let event = announcement_event(&owner, "repo", 100);
    let mut purgatory = Purgatory::new(config());
    purgatory.hold_announcement(Timestamp::from_secs(0), parsed(&event), &event);
    let late = 23 * HOUR;
    assert_eq!(
        status_at(&mut purgatory, late),
        Some(ExpiryStatus::SoftExpired)
    );

    let update = state(&owner, "repo", 200);
    let now = Timestamp::from_secs(late);
    let holder = purgatory
        .holder_of(now, &update)
        .expect("the state depends on the entry");
    assert_eq!(purgatory.hold_dependent(now, &holder, &update), Hold::Held);

    assert_eq!(status_at(&mut purgatory, late), Some(ExpiryStatus::Active));
    assert_eq!(
        status_at(&mut purgatory, late + 24 * HOUR - 1),
        Some(ExpiryStatus::SoftExpired),
        "the window restarts at the revival"
    );
    assert_eq!(status_at(&mut purgatory, late + 24 * HOUR), None);
}

#[test]
fn dependents_are_the_owners_states_and_root_events_tagging_the_repository() {
    let owner = keys(1);
    let stranger = keys(2);
    let event = announcement_event(&owner, "repo", 100);
    let mut purgatory = Purgatory::new(config());
    let now = Timestamp::from_secs(0);
    purgatory.hold_announcement(now, parsed(&event), &event);
    let coordinate = RepoCoordinate::new(owner.public_key(), "repo").expect("coordinate");

    let issue = nip34::root(
        &stranger,
        RootKind::Issue,
        &[RepoRef::new(owner.public_key(), "repo")],
        "broken",
        Timestamp::from_secs(300),
    )
    .expect("issue");
    for (event, expected) in [
        (state(&owner, "repo", 200), Some(coordinate.clone())),
        (state(&stranger, "repo", 200), None),
        (state(&owner, "other", 200), None),
        (issue, Some(coordinate.clone())),
    ] {
        assert_eq!(purgatory.holder_of(now, &event), expected, "{}", event.kind);
    }
}

#[test]
fn the_caps_refuse_announcements_and_dependents_past_them() {
    let owner = keys(1);
    let mut purgatory = Purgatory::new(config());
    let now = Timestamp::from_secs(0);
    for identifier in ["a", "b"] {
        let event = announcement_event(&owner, identifier, 100);
        assert_eq!(
            purgatory.hold_announcement(now, parsed(&event), &event),
            Hold::Held
        );
    }
    let third = announcement_event(&owner, "c", 100);
    assert_eq!(
        purgatory.hold_announcement(now, parsed(&third), &third),
        Hold::Full
    );

    let coordinate = RepoCoordinate::new(owner.public_key(), "a").expect("coordinate");
    for (created_at, expected) in [(1, Hold::Held), (2, Hold::Held), (3, Hold::Full)] {
        let update = state(&owner, "a", created_at);
        assert_eq!(
            purgatory.hold_dependent(now, &coordinate, &update),
            expected
        );
    }
    let stats = purgatory.stats(now);
    assert_eq!(
        (stats.announcements, stats.held_events, stats.refused_full),
        (2, 2, 2)
    );
}

#[test]
fn a_newer_announcement_replaces_the_held_one_and_keeps_its_dependents() {
    let owner = keys(1);
    let old = announcement_event(&owner, "repo", 100);
    let new = announcement_event(&owner, "repo", 200);
    let mut purgatory = Purgatory::new(config());
    let now = Timestamp::from_secs(0);
    purgatory.hold_announcement(now, parsed(&old), &old);
    let coordinate = RepoCoordinate::new(owner.public_key(), "repo").expect("coordinate");
    let update = state(&owner, "repo", 150);
    purgatory.hold_dependent(now, &coordinate, &update);

    assert_eq!(
        purgatory.hold_announcement(now, parsed(&new), &new),
        Hold::Held
    );
    assert_eq!(
        purgatory.hold_announcement(now, parsed(&old), &old),
        Hold::Older
    );
    let taken = purgatory.take(&coordinate).expect("held");
    assert_eq!(taken.announcement().id, new.id);
    assert_eq!(
        taken.dependents().iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![update.id]
    );
    assert!(!purgatory.contains(&old.id) && !purgatory.contains(&update.id));
}

#[test]
fn an_entry_whose_promotion_failed_is_held_again_and_not_counted() {
    let owner = Keys::generate();
    let event = announcement_event(&owner, "repo", 100);
    let mut purgatory = Purgatory::new(config());
    let now = Timestamp::from_secs(0);
    purgatory.hold_announcement(now, parsed(&event), &event);
    let coordinate = RepoCoordinate::new(owner.public_key(), "repo").expect("coordinate");
    let update = state(&owner, "repo", 150);
    purgatory.hold_dependent(now, &coordinate, &update);

    let taken = purgatory.take(&coordinate).expect("held");
    assert!(!purgatory.contains(&event.id));
    purgatory.restore(taken);
    assert!(purgatory.contains(&event.id) && purgatory.contains(&update.id));
    assert_eq!(purgatory.coordinates(), vec![coordinate.clone()]);
    assert_eq!(purgatory.stats(now).promoted, 0);

    purgatory.take(&coordinate).expect("held again");
    purgatory.promoted();
    assert_eq!(purgatory.stats(now).promoted, 1);
}

/// Git data present for the coordinates it was told of.
#[derive(Default)]
struct FakeGitData(Mutex<HashSet<RepoCoordinate>>);

impl GitDataProbe for FakeGitData {
    fn is_present(&self, coordinate: &RepoCoordinate) -> bool {
        self.0.lock().expect("lock").contains(coordinate)
    }
}

async fn purgatory_store(probe: Arc<FakeGitData>) -> MemoryStore {
    let config = StoreConfig::new(RelayUrl::parse(SERVICE).expect("url"), "relay.example.com");
    MemoryStore::with_purgatory(
        config,
        Arc::new(TokioClock::from_system()),
        Some(PurgatoryParts {
            config: PurgatoryConfig::default(),
            probe,
        }),
    )
    .await
    .expect("store opens")
}

#[tokio::test(start_paused = true)]
async fn the_store_holds_an_announcement_and_its_state_until_git_data_arrives() {
    let probe = Arc::new(FakeGitData::default());
    let store = purgatory_store(Arc::clone(&probe)).await;
    let owner = keys(1);
    let source = RelayUrl::parse("wss://elsewhere.example.org").expect("url");
    let announcement = announcement_event(&owner, "repo", 100);
    let update = state(&owner, "repo", 200);

    assert_eq!(
        store.ingest(announcement.clone(), &source).await,
        Ok(IngestOutcome::Deferred)
    );
    assert_eq!(
        store.ingest(update.clone(), &source).await,
        Ok(IngestOutcome::Deferred)
    );
    let issue = nip34::root(
        &keys(2),
        RootKind::Issue,
        &[RepoRef::new(owner.public_key(), "repo")],
        "broken",
        Timestamp::from_secs(300),
    )
    .expect("issue");
    assert_eq!(
        store.ingest(issue.clone(), &source).await,
        Ok(IngestOutcome::Deferred)
    );
    let elsewhere = nip34::root(
        &keys(2),
        RootKind::Issue,
        &[RepoRef::new(owner.public_key(), "unknown")],
        "broken",
        Timestamp::from_secs(300),
    )
    .expect("issue");
    assert!(matches!(
        store.ingest(elsewhere, &source).await,
        Ok(IngestOutcome::Rejected(_))
    ));
    assert_eq!(
        store.ingest(update.clone(), &source).await,
        Ok(IngestOutcome::Duplicate),
        "a held event is had"
    );
    assert!(store.contains(&update.id).await.expect("contains"));
    for id in [announcement.id, update.id, issue.id] {
        let stored = store.database().event_by_id(&id).await.expect("reads");
        assert!(
            stored.is_none(),
            "a held event is not stored, so not served"
        );
    }
    assert_eq!(store.announcements_for_sync().len(), 1);
    assert_eq!(store.promote_ready().await, Ok(0), "no git data yet");

    tokio::time::sleep(Duration::from_secs(HOUR)).await;
    let coordinate = RepoCoordinate::new(owner.public_key(), "repo").expect("coordinate");
    assert_eq!(
        store.announcements_for_sync()[0].status,
        ExpiryStatus::SoftExpired
    );
    probe.0.lock().expect("lock").insert(coordinate);
    assert_eq!(store.promote_ready().await, Ok(1));
    assert!(store.announcements_for_sync().is_empty());
    for id in [announcement.id, update.id, issue.id] {
        let stored = store.database().event_by_id(&id).await.expect("reads");
        assert!(stored.is_some(), "promoted events are stored");
    }
}

#[tokio::test(start_paused = true)]
async fn the_store_forgets_an_announcement_left_without_git_data_for_24_hours() {
    let probe = Arc::new(FakeGitData::default());
    let store = purgatory_store(Arc::clone(&probe)).await;
    let owner = keys(1);
    let source = RelayUrl::parse("wss://elsewhere.example.org").expect("url");
    let announcement = announcement_event(&owner, "repo", 100);
    assert_eq!(
        store.ingest(announcement.clone(), &source).await,
        Ok(IngestOutcome::Deferred)
    );

    tokio::time::sleep(Duration::from_secs(24 * HOUR - 1)).await;
    assert_eq!(
        store.announcements_for_sync().len(),
        1,
        "still inside the window"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(store.announcements_for_sync().is_empty(), "expired");
    assert!(!store.contains(&announcement.id).await.expect("contains"));
    assert_eq!(store.purgatory_stats().map(|s| s.expired), Some(1));

    // Offered again after expiry, it is held afresh.
    assert_eq!(
        store.ingest(announcement, &source).await,
        Ok(IngestOutcome::Deferred)
    );
}
