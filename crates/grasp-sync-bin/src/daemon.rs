//! [`Daemon`]: the running `grasp-sync`: the own store (embedded relay over LMDB, or an
//! external relay), the sync engine writing into it, the `/`, `/metrics` and `/status`
//! endpoints and the history the status page plots; [`run`] adds signal handling and a bounded graceful shutdown, and stops the daemon
//! with an error when the engine's task ends on its own, so a supervisor restarts it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{
    EngineEnd, EngineExit, EngineParts, EngineStatus, LmdbStore, SdkConnector, StoreConfig,
    SyncEngine,
};
use grasp_sync_model::RelayUrl;
use nostr::EventId;
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use tokio::net::TcpListener;
use tokio::sync::RwLock;

use crate::config::Settings;
use crate::endpoints::{Endpoints, EngineSlot};
use crate::external::{ExternalFeed, ExternalStore, HaveIndex, OwnRelayLink};
use crate::feed::RestartingFeed;
use crate::history::SharedHistory;
use crate::metrics::MetricsRegistry;
use crate::progress::FirstSync;
use crate::relay::EmbeddedRelay;
use crate::synced::SyncedEvents;

/// The whole shutdown must finish within this, or the daemon exits anyway.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(9);
/// How long start waits for the first connection to an external own relay.
const EXTERNAL_CONNECT_WAIT: Duration = Duration::from_secs(10);
/// Subdirectory of the data directory holding the embedded relay's LMDB store.
pub const STORE_DIR: &str = "store";
/// Subdirectory of the data directory holding external mode's local index.
pub const INDEX_DIR: &str = "external-index";

/// The own store, by mode.
#[derive(Debug)]
enum Own {
    Embedded {
        relay: Box<EmbeddedRelay>,
        store: LmdbStore,
    },
    External {
        link: Arc<OwnRelayLink>,
        store: ExternalStore,
    },
}

impl Own {
    /// The relay whose subscribers see synced events live: the embedded one.
    fn live_relay(&self) -> Option<nostr_relay_builder::LocalRelay> {
        match self {
            Own::Embedded { relay, .. } => Some(relay.local()),
            Own::External { .. } => None,
        }
    }
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    service_url: RelayUrl,
    own: Own,
    engine: EngineSlot,
    exit: EngineExit,
    endpoints: Endpoints,
    metrics: MetricsRegistry,
    sampler: tokio::task::JoinHandle<()>,
}

/// The engine's task ended while the daemon was serving: it panicked, or it returned without
/// being asked. The daemon cannot sync without it.
#[derive(Debug, thiserror::Error)]
#[error("the sync engine stopped on its own: {0}")]
pub struct EngineStopped(pub EngineEnd);

