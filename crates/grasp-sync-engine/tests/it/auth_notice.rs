//! `auth-required:` sent as a NOTICE, which names no subscription: handled as the
//! `auth-required:` CLOSED of the newest REQ the relay had not answered. With a key it costs
//! no pause at all (the request is sent again after AUTH); without one, only the refused
//! coverage is paused, never the whole relay.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_engine::{EngineHandle, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    AuthRefusal, FilterPredicate, RefusalKind, StrictAuth, StrictLimits, TestRelay, TestRelayConfig,
};
use nostr::{Event, EventId, Keys};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, history_settled, start_engine,
    start_engine_authenticating, test_config, wait_for_store, wait_until,
};

/// A relay that reads only to authenticated clients and refuses a REQ from any other with
/// `refusal` (a NOTICE alone, or nostrcheck-server's NOTICE then CLOSED). It advertises its
/// filter ceiling, so a first sync goes by REQ+EOSE: REQs are what such a NOTICE refuses.
fn notice_refusing(refusal: AuthRefusal) -> TestRelayConfig {
    TestRelayConfig {
        max_filters: Some(20),
        ..TestRelayConfig::strict(StrictLimits {
            auth: Some(StrictAuth {
                refusal,
                ..StrictAuth::new(FilterPredicate::custom(|_| true))
            }),
            ..StrictLimits::default()
        })
    }
}

/// A bootstrap relay listing one repository whose thread is on `home`.
async fn network(home: TestRelayConfig) -> (TestRelay, TestRelay, Vec<Event>) {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(home).await.expect("home");
    let mut events = Vec::new();
    let mut announcements = Vec::new();
    for n in 0..1u64 {
        let fixture = RepoFixture::new(&format!("noticed-{n}"));
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
async fn an_auth_required_notice_costs_an_engine_holding_a_key_no_pause() {
    let (bootstrap, home, events) = network(notice_refusing(AuthRefusal::Notice)).await;
    let store = TestStore::open().await;
    let engine =
        start_engine_authenticating(&store, test_config(&[bootstrap.url()]), Keys::generate())
            .await;
    let ids: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
    // A relay-wide policy pause would keep all of it out for hours.
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
    let status = relay_status(&engine, &home).await;
    assert!(home.strict_stats().refusals_of(RefusalKind::AuthRequired) >= 1);
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_an_auth_required_notice_pauses_only_the_refused_coverage() {
    for refusal in [AuthRefusal::Notice, AuthRefusal::NoticeThenClosed] {
        let (bootstrap, home, _) = network(notice_refusing(refusal)).await;
        let store = TestStore::open().await;
        let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
        let refused = wait_until(Duration::from_secs(20), || async {
            tracked(&engine, &home)
                .await
                .is_some_and(|s| s.paused_filters >= 1)
        })
        .await;
        let status = relay_status(&engine, &home).await;
        assert!(refused, "{refusal:?}: nothing paused: {status:#?}");
        assert!(home.strict_stats().refusals_of(RefusalKind::AuthRequired) >= 1);
        assert_eq!(status.auth, "unchallenged", "{refusal:?}: {status:#?}");
        assert_eq!(
            status.health, "healthy",
            "{refusal:?}: the relay is paused: {status:#?}"
        );
        assert_eq!(status.connections, 1, "{refusal:?}: {status:#?}");
        engine.shutdown().await;
    }
}
