//! The async shell around one client connection of the embedded relay: the client's
//! WebSocket on one side, the `nostr-relay-builder` relay on an in-process pipe on the other,
//! and the connection's [`Guard`] and [`NegSessions`] in between.
//!
//! Two loops run together. The reader takes client messages (bounded in size by the
//! WebSocket layer) and does what the guard says: forwards them to the relay, queues a
//! refusal, or serves a NIP-77 step from the store. The writer sends the relay's messages,
//! the queued answers and a ping at a third of the idle timeout. A client that sends nothing,
//! not even a pong, for the idle timeout is closed; so is one whose message is too large,
//! after a NOTICE saying so.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use nostr::{Filter, JsonUtil, RelayMessage, SubscriptionId, Timestamp};
use nostr_database::NostrDatabase;
use nostr_relay_builder::LocalRelay;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::guard::{Guard, Verdict};
use super::limits::RelayLimits;
use super::negentropy::{self, NegReply, NegSessions};

/// Bytes buffered in each direction of the pipe to the relay.
const PIPE_BUFFER: usize = 256 * 1024;
/// Answers queued for the writer before the reader waits.
const ANSWER_QUEUE: usize = 64;

type Client = WebSocketStream<TokioIo<Upgraded>>;
type Upstream = WebSocketStream<DuplexStream>;

/// What one connection needs from the relay around it.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) relay: LocalRelay,
    pub(crate) limits: Arc<RelayLimits>,
    /// The store as the relay reads it (heavy reads off the async workers).
    pub(crate) database: Arc<dyn NostrDatabase>,
}

/// Serves one upgraded client connection until either side ends.
pub(crate) async fn serve(shared: Shared, io: TokioIo<Upgraded>, peer: SocketAddr) {
    let config = WebSocketConfig::default()
        .max_message_size(Some(shared.limits.max_message_length))
        .max_frame_size(Some(shared.limits.max_message_length));
    let client = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (relay_end, proxy_end) = tokio::io::duplex(PIPE_BUFFER);
    let upstream = WebSocketStream::from_raw_socket(proxy_end, Role::Client, None).await;
    let (client_tx, client_rx) = client.split();
    let (upstream_tx, upstream_rx) = upstream.split();
    let (answers_tx, answers_rx) = mpsc::channel(ANSWER_QUEUE);
    let guard = Mutex::new(Guard::new(Arc::clone(&shared.limits), Instant::now()));
    let link = Link {
        shared: &shared,
        guard: &guard,
    };
    let both = async {
        tokio::join!(
            link.read(client_rx, upstream_tx, answers_tx),
            link.write(client_tx, upstream_rx, answers_rx),
        )
    };
    tokio::select! {
        _ = both => {}
        ended = shared.relay.take_connection(relay_end, peer) => {
            if let Err(error) = ended {
                tracing::debug!(%error, %peer, "relay session ended");
            }
        }
    }
}

/// What the writer sends besides the relay's messages.
#[derive(Debug)]
enum Outgoing {
    Text(String),
    Close(CloseCode, &'static str),
}

/// The state both loops of one connection share.
struct Link<'a> {
    shared: &'a Shared,
    guard: &'a Mutex<Guard>,
}

