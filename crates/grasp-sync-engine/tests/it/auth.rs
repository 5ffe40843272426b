//! NIP-42 end to end: a relay that requires authentication for reads (the rust-nostr relay
//! builder's NIP-42 read mode) serves an engine that holds a key; without a key, or where
//! coverage stays refused after authenticating, an `auth-required:` refusal pauses only the
//! refused coverage, not the relay, and is never retried in a loop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use grasp_sync_engine::{EngineHandle, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{KIND_ISSUE, KIND_REPO_ANNOUNCEMENT, ThreadTag, reply};
use grasp_sync_testkit::{
    FilterPredicate, PolicyRule, RefusalKind, RelayAuth, StrictLimits, TestRelay, TestRelayConfig,
};
use nostr::{Event, EventId, Keys, TagKind, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, history_settled, ids, start_engine,
    start_engine_authenticating, test_config, wait_for_store, wait_until,
};

/// The text of a relay that serves quotes to authenticated members only.
const QUOTES_NEED_AUTH: &str = "auth-required: quotes are for members";

/// A bootstrap relay (no authentication) listing repositories whose events are all on `home`.
struct Network {
    bootstrap: TestRelay,
    home: TestRelay,
    events: Vec<Event>,
}

impl Network {
    async fn start(home: TestRelayConfig) -> Self {
        let bootstrap = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("bootstrap");
        let home = TestRelay::start(home).await.expect("home");
        let mut events = Vec::new();
        let mut announcements = Vec::new();
        for n in 0..2u64 {
            let fixture = RepoFixture::new(&format!("repo-{n}"));
            let announcement =
                fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
            announcements.push(announcement.clone());
            events.push(announcement);
            events.extend(fixture.thread(1_700_000_100 + n * 100));
        }
        bootstrap.seed(announcements).await.expect("seed bootstrap");
        home.seed(events.iter().cloned()).await.expect("seed home");
        Self {
            bootstrap,
            home,
            events,
        }
    }

    fn key(relay: &TestRelay) -> String {
        RelayUrl::parse(&relay.url()).expect("url").to_string()
    }

    fn issue(&self) -> &Event {
        self.events
            .iter()
            .find(|e| e.kind.as_u16() == KIND_ISSUE)
            .expect("an issue")
    }

    /// Publishes a fresh reply to the first issue on `home` and waits for the store to hold
    /// it: live coverage works.
    async fn live_reply_arrives(&self, store: &TestStore, engine: &EngineHandle) {
        let fresh = reply(
            &Keys::generate(),
            self.issue(),
            ThreadTag::LowerE,
            "live",
            Timestamp::now(),
        )
        .expect("reply");
        self.home.publish(fresh.clone()).await.expect("publish");
        wait_for_store(store, engine, &ids(&[fresh]), Duration::from_secs(30)).await;
    }
}

fn auth_reads() -> TestRelayConfig {
    TestRelayConfig {
        auth: RelayAuth::Reads,
        ..TestRelayConfig::default()
    }
}

/// A relay that refuses every `#q` filter with `auth-required:`, whether or not the client
/// authenticated; `auth` says whether the relay itself requires authentication for reads.
fn quotes_refused(auth: RelayAuth) -> TestRelayConfig {
    TestRelayConfig {
        auth,
        ..TestRelayConfig::strict(StrictLimits {
            policies: vec![PolicyRule::new(FilterPredicate::Tag('q'), QUOTES_NEED_AUTH)],
            ..StrictLimits::default()
        })
    }
}

/// Whether the event is reachable only through a `#q` filter.
fn quote_only(event: &Event) -> bool {
    event.kind.as_u16() != KIND_REPO_ANNOUNCEMENT
        && !event.tags.iter().any(|tag| {
            matches!(tag.kind(), TagKind::SingleLetter(letter)
                if matches!(letter.as_char(), 'a' | 'A' | 'e' | 'E'))
        })
}

async fn relay_status(engine: &EngineHandle, key: &str) -> RelayStatus {
    engine
        .status()
        .await
        .and_then(|s| s.relays.get(key).cloned())
        .expect("relay status")
}

