//! The strict relay's message proxy: the client's WebSocket on one side, the relay on an
//! in-process duplex pipe on the other, each client message passed through the connection's
//! `Gate` before it reaches the relay.
//!
//! Two loops run together: client to relay, and relay (plus the gate's refusals) to client.
//! Each direction keeps its order. A refusal can reach the client before the relay's answer
//! to an earlier forwarded message, as with relays that answer from several threads.
//!
//! On a relay with query quirks, a REQ the proxy answers itself reaches the relay with every
//! `limit` set to 0; when the relay's EOSE for it arrives (the relay now holds the
//! subscription), the proxy reads the store and sends its answer and its own EOSE in that
//! EOSE's place. So the answer keeps its place among the relay's messages: after the relay's
//! answers to earlier messages, before any live event of the subscription. An event stored
//! after the relay took the subscription and before the proxy read the store is in the
//! answer and comes live too; its live copy is not sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::{SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, StreamExt};
use nostr::{Event, Filter, JsonUtil, RelayMessage, SubscriptionId};
use nostr_database::NostrDatabase;
use nostr_relay_builder::LocalRelay;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::gate::{Gate, Verdict};
use super::quirks::asks_stored;
use super::stored::{EoseAction, StoredPhases};
use super::{FilterCaps, QueryQuirks, Recorder, StartKind, StrictLimits};

/// Bytes buffered in each direction of the pipe to the relay.
const PIPE_BUFFER: usize = 256 * 1024;

type Upstream = WebSocketStream<DuplexStream>;

/// What a strict relay's proxy needs besides the relay itself; shared by its connections.
#[derive(Debug, Clone)]
pub(crate) struct Strict {
    pub(crate) limits: Arc<StrictLimits>,
    pub(crate) recorder: Arc<Recorder>,
    /// The relay's store, read to answer REQs the quirks change.
    pub(crate) store: Arc<dyn NostrDatabase>,
    /// The relay's per-filter caps.
    pub(crate) caps: FilterCaps,
}