impl Link<'_> {
    /// Client to relay, until the client leaves, idles out or breaks a limit.
    async fn read(
        &self,
        mut client_rx: SplitStream<Client>,
        mut upstream_tx: SplitSink<Upstream, Message>,
        answers: mpsc::Sender<Outgoing>,
    ) {
        let limits = &self.shared.limits;
        let mut negentropy =
            NegSessions::new(limits.negentropy_frame_size, limits.max_negentropy_items);
        loop {
            let received = tokio::time::timeout(limits.idle_timeout, client_rx.next()).await;
            let message = match received {
                Err(_idle) => {
                    let _ = answers
                        .send(Outgoing::Close(CloseCode::Away, "idle timeout"))
                        .await;
                    break;
                }
                Ok(None) | Ok(Some(Ok(Message::Close(_)))) => break,
                Ok(Some(Err(WsError::Capacity(CapacityError::MessageTooLong { .. })))) => {
                    let notice = RelayMessage::notice(format!(
                        "invalid: message is larger than {} bytes",
                        limits.max_message_length
                    ));
                    let _ = answers.send(Outgoing::Text(notice.as_json())).await;
                    let _ = answers
                        .send(Outgoing::Close(CloseCode::Size, "message too large"))
                        .await;
                    break;
                }
                Ok(Some(Err(error))) => {
                    tracing::debug!(%error, "client websocket error");
                    break;
                }
                Ok(Some(Ok(message))) => message,
            };
            let text = match message {
                Message::Text(text) => text,
                Message::Binary(_) => {
                    let notice = RelayMessage::notice("invalid: binary messages are not served");
                    if answers
                        .send(Outgoing::Text(notice.as_json()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                    continue;
                }
                // Pings are answered by the WebSocket layer; any frame keeps the link alive.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Close(_) => break,
            };
            let verdict =
                self.guard()
                    .handle_client(text.as_str(), Instant::now(), Timestamp::now());
            let delivered = match verdict {
                Verdict::Forward => upstream_tx.send(Message::Text(text)).await.is_ok(),
                Verdict::Answer(answer) => answers.send(Outgoing::Text(answer)).await.is_ok(),
                Verdict::NegOpen {
                    id,
                    filter,
                    initial,
                } => {
                    let reply = self
                        .neg_open(&mut negentropy, id.clone(), *filter, &initial)
                        .await;
                    self.neg_reply(&id, reply, &answers).await
                }
                Verdict::NegMsg { id, message } => {
                    let reply = negentropy.step(id.clone(), &message);
                    self.neg_reply(&id, reply, &answers).await
                }
                Verdict::NegClose { id } => {
                    negentropy.close(&id);
                    true
                }
            };
            if !delivered {
                break;
            }
        }
    }

    /// Reads the items of a NEG-OPEN (one more than the cap, to tell "too many") and opens
    /// the session.
    async fn neg_open(
        &self,
        sessions: &mut NegSessions,
        id: SubscriptionId,
        filter: Filter,
        initial: &str,
    ) -> NegReply {
        let filter = filter.limit(sessions.read_limit());
        match self.shared.database.negentropy_items(filter).await {
            Ok(items) => sessions.open(id, items, initial),
            Err(error) => {
                tracing::warn!(%error, "cannot read the store for NEG-OPEN");
                negentropy::error(id, "error: cannot read the store".to_owned())
            }
        }
    }

    /// Queues a NIP-77 reply; a NEG-ERR frees the session's place.
    async fn neg_reply(
        &self,
        id: &SubscriptionId,
        reply: NegReply,
        answers: &mpsc::Sender<Outgoing>,
    ) -> bool {
        if matches!(reply, NegReply::Error(_)) {
            self.guard().negentropy_failed(id);
        }
        answers
            .send(Outgoing::Text(reply.into_json()))
            .await
            .is_ok()
    }

    /// Relay and answers to client, until the relay, the client or the reader ends.
    async fn write(
        &self,
        mut client_tx: SplitSink<Client, Message>,
        mut upstream_rx: SplitStream<Upstream>,
        mut answers: mpsc::Receiver<Outgoing>,
    ) {
        let mut pings = tokio::time::interval(self.shared.limits.idle_timeout / 3);
        pings.tick().await;
        loop {
            let outgoing = tokio::select! {
                biased;
                answer = answers.recv() => match answer {
                    Some(Outgoing::Text(text)) => Message::Text(text.into()),
                    Some(Outgoing::Close(code, reason)) => {
                        let _ = client_tx
                            .send(Message::Close(Some(CloseFrame { code, reason: reason.into() })))
                            .await;
                        break;
                    }
                    // The reader is done: the client left.
                    None => break,
                },
                relayed = upstream_rx.next() => match relayed {
                    Some(Ok(Message::Text(text))) => {
                        self.observe(text.as_str());
                        Message::Text(text)
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => break,
                },
                _ = pings.tick() => Message::Ping(Vec::new().into()),
            };
            if client_tx.send(outgoing).await.is_err() {
                break;
            }
        }
        let _ = client_tx.close().await;
    }

    /// Notes a subscription the relay closed on its own.
    fn observe(&self, text: &str) {
        if !text.starts_with("[\"CLOSED\"") {
            return;
        }
        if let Ok(RelayMessage::Closed {
            subscription_id, ..
        }) = RelayMessage::from_json(text)
        {
            self.guard().relay_closed(&subscription_id);
        }
    }

    fn guard(&self) -> MutexGuard<'_, Guard> {
        self.guard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
