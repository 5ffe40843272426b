//! Tests of the external store over a real relay that accepts everything, on a clock the tests
//! set: the policy decides what is published, and the rejected-events records are bounded,
//! expire, and are released (re-processed, or reported for fetching) when their announcement
//! arrives.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use grasp_sync_engine::store::DEFAULT_HOT_TTL;
use grasp_sync_engine::{Clock, EventStore, IngestOutcome, StoreConfig};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, EventId, Keys, Timestamp};
use tempfile::TempDir;

use super::ExternalStore;
use crate::external::{HaveIndex, OwnRelayLink};

const T0: u64 = 1_700_000_000;
const DAY: u64 = 24 * 3600;

/// A clock whose unix time only moves when a test sets it.
#[derive(Debug)]
struct SetClock(AtomicU64);

impl SetClock {
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

/// An own relay that keeps whatever it is sent, and a store over it.
struct Fixture {
    own: TestRelay,
    store: ExternalStore,
    clock: Arc<SetClock>,
    owner: Keys,
    _dir: TempDir,
}

impl Fixture {
    async fn start(cold_capacity: usize) -> Fixture {
        let own = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("own relay");
        let url = RelayUrl::parse(&own.url()).expect("url");
        let dir = tempfile::tempdir().expect("dir");
        let index = Arc::new(HaveIndex::open(dir.path()).expect("index"));
        let link = Arc::new(
            OwnRelayLink::connect(&url, Duration::from_secs(10))
                .await
                .expect("link"),
        );
        let mut config = StoreConfig::new(url, own.addr().ip().to_string());
        config.rejected.cold_capacity = cold_capacity;
        let clock = Arc::new(SetClock(AtomicU64::new(T0)));
        let store = ExternalStore::open(link, index, dir.path(), config, clock.clone())
            .await
            .expect("store");
        Fixture {
            own,
            store,
            clock,
            owner: Keys::generate(),
            _dir: dir,
        }
    }

    fn announcement(&self, identifier: &str) -> Event {
        nip34::announcement(
            &self.owner,
            &Announcement {
                identifier: identifier.to_owned(),
                name: identifier.to_owned(),
                relays: vec![self.own.url()],
                clone: vec![format!(
                    "http://{}/{}/{identifier}.git",
                    self.own.addr().ip(),
                    self.owner.public_key().to_hex()
                )],
                maintainers: Vec::new(),
                created_at: Timestamp::from_secs(T0),
            },
        )
        .expect("announcement")
    }

    fn issue(&self, identifier: &str, n: u64) -> Event {
        let repo = RepoRef::new(self.owner.public_key(), identifier);
        nip34::root(
            &Keys::generate(),
            RootKind::Issue,
            &[repo],
            "bug",
            Timestamp::from_secs(T0 + n),
        )
        .expect("issue")
    }

    async fn ingest(&self, event: &Event) -> IngestOutcome {
        self.store
            .ingest(event.clone(), &source())
            .await
            .expect("ingest")
    }

