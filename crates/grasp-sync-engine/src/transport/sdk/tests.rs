//! NIP-42 through the nostr-sdk transport, against the testkit relay that requires
//! authentication for reads: a session with a key answers the challenge and reports it, one
//! without a key reports nothing, and the pool's re-subscription after `AUTH` sends nothing the
//! engine did not send. Also the notification buffer a session and a live-only connection get.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{RelayAuth, StrictLimits, TestRelay, TestRelayConfig};
use nostr::{EventBuilder, Filter, Keys, Kind, SubscriptionId};

use super::{SdkConnector, SdkConnectorOptions};
use crate::transport::{RelayConnection, RelayConnector, RelayInbound};

const DEADLINE: Duration = Duration::from_secs(10);

/// A relay requiring AUTH for reads, behind the counting proxy, holding one note.
async fn auth_relay() -> TestRelay {
    let relay = TestRelay::start(TestRelayConfig {
        auth: RelayAuth::Reads,
        ..TestRelayConfig::strict(StrictLimits::default())
    })
    .await
    .expect("relay");
    let note = EventBuilder::text_note("hello")
        .sign_with_keys(&Keys::generate())
        .expect("sign");
    relay.seed([note]).await.expect("seed");
    relay
}

async fn connect(relay: &TestRelay, keys: Option<Keys>) -> RelayConnection {
    let mut connector =
        SdkConnector::default().with_address_policy(crate::AddressPolicy::allow_all());
    if let Some(keys) = keys {
        connector = connector.with_auth_keys(keys);
    }
    let url = RelayUrl::parse(&relay.url()).expect("url");
    connector.connect(&url, DEADLINE).await.expect("connect")
}

