//! NIP-77 rounds refused with `auth-required:` (strfry's and khatru's NEG-ERR for a NEG-OPEN
//! of filters they serve to authenticated clients only): with a key the round's coverage is
//! reconciled again by NIP-77 once the relay accepted the engine's AUTH; without one only
//! that coverage is paused. Neither falls back to a REQ+EOSE the relay would refuse the same
//! way.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EngineHandle, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    FilterPredicate, RefusalKind, StartKind, StrictAuth, StrictLimits, StrictStats, TestRelay,
    TestRelayConfig,
};
use nostr::{Event, EventId, Filter, JsonUtil, Keys};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, history_settled, start_engine,
    start_engine_authenticating, test_config, wait_for_store, wait_until,
};

/// History of tagged coverage (every filter with a tag condition that is not live and not by
/// ID): served to authenticated connections only. Live subscriptions, exact-ID fetches and
/// the announcements are served to anyone.
fn restricted(filter: &Filter) -> bool {
    filter.limit != Some(0) && filter.ids.is_none() && !filter.generic_tags.is_empty()
}

fn tagged_history_needs_auth() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        auth: Some(StrictAuth::new(FilterPredicate::custom(restricted))),
        ..StrictLimits::default()
    })
}

/// The filter as coverage: no time bounds, and no page size (a live `limit: 0` kept).
fn coverage(filter: &Filter) -> String {
    let mut filter = filter.clone();
    filter.since = None;
    filter.until = None;
    if filter.limit != Some(0) {
        filter.limit = None;
    }
    filter.as_json()
}

/// The coverage of every NEG-OPEN refused for want of authentication.
fn refused_rounds(stats: &StrictStats) -> BTreeSet<String> {
    stats
        .starts
        .iter()
        .filter(|s| s.kind == StartKind::NegOpen && s.refused == Some(RefusalKind::AuthRequired))
        .flat_map(|s| s.filters.iter().map(coverage))
        .collect()
}

/// REQs carrying the coverage of a refused round: a REQ+EOSE fallback.
fn fallback_reqs(stats: &StrictStats) -> Vec<String> {
    let refused = refused_rounds(stats);
    stats
        .req_starts()
        .flat_map(|s| s.filters.iter().map(coverage))
        .filter(|c| refused.contains(c))
        .collect()
}

/// A bootstrap relay listing one repository whose thread is on `home`.
async fn network() -> (TestRelay, TestRelay, Vec<Event>) {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(tagged_history_needs_auth())
        .await
        .expect("home");
    let mut events = Vec::new();
    let mut announcements = Vec::new();
    for n in 0..1u64 {
        let fixture = RepoFixture::new(&format!("reconciled-{n}"));
        let announcement =
            fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
        announcements.push(announcement.clone());
        events.push(announcement);
        events.extend(fixture.thread(1_700_000_100 + n * 100));
    }
    bootstrap.seed(announcements).await.expect("seed bootstrap");
    home.seed(events.iter().cloned()).await.expect("seed home");
    (bootstrap, home, events)
}

/// History by NIP-77 only: a new store's first sync would take it by REQ+EOSE.
fn config(bootstrap: &TestRelay) -> EngineConfig {
    EngineConfig {
        first_sync_by_req: false,
        ..test_config(&[bootstrap.url()])
    }
}

async fn relay_status(engine: &EngineHandle, relay: &TestRelay) -> RelayStatus {
    tracked(engine, relay).await.expect("relay status")
}

/// The relay's status once the engine tracks it.
async fn tracked(engine: &EngineHandle, relay: &TestRelay) -> Option<RelayStatus> {
    let key = RelayUrl::parse(&relay.url()).expect("url").to_string();
    engine
        .status()
        .await
        .and_then(|s| s.relays.get(&key).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_refused_for_auth_is_reconciled_by_nip77_after_authenticating() {
    let (bootstrap, home, events) = network().await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(&store, config(&bootstrap), Keys::generate()).await;
    let ids: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
    wait_for_store(&store, &engine, &ids, Duration::from_secs(30)).await;
    assert!(
        wait_until(Duration::from_secs(20), || async {
            tracked(&engine, &home)
                .await
                .is_some_and(|s| history_settled(&s))
        })
        .await,
        "{:#?}",
        relay_status(&engine, &home).await
    );
    let stats = home.strict_stats();
    let refused = refused_rounds(&stats);
    assert!(!refused.is_empty(), "no round was refused: {stats:#?}");
    // Each refused round's coverage was reconciled again by NIP-77, once.
    for filter in &refused {
        let opens: Vec<_> = stats
            .starts
            .iter()
            .filter(|s| s.kind == StartKind::NegOpen)
            .filter(|s| s.filters.iter().any(|f| coverage(f) == *filter))
            .collect();
        assert!(
            opens.iter().any(|s| s.refused.is_none()),
            "{filter} not reconciled after AUTH: {opens:#?}"
        );
        assert!(opens.len() <= 2, "{filter} opened {} times", opens.len());
    }
    assert_eq!(
        fallback_reqs(&stats),
        Vec::<String>::new(),
        "fell back to REQ"
    );
    let status = relay_status(&engine, &home).await;
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_a_round_refused_for_auth_pauses_its_coverage_without_a_fallback() {
    let (bootstrap, home, _) = network().await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, config(&bootstrap)).await;
    let settled = wait_until(Duration::from_secs(30), || async {
        tracked(&engine, &home)
            .await
            .is_some_and(|s| s.paused_filters >= 1 && history_settled(&s))
    })
    .await;
    let status = relay_status(&engine, &home).await;
    assert!(settled, "{status:#?}");
    let stats = home.strict_stats();
    assert!(!refused_rounds(&stats).is_empty(), "{stats:#?}");
    assert_eq!(
        fallback_reqs(&stats),
        Vec::<String>::new(),
        "fell back to REQ"
    );
    assert_eq!(status.auth, "unchallenged", "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    engine.shutdown().await;
}
