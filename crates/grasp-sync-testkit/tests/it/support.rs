//! Shared helpers: a nostr-sdk probe client that records what one relay says, and a raw
//! HTTP fetch for NIP-11.

use std::time::Duration;

use nostr_sdk::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::broadcast;
use tokio::time::timeout;

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
