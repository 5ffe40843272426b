//! `TestRelay` over real sockets: NIP-11, subscriptions, enforced limits, live publishing,
//! stop and restart.

use std::collections::BTreeSet;

use grasp_sync_testkit::{Nip11Mode, StoreKind, TestRelay, TestRelayConfig};
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use tokio::net::TcpStream;

use crate::support::{DEADLINE, End, Probe, fetch_nip11, notes};

/// Starts a relay with `nip11` and asserts the document's `limitation` (`None`: no
/// `limitation` key; the outer `None`: no document, 404).
async fn check_nip11(nip11: Nip11Mode, expected: Option<Option<Value>>) {
    let relay = TestRelay::start(TestRelayConfig {
        max_subscriptions: 12,
        default_filter_limit: 40,
        max_filter_limit: Some(300),
        max_filters: Some(10),
        nip11,
        ..TestRelayConfig::default()
    })
    .await
    .expect("relay starts");
    let (status, body) = fetch_nip11(&relay.nip11_url()).await;
    match expected {
        None => assert_eq!(status, 404),
        Some(limitation) => {
            assert_eq!(status, 200);
            let doc: Value = serde_json::from_str(&body).expect("NIP-11 is JSON");
            assert!(
                doc["supported_nips"]
                    .as_array()
                    .expect("supported_nips is a list")
                    .contains(&json!(77))
            );
            assert_eq!(doc.get("limitation").cloned(), limitation);
        }
    }
    assert_eq!(relay.nip11_requests(), 1);
    assert_eq!(relay.websocket_connections_accepted(), 0);
}

#[tokio::test]
async fn nip11_serves_the_configured_limits() {
    check_nip11(
        Nip11Mode::WithLimits,
        Some(Some(json!({
            "max_subscriptions": 12,
            "max_filters": 10,
            "max_limit": 300,
            "default_limit": 40,
        }))),
    )
    .await;
}

#[tokio::test]
async fn nip11_omits_limitation_when_limits_are_hidden() {
    check_nip11(Nip11Mode::WithoutLimits, Some(None)).await;
}

#[tokio::test]
async fn nip11_is_absent_when_not_served() {
    check_nip11(Nip11Mode::NotServed, None).await;
}

