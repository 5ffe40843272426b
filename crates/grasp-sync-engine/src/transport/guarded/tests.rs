//! The dial-time check over real sockets: a name that resolves to loopback is refused before
//! any connection, for the WebSocket dial and the NIP-11 fetch alike; allowed, it connects.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use grasp_sync_model::RelayUrl;
use tokio::net::TcpListener;

use super::connect_checked;
use crate::address::AddressPolicy;
use crate::error::TransportError;
use crate::transport::{RelayConnector, SdkConnector, fetch_relay_info};

/// A listener that counts the connections it accepts.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_before_connecting() {
    let (port, accepted) = counting_listener().await;
    let url = url::Url::parse(&format!("ws://localhost:{port}")).expect("url");
    let refused = connect_checked(&AddressPolicy::default(), &url)
        .await
        .expect_err("refused");
    assert!(
        matches!(&refused, TransportError::Refused { host, reason: "internal", .. } if host == "localhost"),
        "{refused:?}"
    );
    // The WebSocket dial and the NIP-11 fetch of the default connector refuse it too.
    let relay = RelayUrl::parse(url.as_str()).expect("relay url");
    let connector = SdkConnector::default();
    let dialled = connector.connect(&relay, Duration::from_secs(5)).await;
    assert!(
        matches!(
            dialled,
            Err(TransportError::Refused {
                reason: "internal",
                ..
            })
        ),
        "{:?}",
        dialled.err()
    );
    let info = fetch_relay_info(&AddressPolicy::default(), &relay, Duration::from_secs(5)).await;
    assert!(
        matches!(info, Err(TransportError::Refused { .. })),
        "{info:?}"
    );
    let info = connector.fetch_info(&relay, Duration::from_secs(5)).await;
    assert!(
        matches!(info, Err(TransportError::Refused { .. })),
        "{info:?}"
    );
    // Nothing reached the listener: the check came before the connection.
    tokio::task::yield_now().await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0);

    // Allowed by name, the same host connects.
    let allowed = AddressPolicy {
        allowed_hosts: vec!["localhost".to_owned()],
        ..AddressPolicy::default()
    };
    let stream = connect_checked(&allowed, &url).await.expect("connects");
    assert!(stream.nodelay().expect("nodelay"));
    drop(stream);
    let connected = async {
        while accepted.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), connected)
        .await
        .expect("the allowed connection arrives");
}

#[tokio::test]
async fn a_denied_address_is_denied_whatever_name_leads_to_it() {
    let (port, accepted) = counting_listener().await;
    let policy = AddressPolicy {
        allow_private: true,
        denied_hosts: vec!["127.0.0.1".to_owned(), "::1".to_owned()],
        ..AddressPolicy::default()
    };
    let url = url::Url::parse(&format!("ws://localhost:{port}")).expect("url");
    let refused = connect_checked(&policy, &url).await.expect_err("denied");
    assert!(
        matches!(
            refused,
            TransportError::Refused {
                reason: "denied",
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

/// One transport serves a pool of many relays: it counts each connection's bytes apart, keeps
/// each URL's refusal apart, and counts a new dial of a URL from zero.
#[tokio::test]
async fn one_transport_counts_and_refuses_per_url() {
    use futures::SinkExt;
    use nostr_sdk::pool::ConnectionMode;
    use nostr_sdk::pool::transport::websocket::WebSocketTransport;

    use super::GuardedWebSocket;

    let first =
        grasp_sync_testkit::TestRelay::start(grasp_sync_testkit::TestRelayConfig::default())
            .await
            .expect("relay");
    let second =
        grasp_sync_testkit::TestRelay::start(grasp_sync_testkit::TestRelayConfig::default())
            .await
            .expect("relay");
    let (a, b) = (
        url::Url::parse(&first.url()).expect("url"),
        url::Url::parse(&second.url()).expect("url"),
    );
    let transport = GuardedWebSocket::new(Arc::new(AddressPolicy::allow_all()));
    let timeout = Duration::from_secs(10);
    let (mut sink_a, _stream_a) = transport
        .connect(&a, &ConnectionMode::Direct, timeout)
        .await
        .expect("dial a");
    let (_sink_b, _stream_b) = transport
        .connect(&b, &ConnectionMode::Direct, timeout)
        .await
        .expect("dial b");
    let frame = r#"["CLOSE","nothing"]"#;
    sink_a
        .send(async_wsocket::Message::Text(frame.to_owned()))
        .await
        .expect("send");
    assert_eq!(transport.wire_bytes(&a).sent, frame.len() as u64);
    assert_eq!(
        transport.wire_bytes(&b).sent,
        0,
        "another connection's frame"
    );
    let (_sink_a, _stream_a) = transport
        .connect(&a, &ConnectionMode::Direct, timeout)
        .await
        .expect("dial a again");
    assert_eq!(
        transport.wire_bytes(&a).sent,
        0,
        "a new dial counts from zero"
    );

    // Refused under the default policy: the refusal is the loopback URL's alone.
    let strict = GuardedWebSocket::new(Arc::new(AddressPolicy::default()));
    assert!(
        strict
            .connect(&a, &ConnectionMode::Direct, timeout)
            .await
            .is_err()
    );
    assert!(strict.take_refusal(&b).is_none());
    assert!(matches!(
        strict.take_refusal(&a),
        Some(TransportError::Refused { .. })
    ));
    assert!(strict.take_refusal(&a).is_none(), "taken once");
    transport.forget(&a);
    assert_eq!(transport.wire_bytes(&a), super::WireBytes::default());
}
