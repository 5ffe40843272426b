//! NIP-42 through the nostr-sdk transport, against the testkit relay that requires
//! authentication for reads: a session with a key answers the challenge and reports it, one
//! without a key reports nothing, and the pool's re-subscription after `AUTH` sends nothing the
//! engine did not send.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{RelayAuth, StrictLimits, TestRelay, TestRelayConfig};
use nostr::{EventBuilder, Filter, Keys, Kind, SubscriptionId};

use super::SdkConnector;
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
