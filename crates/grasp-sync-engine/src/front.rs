//! The HTTP/WebSocket front of the grasp-sync daemon (its embedded relay and its `/metrics` +
//! `/status` endpoints) and of the test relays (`front` feature): one accept loop on a
//! listener, HTTP/1.1 from `hyper`, and WebSocket upgrades answered with `tungstenite`'s
//! handshake key.
//!
//! What the front guarantees, whatever it serves:
//! - **Bounded connections.** At most [`FrontLimits::max_connections`] open in total and
//!   [`FrontLimits::max_connections_per_ip`] from one address. A connection over either cap
//!   gets a canned `503` or `429` response, written without reading, and is closed.
//! - **No idle sockets.** A connection that has not sent a complete request head within
//!   [`FrontLimits::header_read_timeout`] is closed: a fresh one, a half-sent request, and
//!   a keep-alive connection between requests alike. (Idle WebSockets are the site's to time
//!   out: only it knows its protocol.)
//! - **Accept backoff.** A failed `accept` (for example when file descriptors run out) waits
//!   5 ms, doubling to 1 s while failures continue, instead of spinning.
//! - **Graceful shutdown.** [`Front::stop`] stops accepting, lets requests in flight finish
//!   for up to [`FrontLimits::shutdown_grace`], then closes what is left.
//!
//! A [`Site`] decides what each request gets and runs each upgraded WebSocket.

mod occupancy;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

pub use occupancy::{Admission, Occupancy, Refusal};

/// The first wait after a failed `accept`.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest wait after failed `accept`s.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The bounds the front enforces on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontLimits {
    /// Open connections in total (HTTP and WebSocket).
    pub max_connections: usize,
    /// Open connections from one IP address; 0 means no per-address cap.
    pub max_connections_per_ip: usize,
    /// How long a connection may take to send a complete request head.
    pub header_read_timeout: Duration,
    /// How long connections may take to finish once the front stops.
    pub shutdown_grace: Duration,
}

impl Default for FrontLimits {
    /// Generous bounds for test relays: 4,096 connections, no per-address cap, 10 s to send
    /// a request head, and no grace on stopping (a stopped test relay drops every connection
    /// at once, as a crashed relay would).
    fn default() -> Self {
        FrontLimits {
            max_connections: 4_096,
            max_connections_per_ip: 0,
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::ZERO,
        }
    }
}

/// What a front serves.
pub trait Site: Clone + Send + Sync + 'static {
    /// Answers a request that is not a WebSocket upgrade (or any request, when
    /// [`Site::serves_websockets`] is false).
    fn respond(
        &self,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send;

    /// Whether WebSocket upgrades are accepted.
    fn serves_websockets(&self) -> bool;

    /// Runs one upgraded connection: the raw stream after the `101` response.
    fn websocket(&self, io: TokioIo<Upgraded>, peer: SocketAddr)
    -> impl Future<Output = ()> + Send;

    /// Called for every accepted TCP connection, before the caps apply.
    fn accepted(&self, _peer: SocketAddr) {}
}

/// A running front.
#[derive(Debug)]
pub struct Front {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Front {
    /// Serves `site` on `listener` (which must be inside a tokio runtime) until stopped.
    pub fn start<S: Site>(
        listener: TcpListener,
        limits: FrontLimits,
        site: S,
    ) -> std::io::Result<Front> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(serve(listener, limits, site, stopped));
        Ok(Front { addr, stop, task })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets connections finish for up to [`FrontLimits::shutdown_grace`],
    /// and closes every connection.
    pub async fn stop(self) {
        // The task may already be gone; its exit is what we wait for.
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Closes the listener and every connection at once, without waiting.
    pub fn abort(&self) {
        self.task.abort();
    }
}

async fn serve<S: Site>(
    listener: TcpListener,
    limits: FrontLimits,
    site: S,
    mut stopped: watch::Receiver<bool>,
) {
    let occupancy = Arc::new(Occupancy::new(
        limits.max_connections,
        limits.max_connections_per_ip,
    ));
    let mut connections = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    site.accepted(peer);
                    match occupancy.admit(peer.ip()) {
                        Ok(admission) => {
                            connections.spawn(connection(
                                site.clone(),
                                stream,
                                peer,
                                limits.header_read_timeout,
                                admission,
                                stopped.clone(),
                            ));
                        }
                        Err(refusal) => turn_away(&stream, refusal),
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, wait = ?backoff, "cannot accept a connection");
                    tokio::select! {
                        _ = stopped.changed() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drain)
        .await
        .is_err()
    {
        connections.shutdown().await;
    }
}

/// Writes the canned refusal without waiting (a fresh socket's send buffer takes it) and
/// closes the connection by dropping it.
fn turn_away(stream: &TcpStream, refusal: Refusal) {
    let response = refusal.response();
    if let Err(error) = stream.try_write(response.as_bytes()) {
        tracing::debug!(%error, "cannot write the connection refusal");
    }
}

/// HTTP on one connection; after a WebSocket upgrade the site runs it in this same task.
async fn connection<S: Site>(
    site: S,
    stream: TcpStream,
    peer: SocketAddr,
    header_read_timeout: Duration,
    admission: Admission,
    mut stopped: watch::Receiver<bool>,
) {
    let _admission = admission;
    // Small frames (REQ, EOSE, CLOSE) go out at once.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, %peer, "cannot set TCP_NODELAY");
    }
    let (upgrades, mut upgraded) = mpsc::unbounded_channel::<OnUpgrade>();
    let handler = site.clone();
    let service = service_fn(move |request| {
        let handler = handler.clone();
        let upgrades = upgrades.clone();
        async move { Ok::<_, Infallible>(answer(&handler, request, &upgrades).await) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let mut served = pin!(
        builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
    );
    let result = tokio::select! {
        result = served.as_mut() => result,
        _ = stopped.changed() => {
            served.as_mut().graceful_shutdown();
            served.as_mut().await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, %peer, "http connection ended");
        return;
    }
    let Ok(on_upgrade) = upgraded.try_recv() else {
        return;
    };
    match on_upgrade.await {
        Ok(io) => site.websocket(TokioIo::new(io), peer).await,
        Err(error) => tracing::debug!(%error, %peer, "websocket upgrade failed"),
    }
}

/// One request: a WebSocket upgrade is answered here, anything else by the site.
async fn answer<S: Site>(
    site: &S,
    mut request: Request<Incoming>,
    upgrades: &mpsc::UnboundedSender<OnUpgrade>,
) -> Response<Full<Bytes>> {
    if !(site.serves_websockets() && is_websocket_upgrade(request.headers())) {
        return site.respond(request).await;
    }
    let Some(key) = request.headers().get(header::SEC_WEBSOCKET_KEY) else {
        return plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key\n");
    };
    let accept = derive_accept_key(key.as_bytes());
    if upgrades.send(hyper::upgrade::on(&mut request)).is_err() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "stopping\n");
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(value) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, value);
    }
    response
}

/// A response with a body and a content type.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A plain-text response.
pub fn plain(status: StatusCode, text: impl Into<String>) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(text.into()),
    )
}

/// Whether the request asks for a WebSocket upgrade.
pub fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    header_has_token(headers, header::CONNECTION, "upgrade")
        && header_has_token(headers, header::UPGRADE, "websocket")
}

/// Whether a comma-separated token of any `name` header equals `token`, ignoring case and
/// parameters such as `;q=0.9`.
pub fn header_has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|item| item.split(';').next())
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests;
