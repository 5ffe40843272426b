//! [`EmbeddedRelay`]: the daemon's own relay, a `nostr-relay-builder` relay over the store's
//! database and write policy, served on the shared HTTP/WebSocket front
//! ([`grasp_sync_engine::front`]) on our own listener, so the bound address is known before
//! anything connects (port 0 picks a free port without racing).
//!
//! Every client connection goes through a [`guard`](self::guard) that enforces
//! [`RelayLimits`] with NIP-01 refusal texts; NIP-77 is served by the guard's own sessions
//! ([`negentropy`](self::negentropy)); heavy store reads run off the async workers
//! ([`offload`](self::offload)); the NIP-11 document advertises every limit a client can plan
//! by ([`nip11`](self::nip11)).

#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod guard;
pub(crate) mod limits;
mod negentropy;
mod nip11;
mod offload;
mod proxy;

use std::net::SocketAddr;
use std::sync::Arc;

use grasp_sync_engine::LmdbStore;
use grasp_sync_engine::front::{Front, Site, header_has_token, plain, respond};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::upgrade::Upgraded;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use nostr_database::NostrDatabase;
use nostr_relay_builder::LocalRelay;
use nostr_relay_builder::builder::{RateLimit, RelayBuilder};
use tokio::net::TcpListener;

pub use limits::RelayLimits;
use offload::OffloadedReads;
use proxy::Shared;

/// The NIP-11 media type.
const NOSTR_JSON: &str = "application/nostr+json";

/// The running embedded relay.
#[derive(Debug)]
pub(crate) struct EmbeddedRelay {
    relay: LocalRelay,
    front: Front,
}

impl EmbeddedRelay {
    /// Serves the store through a relay on `listener`, within `limits`.
    pub(crate) fn start(
        listener: TcpListener,
        store: &LmdbStore,
        limits: RelayLimits,
    ) -> std::io::Result<Self> {
        let database: Arc<dyn NostrDatabase> = Arc::new(OffloadedReads::new(
            store.database(),
            limits.concurrent_reads,
        ));
        let builder = RelayBuilder::default()
            .database(Arc::clone(&database))
            .write_policy(store.write_policy())
            .rate_limit(RateLimit {
                max_reqs: limits.max_subscriptions,
                notes_per_minute: limits.events_per_minute,
            })
            .max_subid_length(limits.max_subid_length)
            .max_filter_limit(limits.max_limit)
            .default_filter_limit(limits.default_limit);
        let relay = LocalRelay::new(builder);
        let front_limits = limits.front();
        let site = RelaySite {
            info: Bytes::from(nip11::document(&limits).to_string()),
            shared: Shared {
                relay: relay.clone(),
                limits: Arc::new(limits),
                database,
            },
        };
        let front = Front::start(listener, front_limits, site)?;
        Ok(EmbeddedRelay { relay, front })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.front.addr()
    }

    /// A handle to the relay, for pushing events to its subscribers.
    pub(crate) fn local(&self) -> LocalRelay {
        self.relay.clone()
    }

    /// Stops accepting, closes every connection and stops the relay.
    pub(crate) async fn stop(self) {
        self.relay.shutdown();
        self.front.stop().await;
    }
}

/// What the relay's front serves.
#[derive(Debug, Clone)]
struct RelaySite {
    shared: Shared,
    info: Bytes,
}

impl Site for RelaySite {
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if header_has_token(request.headers(), header::ACCEPT, NOSTR_JSON) {
            let mut response = respond(StatusCode::OK, NOSTR_JSON, self.info.clone());
            response.headers_mut().insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            return response;
        }
        plain(
            StatusCode::OK,
            "grasp-sync relay: connect with a WebSocket client\n",
        )
    }

    fn serves_websockets(&self) -> bool {
        true
    }

    async fn websocket(&self, io: TokioIo<Upgraded>, peer: SocketAddr) {
        proxy::serve(self.shared.clone(), io, peer).await;
    }
}
