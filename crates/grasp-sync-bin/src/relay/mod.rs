//! [`EmbeddedRelay`]: the daemon's own relay, a `nostr-relay-builder` relay over the store's
//! database and write policy, served on our own listener: WebSocket upgrades are answered here
//! and handed to `LocalRelay::take_connection`, a NIP-11 request gets a small document, so the
//! bound address is known before anything connects (port 0 picks a free port without racing).

use std::convert::Infallible;
use std::net::SocketAddr;

use grasp_sync_engine::LmdbStore;
use hyper::body::{Bytes, Incoming};
use hyper::header;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nostr::hashes::{Hash, HashEngine, sha1};
use nostr_relay_builder::LocalRelay;
use nostr_relay_builder::builder::{RateLimit, RelayBuilder};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::http::{Body, header_has_token, plain, respond};

/// The GUID that RFC 6455 appends to `Sec-WebSocket-Key`.
const WEBSOCKET_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The NIP-11 media type.
const NOSTR_JSON: &str = "application/nostr+json";
/// Events a client connection may publish per minute.
const NOTES_PER_MINUTE: u32 = 600;
/// Open subscriptions per client connection.
const MAX_SUBSCRIPTIONS: usize = 100;

/// The running embedded relay.
#[derive(Debug)]
pub(crate) struct EmbeddedRelay {
    addr: SocketAddr,
    relay: LocalRelay,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl EmbeddedRelay {
    /// Serves the store through a relay on `listener`.
    pub(crate) fn start(listener: TcpListener, store: &LmdbStore) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let builder = RelayBuilder::default()
            .database(store.database())
            .write_policy(store.write_policy())
            .rate_limit(RateLimit {
                max_reqs: MAX_SUBSCRIPTIONS,
                notes_per_minute: NOTES_PER_MINUTE,
            });
        let relay = LocalRelay::new(builder);
        let (stop, stopped) = watch::channel(false);
        let front = Front {
            relay: relay.clone(),
            info: Bytes::from(info_document().to_string()),
        };
        let task = tokio::spawn(front.serve(listener, stopped));
        Ok(EmbeddedRelay {
            addr,
            relay,
            stop,
            task,
        })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle to the relay, for pushing events to its subscribers.
    pub(crate) fn local(&self) -> LocalRelay {
        self.relay.clone()
    }

    /// Stops accepting, closes every connection and stops the relay.
    pub(crate) async fn stop(self) {
        self.relay.shutdown();
        // The task may already be gone; its exit is what we wait for.
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// The accept loop and HTTP handling in front of the relay.
#[derive(Debug, Clone)]
struct Front {
    relay: LocalRelay,
    info: Bytes,
}

impl Front {
    async fn serve(self, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        connections.spawn(self.clone().connection(stream, peer));
                    }
                    Err(error) => tracing::warn!(%error, "relay cannot accept"),
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        connections.shutdown().await;
    }

    /// HTTP on one connection; after a WebSocket upgrade the relay runs in this task.
    async fn connection(self, stream: TcpStream, peer: SocketAddr) {
        let (upgrades, mut upgraded) = mpsc::unbounded_channel::<OnUpgrade>();
        let front = self.clone();
        let service = service_fn(move |request| {
            let response = front.answer(request, &upgrades);
            async move { Ok::<_, Infallible>(response) }
        });
        let served = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
        if let Err(error) = served {
            tracing::debug!(%error, %peer, "relay http connection ended");
            return;
        }
        let Ok(on_upgrade) = upgraded.try_recv() else {
            return;
        };
        match on_upgrade.await {
            Ok(io) => {
                if let Err(error) = self.relay.take_connection(TokioIo::new(io), peer).await {
                    tracing::debug!(%error, %peer, "relay websocket ended");
                }
            }
            Err(error) => tracing::debug!(%error, %peer, "websocket upgrade failed"),
        }
    }

    fn answer(
        &self,
        mut request: Request<Incoming>,
        upgrades: &mpsc::UnboundedSender<OnUpgrade>,
    ) -> Response<Body> {
        let headers = request.headers();
        if header_has_token(headers, header::CONNECTION, "upgrade")
            && header_has_token(headers, header::UPGRADE, "websocket")
        {
            let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
                return plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key\n");
            };
            let accept = websocket_accept(key.as_bytes());
            if upgrades.send(hyper::upgrade::on(&mut request)).is_err() {
                return plain(StatusCode::SERVICE_UNAVAILABLE, "relay is stopping\n");
            }
            let mut response = respond(StatusCode::SWITCHING_PROTOCOLS, "text/plain", Bytes::new());
            let headers = response.headers_mut();
            headers.insert(
                header::CONNECTION,
                header::HeaderValue::from_static("Upgrade"),
            );
            headers.insert(
                header::UPGRADE,
                header::HeaderValue::from_static("websocket"),
            );
            if let Ok(value) = header::HeaderValue::from_str(&accept) {
                headers.insert(header::SEC_WEBSOCKET_ACCEPT, value);
            }
            return response;
        }
        if header_has_token(headers, header::ACCEPT, NOSTR_JSON) {
            let mut response = respond(StatusCode::OK, NOSTR_JSON, self.info.clone());
            response.headers_mut().insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                header::HeaderValue::from_static("*"),
            );
            return response;
        }
        plain(
            StatusCode::OK,
            "grasp-sync relay: connect with a WebSocket client\n",
        )
    }
}

/// The relay's NIP-11 document.
fn info_document() -> serde_json::Value {
    serde_json::json!({
        "name": "grasp-sync",
        "description": "GRASP relay kept complete by proactive sync",
        "software": "grasp-sync",
        "version": env!("CARGO_PKG_VERSION"),
        "supported_nips": [1, 9, 11, 22, 34, 77],
        "limitation": { "max_subscriptions": MAX_SUBSCRIPTIONS },
    })
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (RFC 6455, section 4.2.2).
pub(crate) fn websocket_accept(key: &[u8]) -> String {
    let mut engine = sha1::Hash::engine();
    engine.input(key);
    engine.input(WEBSOCKET_GUID);
    encode_base64(sha1::Hash::from_engine(engine).as_byte_array())
}

/// Standard base64 with padding.
fn encode_base64(bytes: &[u8]) -> String {
    const SYMBOLS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let word = group.iter().enumerate().fold(0u32, |acc, (i, byte)| {
            acc | u32::from(*byte) << (16 - 8 * i)
        });
        for position in 0..4 {
            if position <= group.len() {
                let index = (word >> (18 - 6 * position)) & 0x3f;
                out.push(char::from(SYMBOLS[index as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
