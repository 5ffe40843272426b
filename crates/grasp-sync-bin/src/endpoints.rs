//! The operator endpoints, on their own listener: `GET /` (the status page, see
//! [`status_page`](crate::status_page)), `GET /metrics` (Prometheus text) and `GET /status`
//! (the engine's [`EngineStatus`](grasp_sync_engine::EngineStatus) as JSON).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::front::{Front, FrontLimits, Site, plain, respond};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::upgrade::Upgraded;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::RwLock;

use grasp_sync_engine::EngineHandle;

use crate::history::SharedHistory;
use crate::metrics::MetricsRegistry;
use crate::status_page;

type Body = Full<Bytes>;

/// The running engine, shared with the endpoints; `None` once it is shut down.
pub(crate) type EngineSlot = Arc<RwLock<Option<EngineHandle>>>;

/// The endpoints' own bounds: few clients (a scraper, an operator), each kept short.
const LIMITS: FrontLimits = FrontLimits {
    max_connections: 64,
    max_connections_per_ip: 0,
    header_read_timeout: Duration::from_secs(10),
    shutdown_grace: Duration::from_secs(2),
};

/// The running endpoints server.
#[derive(Debug)]
pub(crate) struct Endpoints {
    front: Front,
}

impl Endpoints {
    /// Serves `/`, `/metrics` and `/status` on `listener` until stopped.
    pub(crate) fn start(
        listener: TcpListener,
        metrics: MetricsRegistry,
        engine: EngineSlot,
        history: SharedHistory,
    ) -> std::io::Result<Endpoints> {
        let state = Arc::new(State {
            metrics,
            engine,
            history,
        });
        let front = Front::start(listener, LIMITS, EndpointSite { state })?;
        Ok(Endpoints { front })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.front.addr()
    }

    /// Stops accepting and closes open connections.
    pub(crate) async fn stop(self) {
        self.front.stop().await;
    }
}

#[derive(Debug)]
struct State {
    metrics: MetricsRegistry,
    engine: EngineSlot,
    history: SharedHistory,
}

#[derive(Debug, Clone)]
struct EndpointSite {
    state: Arc<State>,
}

impl Site for EndpointSite {
    async fn respond(&self, request: Request<Incoming>) -> Response<Body> {
        answer(&self.state, request).await
    }

    fn serves_websockets(&self) -> bool {
        false
    }

    async fn websocket(&self, _io: TokioIo<Upgraded>, _peer: SocketAddr) {}
}

async fn answer(state: &State, request: Request<Incoming>) -> Response<Body> {
    if request.method() != Method::GET {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n");
    }
    match request.uri().path() {
        "/metrics" => match state.metrics.render() {
            Ok(text) => respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                Bytes::from(text),
            ),
            Err(error) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}\n")),
        },
        "/status" => {
            let Some(status) = engine_status(&state.engine).await else {
                return not_running();
            };
            match serde_json::to_vec_pretty(&status) {
                Ok(json) => respond(StatusCode::OK, "application/json", Bytes::from(json)),
                Err(error) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")),
            }
        }
        "/" => {
            let Some(status) = engine_status(&state.engine).await else {
                return not_running();
            };
            let uptime = state.history.uptime();
            let sort = status_page::sort_from_query(request.uri().query());
            let page = state
                .history
                .read(|history| status_page::render(&status, history, uptime, sort));
            respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                Bytes::from(page),
            )
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "grasp-sync: GET /, /metrics or /status\n",
        ),
    }
}

/// The status of the engine in `slot`; `None` once it is shut down or stopped.
pub(crate) async fn engine_status(slot: &EngineSlot) -> Option<grasp_sync_engine::EngineStatus> {
    match slot.read().await.as_ref() {
        Some(engine) => engine.status().await,
        None => None,
    }
}

fn not_running() -> Response<Body> {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the engine is not running\n",
    )
}
