//! Query quirks on the wire: what the rust-nostr relay builder does with `limit: 0`, and each
//! quirk profile's answers (oldest first without `limit`, newest first with it, exclusive
//! `until`, a per-REQ cap summed over filters, no EOSE for `limit: 0` while live events still
//! arrive), counted like the relay's own events.

use grasp_sync_testkit::{
    QueryQuirks, RefusalKind, ServeById, StoreKind, StrictLimits, TestRelay, TestRelayConfig,
};
use nostr_sdk::prelude::*;
use serde_json::{Value, json};

use crate::support::{End, Probe, Raw, fetch_nip11, notes};

/// `created_at` of the first note `notes` builds; note `i` is one second later per step.
const BASE: u64 = 1_700_000_000;
/// Notes seeded into each relay.
const SEEDED: usize = 300;

/// Starts `config` with `SEEDED` notes; returns the relay and the notes, oldest first.
async fn seeded(config: TestRelayConfig) -> (TestRelay, Vec<Event>) {
    let relay = TestRelay::start(config).await.expect("relay starts");
    let events = notes(SEEDED);
    relay.seed(events.clone()).await.expect("notes seeded");
    (relay, events)
}

/// The events a REQ's stored phase delivered on `client`, in order, up to its EOSE; fails on
/// any other frame.
async fn stored(client: &mut Raw, id: &str) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let frame = client.recv().await;
        match (frame[0].as_str(), frame[1].as_str()) {
            (Some("EVENT"), Some(sub)) if sub == id => events.push(frame[2].clone()),
            (Some("EOSE"), Some(sub)) if sub == id => return events,
            _ => panic!("unexpected frame {frame} before EOSE of {id}"),
        }
    }
}

/// The `created_at` offsets from `BASE` of `events`, in order.
fn offsets(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["created_at"].as_u64().expect("created_at") - BASE)
        .collect()
}

/// Offsets `first..=last` counting down when `first > last`.
fn run(first: u64, last: u64) -> Vec<u64> {
    if first <= last {
        (first..=last).collect()
    } else {
        (last..=first).rev().collect()
    }
}

/// A kind-1 note by a new key at `BASE + offset`, for publishing live.
fn live_note(offset: u64) -> Event {
    EventBuilder::text_note("live")
        .custom_created_at(Timestamp::from_secs(BASE + offset))
        .sign_with_keys(&Keys::generate())
        .expect("note signs")
}

async fn check_limit_zero_on_the_relay_builder(store: StoreKind) {
    let (relay, _) = seeded(TestRelayConfig {
        store,
        ..TestRelayConfig::default()
    })
    .await;
    let mut client = Raw::connect(&relay.url()).await;
    client
        .exchange(
            json!(["REQ", "live", { "kinds": [1], "limit": 0 }]),
            json!(["EOSE", "live"]),
        )
        .await;
    let event = live_note(1_000);
    assert!(relay.publish(event.clone()).await.expect("event published"));
    let frame = client.recv().await;
    assert_eq!(
        (&frame[0], &frame[1], &frame[2]["id"]),
        (&json!("EVENT"), &json!("live"), &json!(event.id.to_hex()))
    );
}

/// What the proxy relies on: the rust-nostr relay builder answers a REQ whose every filter
/// has `limit: 0` with no stored event and EOSE at once, keeps the subscription and then
/// sends matching live events, whatever the store.
#[tokio::test]
async fn the_relay_builder_answers_limit_zero_with_eose_at_once_then_live_events() {
    check_limit_zero_on_the_relay_builder(StoreKind::Memory).await;
    check_limit_zero_on_the_relay_builder(StoreKind::Lmdb).await;
}

#[tokio::test]
async fn oldest_first_without_limit_like_sends_the_oldest_250_oldest_first() {
    let (relay, seeded) = seeded(TestRelayConfig::oldest_first_without_limit_like()).await;
    let mut probe = Probe::connect(&relay.url()).await;
    probe
        .req("page", vec![Filter::new().kind(Kind::TextNote)])
        .await;
    let (events, end) = probe.until_end("page").await;
    assert_eq!(end, End::Eose);
    let ids: Vec<EventId> = events.iter().map(|e| e.id).collect();
    let oldest: Vec<EventId> = seeded[..250].iter().map(|e| e.id).collect();
    assert_eq!(ids, oldest, "the oldest 250, oldest first");

    // The subscription stays open at the relay for live events.
    let event = live_note(5_000);
    assert!(relay.publish(event.clone()).await.unwrap());
    assert_eq!(probe.next_event("page").await.id, event.id);
    assert_eq!(relay.strict_stats().events_sent(), 251);
}

