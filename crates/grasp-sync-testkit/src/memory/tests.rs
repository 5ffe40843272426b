//! The memory network as the engine's transport: answers in order then EOSE, live events
//! until the connection is cut, every start counted at its virtual instant, and hooks that
//! answer in the relay's place.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{RelayConnection, RelayConnector, RelayInbound};
use grasp_sync_model::RelayUrl;
use nostr::{EventBuilder, Filter, Keys, Kind, SubscriptionId};

use super::{MemoryNetwork, MessageFate, NetworkHooks};
use crate::{RefusalKind, SimulatedRelay, StartKind, StrictLimits, TestRelayConfig};

const URL: &str = "ws://relay.memory";

fn notes(n: u64) -> Vec<nostr::Event> {
    let keys = Keys::generate();
    (0..n)
        .map(|i| {
            EventBuilder::text_note(format!("note {i}"))
                .custom_created_at(nostr::Timestamp::from_secs(1_700_000_000 + i))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect()
}

async fn dial(network: &MemoryNetwork) -> RelayConnection {
    let url = RelayUrl::parse(URL).expect("url");
    network
        .connect(&url, Duration::from_secs(1))
        .await
        .expect("connect")
}

fn notes_filter() -> Vec<Filter> {
    vec![Filter::new().kind(Kind::TextNote)]
}

#[tokio::test(start_paused = true)]
async fn a_req_gets_the_stored_events_then_eose_then_published_ones_until_cut() {
    let mut events = notes(3);
    let late = events.pop().expect("late");
    let network = MemoryNetwork::new(vec![(
        URL.to_owned(),
        SimulatedRelay::new(TestRelayConfig::default(), events),
    )]);
    let mut connection = dial(&network).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = tokio::time::Instant::now();
    connection
        .session
        .subscribe(SubscriptionId::new("a"), notes_filter())
        .await
        .expect("subscribe");
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(connection.inbound.recv().await.expect("inbound"));
    }
    assert!(matches!(received[0], RelayInbound::Event { .. }));
    assert!(matches!(received[1], RelayInbound::Event { .. }));
    assert!(matches!(received[2], RelayInbound::Eose(_)));
    network.publish(URL, late.clone());
    match connection.inbound.recv().await.expect("live event") {
        RelayInbound::Event { event, .. } => assert_eq!(event.id, late.id),
        other => panic!("expected the published event, got {other:?}"),
    }
    network.kill(URL);
    assert_eq!(
        connection.inbound.recv().await,
        Some(RelayInbound::Disconnected)
    );
    assert!(!connection.session.is_connected());
    let stats = network.stats(URL);
    assert_eq!(stats.connections(), 1);
    assert_eq!(stats.starts.len(), 1);
    assert_eq!(stats.starts[0].kind, StartKind::Req);
    assert_eq!(stats.starts[0].at, started);
    assert_eq!(stats.events_sent(), 3);
    let url = RelayUrl::parse(URL).expect("url");
    assert!(network.connect(&url, Duration::from_secs(1)).await.is_err());
    network.revive(URL);
    assert!(network.connect(&url, Duration::from_secs(1)).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn the_relays_limits_refuse_and_are_counted() {
    let config = TestRelayConfig::strict(StrictLimits {
        queries_per_minute: Some(1),
        ..StrictLimits::default()
    });
    let network = MemoryNetwork::new(vec![(
        URL.to_owned(),
        SimulatedRelay::new(config, notes(1)),
    )]);
    let mut connection = dial(&network).await;
    for id in ["a", "b"] {
        connection
            .session
            .subscribe(SubscriptionId::new(id), notes_filter())
            .await
            .expect("subscribe");
    }
    let mut closed = None;
    while closed.is_none() {
        if let RelayInbound::Closed { message, .. } =
            connection.inbound.recv().await.expect("inbound")
        {
            closed = Some(message);
        }
    }
    assert_eq!(closed.as_deref(), Some("rate-limited: too many queries"));
    let stats = network.stats(URL);
    assert_eq!(stats.refusals_of(RefusalKind::TooManyQueries), 1);
    assert_eq!(stats.starts[1].refused, Some(RefusalKind::TooManyQueries));
}

/// Answers every REQ in the relay's place.
struct Refuser;

impl NetworkHooks for Refuser {
    fn message(&self, _relay: &str, _connection: usize, text: &str) -> MessageFate {
        if text.starts_with("[\"REQ\"") {
            MessageFate::Answer(vec![r#"["CLOSED","a","error: not now"]"#.to_owned()])
        } else {
            MessageFate::Read
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_hook_answers_in_the_relays_place() {
    let network = MemoryNetwork::with_hooks(
        vec![(
            URL.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), notes(2)),
        )],
        Arc::new(Refuser),
    );
    let mut connection = dial(&network).await;
    connection
        .session
        .subscribe(SubscriptionId::new("a"), notes_filter())
        .await
        .expect("subscribe");
    match connection.inbound.recv().await.expect("inbound") {
        RelayInbound::Closed { message, .. } => assert_eq!(message, "error: not now"),
        other => panic!("expected the hook's CLOSED, got {other:?}"),
    }
    // The relay never read it.
    assert!(network.stats(URL).starts.is_empty());
}

#[tokio::test(start_paused = true)]
async fn open_connections_counts_the_connections_not_yet_closed_or_cut() {
    let network = MemoryNetwork::new(vec![(
        URL.to_owned(),
        SimulatedRelay::new(TestRelayConfig::default(), notes(1)),
    )]);
    assert_eq!(network.open_connections(URL), 0);
    let first = dial(&network).await;
    let second = dial(&network).await;
    assert_eq!(network.open_connections(URL), 2);
    first.session.disconnect().await;
    assert_eq!(network.open_connections(URL), 1);
    network.kill(URL);
    assert_eq!(network.open_connections(URL), 0);
    assert!(!second.session.is_connected());
    assert_eq!(network.stats(URL).connections(), 2);
    assert_eq!(network.open_connections("ws://unknown.memory"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_reads_auth_relays_challenge_is_answered_and_reported_after_the_refusal() {
    let config = TestRelayConfig {
        auth: crate::RelayAuth::Reads,
        ..TestRelayConfig::default()
    };
    let network = MemoryNetwork::new(vec![(
        URL.to_owned(),
        SimulatedRelay::new(config, notes(1)),
    )]);
    network.answer_auth_with(Keys::generate());
    let mut connection = dial(&network).await;
    connection
        .session
        .subscribe(SubscriptionId::new("a"), notes_filter())
        .await
        .expect("subscribe");
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(connection.inbound.recv().await.expect("inbound"));
    }
    assert_eq!(received[0], RelayInbound::AuthChallenge);
    assert!(
        matches!(&received[1], RelayInbound::Closed { message, .. } if message == "auth-required: you must auth"),
        "{received:?}"
    );
    assert_eq!(received[2], RelayInbound::Authenticated);
    // Sent again after the AUTH, the REQ is served.
    connection
        .session
        .subscribe(SubscriptionId::new("a"), notes_filter())
        .await
        .expect("subscribe");
    assert!(matches!(
        connection.inbound.recv().await,
        Some(RelayInbound::Event { .. })
    ));
    assert!(matches!(
        connection.inbound.recv().await,
        Some(RelayInbound::Eose(_))
    ));
    let stats = network.stats(URL);
    assert_eq!(
        stats.total_refusals(),
        0,
        "the builder refused, not the proxy"
    );
    assert_eq!(stats.starts.len(), 2);
}