/// Inbound messages until `last` says stop (inclusive), within the deadline.
async fn until(
    connection: &mut RelayConnection,
    last: impl Fn(&RelayInbound) -> bool,
) -> Vec<RelayInbound> {
    let mut seen = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(message) = connection.inbound.recv().await {
            let done = last(&message);
            seen.push(message);
            if done {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no end within the deadline: {seen:?}"));
    seen
}

fn notes() -> Vec<Filter> {
    vec![Filter::new().kind(Kind::TextNote)]
}

fn eose_of(id: &str) -> impl Fn(&RelayInbound) -> bool + '_ {
    move |m| matches!(m, RelayInbound::Eose(sub) if sub.as_str() == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_key_answers_the_challenge_and_the_pool_resends_nothing() {
    let relay = auth_relay().await;
    let mut connection = connect(&relay, Some(Keys::generate())).await;
    assert!(connection.session.authenticates());
    let refused = SubscriptionId::new("refused");
    connection
        .session
        .subscribe(refused.clone(), notes())
        .await
        .expect("send");
    let seen = until(&mut connection, |m| *m == RelayInbound::Authenticated).await;
    let challenge = seen.iter().position(|m| *m == RelayInbound::AuthChallenge);
    let closed = seen.iter().position(|m| {
        matches!(m, RelayInbound::Closed { subscription_id, message }
            if *subscription_id == refused && message.starts_with("auth-required:"))
    });
    assert!(
        matches!((challenge, closed), (Some(c), Some(r)) if c < r),
        "the challenge, then the refusal, then the outcome: {seen:?}"
    );
    // Authenticated: the engine's own second REQ is served.
    connection
        .session
        .subscribe(SubscriptionId::new("served"), notes())
        .await
        .expect("send");
    let seen = until(&mut connection, eose_of("served")).await;
    assert!(
        seen.iter().any(|m| matches!(m, RelayInbound::Event { .. })),
        "{seen:?}"
    );
    // After AUTH the pool re-subscribes what it registered: nothing, so the relay saw exactly
    // the two REQs the engine sent.
    connection
        .session
        .subscribe(SubscriptionId::new("last"), notes())
        .await
        .expect("send");
    until(&mut connection, eose_of("last")).await;
    let sent: Vec<String> = relay
        .strict_stats()
        .req_starts()
        .map(|start| start.subscription_id.clone())
        .collect();
    assert_eq!(sent, ["refused", "served", "last"]);
    connection.session.disconnect().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_key_answers_no_challenge() {
    let relay = auth_relay().await;
    let mut connection = connect(&relay, None).await;
    assert!(!connection.session.authenticates());
    for id in ["first", "second"] {
        connection
            .session
            .subscribe(SubscriptionId::new(id), notes())
            .await
            .expect("send");
        let seen = until(&mut connection, |m| {
            matches!(m, RelayInbound::Closed { .. })
        })
        .await;
        assert!(
            !seen.iter().any(|m| matches!(
                m,
                RelayInbound::AuthChallenge
                    | RelayInbound::Authenticated
                    | RelayInbound::AuthFailed
            )),
            "{seen:?}"
        );
        assert!(
            matches!(seen.last(), Some(RelayInbound::Closed { subscription_id, message })
                if subscription_id.as_str() == id && message.starts_with("auth-required:")),
            "{seen:?}"
        );
    }
    connection.session.disconnect().await;
}

/// Opens a session or a live-only connection to `relay` through `connector`, sends it a REQ
/// for the relay's 40 notes while the engine reads nothing (an inbound channel of one message),
/// and returns what the engine then reads. Before reading, it waits until the SDK has broadcast
/// the REQ's EOSE, so every message of the burst is in the connection's notification buffer or
/// lost from it, whatever the scheduling.
async fn burst_read_late(
    connector: &SdkConnector,
    relay: &TestRelay,
    live_only: bool,
) -> Vec<RelayInbound> {
    let url = RelayUrl::parse(&relay.url()).expect("url");
    let mut connection = if live_only {
        connector.connect_live_only(&url, DEADLINE).await
    } else {
        connector.connect(&url, DEADLINE).await
    }
    .expect("connect");
    let [sdk_relay] = connector.sdk_relays(&url).await.try_into().expect("one");
    let mut watch = sdk_relay.notifications();
    connection
        .session
        .subscribe(SubscriptionId::new("burst"), notes())
        .await
        .expect("req");
    tokio::time::timeout(DEADLINE, async {
        loop {
            match watch.recv().await {
                Ok(nostr_sdk::pool::RelayNotification::Message {
                    message: nostr::RelayMessage::EndOfStoredEvents(id),
                }) if id.as_str() == "burst" => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => panic!("closed"),
            }
        }
    })
    .await
    .expect("the EOSE within the deadline");
    let seen = until(&mut connection, |m| {
        matches!(m, RelayInbound::Lagged(_)) || eose_of("burst")(m)
    })
    .await;
    connection.session.disconnect().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_only_connection_buffers_fewer_notifications_than_a_session() {
    let relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay");
    let keys = Keys::generate();
    let burst: Vec<_> = (0..40)
        .map(|n| {
            EventBuilder::text_note(format!("note {n}"))
                .sign_with_keys(&keys)
                .expect("sign")
        })
        .collect();
    relay.seed(burst).await.expect("seed");
    let connector = SdkConnector::new(SdkConnectorOptions {
        notification_capacity: 256,
        live_only_notification_capacity: 8,
        inbound_capacity: 1,
    })
    .with_address_policy(crate::AddressPolicy::allow_all());

    let session = burst_read_late(&connector, &relay, false).await;
    let events = session
        .iter()
        .filter(|m| matches!(m, RelayInbound::Event { .. }))
        .count();
    assert_eq!(
        events, 40,
        "a session's buffer holds the burst: {session:?}"
    );

    let live_only = burst_read_late(&connector, &relay, true).await;
    assert!(
        matches!(live_only.last(), Some(RelayInbound::Lagged(_))),
        "a live-only connection's buffer of 8 overflows: {live_only:?}"
    );
}
