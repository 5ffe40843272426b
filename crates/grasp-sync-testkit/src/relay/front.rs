//! The HTTP front of a test relay: our own accept loop on the relay's listener, NIP-11
//! documents for `Accept: application/nostr+json` requests, and WebSocket upgrades handed to
//! `LocalRelay::take_connection`, or to the strict relay's message proxy when the relay has
//! strict limits. Every connection is a task in one set, so stopping the loop closes them
//! all.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nostr::hashes::{Hash, HashEngine, sha1};
use nostr_relay_builder::LocalRelay;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::strict::proxy::{self, Strict};

/// The GUID RFC 6455 appends to `Sec-WebSocket-Key`.
const WEBSOCKET_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The NIP-11 media type.
const NOSTR_JSON: &str = "application/nostr+json";

/// Connection counters shared by a relay and its front.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) tcp_accepted: AtomicU64,
    pub(crate) websockets_accepted: AtomicU64,
    pub(crate) websockets_open: AtomicU64,
    pub(crate) nip11_requests: AtomicU64,
}

/// The accept loop and request handling for one run of a relay.
#[derive(Debug, Clone)]
pub(crate) struct Front {
    relay: LocalRelay,
    nip11: Option<Bytes>,
    counters: Arc<Counters>,
    strict: Option<Strict>,
}

impl Front {
    /// A front for `relay`; with `strict`, every WebSocket goes through the message proxy.
    pub(crate) fn new(
        relay: LocalRelay,
        nip11: Option<Value>,
        counters: Arc<Counters>,
        strict: Option<Strict>,
    ) -> Self {
        Self {
            relay,
            nip11: nip11.map(|doc| Bytes::from(doc.to_string())),
            counters,
            strict,
        }
    }

    /// Accepts connections until `stopped` changes or its sender is gone, then closes the
    /// listener and every connection.
    pub(crate) async fn serve(self, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        self.counters.tcp_accepted.fetch_add(1, Ordering::Relaxed);
                        // Small frames (REQ, EOSE, CLOSE) go out at once, as relays send them.
                        if let Err(error) = stream.set_nodelay(true) {
                            tracing::debug!(%error, %peer, "cannot set TCP_NODELAY");
                        }
                        connections.spawn(self.clone().connection(stream, peer));
                    }
                    Err(error) => tracing::warn!(%error, "test relay cannot accept"),
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        connections.shutdown().await;
    }

    /// Serves HTTP on one connection; after a WebSocket upgrade, hands the stream to the
    /// relay and runs it in this same task.
    async fn connection(self, stream: TcpStream, peer: SocketAddr) {
        let (upgrades, mut upgraded) = mpsc::unbounded_channel::<OnUpgrade>();
        let front = self.clone();
        let service = service_fn(move |request| {
            let response = front.respond(request, &upgrades);
            async move { Ok::<_, Infallible>(response) }
        });
        let served = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
        if let Err(error) = served {
            tracing::debug!(%error, %peer, "test relay http connection ended");
            return;
        }
        let Ok(on_upgrade) = upgraded.try_recv() else {
            return;
        };
        match on_upgrade.await {
            Ok(io) => {
                self.counters
                    .websockets_accepted
                    .fetch_add(1, Ordering::Relaxed);
                let _open = OpenGuard::new(&self.counters);
                let io = TokioIo::new(io);
                if let Some(strict) = &self.strict {
                    proxy::serve(self.relay.clone(), io, peer, strict.clone()).await;
                } else if let Err(error) = self.relay.take_connection(io, peer).await {
                    tracing::debug!(%error, %peer, "test relay websocket ended");
                }
            }
            Err(error) => tracing::debug!(%error, %peer, "websocket upgrade failed"),
        }
    }

    /// Answers one HTTP request.
    fn respond(
        &self,
        mut request: Request<Incoming>,
        upgrades: &mpsc::UnboundedSender<OnUpgrade>,
    ) -> Response<Full<Bytes>> {
        if is_websocket_upgrade(request.headers()) {
            let Some(key) = request.headers().get(header::SEC_WEBSOCKET_KEY) else {
                return plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
            };
            let accept = accept_key(key.as_bytes());
            if upgrades.send(hyper::upgrade::on(&mut request)).is_err() {
                return plain(StatusCode::SERVICE_UNAVAILABLE, "relay is stopping");
            }
            return Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header(header::CONNECTION, "Upgrade")
                .header(header::UPGRADE, "websocket")
                .header(header::SEC_WEBSOCKET_ACCEPT, accept)
                .body(Full::new(Bytes::new()))
                .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "bad response"));
        }
        if header_contains(request.headers(), header::ACCEPT, NOSTR_JSON) {
            self.counters.nip11_requests.fetch_add(1, Ordering::Relaxed);
            return match &self.nip11 {
                Some(doc) => Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, NOSTR_JSON)
                    .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
                    .body(Full::new(doc.clone()))
                    .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "bad response")),
                None => plain(StatusCode::NOT_FOUND, "no relay information document"),
            };
        }
        plain(
            StatusCode::OK,
            "grasp-sync test relay: connect with a WebSocket",
        )
    }
}

/// Decrements the open-WebSocket counter when the connection ends, however it ends.
struct OpenGuard {
    counters: Arc<Counters>,
}

impl OpenGuard {
    fn new(counters: &Arc<Counters>) -> Self {
        counters.websockets_open.fetch_add(1, Ordering::Relaxed);
        Self {
            counters: Arc::clone(counters),
        }
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.counters
            .websockets_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A plain-text response.
fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Whether the request asks for a WebSocket upgrade.
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    header_contains(headers, header::CONNECTION, "upgrade")
        && header_contains(headers, header::UPGRADE, "websocket")
}

/// Whether any comma-separated token of any `name` header equals `token`, ignoring case and
/// parameters such as `;q=0.9`.
fn header_contains(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or_default().trim())
        .any(|item| item.eq_ignore_ascii_case(token))
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (RFC 6455 section 4.2.2).
pub(crate) fn accept_key(key: &[u8]) -> String {
    let mut engine = sha1::Hash::engine();
    engine.input(key);
    engine.input(WEBSOCKET_GUID);
    base64(sha1::Hash::from_engine(engine).as_byte_array())
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
