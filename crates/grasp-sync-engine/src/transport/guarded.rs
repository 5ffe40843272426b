//! Outbound connections that check the address they dial. [`connect_checked`] resolves a
//! relay's host itself, checks every address with [`AddressPolicy::check_address`], and
//! connects only to an allowed one, so the address that was checked is the address that is
//! dialled (no second resolution, no DNS rebinding in between). It sets `TCP_NODELAY`, so
//! small frames (REQ, CLOSE) leave at once. Both the WebSocket dial ([`GuardedWebSocket`], the
//! relay pool's transport) and the NIP-11 fetch go through it. [`GuardedWebSocket`] also counts
//! the text-frame bytes each of its connections writes and reads ([`WireBytes`]).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::SplitSink;
use futures::{Sink, SinkExt, StreamExt};
use nostr::util::BoxedFuture;
use nostr_sdk::pool::ConnectionMode;
use nostr_sdk::pool::transport::error::TransportError as PoolError;
use nostr_sdk::pool::transport::websocket::{WebSocketSink, WebSocketStream, WebSocketTransport};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};

use super::nip11::tls_connector;
use super::wire::{WireBytes, WireCounter};
use crate::address::AddressPolicy;
use crate::error::TransportError;

/// Largest message accepted from a relay: 16 MiB, a quarter of the WebSocket stack's default.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Each connection's read buffer: 16 KiB. The WebSocket stack zeroes its whole read buffer
/// before the first read, so the default of 128 KiB stays resident for the connection's life:
/// 3 MiB for the two dozen connections of an idle daemon at ten times the gitnostr size. A
/// larger frame grows the buffer as it needs.
const READ_BUFFER: usize = 16 * 1024;

/// Resolves `url`'s host, keeps the addresses `policy` allows, and connects TCP to the first
/// that answers. Refused when every resolved address is refused.
pub async fn connect_checked(
    policy: &AddressPolicy,
    url: &url::Url,
) -> Result<TcpStream, TransportError> {
    let host = url
        .host()
        .ok_or_else(|| TransportError::BadUrl("no host".to_owned()))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| TransportError::BadUrl("no port".to_owned()))?;
    let (name, resolved): (String, Vec<SocketAddr>) = match host {
        url::Host::Ipv4(ip) => (ip.to_string(), vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        url::Host::Ipv6(ip) => (ip.to_string(), vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        url::Host::Domain(name) => {
            let addresses = tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| TransportError::Connect(format!("cannot resolve {name}: {e}")))?;
            (name.to_ascii_lowercase(), addresses.collect())
        }
    };
    let mut refused = None;
    let mut allowed = Vec::new();
    for address in resolved {
        match policy.check_address(&name, address.ip()) {
            Ok(()) => allowed.push(address),
            Err(refusal) => {
                refused.get_or_insert((address.ip(), refusal));
            }
        }
    }
    if allowed.is_empty() {
        return Err(match refused {
            Some((address, refusal)) => TransportError::Refused {
                host: name,
                address,
                reason: refusal.label(),
            },
            None => TransportError::Connect(format!("{name} resolves to no address")),
        });
    }
    let mut last = None;
    for address in allowed {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, %address, "cannot set TCP_NODELAY");
                }
                return Ok(stream);
            }
            Err(error) => last = Some(error),
        }
    }
    Err(TransportError::Connect(last.map_or_else(
        || "no address answered".to_owned(),
        |e| e.to_string(),
    )))
}

/// Any byte stream a WebSocket can run over (plain TCP, or TLS over TCP).
pub(crate) trait ByteStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> ByteStream for T {}

/// TCP (checked) then TLS for `wss`.
pub(crate) async fn open_stream(
    policy: &AddressPolicy,
    url: &url::Url,
) -> Result<Box<dyn ByteStream>, TransportError> {
    let tcp = connect_checked(policy, url).await?;
    if url.scheme() != "wss" {
        return Ok(Box::new(tcp));
    }
    let host = url
        .host_str()
        .ok_or_else(|| TransportError::BadUrl("no host".to_owned()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host)
        .map_err(|e| TransportError::BadUrl(e.to_string()))?;
    let tls = tls_connector()?
        .connect(name, tcp)
        .await
        .map_err(|e| TransportError::Connect(format!("tls: {e}")))?;
    Ok(Box::new(tls))
}

/// The relay pool's WebSocket transport: every dial through [`connect_checked`]. One pool
/// holds at most one connection per relay URL, so the transport keeps what it learns per URL:
/// the refusal of the last dial, so the caller can tell it from other failures (the relay pool
/// reports every failure as text), and the byte count of the connection the last dial opened
/// (every text frame written or read adds its length, [`GuardedWebSocket::wire_bytes`]). Each
/// dial counts from zero. Clones share both.
#[derive(Clone)]
pub struct GuardedWebSocket {
    policy: Arc<AddressPolicy>,
    dials: Arc<Mutex<HashMap<url::Url, Dial>>>,
}

/// What the last dial of one URL left: its refusal, or its connection's byte counter.
#[derive(Debug, Default)]
struct Dial {
    refusal: Option<TransportError>,
    wire: Arc<WireCounter>,
}

impl fmt::Debug for GuardedWebSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedWebSocket")
            .field("policy", &self.policy)
            .finish()
    }
}

