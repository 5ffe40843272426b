//! Tests of the synced-event hook's 500 ms batching on paused time: one call per burst, saved
//! and deferred events of a burst together, and a later event opening the next burst.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_model::{RelayUrl, RepoCoordinate};
use grasp_sync_testkit::nip34::{self, Announcement};
use nostr::{Event, EventBuilder, EventId, Keys, Kind, SecretKey, Timestamp};
use tokio::time::Instant;

use super::{HOOK_BATCH_WINDOW, Ingestor};
use crate::boundary::SyncedEventHook;
use crate::clock::TokioClock;
use crate::store::{GitDataProbe, MemoryStore, PurgatoryConfig, PurgatoryParts, StoreConfig};

/// One hook call: when, the saved IDs and the deferred IDs.
type Call = (Duration, Vec<EventId>, Vec<EventId>);

struct Recorder {
    start: Instant,
    calls: Mutex<Vec<Call>>,
}

#[async_trait]
impl SyncedEventHook for Recorder {
    async fn events_synced(&self, _events: Vec<Event>) {}

    async fn burst_synced(&self, saved: Vec<Event>, deferred: Vec<Event>) {
        let ids = |events: Vec<Event>| events.into_iter().map(|e| e.id).collect();
        self.calls
            .lock()
            .expect("lock")
            .push((self.start.elapsed(), ids(saved), ids(deferred)));
    }
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            calls: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("lock").clone()
    }
}

fn note(n: u64) -> Event {
    let keys = Keys::new(SecretKey::from_slice(&[9; 32]).expect("key"));
    EventBuilder::new(Kind::from(1621), format!("issue {n}"))
        .custom_created_at(Timestamp::from(1_700_000_000 + n))
        .sign_with_keys(&keys)
        .expect("signs")
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("url")
}

async fn sleep_until(recorder: &Recorder, at: Duration) {
    tokio::time::sleep_until(recorder.start + at).await;
}

#[tokio::test(start_paused = true)]
async fn a_burst_reaches_the_hook_once_after_500_ms_and_a_later_event_opens_the_next() {
    let store = Arc::new(MemoryStore::accept_all().await.expect("store"));
    let recorder = Recorder::new();
    let hook: Arc<dyn SyncedEventHook> = recorder.clone();
    let ingestor = Ingestor::new(store, 4, Some(hook), None);
    let ms = Duration::from_millis;
    let events: Vec<Event> = (0..4).map(note).collect();

    ingestor.submit(source(), events[0].clone(), None).await;
    sleep_until(&recorder, ms(100)).await;
    ingestor.submit(source(), events[1].clone(), None).await;
    sleep_until(&recorder, ms(450)).await;
    ingestor.submit(source(), events[2].clone(), None).await;
    sleep_until(&recorder, HOOK_BATCH_WINDOW - ms(1)).await;
    assert!(
        recorder.calls().is_empty(),
        "nothing before the window ends"
    );

    sleep_until(&recorder, ms(700)).await;
    let calls = recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, HOOK_BATCH_WINDOW);
    let ids: HashSet<EventId> = calls[0].1.iter().copied().collect();
    assert_eq!(ids, events[..3].iter().map(|e| e.id).collect());

    ingestor.submit(source(), events[3].clone(), None).await;
    sleep_until(&recorder, ms(700) + HOOK_BATCH_WINDOW - ms(1)).await;
    assert_eq!(recorder.calls().len(), 1);
    sleep_until(&recorder, ms(700) + HOOK_BATCH_WINDOW + ms(1)).await;
    let calls = recorder.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[1].0, ms(700) + HOOK_BATCH_WINDOW);
    assert_eq!(calls[1].1, vec![events[3].id]);
}

struct NoGitData;

impl GitDataProbe for NoGitData {
    fn is_present(&self, _coordinate: &RepoCoordinate) -> bool {
        false
    }
}

#[tokio::test(start_paused = true)]
async fn events_deferred_to_purgatory_reach_the_hook_with_their_burst() {
    let service = "wss://relay.example.com";
    let store = MemoryStore::with_purgatory(
        StoreConfig::new(RelayUrl::parse(service).expect("url"), "relay.example.com"),
        Arc::new(TokioClock::from_system()),
        Some(PurgatoryParts {
            config: PurgatoryConfig::default(),
            probe: Arc::new(NoGitData),
        }),
    )
    .await
    .expect("store");
    let recorder = Recorder::new();
    let hook: Arc<dyn SyncedEventHook> = recorder.clone();
    let ingestor = Ingestor::new(Arc::new(store), 4, Some(hook), None);
    let owner = Keys::new(SecretKey::from_slice(&[4; 32]).expect("key"));
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "repo".to_owned(),
            name: "repo".to_owned(),
            relays: vec![service.to_owned()],
            clone: vec!["https://relay.example.com/x/repo.git".to_owned()],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    let state =
        nip34::repo_state(&owner, "repo", &[], Timestamp::from_secs(1_700_000_001)).expect("state");

    ingestor.submit(source(), announcement.clone(), None).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    ingestor.submit(source(), state.clone(), None).await;
    ingestor.submit(source(), note(1), None).await;
    tokio::time::sleep(HOOK_BATCH_WINDOW * 2).await;
    let calls = recorder.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].1.is_empty(), "nothing was saved: {calls:?}");
    let deferred: HashSet<EventId> = calls[0].2.iter().copied().collect();
    assert_eq!(deferred, HashSet::from([announcement.id, state.id]));
}
