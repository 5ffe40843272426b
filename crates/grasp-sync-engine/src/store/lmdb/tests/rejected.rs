//! The rejected-events index through the LMDB store, on a clock the tests set: dependency
//! re-processing from the hot cache, the refetch report once the hot copy expired, and the cold
//! tier surviving a reopen.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, Keys, Kind, Timestamp};
use tempfile::TempDir;

use super::{SERVICE, announcement, config, event, issue, keys, source};
use crate::boundary::{EventStore, IngestOutcome};
use crate::clock::Clock;
use crate::store::LmdbStore;

const T0: u64 = 1_700_000_000;
const MINUTE: u64 = 60;
const DAY: u64 = 24 * 60 * MINUTE;

/// A clock whose unix time only moves when a test sets it.
#[derive(Debug)]
struct SetClock(AtomicU64);

impl SetClock {
    fn at(secs: u64) -> Arc<Self> {
        Arc::new(Self(AtomicU64::new(secs)))
    }

    fn set(&self, secs: u64) {
        self.0.store(secs, Ordering::SeqCst);
    }
}

impl Clock for SetClock {
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }

    fn unix_now(&self) -> Timestamp {
        Timestamp::from_secs(self.0.load(Ordering::SeqCst))
    }
}

async fn open_at(dir: &TempDir, clock: &Arc<SetClock>) -> LmdbStore {
    let clock: Arc<dyn Clock> = clock.clone();
    LmdbStore::open_with_clock(dir.path(), config(), clock)
        .await
        .expect("store opens")
}

fn other_source() -> RelayUrl {
    RelayUrl::parse("wss://other.example.org").expect("valid url")
}

fn state(owner: &Keys) -> Event {
    event(owner, 30618, 12, &[&["d", "repo"]])
}

async fn rejected(store: &LmdbStore, event: &Event, from: &RelayUrl) {
    let outcome = store.ingest(event.clone(), from).await;
    assert!(
        matches!(outcome, Ok(IngestOutcome::Rejected(_))),
        "{outcome:?}"
    );
}

async fn saved(store: &LmdbStore, event: &Event, from: &RelayUrl) {
    assert_eq!(
        store.ingest(event.clone(), from).await,
        Ok(IngestOutcome::Saved)
    );
}

async fn stored_ids(store: &LmdbStore, kind: u16) -> Vec<EventId> {
    store
        .negentropy_items(Filter::new().kind(Kind::from(kind)))
        .await
        .expect("items")
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

#[tokio::test]
async fn state_before_its_announcement_is_stored_from_the_hot_cache() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let store = open_at(&dir, &clock).await;
    let owner = keys(1);
    let early = state(&owner);
    rejected(&store, &early, &source()).await;
    assert!(store.contains(&early.id).await.expect("contains"));

    clock.set(T0 + 5 * MINUTE);
    saved(&store, &announcement(&owner), &source()).await;
    // Stored without being offered again, and forgotten by the index.
    assert_eq!(stored_ids(&store, 30618).await, vec![early.id]);
    assert_eq!(store.rejection_reason(&early.id), Ok(None));
    assert_eq!(store.poll_refetch(), Ok(Vec::new()));
    assert_eq!(
        store.ingest(early, &source()).await,
        Ok(IngestOutcome::Duplicate)
    );
}

#[tokio::test]
async fn maintainer_chain_before_the_owners_announcement_is_stored_in_cascade() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let store = open_at(&dir, &clock).await;
    let (owner, maintainer, second) = (keys(1), keys(2), keys(3));
    // The second maintainer is named only by the first maintainer's announcement, so its state
    // becomes acceptable only once that announcement has been re-processed and accepted.
    let seconds_state = state(&second);
    let maintainers_announcement = event(
        &maintainer,
        30617,
        10,
        &[
            &["d", "repo"],
            &["maintainers", &second.public_key().to_hex()],
        ],
    );
    rejected(&store, &seconds_state, &source()).await;
    rejected(&store, &maintainers_announcement, &source()).await;
    let owners = event(
        &owner,
        30617,
        11,
        &[
            &["d", "repo"],
            &["relays", super::SERVICE],
            &["clone", "https://relay.example.com/repo.git"],
            &["maintainers", &maintainer.public_key().to_hex()],
        ],
    );
    saved(&store, &owners, &source()).await;
    let mut announcements = stored_ids(&store, 30617).await;
    announcements.sort_unstable();
    let mut expected = vec![owners.id, maintainers_announcement.id];
    expected.sort_unstable();
    assert_eq!(announcements, expected);
    assert_eq!(stored_ids(&store, 30618).await, vec![seconds_state.id]);
    assert_eq!(store.poll_refetch(), Ok(Vec::new()));
}