#[tokio::test]
async fn client_receives_seeded_events_then_eose() {
    let relay = TestRelay::start(TestRelayConfig::default()).await.unwrap();
    let seeded = notes(5);
    assert_eq!(relay.seed(seeded.clone()).await.unwrap(), 5);
    assert_eq!(relay.count().await.unwrap(), 5);

    let mut probe = Probe::connect(&relay.url()).await;
    probe
        .req("all", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    let (events, end) = probe.until_end("all").await;
    assert_eq!(end, End::Eose);
    let got: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
    let want: BTreeSet<EventId> = seeded.iter().map(|e| e.id).collect();
    assert_eq!(got, want);
    assert_eq!(relay.event_ids().await.unwrap(), want);
    assert_eq!(relay.websocket_connections_accepted(), 1);
    assert_eq!(relay.open_websocket_connections(), 1);
}

#[tokio::test]
async fn a_subscription_past_max_subscriptions_is_closed_as_rate_limited() {
    let relay = TestRelay::start(TestRelayConfig {
        max_subscriptions: 2,
        ..TestRelayConfig::default()
    })
    .await
    .unwrap();
    let mut probe = Probe::connect(&relay.url()).await;
    for id in ["s1", "s2"] {
        probe
            .req(id, vec![Filter::new().kind(Kind::TextNote)])
            .await;
        assert_eq!(probe.until_end(id).await.1, End::Eose);
    }
    probe
        .req("s3", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    assert_eq!(
        probe.until_end("s3").await.1,
        End::Closed("rate-limited: too many REQs".to_owned())
    );
}

#[tokio::test]
async fn default_filter_limit_caps_a_filter_without_limit() {
    let relay = TestRelay::start(TestRelayConfig {
        default_filter_limit: 3,
        max_filter_limit: Some(5),
        ..TestRelayConfig::default()
    })
    .await
    .unwrap();
    let seeded = notes(10);
    relay.seed(seeded.clone()).await.unwrap();
    let mut probe = Probe::connect(&relay.url()).await;

    probe
        .req("default", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    let (events, end) = probe.until_end("default").await;
    assert_eq!(end, End::Eose);
    // Newest first: the last three seeded.
    let newest: Vec<EventId> = seeded.iter().rev().take(3).map(|e| e.id).collect();
    assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), newest);

    probe
        .req(
            "capped",
            vec![Filter::new().kind(Kind::TextNote).limit(100)],
        )
        .await;
    assert_eq!(probe.until_end("capped").await.0.len(), 5);
}

#[tokio::test]
async fn published_events_reach_live_subscribers() {
    let relay = TestRelay::start(TestRelayConfig::default()).await.unwrap();
    let mut probe = Probe::connect(&relay.url()).await;
    probe
        .req("live", vec![Filter::new().kind(Kind::TextNote).limit(0)])
        .await;
    assert_eq!(probe.until_end("live").await, (Vec::new(), End::Eose));

    let event = notes(1).remove(0);
    assert!(relay.publish(event.clone()).await.unwrap());
    assert_eq!(probe.next_event("live").await.id, event.id);
    assert!(
        !relay.publish(event).await.unwrap(),
        "a duplicate is not stored again"
    );
}

/// Seeds, stops (the client sees a disconnect), restarts on the same URL and checks that a
/// new client still gets every event.
async fn check_stop_and_restart(store: StoreKind) {
    let mut relay = TestRelay::start(TestRelayConfig {
        store,
        ..TestRelayConfig::default()
    })
    .await
    .expect("relay starts");
    let url = relay.url();
    let seeded = notes(4);
    relay.seed(seeded.clone()).await.expect("seeded");

    let mut probe = Probe::connect(&url).await;
    relay.stop().await.expect("stopped");
    probe.until_disconnected().await;
    assert!(!relay.is_running());
    assert!(
        TcpStream::connect(relay.addr()).await.is_err(),
        "port closed"
    );
    assert_eq!(relay.open_websocket_connections(), 0);
    assert!(matches!(
        relay.publish(notes(1).remove(0)).await,
        Err(grasp_sync_testkit::TestkitError::NotRunning)
    ));

    relay.restart().await.expect("restarted");
    assert_eq!(relay.url(), url);
    let mut again = Probe::connect(&url).await;
    again
        .req("all", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    let (events, end) = again.until_end("all").await;
    assert_eq!(end, End::Eose);
    assert_eq!(events.len(), seeded.len());
    assert_eq!(relay.websocket_connections_accepted(), 2);
    assert!(matches!(
        relay.restart().await,
        Err(grasp_sync_testkit::TestkitError::AlreadyRunning)
    ));
}

#[tokio::test]
async fn stop_disconnects_clients_and_restart_keeps_memory_events() {
    check_stop_and_restart(StoreKind::Memory).await;
}

#[tokio::test]
async fn stop_disconnects_clients_and_restart_keeps_lmdb_events() {
    check_stop_and_restart(StoreKind::Lmdb).await;
}

#[tokio::test]
async fn negentropy_reconciles_against_a_test_relay() {
    let relay = TestRelay::start(TestRelayConfig::default()).await.unwrap();
    let seeded = notes(6);
    relay.seed(seeded.clone()).await.unwrap();
    let probe = Probe::connect(&relay.url()).await;
    let have: Vec<(EventId, Timestamp)> =
        seeded[..2].iter().map(|e| (e.id, e.created_at)).collect();
    let opts = SyncOptions::default().dry_run();
    let result = tokio::time::timeout(
        DEADLINE,
        probe
            .relay
            .sync_with_items(Filter::new().kind(Kind::TextNote), have, &opts),
    )
    .await
    .unwrap()
    .unwrap();
    let want: std::collections::HashSet<EventId> = seeded[2..].iter().map(|e| e.id).collect();
    assert_eq!(result.remote, want);
}

#[tokio::test]
async fn dropping_a_relay_closes_its_port_and_connections() {
    let relay = TestRelay::start(TestRelayConfig::default()).await.unwrap();
    let addr = relay.addr();
    let mut probe = Probe::connect(&relay.url()).await;
    drop(relay);
    probe.until_disconnected().await;
    // The accept loop is aborted on drop and ends at its next poll.
    tokio::time::timeout(DEADLINE, async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("port closed before the deadline");
}

#[tokio::test]
async fn an_ids_request_stays_open_and_holds_a_slot_only_while_ids_are_missing() {
    let relay = TestRelay::start(TestRelayConfig {
        max_subscriptions: 1,
        ..TestRelayConfig::default()
    })
    .await
    .unwrap();
    let seeded = notes(2);
    relay.seed(seeded[..1].to_vec()).await.unwrap();
    let mut probe = Probe::connect(&relay.url()).await;

    // Every ID found: EOSE then CLOSED with an empty reason, and no slot is held.
    probe
        .req("found", vec![Filter::new().id(seeded[0].id)])
        .await;
    assert_eq!(probe.until_end("found").await.1, End::Eose);
    assert_eq!(probe.until_end("found").await.1, End::Closed(String::new()));

    // One ID missing: EOSE only, and the subscription takes the one slot.
    let both = Filter::new().ids([seeded[0].id, seeded[1].id]);
    probe.req("missing", vec![both]).await;
    let (events, end) = probe.until_end("missing").await;
    assert_eq!((events.len(), end), (1, End::Eose));
    probe
        .req("next", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    assert_eq!(
        probe.until_end("next").await.1,
        End::Closed("rate-limited: too many REQs".to_owned())
    );
}
