//! Sessions in shared pools, against real relays: sessions of different relays share a pool, a
//! relay's second session takes another, each session reads only its own relay and counts only
//! its own bytes, and a session that ends, by `disconnect` or by being dropped, frees its seat
//! for the relay's next session.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, EventBuilder, Filter, Keys, Kind, SubscriptionId};
use tokio::sync::mpsc;

use crate::transport::sdk::{SdkConnector, SdkConnectorOptions};
use crate::transport::{RelayConnection, RelayConnector, RelayInbound};

const DEADLINE: Duration = Duration::from_secs(10);

fn note(keys: &Keys, text: &str) -> Event {
    EventBuilder::text_note(text)
        .sign_with_keys(keys)
        .expect("sign")
}

/// A relay holding one note.
async fn relay_with(event: Event) -> TestRelay {
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    relay.seed(vec![event]).await.expect("seed");
    relay
}

async fn connect(connector: &SdkConnector, relay: &TestRelay) -> RelayConnection {
    let url = RelayUrl::parse(&relay.url()).expect("relay url");
    connector.connect(&url, DEADLINE).await.expect("connect")
}

/// The IDs of the text notes `connection`'s relay sends for one REQ, up to its EOSE.
async fn notes_of(connection: &mut RelayConnection, name: &str) -> Vec<nostr::EventId> {
    let id = SubscriptionId::new(name);
    connection
        .session
        .subscribe(id.clone(), vec![Filter::new().kind(Kind::TextNote)])
        .await
        .expect("req");
    read_until_eose(&mut connection.inbound, &id).await
}

async fn read_until_eose(
    inbound: &mut mpsc::Receiver<RelayInbound>,
    marker: &SubscriptionId,
) -> Vec<nostr::EventId> {
    let read = async {
        let mut ids = Vec::new();
        while let Some(message) = inbound.recv().await {
            match message {
                RelayInbound::Event { event, .. } => ids.push(event.id),
                RelayInbound::Eose(id) if &id == marker => return ids,
                _ => {}
            }
        }
        panic!("inbound ended before the eose");
    };
    tokio::time::timeout(DEADLINE, read)
        .await
        .expect("eose in time")
}

/// Seats taken across the connector's pools.
async fn seats(connector: &SdkConnector) -> usize {
    let pools = connector.pools.pools.lock().await;
    pools.iter().map(|pool| pool.seated().len()).sum()
}

/// Waits until every seat is free: a seat given up from a destructor is freed in a task of its
/// own, once its relay has left the pool.
async fn all_seats_freed(connector: &SdkConnector) {
    tokio::time::timeout(DEADLINE, async {
        while seats(connector).await > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("every seat is freed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_different_relays_share_a_pool_and_a_relays_second_session_takes_another() {
    let keys = Keys::generate();
    let (note_a, note_b) = (note(&keys, "on a"), note(&keys, "on b"));
    let relay_a = relay_with(note_a.clone()).await;
    let relay_b = relay_with(note_b.clone()).await;
    let connector = SdkConnector::new(SdkConnectorOptions::default())
        .with_address_policy(crate::AddressPolicy::allow_all());

    let mut first_a = connect(&connector, &relay_a).await;
    let mut on_b = connect(&connector, &relay_b).await;
    assert_eq!(connector.pool_count().await, 1, "two relays, one pool");
    let mut second_a = connect(&connector, &relay_a).await;
    assert_eq!(connector.pool_count().await, 2, "a relay's second session");

    assert_eq!(notes_of(&mut first_a, "first").await, vec![note_a.id]);
    let before = second_a.session.wire_bytes();
    assert_eq!(notes_of(&mut on_b, "b").await, vec![note_b.id]);
    assert_eq!(
        second_a.session.wire_bytes(),
        before,
        "another session's traffic is not counted"
    );
    assert_eq!(notes_of(&mut second_a, "second").await, vec![note_a.id]);
    assert!(on_b.session.wire_bytes().sent > 0);

    // The first session leaves; the relay's next session takes its seat, counting from zero.
    first_a.session.disconnect().await;
    let mut third_a = connect(&connector, &relay_a).await;
    assert_eq!(
        connector.pool_count().await,
        2,
        "the freed seat is taken again"
    );
    assert_eq!(third_a.session.wire_bytes().sent, 0);
    assert_eq!(notes_of(&mut third_a, "third").await, vec![note_a.id]);
    assert_eq!(
        notes_of(&mut second_a, "again").await,
        vec![note_a.id],
        "the other session of the relay is untouched"
    );
    assert_eq!(notes_of(&mut on_b, "b again").await, vec![note_b.id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_session_leaves_its_pool_and_frees_its_seat() {
    let keys = Keys::generate();
    let the_note = note(&keys, "held");
    let relay = relay_with(the_note.clone()).await;
    let connector = SdkConnector::new(SdkConnectorOptions::default())
        .with_address_policy(crate::AddressPolicy::allow_all());

    let RelayConnection { session, inbound } = connect(&connector, &relay).await;
    let pool = connector.pools.pools.lock().await[0].pool.clone();
    assert_eq!(seats(&connector).await, 1);
    drop(inbound);
    drop(session);
    all_seats_freed(&connector).await;
    assert!(
        pool.all_relays().await.is_empty(),
        "the relay left its pool"
    );

    let mut again = connect(&connector, &relay).await;
    assert_eq!(connector.pool_count().await, 1);
    assert_eq!(notes_of(&mut again, "again").await, vec![the_note.id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_dial_frees_its_seat_and_reports_the_refusal() {
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    // The default policy dials no internal address, and the test relay is on loopback.
    let connector = SdkConnector::new(SdkConnectorOptions::default());
    let url = RelayUrl::parse(&relay.url()).expect("relay url");
    for _ in 0..2 {
        let refused = connector.connect(&url, DEADLINE).await;
        assert!(
            matches!(refused, Err(crate::TransportError::Refused { .. })),
            "{refused:?}"
        );
        assert_eq!(seats(&connector).await, 0);
    }
    assert_eq!(connector.pool_count().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_given_up_midway_frees_its_seat() {
    // A relay that accepts the TCP connection and never answers the WebSocket upgrade.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let url = RelayUrl::parse(&format!("ws://{address}")).expect("relay url");
    let connector = SdkConnector::new(SdkConnectorOptions::default())
        .with_address_policy(crate::AddressPolicy::allow_all());
    // Once the relay has the connection, the dial is midway; the other branch then drops it.
    let held = tokio::select! {
        accepted = listener.accept() => accepted.expect("accept").0,
        ended = connector.connect(&url, DEADLINE) => panic!("the dial ended: {:?}", ended.err()),
    };
    all_seats_freed(&connector).await;
    drop(held);
}