    async fn relay_holds(&self) -> BTreeSet<EventId> {
        self.own.event_ids().await.expect("ids")
    }
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("url")
}

fn is_rejected(outcome: &IngestOutcome) -> bool {
    matches!(outcome, IngestOutcome::Rejected(_))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_the_policy_accepts_is_published_to_an_accept_everything_relay() {
    let fixture = Fixture::start(1_000).await;
    let listed = fixture.announcement("listed");
    let elsewhere = Announcement {
        identifier: "elsewhere".to_owned(),
        name: "elsewhere".to_owned(),
        relays: vec!["wss://other.example.org".to_owned()],
        clone: vec!["https://git.example.org/elsewhere.git".to_owned()],
        maintainers: Vec::new(),
        created_at: Timestamp::from_secs(T0),
    };
    let unlisted = nip34::announcement(&fixture.owner, &elsewhere).expect("announcement");

    assert_eq!(fixture.ingest(&listed).await, IngestOutcome::Saved);
    assert!(is_rejected(&fixture.ingest(&unlisted).await));
    let on_listed = fixture.issue("listed", 1);
    let on_unlisted = fixture.issue("elsewhere", 2);
    assert_eq!(fixture.ingest(&on_listed).await, IngestOutcome::Saved);
    assert!(is_rejected(&fixture.ingest(&on_unlisted).await));

    let held = fixture.relay_holds().await;
    assert_eq!(held, BTreeSet::from([listed.id, on_listed.id]));
    assert!(
        fixture
            .store
            .contains(&unlisted.id)
            .await
            .expect("contains")
    );
    assert!(
        fixture
            .store
            .rejection_reason(&unlisted.id)
            .expect("reason")
            .is_some_and(|reason| reason.starts_with("blocked:"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_records_are_bounded_oldest_first_and_counted() {
    let fixture = Fixture::start(2).await;
    let issues: Vec<Event> = (0..3).map(|n| fixture.issue("unknown", n)).collect();
    for issue in &issues {
        assert!(is_rejected(&fixture.ingest(issue).await));
    }
    let usage = fixture.store.guarded().rejected_usage().expect("usage");
    assert_eq!(usage.cold_ids, 2);
    assert_eq!(usage.cold_capacity, 2);
    assert_eq!(usage.cold_evicted, 1);
    assert!(
        !fixture
            .store
            .contains(&issues[0].id)
            .await
            .expect("contains")
    );
    assert!(
        fixture
            .store
            .contains(&issues[2].id)
            .await
            .expect("contains")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_records_expire() {
    let fixture = Fixture::start(1_000).await;
    let issue = fixture.issue("unknown", 1);
    assert!(is_rejected(&fixture.ingest(&issue).await));
    fixture.clock.set(T0 + 7 * DAY - 1);
    assert!(fixture.store.contains(&issue.id).await.expect("contains"));
    fixture.clock.set(T0 + 7 * DAY);
    assert!(!fixture.store.contains(&issue.id).await.expect("contains"));
    let usage = fixture.store.guarded().rejected_usage().expect("usage");
    assert_eq!((usage.cold_ids, usage.hot_events), (0, 0));
    assert_eq!(usage.cold_evicted, 0, "expiry is not eviction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issue_before_its_announcement_is_published_when_the_announcement_arrives() {
    let fixture = Fixture::start(1_000).await;
    let issue = fixture.issue("tool", 1);
    assert!(is_rejected(&fixture.ingest(&issue).await));
    assert!(fixture.relay_holds().await.is_empty());

    let announcement = fixture.announcement("tool");
    assert_eq!(fixture.ingest(&announcement).await, IngestOutcome::Saved);
    assert_eq!(
        fixture.relay_holds().await,
        BTreeSet::from([announcement.id, issue.id])
    );
    assert!(
        fixture
            .store
            .index()
            .is_accepted(&issue.id)
            .await
            .expect("index")
    );
    assert_eq!(
        fixture.store.rejection_reason(&issue.id).expect("reason"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_the_hot_copy_expired_is_reported_for_fetching_from_its_source() {
    let fixture = Fixture::start(1_000).await;
    let issue = fixture.issue("tool", 1);
    assert!(is_rejected(&fixture.ingest(&issue).await));
    fixture.clock.set(T0 + DEFAULT_HOT_TTL.as_secs());
    assert!(EventStore::poll_refetch(&fixture.store).is_empty());

    let announcement = fixture.announcement("tool");
    assert_eq!(fixture.ingest(&announcement).await, IngestOutcome::Saved);
    assert!(!fixture.relay_holds().await.contains(&issue.id));
    assert!(
        !fixture.store.contains(&issue.id).await.expect("contains"),
        "a released event is no longer had, so sync fetches it"
    );
    assert_eq!(
        EventStore::poll_refetch(&fixture.store),
        vec![(source(), vec![issue.id])]
    );
    // Fetched again, it is accepted now.
    assert_eq!(fixture.ingest(&issue).await, IngestOutcome::Saved);
    assert!(fixture.relay_holds().await.contains(&issue.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_event_read_from_the_relay_is_recorded_without_being_published_back() {
    let fixture = Fixture::start(1_000).await;
    // Offered as read from the relay, though the relay does not hold it: nothing is sent.
    let announcement = fixture.announcement("tool");
    assert_eq!(
        fixture
            .store
            .offer_from_relay(&announcement)
            .await
            .expect("offer"),
        IngestOutcome::Saved
    );
    assert!(
        fixture
            .store
            .index()
            .is_accepted(&announcement.id)
            .await
            .expect("index")
    );
    assert!(fixture.relay_holds().await.is_empty());
    let refused = fixture.issue("elsewhere", 1);
    assert!(is_rejected(
        &fixture
            .store
            .offer_from_relay(&refused)
            .await
            .expect("offer")
    ));
    assert!(
        !fixture
            .store
            .index()
            .is_accepted(&refused.id)
            .await
            .expect("index")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_event_read_from_the_relay_releases_is_published_by_the_next_settle() {
    let fixture = Fixture::start(1_000).await;
    let early = fixture.issue("tool", 1);
    assert!(is_rejected(&fixture.ingest(&early).await));
    let announcement = fixture.announcement("tool");
    assert_eq!(
        fixture
            .store
            .offer_from_relay(&announcement)
            .await
            .expect("offer"),
        IngestOutcome::Saved
    );
    assert!(!fixture.relay_holds().await.contains(&early.id), "not yet");
    fixture.store.settle().await.expect("settle");
    assert_eq!(fixture.relay_holds().await, BTreeSet::from([early.id]));
    assert!(
        fixture
            .store
            .index()
            .is_accepted(&early.id)
            .await
            .expect("index")
    );
}