impl Daemon {
    /// Starts the daemon as `settings` say: binds `listen` (embedded mode) and
    /// `metrics_listen`, opens the store, starts the engine.
    pub async fn start(settings: &Settings) -> anyhow::Result<Daemon> {
        if settings.own_relay.is_some() {
            return Daemon::start_inner(settings, None).await;
        }
        let listener = TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("binding the relay address (listen = {})", settings.listen))?;
        Daemon::start_inner(settings, Some(listener)).await
    }

    /// Starts an embedded daemon whose relay serves on an already bound `listener` (so its
    /// URL can be known, and given to others, before the daemon starts); `settings.listen`
    /// is ignored.
    pub async fn start_on(settings: &Settings, listener: TcpListener) -> anyhow::Result<Daemon> {
        anyhow::ensure!(
            settings.own_relay.is_none(),
            "a relay listener was given but own_relay selects external mode"
        );
        Daemon::start_inner(settings, Some(listener)).await
    }

    async fn start_inner(
        settings: &Settings,
        listener: Option<TcpListener>,
    ) -> anyhow::Result<Daemon> {
        std::fs::create_dir_all(&settings.data_dir).with_context(|| {
            format!(
                "creating the data directory (data_dir = {})",
                settings.data_dir.display()
            )
        })?;
        let metrics = MetricsRegistry::new()?;
        let engine: EngineSlot = Arc::new(RwLock::new(None));
        let metrics_listener = TcpListener::bind(settings.metrics_listen)
            .await
            .with_context(|| {
                format!(
                    "binding the metrics address (metrics_listen = {})",
                    settings.metrics_listen
                )
            })?;
        let (service_url, own, parts) = match (listener, &settings.own_relay) {
            (Some(listener), _) => embedded(settings, listener).await?,
            (None, Some(own_relay)) => external(settings, own_relay).await?,
            (None, None) => anyhow::bail!("embedded mode needs a relay listener"),
        };
        let history = SharedHistory::new();
        let endpoints = Endpoints::start(
            metrics_listener,
            metrics.clone(),
            Arc::clone(&engine),
            history.clone(),
        )
        .context("starting the metrics endpoints")?;
        let handle = SyncEngine::start(
            settings.engine_config(&service_url),
            parts
                .meter(metrics.meter())
                .hook(Arc::new(SyncedEvents::new(
                    &metrics.meter(),
                    own.live_relay(),
                ))),
        )
        .await
        .context("starting the sync engine")?;
        let exit = handle.exit();
        *engine.write().await = Some(handle);
        let sampler = history.spawn_sampler(Arc::clone(&engine));
        Ok(Daemon {
            service_url,
            own,
            engine,
            exit,
            endpoints,
            metrics,
            sampler,
        })
    }

    /// The service URL announcements must list.
    pub fn service_url(&self) -> &RelayUrl {
        &self.service_url
    }

    /// The embedded relay's bound address; `None` in external mode.
    pub fn relay_addr(&self) -> Option<SocketAddr> {
        match &self.own {
            Own::Embedded { relay, .. } => Some(relay.addr()),
            Own::External { .. } => None,
        }
    }

    /// The bound address of `/metrics` and `/status`.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.endpoints.addr()
    }

    /// The engine's status now; `None` once it stopped.
    pub async fn status(&self) -> Option<EngineStatus> {
        match self.engine.read().await.as_ref() {
            Some(engine) => engine.status().await,
            None => None,
        }
    }

    /// Whether the own store holds the event (embedded: stored in LMDB; external: confirmed
    /// by the own relay or seen on its feed).
    pub async fn holds(&self, id: &EventId) -> anyhow::Result<bool> {
        match &self.own {
            Own::Embedded { store, .. } => {
                let status = store
                    .database()
                    .check_id(id)
                    .await
                    .context("reading the store")?;
                Ok(status == DatabaseEventStatus::Saved)
            }
            Own::External { store, .. } => Ok(store.index().is_seen(id).await?),
        }
    }

    /// Watches for the end of the engine's task.
    pub fn engine_exit(&self) -> EngineExit {
        self.exit.clone()
    }

    /// Serves until `stop` resolves (to a name for the log, e.g. a signal's) or the engine's
    /// task ends on its own, then shuts down within [`SHUTDOWN_LIMIT`]. An engine that ended
    /// on its own is an [`EngineStopped`] error, logged before the shutdown.
    pub async fn serve_until(self, stop: impl Future<Output = &'static str>) -> anyhow::Result<()> {
        let outcome = supervise(stop, self.engine_exit()).await;
        match &outcome {
            Ok(reason) => tracing::info!(reason, "shutting down"),
            Err(error) => tracing::error!(
                %error,
                "shutting down; a supervisor should restart the daemon"
            ),
        }
        if tokio::time::timeout(SHUTDOWN_LIMIT, self.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("shutdown took too long; exiting anyway");
        }
        tracing::info!("stopped");
        outcome.map(|_| ()).map_err(anyhow::Error::from)
    }

    /// Stops the engine (closing sessions, waiting for in-flight writes), then the relay or
    /// the link, then the endpoints.
    pub async fn shutdown(self) {
        self.sampler.abort();
        if let Some(engine) = self.engine.write().await.take() {
            engine.shutdown().await;
        }
        match self.own {
            Own::Embedded { relay, store } => {
                relay.stop().await;
                drop(store);
            }
            Own::External { link, store } => {
                drop(store);
                link.shutdown().await;
            }
        }
        self.endpoints.stop().await;
        self.metrics.shutdown();
    }
}

/// Runs the daemon until SIGINT or SIGTERM, logging the first sync's progress, then shuts it
/// down within [`SHUTDOWN_LIMIT`]. If
/// the engine's task ends first (a panic), shuts down the same way and returns
/// [`EngineStopped`]: the process then exits with code 1.
pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let daemon = Daemon::start(settings).await?;
    match daemon.relay_addr() {
        Some(addr) => {
            tracing::info!(relay = %format!("ws://{addr}"), service_url = %daemon.service_url(), "embedded relay serving")
        }
        None => {
            tracing::info!(service_url = %daemon.service_url(), "syncing into the external own relay")
        }
    }
    tracing::info!(
        page = %format!("http://{}/", daemon.metrics_addr()),
        metrics = %format!("http://{}/metrics", daemon.metrics_addr()),
        status = %format!("http://{}/status", daemon.metrics_addr()),
        "grasp-sync running"
    );
    let first_sync = tokio::spawn(log_first_sync(Arc::clone(&daemon.engine)));
    let outcome = daemon.serve_until(shutdown_signal()).await;
    first_sync.abort();
    outcome
}