/// Serves one upgraded client connection through the gate until either side ends.
pub(crate) async fn serve<S>(relay: LocalRelay, client_io: S, peer: SocketAddr, strict: Strict)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Strict {
        limits,
        recorder,
        store,
        caps,
    } = strict;
    let connection = recorder.open_connection();
    let (relay_end, proxy_end) = tokio::io::duplex(PIPE_BUFFER);
    let client = WebSocketStream::from_raw_socket(client_io, Role::Server, None).await;
    let upstream = WebSocketStream::from_raw_socket(proxy_end, Role::Client, None).await;
    let (client_tx, client_rx) = client.split();
    let (upstream_tx, upstream_rx) = upstream.split();
    let (replies_tx, replies_rx) = mpsc::unbounded_channel();
    let phases = (!limits.quirks.is_off()).then(|| Mutex::new(StoredPhases::new(limits.quirks)));
    let link = Link {
        quirks: limits.quirks,
        gate: Mutex::new(Gate::new(limits)),
        phases,
        recorder,
        connection,
        store,
        caps,
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
    /// Present when the relay has query quirks.
    phases: Option<Mutex<StoredPhases>>,
    quirks: QueryQuirks,
    recorder: Arc<Recorder>,
    connection: usize,
    store: Arc<dyn NostrDatabase>,
    caps: FilterCaps,
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
                let mut gate = lock(&self.gate);
                let outcome = gate.handle_client(now, text.as_str());
                (outcome, gate.open())
            };
            self.recorder.client_message(
                self.connection,
                text.as_str(),
                outcome.start.clone(),
                now,
                outcome.refusal(),
                open,
            );
            match outcome.verdict {
                Verdict::Forward => {
                    let text = match self.track_forwarded(&outcome.start, outcome.closes.as_deref())
                    {
                        Some(frame) => frame.into(),
                        None => text,
                    };
                    if upstream_tx.send(Message::Text(text)).await.is_err() {
                        return false;
                    }
                }
                Verdict::Refuse {
                    frames,
                    close_upstream,
                    ..
                } => {
                    if close_upstream.is_some()
                        && let (Some(phases), Some((_, id, _))) = (&self.phases, &outcome.start)
                    {
                        lock(phases).handle_close(id);
                    }
                    if let Some(close) = close_upstream
                        && upstream_tx.send(Message::Text(close.into())).await.is_err()
                    {
                        return false;
                    }
                    if frames
                        .into_iter()
                        .any(|frame| replies_tx.send(frame).is_err())
                    {
                        return false;
                    }
                }
                Verdict::Answer(frame) => {
                    if replies_tx.send(frame).is_err() {
                        return false;
                    }
                }
                Verdict::Disconnect => return true,
                Verdict::Ignore => {}
            }
        }
        false
    }

    /// Tells the quirks about a forwarded REQ or CLOSE; returns the REQ to send the relay
    /// instead, if it changes.
    fn track_forwarded(
        &self,
        start: &Option<(StartKind, String, Vec<Filter>)>,
        closes: Option<&str>,
    ) -> Option<String> {
        let mut phases = lock(self.phases.as_ref()?);
        if let Some(id) = closes {
            phases.handle_close(id);
        }
        match start {
            Some((StartKind::Req, id, filters)) => phases.handle_req(id, filters),
            _ => None,
        }
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
                        if self.feed(&mut client_tx, message).await.is_err() {
                            return;
                        }
                    }
                    Next::Skip => {}
                    Next::Answer {
                        subscription,
                        filters,
                    } => {
                        for message in self.answer(subscription, &filters).await {
                            if self.feed(&mut client_tx, message).await.is_err() {
                                return;
                            }
                        }
                    }
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

    /// Feeds one message to the client, counting a text frame's bytes.
    async fn feed<S>(
        &self,
        client_tx: &mut SplitSink<WebSocketStream<S>, Message>,
        message: Message,
    ) -> Result<(), WsError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        if let Message::Text(text) = &message {
            self.recorder.text_sent(self.connection, text.as_str());
        }
        client_tx.feed(message).await
    }

    /// What to do with one item of the relay's stream.
    fn handle_relay_item(&self, from_relay: Option<Result<Message, WsError>>) -> Next {
        match from_relay {
            Some(Ok(Message::Text(text))) => {
                if let Some(phases) = &self.phases
                    && let Some(next) = phase_step(phases, text.as_str())
                {
                    return next;
                }
                let is_event = lock(&self.gate).handle_relay(text.as_str());
                if is_event && !self.deliver(text.as_str(), event_id(text.as_str())) {
                    return Next::Skip;
                }
                Next::Send(Message::Text(text))
            }
            Some(Ok(Message::Binary(bytes))) => Next::Send(Message::Binary(bytes)),
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Next::Skip,
            Some(Ok(Message::Close(_)) | Err(_)) | None => Next::End,
        }
    }

    /// Whether an EVENT frame for the client is sent (not withheld); counts it if so.
    fn deliver(&self, frame: &str, id: Option<String>) -> bool {
        if lock(&self.gate).withholds(frame) {
            return false;
        }
        self.recorder.event_sent(self.connection, id);
        true
    }

    /// The proxy's answer to the stored part of a REQ with `filters` on `subscription`: the
    /// EVENT frames not withheld, then EOSE.
    async fn answer(&self, subscription: String, filters: &[Filter]) -> Vec<Message> {
        let mut stored: Vec<Event> = Vec::new();
        for filter in filters.iter().filter(|f| asks_stored(f)) {
            // Every match: the quirks pick among them, the store's own limit would not.
            let mut query = filter.clone();
            query.limit = None;
            match self.store.query(query).await {
                Ok(events) => stored.extend(events),
                Err(error) => tracing::warn!(%error, "strict relay cannot read its store"),
            }
        }
        let events = self.quirks.answer(filters, &stored, self.caps);
        let id = SubscriptionId::new(&subscription);
        let mut messages = Vec::with_capacity(events.len() + 1);
        let mut sent = Vec::with_capacity(events.len());
        for event in events {
            let event_id = event.id.to_hex();
            let frame = RelayMessage::event(id.clone(), event).as_json();
            if self.deliver(&frame, Some(event_id.clone())) {
                messages.push(Message::Text(frame.into()));
                sent.push(event_id);
            }
        }
        messages.push(Message::Text(RelayMessage::eose(id).as_json().into()));
        if let Some(phases) = &self.phases {
            lock(phases).answered(&subscription, sent);
        }
        messages
    }
}

/// The next step of the relay-to-client loop.
enum Next {
    Send(Message),
    Skip,
    /// Send the proxy's own answer to the stored part of a REQ, then EOSE.
    Answer {
        subscription: String,
        filters: Vec<Filter>,
    },
    End,
}

/// What the quirks make of one relay text frame: `None` to handle it as usual.
fn phase_step(phases: &Mutex<StoredPhases>, text: &str) -> Option<Next> {
    let kind = ["[\"EOSE\"", "[\"CLOSED\"", "[\"EVENT\""]
        .into_iter()
        .position(|prefix| text.starts_with(prefix))?;
    let value: Value = serde_json::from_str(text).ok()?;
    let subscription = value.get(1)?.as_str()?;
    let mut phases = lock(phases);
    match kind {
        0 => match phases.handle_eose(subscription) {
            EoseAction::Pass => None,
            EoseAction::Drop => Some(Next::Skip),
            EoseAction::Answer(filters) => Some(Next::Answer {
                subscription: subscription.to_owned(),
                filters,
            }),
        },
        1 => {
            let message = value.get(2).and_then(Value::as_str).unwrap_or_default();
            phases.handle_closed(subscription, message);
            None
        }
        _ => {
            let id = value.get(2)?.get("id")?.as_str()?;
            (phases.repeats(subscription, id) || phases.skips(subscription, id))
                .then_some(Next::Skip)
        }
    }
}

/// Locks a mutex, whether or not another thread panicked holding it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The event ID of an `["EVENT", <subscription>, <event>]` frame.
fn event_id(frame: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(frame).ok()?;
    value.get(2)?.get("id")?.as_str().map(str::to_owned)
}
