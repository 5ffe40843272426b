//! `auth-required:` sent as a NOTICE, which names no subscription: handled as the
//! `auth-required:` CLOSED of the newest REQ the relay had not answered. With a key it costs
//! no pause at all (the request is sent again after AUTH); without one, only the refused
//! coverage is paused, never the whole relay. On paused time over memory relays, which answer
//! the relay's challenge with the engine's key when it holds one.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_testkit::{
    AuthRefusal, FilterPredicate, MemoryNetwork, RefusalKind, StrictAuth, StrictLimits,
    TestRelayConfig,
};
use nostr::{Event, EventId, Keys};

use crate::support::{repo_network, start_paused_engine, test_config};

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

/// A bootstrap relay listing one repository whose announcement and thread are on a relay
/// configured as `home`; with the announcement and the thread.
fn network(home: TestRelayConfig) -> (MemoryNetwork, Vec<Event>) {
    let (network, _fixture, thread) = repo_network(home, "noticed-0");
    let urls = network.urls();
    let mut events = network.events(&urls[0]);
    for announcement in &events {
        network.store(&urls[1], announcement.clone());
    }
    events.extend(thread);
    (network, events)
}

#[tokio::test(start_paused = true)]
async fn an_auth_required_notice_costs_an_engine_holding_a_key_no_pause() {
    let (network, events) = network(notice_refusing(AuthRefusal::Notice));
    let urls = network.urls();
    let home = &urls[1];
    network.answer_auth_with(Keys::generate());
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let ids: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
    // A relay-wide policy pause would keep all of it out for hours, and even the shortest
    // pause past this deadline.
    run.wait_for_store(&ids, Duration::from_secs(60)).await;
    run.settle(home, Duration::from_secs(600)).await;
    let status = run.relay(home).await.expect("relay status");
    assert!(network.stats(home).refusals_of(RefusalKind::AuthRequired) >= 1);
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_key_an_auth_required_notice_pauses_only_the_refused_coverage() {
    for refusal in [AuthRefusal::Notice, AuthRefusal::NoticeThenClosed] {
        let (network, _) = network(notice_refusing(refusal));
        let urls = network.urls();
        let home = &urls[1];
        let run = start_paused_engine(&network, test_config(&urls[..1])).await;
        let refused = run
            .wait_for_relay(home, Duration::from_secs(600), |s| s.paused_filters >= 1)
            .await;
        let status = run.relay(home).await.expect("relay status");
        assert!(refused, "{refusal:?}: nothing paused: {status:#?}");
        assert!(network.stats(home).refusals_of(RefusalKind::AuthRequired) >= 1);
        assert_eq!(status.auth, "unchallenged", "{refusal:?}: {status:#?}");
        assert_eq!(
            status.health, "healthy",
            "{refusal:?}: the relay is paused: {status:#?}"
        );
        assert_eq!(status.connections, 1, "{refusal:?}: {status:#?}");
        run.engine.shutdown().await;
    }
}
