//! The simulated relay answers as the strict relay does: pages then EOSE, live events until CLOSE,
//! its refusal texts past a limit, and NEG-OPENs admitted with every match.

use nostr::{
    ClientMessage, EventBuilder, Filter, JsonUtil, Keys, Kind, RelayMessage, SubscriptionId,
};
use tokio::time::Instant;

use super::SimulatedRelay;
use crate::relay::TestRelayConfig;
use crate::relay::strict::{RefusalKind, StartKind};

fn notes(n: usize) -> Vec<nostr::Event> {
    let keys = Keys::generate();
    (0..n)
        .map(|i| {
            EventBuilder::text_note(format!("note {i}"))
                .custom_created_at(nostr::Timestamp::from_secs(1_700_000_000 + i as u64))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect()
}

fn req(id: &str, filter: Filter) -> String {
    ClientMessage::req(SubscriptionId::new(id), vec![filter]).as_json()
}

#[test]
fn an_accepted_req_gets_its_page_then_eose_and_later_events_until_closed() {
    let config = TestRelayConfig {
        default_filter_limit: 3,
        ..TestRelayConfig::default()
    };
    let mut events = notes(5);
    let late = events.pop().expect("late");
    let mut relay = SimulatedRelay::new(config, events);
    let mut connection = relay.connect();
    let now = Instant::now();

    let reply =
        connection.handle_client(&relay, now, &req("a", Filter::new().kind(Kind::TextNote)));
    assert_eq!(reply.start, Some(StartKind::Req));
    assert_eq!(reply.refusal, None);
    // The relay's page of 3 newest, then EOSE.
    assert_eq!(reply.frames.len(), 4);
    assert!(matches!(
        RelayMessage::from_json(&reply.frames[3]).expect("frame"),
        RelayMessage::EndOfStoredEvents(_)
    ));

    relay.store(late.clone());
    assert_eq!(connection.handle_published(&relay, &late).len(), 1);
    connection.handle_client(
        &relay,
        now,
        &ClientMessage::close(SubscriptionId::new("a")).as_json(),
    );
    assert!(connection.handle_published(&relay, &late).is_empty());
}

#[test]
fn a_req_past_the_subscription_budget_is_refused_with_the_relays_text() {
    let config = TestRelayConfig {
        max_subscriptions: 1,
        ..TestRelayConfig::default()
    };
    let relay = SimulatedRelay::new(config, notes(1));
    let mut connection = relay.connect();
    let now = Instant::now();
    let filter = Filter::new().kind(Kind::TextNote);
    assert_eq!(
        connection
            .handle_client(&relay, now, &req("a", filter.clone()))
            .refusal,
        None
    );
    let refused = connection.handle_client(&relay, now, &req("b", filter));
    assert_eq!(refused.refusal, Some(RefusalKind::TooManySubscriptions));
    assert_eq!(
        refused.frames,
        vec![
            RelayMessage::closed(SubscriptionId::new("b"), "rate-limited: too many REQs").as_json()
        ]
    );
    assert_eq!(connection.open(), (1, 0));
}

#[test]
fn a_neg_open_is_admitted_and_the_reconciliation_sees_every_match_ignoring_limits() {
    let relay = SimulatedRelay::new(TestRelayConfig::default(), notes(4));
    let mut connection = relay.connect();
    let filter = Filter::new().kind(Kind::TextNote).limit(1);
    let open = ClientMessage::neg_open(SubscriptionId::new("n"), filter.clone(), "61".to_owned());
    let reply = connection.handle_client(&relay, Instant::now(), &open.as_json());
    assert!(reply.negentropy_admitted);
    assert_eq!(reply.start, Some(StartKind::NegOpen));
    assert_eq!(relay.matching(&filter).len(), 4);
}

/// The challenge of an `AUTH` frame.
fn challenge_of(frame: &str) -> String {
    match RelayMessage::from_json(frame).expect("frame") {
        RelayMessage::Auth { challenge } => challenge.into_owned(),
        other => panic!("expected AUTH, got {other:?}"),
    }
}

/// An `AUTH` message answering `challenge`, signed by a fresh key.
fn auth(challenge: &str) -> (nostr::EventId, String) {
    let relay = nostr::RelayUrl::parse("ws://relay.memory").expect("url");
    let event = EventBuilder::auth(challenge, relay)
        .sign_with_keys(&Keys::generate())
        .expect("sign");
    (event.id, ClientMessage::auth(event).as_json())
}

#[test]
fn with_reads_auth_a_req_is_refused_with_a_fresh_challenge_until_an_answer_is_accepted() {
    let config = TestRelayConfig {
        auth: crate::relay::RelayAuth::Reads,
        ..TestRelayConfig::default()
    };
    let relay = SimulatedRelay::new(config, notes(1));
    let mut connection = relay.connect();
    let now = Instant::now();
    let notes_filter = || Filter::new().kind(Kind::TextNote);

    // The builder's refusal, which the proxy in front of it let through.
    let first = connection.handle_client(&relay, now, &req("a", notes_filter()));
    assert_eq!(first.start, Some(StartKind::Req));
    assert_eq!(first.refusal, None);
    assert_eq!(first.frames.len(), 2);
    assert_eq!(
        first.frames[1],
        r#"["CLOSED","a","auth-required: you must auth"]"#
    );
    assert!(!connection.holds("a"));
    let challenge = challenge_of(&first.frames[0]);
    // Each refusal brings a fresh challenge.
    let second = connection.handle_client(&relay, now, &req("b", notes_filter()));
    assert_ne!(challenge_of(&second.frames[0]), challenge);

    // An answer to a challenge never sent is refused; one that was sent is accepted.
    let (id, wrong) = auth("not-the-challenge");
    let refused = connection.handle_client(&relay, now, &wrong);
    assert_eq!(
        RelayMessage::from_json(&refused.frames[0]).expect("ok"),
        RelayMessage::ok(id, false, "auth-required: received invalid challenge")
    );
    let (id, answer) = auth(&challenge);
    let accepted = connection.handle_client(&relay, now, &answer);
    assert_eq!(
        RelayMessage::from_json(&accepted.frames[0]).expect("ok"),
        RelayMessage::ok(id, true, "")
    );

    // Served from now on: the note, then EOSE.
    let served = connection.handle_client(&relay, now, &req("c", notes_filter()));
    assert_eq!(served.frames.len(), 2);
    assert!(connection.holds("c"));
}

#[test]
fn with_reads_auth_a_neg_open_is_admitted_without_authentication() {
    let config = TestRelayConfig {
        auth: crate::relay::RelayAuth::Reads,
        ..TestRelayConfig::default()
    };
    let relay = SimulatedRelay::new(config, notes(1));
    let mut connection = relay.connect();
    let open = ClientMessage::neg_open(
        SubscriptionId::new("n"),
        Filter::new().kind(Kind::TextNote),
        "61".to_owned(),
    );
    let reply = connection.handle_client(&relay, Instant::now(), &open.as_json());
    assert!(reply.negentropy_admitted);
    assert!(reply.frames.is_empty());
}
