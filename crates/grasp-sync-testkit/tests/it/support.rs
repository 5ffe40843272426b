//! Shared helpers: a nostr-sdk probe client that records what one relay says, a raw
//! WebSocket client that sends and reads exact frames, and a raw HTTP fetch for NIP-11.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use nostr_sdk::prelude::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::broadcast;
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// Upper bound on any single wait in these tests.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// How a subscription's stored-event phase ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    Eose,
    Closed(String),
}

/// A client connected to one relay, with reconnect off, reading that relay's messages.
pub(crate) struct Probe {
    _client: Client,
    pub(crate) relay: Relay,
    notes: broadcast::Receiver<RelayNotification>,
}

impl Probe {
    pub(crate) async fn connect(url: &str) -> Probe {
        let client = Client::default();
        client
            .pool()
            .add_relay(url, RelayOptions::new().reconnect(false))
            .await
            .expect("relay added to the client");
        let relay = client.relay(url).await.expect("relay in the pool");
        let notes = relay.notifications();
        relay.try_connect(DEADLINE).await.expect("client connects");
        Probe {
            _client: client,
            relay,
            notes,
        }
    }

    /// Opens a long-lived subscription.
    pub(crate) async fn req(&self, id: &str, filters: Vec<Filter>) {
        self.relay
            .subscribe_with_id(
                SubscriptionId::new(id),
                filters,
                SubscribeOptions::default(),
            )
            .await
            .expect("REQ sent");
    }

    /// The next relay message, failing the test after `DEADLINE`.
    async fn next_message(&mut self) -> RelayMessage<'static> {
        loop {
            let note = timeout(DEADLINE, self.notes.recv())
                .await
                .expect("relay message before the deadline")
                .expect("notification channel open");
            if let RelayNotification::Message { message } = note {
                return message;
            }
        }
    }

    /// Events delivered to subscription `id` until its EOSE or CLOSED.
    pub(crate) async fn until_end(&mut self, id: &str) -> (Vec<Event>, End) {
        let id = SubscriptionId::new(id);
        let mut events = Vec::new();
        loop {
            match self.next_message().await {
                RelayMessage::Event {
                    subscription_id,
                    event,
                } if *subscription_id == id => events.push(event.into_owned()),
                RelayMessage::EndOfStoredEvents(subscription_id) if *subscription_id == id => {
                    return (events, End::Eose);
                }
                RelayMessage::Closed {
                    subscription_id,
                    message,
                } if *subscription_id == id => {
                    return (events, End::Closed(message.into_owned()));
                }
                _ => {}
            }
        }
    }

    /// The next event delivered to subscription `id`.
    pub(crate) async fn next_event(&mut self, id: &str) -> Event {
        let id = SubscriptionId::new(id);
        loop {
            if let RelayMessage::Event {
                subscription_id,
                event,
            } = self.next_message().await
                && *subscription_id == id
            {
                return event.into_owned();
            }
        }
    }

    /// Waits until the client sees the connection drop.
    pub(crate) async fn until_disconnected(&mut self) -> RelayStatus {
        loop {
            let note = timeout(DEADLINE, self.notes.recv())
                .await
                .expect("disconnect before the deadline")
                .expect("notification channel open");
            if let RelayNotification::RelayStatus { status } = note
                && matches!(status, RelayStatus::Disconnected | RelayStatus::Terminated)
            {
                return status;
            }
        }
    }
}

/// GETs `/` from `http://host:port` with `Accept: application/nostr+json`; returns the
/// status code and the body.
pub(crate) async fn fetch_nip11(nip11_url: &str) -> (u16, String) {
    let authority = nip11_url.trim_start_matches("http://");
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {authority}\r\nAccept: application/nostr+json\r\nConnection: close\r\n\r\n"
    );
    let response = timeout(DEADLINE, async {
        let mut stream = TcpStream::connect(authority).await.expect("http connect");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("http request sent");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("http response read");
        response
    })
    .await
    .expect("NIP-11 response before the deadline");
    let (head, body) = response.split_once("\r\n\r\n").expect("http head and body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("http status code");
    (status, body.to_owned())
}

/// Signed kind-1 notes with increasing timestamps.
pub(crate) fn notes(n: usize) -> Vec<Event> {
    let keys = Keys::generate();
    (0..n)
        .map(|i| {
            EventBuilder::text_note(format!("note {i}"))
                .custom_created_at(Timestamp::from_secs(1_700_000_000 + i as u64))
                .sign_with_keys(&keys)
                .expect("note signs")
        })
        .collect()
}

/// A bare WebSocket client: sends the frames a test writes and returns the relay's frames
/// as JSON, in order.
pub(crate) struct Raw {
    ws: WebSocketStream<TcpStream>,
}

impl Raw {
    pub(crate) async fn connect(url: &str) -> Raw {
        let tcp = TcpStream::connect(url.trim_start_matches("ws://"))
            .await
            .expect("tcp connect");
        let (ws, _) = timeout(DEADLINE, tokio_tungstenite::client_async(url, tcp))
            .await
            .expect("handshake before the deadline")
            .expect("websocket handshake");
        Raw { ws }
    }

    pub(crate) async fn send(&mut self, frame: Value) {
        self.ws
            .send(WsMessage::Text(frame.to_string().into()))
            .await
            .expect("frame sent");
    }

    /// The relay's next text frame.
    pub(crate) async fn recv(&mut self) -> Value {
        loop {
            let message = timeout(DEADLINE, self.ws.next())
                .await
                .expect("relay frame before the deadline")
                .expect("connection open")
                .expect("websocket frame");
            if let WsMessage::Text(text) = message {
                return serde_json::from_str(text.as_str()).expect("relay frames are JSON");
            }
        }
    }

    /// Sends `frame` and asserts the relay's next frame is `expected`.
    pub(crate) async fn exchange(&mut self, frame: Value, expected: Value) {
        self.send(frame.clone()).await;
        assert_eq!(self.recv().await, expected, "answer to {frame}");
    }

    /// Waits until the connection ends, failing on any text frame meanwhile.
    pub(crate) async fn until_disconnected(&mut self) {
        loop {
            let next = timeout(DEADLINE, self.ws.next())
                .await
                .expect("disconnect before the deadline");
            match next {
                None | Some(Err(_)) | Some(Ok(WsMessage::Close(_))) => return,
                Some(Ok(WsMessage::Text(text))) => panic!("unexpected frame {text}"),
                Some(Ok(_)) => {}
            }
        }
    }
}