#[tokio::test]
async fn reply_before_its_root_is_stored_when_the_root_arrives() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let store = open_at(&dir, &clock).await;
    let owner = keys(1);
    saved(&store, &announcement(&owner), &source()).await;
    let root = issue(&keys(2), &owner, 11);
    let reply = event(&keys(3), 1111, 13, &[&["e", &root.id.to_hex()]]);
    rejected(&store, &reply, &source()).await;
    saved(&store, &root, &source()).await;
    assert_eq!(stored_ids(&store, 1111).await, vec![reply.id]);
}

#[tokio::test]
async fn expired_hot_copy_is_reported_for_refetch_with_its_source_relays() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let store = open_at(&dir, &clock).await;
    let owner = keys(1);
    let early = state(&owner);
    rejected(&store, &early, &source()).await;
    rejected(&store, &early, &other_source()).await;

    clock.set(T0 + 11 * MINUTE);
    assert!(store.contains(&early.id).await.expect("contains"));
    saved(&store, &announcement(&owner), &source()).await;
    assert!(stored_ids(&store, 30618).await.is_empty());
    // Released: no longer in the "have" set, but still remembered until fetched.
    assert!(!store.contains(&early.id).await.expect("contains"));
    assert!(store.rejection_reason(&early.id).expect("lock").is_some());
    assert_eq!(
        store.poll_refetch(),
        Ok(vec![
            (other_source(), vec![early.id]),
            (source(), vec![early.id]),
        ])
    );
    assert_eq!(store.poll_refetch(), Ok(Vec::new()));

    saved(&store, &early, &source()).await;
    assert_eq!(store.rejection_reason(&early.id), Ok(None));
    clock.set(T0 + DAY);
    assert_eq!(store.poll_refetch(), Ok(Vec::new()));
}

#[tokio::test]
async fn cold_index_survives_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let owner = keys(1);
    let early = state(&owner);
    let stray = issue(&keys(2), &keys(9), 11);
    let reason = {
        let store = open_at(&dir, &clock).await;
        rejected(&store, &early, &source()).await;
        rejected(&store, &stray, &source()).await;
        store.rejection_reason(&stray.id).expect("lock")
    };
    assert!(reason.is_some());

    clock.set(T0 + DAY);
    let store = open_at(&dir, &clock).await;
    assert!(store.contains(&stray.id).await.expect("contains"));
    assert!(store.contains(&early.id).await.expect("contains"));
    assert_eq!(store.rejection_reason(&stray.id), Ok(reason));
    // The dependency is remembered too: the hot copy is gone, so the state is reported.
    saved(&store, &announcement(&owner), &source()).await;
    assert!(!store.contains(&early.id).await.expect("contains"));
    drop(store);

    // A released entry stays released across a reopen and is reported again.
    let store = open_at(&dir, &clock).await;
    assert!(!store.contains(&early.id).await.expect("contains"));
    assert_eq!(store.poll_refetch(), Ok(vec![(source(), vec![early.id])]));
    saved(&store, &early, &source()).await;
    drop(store);

    let store = open_at(&dir, &clock).await;
    assert_eq!(store.rejection_reason(&early.id), Ok(None));
    assert_eq!(store.poll_refetch(), Ok(Vec::new()));
}

#[tokio::test]
async fn cold_entries_expire_across_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let stray = issue(&keys(2), &keys(9), 11);
    {
        let store = open_at(&dir, &clock).await;
        rejected(&store, &stray, &source()).await;
    }
    clock.set(T0 + 7 * DAY - 1);
    {
        let store = open_at(&dir, &clock).await;
        assert!(store.contains(&stray.id).await.expect("contains"));
    }
    clock.set(T0 + 7 * DAY);
    let store = open_at(&dir, &clock).await;
    assert!(!store.contains(&stray.id).await.expect("contains"));
    assert_eq!(store.rejection_reason(&stray.id), Ok(None));
}

#[tokio::test]
async fn an_event_dated_past_the_window_is_refused_unremembered_and_taken_once_its_time_comes() {
    let dir = TempDir::new().expect("temp dir");
    let clock = SetClock::at(T0);
    let store = open_at(&dir, &clock).await;
    let ten_years = 10 * 365 * DAY;
    let owner = keys(1);
    let ahead = event(
        &owner,
        30617,
        T0 + ten_years,
        &[
            &["d", "repo"],
            &["relays", SERVICE],
            &["clone", "https://relay.example.com/repo.git"],
        ],
    );
    let Ok(IngestOutcome::Rejected(reason)) = store.ingest(ahead.clone(), &source()).await else {
        panic!("an event ten years ahead was taken");
    };
    assert_eq!(
        reason,
        "invalid: created_at is more than 900 s in the future"
    );
    assert!(!store.contains(&ahead.id).await.expect("contains"));
    // Within the window it is a plain announcement.
    clock.set(T0 + ten_years - 15 * MINUTE);
    assert_eq!(
        store.ingest(ahead.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
}
