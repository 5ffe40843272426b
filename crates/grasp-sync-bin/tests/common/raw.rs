//! A raw WebSocket client of a relay, for tests that send what a well-behaved client never
//! would and read every frame the relay answers with.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use nostr::{JsonUtil, RelayMessage};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

/// What the relay sent, one frame at a time.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A relay message.
    Relay(Box<RelayMessage<'static>>),
    /// A close frame, with its code.
    Closed(Option<CloseCode>),
    /// The connection ended without a close frame.
    Gone,
}

/// One raw connection.
pub(crate) struct RawClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl RawClient {
    /// Connects to `url`.
    pub(crate) async fn connect(url: &str) -> RawClient {
        let (socket, _) = connect_async(url).await.expect("websocket handshake");
        RawClient { socket }
    }

    /// Sends one text message.
    pub(crate) async fn send(&mut self, text: impl Into<String>) {
        self.socket
            .send(Message::Text(text.into().into()))
            .await
            .expect("send");
    }

    /// Sends a text message and reports whether the socket took it (a relay may close the
    /// connection in the middle of a large one).
    pub(crate) async fn try_send(&mut self, text: impl Into<String>) -> bool {
        self.socket
            .send(Message::Text(text.into().into()))
            .await
            .is_ok()
    }

    /// The next frame, waiting up to `wait`.
    pub(crate) async fn next(&mut self, wait: Duration) -> Frame {
        loop {
            let next = tokio::time::timeout(wait, self.socket.next())
                .await
                .expect("a frame in time");
            match next {
                Some(Ok(Message::Text(text))) => {
                    let message = RelayMessage::from_json(text.as_str()).expect("a relay message");
                    return Frame::Relay(Box::new(message));
                }
                Some(Ok(Message::Close(frame))) => {
                    return Frame::Closed(frame.map(|frame| frame.code));
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Frame::Gone,
            }
        }
    }

    /// The next relay message; panics on a close.
    pub(crate) async fn message(&mut self, wait: Duration) -> RelayMessage<'static> {
        match self.next(wait).await {
            Frame::Relay(message) => *message,
            other => panic!("expected a relay message, got {other:?}"),
        }
    }

    /// Events of subscription `id` until its EOSE (or its CLOSED: `Err(text)`).
    pub(crate) async fn events_until_eose(
        &mut self,
        id: &str,
        wait: Duration,
    ) -> Result<usize, String> {
        let mut events = 0;
        loop {
            match self.message(wait).await {
                RelayMessage::Event {
                    subscription_id, ..
                } if subscription_id.as_str() == id => {
                    events += 1;
                }
                RelayMessage::EndOfStoredEvents(subscription_id)
                    if subscription_id.as_str() == id =>
                {
                    return Ok(events);
                }
                RelayMessage::Closed {
                    subscription_id,
                    message,
                } if subscription_id.as_str() == id => {
                    return Err(message.into_owned());
                }
                _ => {}
            }
        }
    }

    /// The `OK` for event `id`: (accepted, message).
    pub(crate) async fn ok_for(&mut self, id: &nostr::EventId, wait: Duration) -> (bool, String) {
        loop {
            if let RelayMessage::Ok {
                event_id,
                status,
                message,
            } = self.message(wait).await
                && event_id == *id
            {
                return (status, message.into_owned());
            }
        }
    }
}
