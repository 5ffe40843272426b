//! The operator endpoints: `GET /metrics` (Prometheus text) and `GET /status` (the engine's
//! [`EngineStatus`](grasp_sync_engine::EngineStatus) as JSON), on their own listener.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{RwLock, watch};
use tokio::task::{JoinHandle, JoinSet};

use grasp_sync_engine::EngineHandle;

use crate::http::{Body, plain, respond};
use crate::metrics::MetricsRegistry;

/// The running engine, shared with the endpoints; `None` once it is shut down.
pub(crate) type EngineSlot = Arc<RwLock<Option<EngineHandle>>>;

/// The running endpoints server.
#[derive(Debug)]
pub(crate) struct Endpoints {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Endpoints {
    /// Serves `/metrics` and `/status` on `listener` until stopped.
    pub(crate) fn start(
        listener: TcpListener,
        metrics: MetricsRegistry,
        engine: EngineSlot,
    ) -> std::io::Result<Endpoints> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let state = Arc::new(State { metrics, engine });
        let task = tokio::spawn(serve(listener, stopped, state));
        Ok(Endpoints { addr, stop, task })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and closes open connections.
    pub(crate) async fn stop(self) {
        // The task may already be gone; its exit is what we wait for.
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[derive(Debug)]
struct State {
    metrics: MetricsRegistry,
    engine: EngineSlot,
}

async fn serve(listener: TcpListener, mut stopped: watch::Receiver<bool>, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let state = Arc::clone(&state);
                    connections.spawn(async move {
                        let service = service_fn(move |request| {
                            let state = Arc::clone(&state);
                            async move { Ok::<_, Infallible>(answer(&state, request).await) }
                        });
                        let served = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(error) = served {
                            tracing::debug!(%error, "endpoint connection ended");
                        }
                    });
                }
                Err(error) => tracing::warn!(%error, "endpoints cannot accept"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
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
            let status = match state.engine.read().await.as_ref() {
                Some(engine) => engine.status().await,
                None => None,
            };
            let Some(status) = status else {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the engine is not running\n",
                );
            };
            match serde_json::to_vec_pretty(&status) {
                Ok(json) => respond(StatusCode::OK, "application/json", Bytes::from(json)),
                Err(error) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")),
            }
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "grasp-sync: GET /metrics or /status\n",
        ),
    }
}