#[tokio::test]
async fn oldest_first_without_limit_like_still_sends_an_explicit_limit_newest_first() {
    let (relay, _) = seeded(TestRelayConfig::oldest_first_without_limit_like()).await;
    let mut client = Raw::connect(&relay.url()).await;
    client
        .send(json!(["REQ", "newest", { "kinds": [1], "limit": 100 }]))
        .await;
    assert_eq!(offsets(&stored(&mut client, "newest").await), run(299, 200));
}

#[tokio::test]
async fn exclusive_until_like_leaves_out_the_until_second() {
    let (relay, _) = seeded(TestRelayConfig::exclusive_until_like()).await;
    let mut client = Raw::connect(&relay.url()).await;
    let until = BASE + 199;
    client
        .send(json!(["REQ", "page", { "kinds": [1], "until": until, "limit": 50 }]))
        .await;
    assert_eq!(offsets(&stored(&mut client, "page").await), run(198, 149));

    // The same REQ on a relay reading `until` inclusively starts at the until second.
    let (inclusive, _) = seeded(TestRelayConfig::default()).await;
    let mut client = Raw::connect(&inclusive.url()).await;
    client
        .send(json!(["REQ", "page", { "kinds": [1], "until": until, "limit": 50 }]))
        .await;
    assert_eq!(offsets(&stored(&mut client, "page").await), run(199, 150));
}

#[tokio::test]
async fn exclusive_until_like_caps_every_filter_at_120() {
    let (relay, _) = seeded(TestRelayConfig::exclusive_until_like()).await;
    let mut client = Raw::connect(&relay.url()).await;
    client.send(json!(["REQ", "a", { "kinds": [1] }])).await;
    assert_eq!(offsets(&stored(&mut client, "a").await), run(299, 180));
    client
        .send(json!(["REQ", "b", { "kinds": [1], "limit": 500 }]))
        .await;
    assert_eq!(stored(&mut client, "b").await.len(), 120);
}

#[tokio::test]
async fn per_req_cap_like_cuts_three_filters_to_150_events_together() {
    let (relay, _) = seeded(TestRelayConfig::per_req_cap_like()).await;
    let thirds = json!([
        { "kinds": [1], "until": BASE + 99 },
        { "kinds": [1], "since": BASE + 100, "until": BASE + 199 },
        { "kinds": [1], "since": BASE + 200 },
    ]);
    let mut client = Raw::connect(&relay.url()).await;
    // Each filter alone gets all of its 100 matches.
    for (i, filter) in thirds.as_array().unwrap().iter().enumerate() {
        let id = format!("alone{i}");
        client.send(json!(["REQ", id, filter])).await;
        assert_eq!(stored(&mut client, &id).await.len(), 100);
    }
    // Together they get the newest 150 of their 300.
    let mut req = vec![json!("REQ"), json!("together")];
    req.extend(thirds.as_array().unwrap().iter().cloned());
    client.send(Value::Array(req)).await;
    assert_eq!(
        offsets(&stored(&mut client, "together").await),
        run(299, 150)
    );
}

#[tokio::test]
async fn quirks_mixed_combines_every_quirk() {
    let (relay, _) = seeded(TestRelayConfig::quirks_mixed()).await;
    let mut client = Raw::connect(&relay.url()).await;
    // Oldest first without limit, cut to 200 for the REQ.
    client
        .send(json!(["REQ", "oldest", { "kinds": [1] }]))
        .await;
    assert_eq!(offsets(&stored(&mut client, "oldest").await), run(0, 199));
    // Exclusive until with a limit, newest first.
    client
        .send(json!(["REQ", "page", { "kinds": [1], "until": BASE + 100, "limit": 10 }]))
        .await;
    assert_eq!(offsets(&stored(&mut client, "page").await), run(99, 90));
    // 20 subscriptions, the 21st refused with strfry's NOTICE.
    for i in 2..20 {
        let id = format!("s{i}");
        client
            .send(json!(["REQ", id, { "kinds": [1], "limit": 1 }]))
            .await;
        assert_eq!(stored(&mut client, &id).await.len(), 1);
    }
    client
        .exchange(
            json!(["REQ", "over", { "kinds": [1], "limit": 1 }]),
            json!(["NOTICE", "ERROR: too many concurrent REQs"]),
        )
        .await;
    // NIP-77 refused.
    client
        .exchange(
            json!(["NEG-OPEN", "n", { "kinds": [1] }, "6100000200"]),
            json!(["NOTICE", "ERROR: bad msg: negentropy disabled"]),
        )
        .await;
    let stats = relay.strict_stats();
    assert_eq!(stats.refusals_of(RefusalKind::TooManySubscriptions), 1);
    assert_eq!(stats.refusals_of(RefusalKind::NegentropyDisabled), 1);
}