/// Refused REQ starts by filter (time bounds and limit removed): how often each refused
/// filter was sent, alone or beside others.
fn refused_sends_by_filter(relay: &TestRelay) -> BTreeMap<String, usize> {
    let mut by_filter = BTreeMap::new();
    for start in relay.strict_stats().req_starts() {
        if start.refused != Some(RefusalKind::Policy) {
            continue;
        }
        for filter in &start.filters {
            if !FilterPredicate::Tag('q').matches(filter) {
                continue;
            }
            let mut filter = filter.clone();
            filter.since = None;
            filter.until = None;
            filter.limit = None;
            *by_filter
                .entry(nostr::JsonUtil::as_json(&filter))
                .or_default() += 1;
        }
    }
    by_filter
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_requiring_auth_serves_an_engine_holding_a_key() {
    let network = Network::start(auth_reads()).await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(
        &store,
        test_config(&[network.bootstrap.url()]),
        Keys::generate(),
    )
    .await;
    let key = Network::key(&network.home);
    wait_for_store(
        &store,
        &engine,
        &ids(&network.events),
        Duration::from_secs(60),
    )
    .await;
    assert!(
        wait_until(Duration::from_secs(30), || async {
            let status = relay_status(&engine, &key).await;
            history_settled(&status) && status.connection == "connected"
        })
        .await,
        "history was not confirmed: {:#?}",
        relay_status(&engine, &key).await
    );
    let status = relay_status(&engine, &key).await;
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    // Live coverage was sent after authenticating too.
    network.live_reply_arrives(&store, &engine).await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_auth_required_pauses_only_the_refused_coverage() {
    let network = Network::start(quotes_refused(RelayAuth::Off)).await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[network.bootstrap.url()])).await;
    let key = Network::key(&network.home);
    // A relay-wide pause (24 h) would leave all of this out of the store.
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    assert!(!quotes.is_empty());
    wait_for_store(&store, &engine, &reachable, Duration::from_secs(60)).await;
    assert_eq!(
        store.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    let status = relay_status(&engine, &key).await;
    assert!(status.paused_filters >= 1, "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    assert_eq!(status.auth, "unchallenged", "{status:#?}");
    let refusals = network.home.strict_stats().refusals_of(RefusalKind::Policy);
    assert!(refusals >= 1);
    assert_eq!(
        status.refusals.get("auth_required").copied(),
        Some(refusals),
        "each refusal is counted once: {status:#?}"
    );

    // Live coverage of what was not refused keeps working, and nothing refused is sent again.
    network.live_reply_arrives(&store, &engine).await;
    assert_eq!(
        network.home.strict_stats().refusals_of(RefusalKind::Policy),
        refusals,
        "a refused filter was sent again"
    );
    let status = relay_status(&engine, &key).await;
    assert_eq!(status.health, "healthy", "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_refused_after_authenticating_is_retried_once_then_paused() {
    let network = Network::start(quotes_refused(RelayAuth::Reads)).await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(
        &store,
        test_config(&[network.bootstrap.url()]),
        Keys::generate(),
    )
    .await;
    let key = Network::key(&network.home);
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    wait_for_store(&store, &engine, &reachable, Duration::from_secs(60)).await;
    assert_eq!(
        store.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    assert!(
        wait_until(Duration::from_secs(30), || async {
            relay_status(&engine, &key).await.paused_filters >= 1
        })
        .await,
        "refused coverage was not paused: {:#?}",
        relay_status(&engine, &key).await
    );
    let status = relay_status(&engine, &key).await;
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    let before = refused_sends_by_filter(&network.home);
    assert!(!before.is_empty());
    // Each refused filter went out at most three times: before the session authenticated, its
    // one retry after, and once alone if it shared a request (the policy refusal's suspects).
    for (filter, sends) in &before {
        assert!(*sends <= 3, "{filter} sent {sends} times: {before:#?}");
    }

    // Live coverage works; no refused filter is sent again.
    network.live_reply_arrives(&store, &engine).await;
    assert_eq!(
        refused_sends_by_filter(&network.home),
        before,
        "refused coverage was retried again"
    );
    engine.shutdown().await;
}
