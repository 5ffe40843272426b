//! The strict relay's message proxy: the client's WebSocket on one side, the relay on an
//! in-process duplex pipe on the other, each client message passed through the connection's
//! `Gate` before it reaches the relay.
//!
//! Two loops run together: client to relay, and relay (plus the gate's refusals) to client.
//! Each direction keeps its order. A refusal can reach the client before the relay's answer
//! to an earlier forwarded message, as with relays that answer from several threads.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::{SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, StreamExt};
use nostr_relay_builder::LocalRelay;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::gate::{Gate, Verdict};
use super::{Recorder, StrictLimits};

/// Bytes buffered in each direction of the pipe to the relay.
const PIPE_BUFFER: usize = 256 * 1024;

type Upstream = WebSocketStream<DuplexStream>;

/// Serves one upgraded client connection through the gate until either side ends.
pub(crate) async fn serve<S>(
    relay: LocalRelay,
    client_io: S,
    peer: SocketAddr,
    limits: Arc<StrictLimits>,
    recorder: Arc<Recorder>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let connection = recorder.open_connection();
    let (relay_end, proxy_end) = tokio::io::duplex(PIPE_BUFFER);
    let client = WebSocketStream::from_raw_socket(client_io, Role::Server, None).await;
    let upstream = WebSocketStream::from_raw_socket(proxy_end, Role::Client, None).await;
    let (client_tx, client_rx) = client.split();
    let (upstream_tx, upstream_rx) = upstream.split();
    let (replies_tx, replies_rx) = mpsc::unbounded_channel();
    let link = Link {
        gate: Mutex::new(Gate::new(limits)),
        recorder,
        connection,
    };
    tokio::select! {
        dropped = link.client_to_relay(client_rx, upstream_tx, replies_tx) => {
            if dropped {
                link.recorder.dropped(connection);
            }
        }
        () = link.relay_to_client(upstream_rx, client_tx, replies_rx) => {}
        ended = relay.take_connection(relay_end, peer) => {
            if let Err(error) = ended {
                tracing::debug!(%error, %peer, "strict relay upstream ended");
            }
        }
    }
}

/// The state both directions of one connection share.
struct Link {
    gate: Mutex<Gate>,
    recorder: Arc<Recorder>,
    connection: usize,
}

impl Link {
    /// Reads client messages until the client leaves or the gate drops the connection
    /// (returns true then).
    async fn client_to_relay<S>(
        &self,
        mut client_rx: SplitStream<WebSocketStream<S>>,
        mut upstream_tx: SplitSink<Upstream, Message>,
        replies_tx: mpsc::UnboundedSender<String>,
    ) -> bool
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        while let Some(Ok(message)) = client_rx.next().await {
            let text = match message {
                Message::Text(text) => text,
                Message::Binary(bytes) => {
                    if upstream_tx.send(Message::Binary(bytes)).await.is_err() {
                        return false;
                    }
                    continue;
                }
                Message::Close(_) => return false,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            };
            let now = Instant::now();
            let (outcome, open) = {
                let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
                let outcome = gate.handle_client(now, text.as_str());
                (outcome, gate.open())
            };
            self.recorder.client_message(
                self.connection,
                outcome.start.clone(),
                now,
                outcome.refusal(),
                open,
            );
            match outcome.verdict {
                Verdict::Forward => {
                    if upstream_tx.send(Message::Text(text)).await.is_err() {
                        return false;
                    }
                }
                Verdict::Refuse {
                    frame,
                    close_upstream,
                    ..
                } => {
                    if let Some(close) = close_upstream
                        && upstream_tx.send(Message::Text(close.into())).await.is_err()
                    {
                        return false;
                    }
                    if replies_tx.send(frame).is_err() {
                        return false;
                    }
                }
                Verdict::Disconnect => return true,
            }
        }
        false
    }

    /// Passes relay messages and the gate's refusals to the client until the relay side
    /// ends or the client cannot be written. Messages already waiting are written together
    /// and flushed once, as the relay writes a query's results.
    async fn relay_to_client<S>(
        &self,
        mut upstream_rx: SplitStream<Upstream>,
        mut client_tx: SplitSink<WebSocketStream<S>, Message>,
        mut replies_rx: mpsc::UnboundedReceiver<String>,
    ) where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        loop {
            let next = tokio::select! {
                from_relay = upstream_rx.next() => self.handle_relay_item(from_relay),
                Some(reply) = replies_rx.recv() => Next::Send(Message::Text(reply.into())),
            };
            let mut next = Some(next);
            while let Some(step) = next.take() {
                match step {
                    Next::Send(message) => {
                        if client_tx.feed(message).await.is_err() {
                            return;
                        }
                    }
                    Next::Skip => {}
                    Next::End => {
                        // Whatever was fed still reaches the client.
                        let _ = client_tx.flush().await;
                        return;
                    }
                }
                next = upstream_rx
                    .next()
                    .now_or_never()
                    .map(|from_relay| self.handle_relay_item(from_relay));
            }
            if client_tx.flush().await.is_err() {
                return;
            }
        }
    }

    /// What to do with one item of the relay's stream.
    fn handle_relay_item(&self, from_relay: Option<Result<Message, WsError>>) -> Next {
        match from_relay {
            Some(Ok(Message::Text(text))) => {
                let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
                let is_event = gate.handle_relay(text.as_str());
                if is_event && gate.withholds(text.as_str()) {
                    return Next::Skip;
                }
                drop(gate);
                if is_event {
                    self.recorder
                        .event_sent(self.connection, event_id(text.as_str()));
                }
                Next::Send(Message::Text(text))
            }
            Some(Ok(Message::Binary(bytes))) => Next::Send(Message::Binary(bytes)),
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Next::Skip,
            Some(Ok(Message::Close(_)) | Err(_)) | None => Next::End,
        }
    }
}

/// The next step of the relay-to-client loop.
enum Next {
    Send(Message),
    Skip,
    End,
}

/// The event ID of an `["EVENT", <subscription>, <event>]` frame.
fn event_id(frame: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(frame).ok()?;
    value.get(2)?.get("id")?.as_str().map(str::to_owned)
}
