//! What a test relay serves on the engine's shared `Front`: NIP-11 documents
//! for `Accept: application/nostr+json` requests, and WebSocket upgrades handed to
//! `LocalRelay::take_connection`, or to the strict relay's message proxy when the relay has
//! strict limits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use grasp_sync_engine::front::{Site, header_has_token, plain, respond};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::upgrade::Upgraded;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nostr_relay_builder::LocalRelay;
use serde_json::Value;

use super::strict::proxy::{self, Strict};

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

/// The request handling of one run of a relay.
#[derive(Debug, Clone)]
pub(crate) struct RelaySite {
    relay: LocalRelay,
    nip11: Option<Bytes>,
    counters: Arc<Counters>,
    strict: Option<Strict>,
}

impl RelaySite {
    /// A site for `relay`; with `strict`, every WebSocket goes through the message proxy.
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
}

impl Site for RelaySite {
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if !header_has_token(request.headers(), header::ACCEPT, NOSTR_JSON) {
            return plain(
                StatusCode::OK,
                "grasp-sync test relay: connect with a WebSocket\n",
            );
        }
        self.counters.nip11_requests.fetch_add(1, Ordering::Relaxed);
        match &self.nip11 {
            Some(doc) => {
                let mut response = respond(StatusCode::OK, NOSTR_JSON, doc.clone());
                response.headers_mut().insert(
                    header::ACCESS_CONTROL_ALLOW_ORIGIN,
                    HeaderValue::from_static("*"),
                );
                response
            }
            None => plain(StatusCode::NOT_FOUND, "no relay information document\n"),
        }
    }

    fn serves_websockets(&self) -> bool {
        true
    }

    async fn websocket(&self, io: TokioIo<Upgraded>, peer: SocketAddr) {
        self.counters
            .websockets_accepted
            .fetch_add(1, Ordering::Relaxed);
        let _open = OpenGuard::new(&self.counters);
        if let Some(strict) = &self.strict {
            proxy::serve(self.relay.clone(), io, peer, strict.clone()).await;
        } else if let Err(error) = self.relay.take_connection(io, peer).await {
            tracing::debug!(%error, %peer, "test relay websocket ended");
        }
    }

    fn accepted(&self, _peer: SocketAddr) {
        self.counters.tcp_accepted.fetch_add(1, Ordering::Relaxed);
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