/// How often the first sync's progress is logged.
const FIRST_SYNC_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs the first sync's progress every [`FIRST_SYNC_LOG_INTERVAL`] until no relay is
/// connecting or syncing, then once that it is done.
async fn log_first_sync(engine: EngineSlot) {
    let started = tokio::time::Instant::now();
    let mut first = FirstSync::default();
    loop {
        tokio::time::sleep(FIRST_SYNC_LOG_INTERVAL).await;
        let status = match engine.read().await.as_ref() {
            Some(engine) => engine.status().await,
            None => None,
        };
        let Some(status) = status else { return };
        if let Some((last, line)) = first.handle_status(&status, started.elapsed()) {
            tracing::info!("{line}");
            if last {
                return;
            }
        }
    }
}

/// Waits for `stop` or for the engine's task to end, whichever comes first: `stop`'s name, or
/// how the engine ended. Any end of the engine before `stop` is an error, since only the
/// daemon's own shutdown stops it.
async fn supervise(
    stop: impl Future<Output = &'static str>,
    exit: EngineExit,
) -> Result<&'static str, EngineStopped> {
    tokio::select! {
        biased;
        reason = stop => Ok(reason),
        end = exit.wait() => Err(EngineStopped(end)),
    }
}

/// Waits for SIGINT or SIGTERM; returns its name.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = terminate.recv() => "SIGTERM",
            },
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                // Without the handler only SIGINT stops the daemon gracefully.
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

/// The embedded relay and its store.
async fn embedded(
    settings: &Settings,
    listener: TcpListener,
) -> anyhow::Result<(RelayUrl, Own, EngineParts)> {
    let bound = listener.local_addr().context("reading the relay address")?;
    let service_url = match &settings.service_url {
        Some(url) => url.clone(),
        None => RelayUrl::parse(&format!("ws://{bound}"))
            .with_context(|| format!("deriving the service url from {bound}"))?,
    };
    let domain = service_domain(&service_url);
    let path = settings.data_dir.join(STORE_DIR);
    create_dir(&path)?;
    let config = StoreConfig {
        max_future_created_at: settings.max_future_created_at,
        lmdb_map_size: settings.lmdb_map_size,
        ..StoreConfig::new(service_url.clone(), domain)
    };
    let store = LmdbStore::open(&path, config)
        .await
        .with_context(|| format!("opening the store in {}", path.display()))?;
    let relay = EmbeddedRelay::start(listener, &store, settings.relay.clone())
        .context("starting the relay")?;
    let parts = EngineParts::new(
        Arc::new(SdkConnector::default().with_address_policy(settings.address_policy.clone())),
        Arc::new(store.clone()),
        Arc::new(RestartingFeed::new(store.feed())),
    );
    Ok((
        service_url,
        Own::Embedded {
            relay: Box::new(relay),
            store,
        },
        parts,
    ))
}

/// The link to the external own relay and the local index.
async fn external(
    settings: &Settings,
    own_relay: &RelayUrl,
) -> anyhow::Result<(RelayUrl, Own, EngineParts)> {
    let service_url = settings
        .service_url
        .clone()
        .unwrap_or_else(|| own_relay.clone());
    let path = settings.data_dir.join(INDEX_DIR);
    let index = Arc::new(
        HaveIndex::open(&path)
            .with_context(|| format!("opening the index in {}", path.display()))?,
    );
    let link = Arc::new(
        OwnRelayLink::connect(own_relay, EXTERNAL_CONNECT_WAIT)
            .await
            .with_context(|| format!("connecting to the own relay (own_relay = {own_relay})"))?,
    );
    let store = ExternalStore::new(Arc::clone(&link), Arc::clone(&index));
    let parts = EngineParts::new(
        Arc::new(SdkConnector::default().with_address_policy(settings.address_policy.clone())),
        Arc::new(store.clone()),
        Arc::new(RestartingFeed::new(ExternalFeed::new(
            Arc::clone(&link),
            index,
        ))),
    );
    Ok((service_url, Own::External { link, store }, parts))
}

/// The domain clone URLs must be on: the service URL's host.
fn service_domain(service_url: &RelayUrl) -> String {
    service_url
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

fn create_dir(path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))
}

#[cfg(test)]
mod tests;