impl GuardedWebSocket {
    /// A transport dialling only what `policy` allows.
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        Self {
            policy,
            dials: Arc::default(),
        }
    }

    /// Text-frame bytes written and read on the connection the last dial of `url` opened
    /// (zero if there is none).
    pub fn wire_bytes(&self, url: &url::Url) -> WireBytes {
        self.dials()
            .get(url)
            .map_or_else(WireBytes::default, |dial| dial.wire.snapshot())
    }

    /// The address refusal of the last dial of `url`, if it was refused.
    pub fn take_refusal(&self, url: &url::Url) -> Option<TransportError> {
        self.dials().get_mut(url)?.refusal.take()
    }

    /// Forgets `url`'s last dial, once its connection is done with.
    pub fn forget(&self, url: &url::Url) {
        self.dials().remove(url);
    }

    /// The byte counter of the connection the last dial of `url` opened.
    pub(crate) fn counter(&self, url: &url::Url) -> Arc<WireCounter> {
        Arc::clone(&self.dials().entry(url.clone()).or_default().wire)
    }

    fn dials(&self) -> std::sync::MutexGuard<'_, HashMap<url::Url, Dial>> {
        self.dials.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WebSocketTransport for GuardedWebSocket {
    fn support_ping(&self) -> bool {
        true
    }

    fn connect<'a>(
        &'a self,
        url: &'a url::Url,
        mode: &'a ConnectionMode,
        timeout: Duration,
    ) -> BoxedFuture<'a, Result<(WebSocketSink, WebSocketStream), PoolError>> {
        Box::pin(async move {
            if !matches!(mode, ConnectionMode::Direct) {
                return Err(PoolError::backend(TransportError::Connect(
                    "only direct connections are supported".to_owned(),
                )));
            }
            // A new dial of `url`: nothing refused yet, a new connection counted from zero.
            let wire = {
                let mut dials = self.dials();
                let dial = dials.entry(url.clone()).or_default();
                *dial = Dial::default();
                Arc::clone(&dial.wire)
            };
            let dial = async {
                let stream = match open_stream(&self.policy, url).await {
                    Ok(stream) => stream,
                    Err(refused @ TransportError::Refused { .. }) => {
                        if let Some(dial) = self.dials().get_mut(url) {
                            dial.refusal = Some(refused.clone());
                        }
                        return Err(refused);
                    }
                    Err(other) => return Err(other),
                };
                let config = WebSocketConfig::default()
                    .read_buffer_size(READ_BUFFER)
                    .max_message_size(Some(MAX_MESSAGE))
                    .max_frame_size(Some(MAX_MESSAGE));
                let (socket, _) =
                    tokio_tungstenite::client_async_with_config(url.as_str(), stream, Some(config))
                        .await
                        .map_err(|e| TransportError::Connect(e.to_string()))?;
                Ok::<_, TransportError>(socket)
            };
            let socket = tokio::time::timeout(timeout, dial)
                .await
                .map_err(|_| PoolError::backend(TransportError::Timeout))?
                .map_err(PoolError::backend)?;
            let (tx, rx) = socket.split();
            let sink: WebSocketSink = Box::new(Outgoing {
                sink: tx,
                wire: Arc::clone(&wire),
            });
            let stream: WebSocketStream = Box::pin(rx.filter_map(move |item| {
                let wire = Arc::clone(&wire);
                async move {
                    match item {
                        Ok(message) => incoming(message, &wire).map(Ok),
                        Err(error) => Some(Err(PoolError::backend(error))),
                    }
                }
            }));
            Ok((sink, stream))
        })
    }
}

/// A tungstenite message as the relay pool's message type, a text frame counted on `wire`;
/// raw frames are never read.
fn incoming(message: WsMessage, wire: &WireCounter) -> Option<async_wsocket::Message> {
    use async_wsocket::Message;
    Some(match message {
        WsMessage::Text(text) => {
            wire.handle_received(text.len());
            Message::Text(text.to_string())
        }
        WsMessage::Binary(data) => Message::Binary(data.to_vec()),
        WsMessage::Ping(data) => Message::Ping(data.to_vec()),
        WsMessage::Pong(data) => Message::Pong(data.to_vec()),
        WsMessage::Close(frame) => Message::Close(frame.map(Into::into)),
        WsMessage::Frame(_) => return None,
    })
}

/// The sending half, taking the relay pool's message type and counting its text frames.
struct Outgoing {
    sink: SplitSink<tokio_tungstenite::WebSocketStream<Box<dyn ByteStream>>, WsMessage>,
    wire: Arc<WireCounter>,
}

impl Sink<async_wsocket::Message> for Outgoing {
    type Error = PoolError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PoolError>> {
        self.sink.poll_ready_unpin(cx).map_err(backend)
    }

    fn start_send(mut self: Pin<&mut Self>, item: async_wsocket::Message) -> Result<(), PoolError> {
        let text = match &item {
            async_wsocket::Message::Text(text) => Some(text.len()),
            _ => None,
        };
        self.sink.start_send_unpin(item.into()).map_err(backend)?;
        if let Some(len) = text {
            self.wire.handle_sent(len);
        }
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PoolError>> {
        self.sink.poll_flush_unpin(cx).map_err(backend)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), PoolError>> {
        self.sink.poll_close_unpin(cx).map_err(backend)
    }
}

fn backend(error: tungstenite::Error) -> PoolError {
    PoolError::backend(error)
}

#[cfg(test)]
mod tests;