#[tokio::test]
async fn quirks_mixed_sends_no_eose_for_limit_zero_but_live_events_arrive() {
    let (relay, _) = seeded(TestRelayConfig::quirks_mixed()).await;
    let mut client = Raw::connect(&relay.url()).await;
    client
        .send(json!(["REQ", "live", { "kinds": [1], "limit": 0 }]))
        .await;
    // The relay answers a connection's REQs in order: by this REQ's EOSE it holds "live", and
    // `stored` fails on any other frame, an EOSE of "live" included.
    client.send(json!(["REQ", "sync", { "kinds": [7] }])).await;
    assert!(stored(&mut client, "sync").await.is_empty());
    let event = live_note(5_000);
    assert!(relay.publish(event.clone()).await.unwrap());
    let frame = client.recv().await;
    assert_eq!(
        (&frame[0], &frame[1], &frame[2]["id"]),
        (&json!("EVENT"), &json!("live"), &json!(event.id.to_hex()))
    );
    // Nor afterwards: a later REQ's EOSE comes after anything the relay sent for "live".
    client
        .send(json!(["REQ", "later", { "kinds": [1], "limit": 1 }]))
        .await;
    assert_eq!(stored(&mut client, "later").await.len(), 1);
}

#[tokio::test]
async fn an_event_the_proxy_answers_twice_on_a_connection_counts_as_a_duplicate() {
    let (relay, seeded) = seeded(TestRelayConfig::per_req_cap_like()).await;
    let mut client = Raw::connect(&relay.url()).await;
    let id = seeded[7].id.to_hex();
    for sub in ["first", "second"] {
        client.send(json!(["REQ", sub, { "ids": [id] }])).await;
        let events = stored(&mut client, sub).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["id"], json!(id));
    }
    let stats = relay.strict_stats();
    assert_eq!(stats.events_sent(), 2);
    assert_eq!(stats.duplicate_events(), 1);
}

#[tokio::test]
async fn events_the_proxy_answers_are_withheld_by_id_like_the_relays() {
    let serve = ServeById::new(0);
    let relay = TestRelay::start(TestRelayConfig::strict(StrictLimits {
        serve_by_id: Some(serve.clone()),
        quirks: QueryQuirks {
            exclusive_until: true,
            ..QueryQuirks::default()
        },
        ..StrictLimits::default()
    }))
    .await
    .unwrap();
    let events = notes(5);
    relay.seed(events.clone()).await.unwrap();
    let ids: Vec<String> = events.iter().map(|e| e.id.to_hex()).collect();
    let mut client = Raw::connect(&relay.url()).await;
    client.send(json!(["REQ", "none", { "ids": ids }])).await;
    assert!(stored(&mut client, "none").await.is_empty());
    serve.set(100);
    client.send(json!(["REQ", "all", { "ids": ids }])).await;
    assert_eq!(stored(&mut client, "all").await.len(), 5);
    assert_eq!(relay.strict_stats().events_sent(), 5);
}

/// Asserts a profile's NIP-11 `limitation` and that it lists no NIP-77.
async fn check_nip11(config: TestRelayConfig, limitation: Value) {
    let relay = TestRelay::start(config).await.expect("profile starts");
    let (status, body) = fetch_nip11(&relay.nip11_url()).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).expect("NIP-11 is JSON");
    assert_eq!(doc["limitation"], limitation);
    let nips = doc["supported_nips"].as_array().expect("supported_nips");
    assert!(!nips.contains(&json!(77)), "{nips:?}");
}

#[tokio::test]
async fn quirk_profiles_hide_their_quirks_and_do_not_list_nip77() {
    check_nip11(
        TestRelayConfig::oldest_first_without_limit_like(),
        json!({ "max_subscriptions": 500 }),
    )
    .await;
    check_nip11(TestRelayConfig::exclusive_until_like(), Value::Null).await;
    check_nip11(
        TestRelayConfig::per_req_cap_like(),
        json!({ "max_subscriptions": 500, "max_limit": 500, "default_limit": 500 }),
    )
    .await;
    check_nip11(TestRelayConfig::quirks_mixed(), Value::Null).await;
}
