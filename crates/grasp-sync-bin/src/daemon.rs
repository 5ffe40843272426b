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
    EngineEnd, EngineExit, EngineParts, EngineStatus, FileHoldingsMemory, FileLimitsMemory,
    LmdbStore, PurgatoryConfig, PurgatoryParts, SdkConnector, StoreConfig, SyncEngine, TokioClock,
};
use grasp_sync_model::RelayUrl;
use nostr::EventId;
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use tokio::net::TcpListener;
use tokio::sync::{Notify, RwLock};

use crate::config::Settings;
use crate::endpoints::{Endpoints, EngineSlot, engine_status};
use crate::external::{ExternalFeed, ExternalStore, HaveIndex, OwnRelayLink};
use crate::feed::RestartingFeed;
use crate::follow::{GitFollower, RepositoryLookup};
use crate::git::{CloneUrlRules, GitFetcher, GitLimits, GitRoot, UrlBackoffConfig};
use crate::history::SharedHistory;
use crate::hook::{HookConfig, SyncHook};
use crate::metrics::MetricsRegistry;
use crate::progress::FirstSync;
use crate::purgatory::Promoter;
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
/// The file under `data_dir` that keeps the limits relays taught, across restarts.
pub const LEARNED_LIMITS_FILE: &str = "learned-limits.json";

/// The directory in the data directory where each relay's holdings are kept for the daily
/// reconciliation (one file per relay).
pub const RELAY_HOLDINGS_DIR: &str = "relay-holdings";

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

    /// Starts dropping the pages of this mode's LMDB store (under `data_dir`) from resident
    /// memory while the engine is at rest; the task keeps the store open. `None` where that is
    /// not supported.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    fn spawn_page_release(
        &self,
        engine: &EngineSlot,
        data_dir: &std::path::Path,
    ) -> Option<tokio::task::JoinHandle<()>> {
        #[cfg(target_os = "linux")]
        {
            use crate::store_pages::{RELEASE_PERIOD, spawn_release_at_rest};
            let engine = Arc::clone(engine);
            Some(match self {
                Own::Embedded { store, .. } => spawn_release_at_rest(
                    engine,
                    data_dir.join(STORE_DIR),
                    store.clone(),
                    RELEASE_PERIOD,
                ),
                Own::External { store, .. } => spawn_release_at_rest(
                    engine,
                    data_dir.join(INDEX_DIR),
                    store.clone(),
                    RELEASE_PERIOD,
                ),
            })
        }
        #[cfg(not(target_os = "linux"))]
        None
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
    /// Moves purgatory announcements whose git data arrived into the store (with `git_root`).
    _promoter: Option<Promoter>,
    sampler: tokio::task::JoinHandle<()>,
    /// Drops the store's pages from resident memory while the engine is at rest (Linux).
    page_release: Option<tokio::task::JoinHandle<()>>,
}

/// What the git-data keys add to an embedded daemon.
#[derive(Debug, Default)]
struct GitData {
    follower: Option<GitFollower>,
    promoter: Option<Promoter>,
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
        let (service_url, own, parts, git) = match (listener, &settings.own_relay) {
            (Some(listener), _) => embedded(settings, listener, &metrics).await?,
            (None, Some(own_relay)) => external(settings, own_relay, &metrics).await?,
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
                .limits_memory(Arc::new(FileLimitsMemory::new(
                    settings.data_dir.join(LEARNED_LIMITS_FILE),
                )))
                .holdings_memory(Arc::new(FileHoldingsMemory::new(
                    settings.data_dir.join(RELAY_HOLDINGS_DIR),
                )))
                .hook(Arc::new(
                    SyncedEvents::new(&metrics.meter(), own.live_relay())
                        .with_follower(git.follower),
                )),
        )
        .await
        .context("starting the sync engine")?;
        let exit = handle.exit();
        *engine.write().await = Some(handle);
        let sampler = history.spawn_sampler(Arc::clone(&engine));
        let page_release = own.spawn_page_release(&engine, &settings.data_dir);
        Ok(Daemon {
            service_url,
            own,
            engine,
            exit,
            endpoints,
            metrics,
            _promoter: git.promoter,
            sampler,
            page_release,
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
        engine_status(&self.engine).await
    }

    /// Runs the daily reconciliation now on every connected relay
    /// ([`EngineHandle::reconcile_now`](grasp_sync_engine::EngineHandle::reconcile_now)); how
    /// many relays it started on, `None` once the engine stopped.
    pub async fn reconcile_now(&self) -> Option<usize> {
        match self.engine.read().await.as_ref() {
            Some(engine) => engine.reconcile_now().await,
            None => None,
        }
    }

    /// Whether the own store holds the event (embedded: stored in LMDB; external: accepted
    /// by the policy and confirmed by the own relay, or read from it).
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
            Own::External { store, .. } => Ok(store.index().is_accepted(id).await?),
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
        if let Some(task) = self.page_release {
            // Awaited, so the store it holds is dropped before the store below.
            task.abort();
            let _ = task.await;
        }
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
    let stop = shutdown_signal();
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
    let outcome = daemon.serve_until(stop).await;
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
        let Some(status) = engine_status(&engine).await else {
            return;
        };
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

/// Listens for SIGINT and SIGTERM from the moment it is called (so a signal that arrives
/// before the daemon reports running is not missed), and returns a future that waits for the
/// first and resolves to its name.
fn shutdown_signal() -> impl Future<Output = &'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = signal(SignalKind::terminate());
        let interrupt = signal(SignalKind::interrupt());
        async move {
            match (terminate, interrupt) {
                (Ok(mut terminate), Ok(mut interrupt)) => tokio::select! {
                    _ = interrupt.recv() => "SIGINT",
                    _ = terminate.recv() => "SIGTERM",
                },
                (terminate, _) => {
                    if let Err(error) = terminate {
                        tracing::warn!(%error, "cannot listen for SIGTERM");
                    }
                    // Without the handlers only SIGINT stops the daemon gracefully.
                    let _ = tokio::signal::ctrl_c().await;
                    "SIGINT"
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

/// The embedded relay and its store, with the purgatory, the fetcher and the hook that the
/// git-data keys ask for.
async fn embedded(
    settings: &Settings,
    listener: TcpListener,
    metrics: &MetricsRegistry,
) -> anyhow::Result<(RelayUrl, Own, EngineParts, GitData)> {
    let bound = listener.local_addr().context("reading the relay address")?;
    let service_url = match &settings.service_url {
        Some(url) => url.clone(),
        None => RelayUrl::parse(&format!("ws://{bound}"))
            .with_context(|| format!("deriving the service url from {bound}"))?,
    };
    let path = settings.data_dir.join(STORE_DIR);
    create_dir(&path)?;
    let config = StoreConfig {
        lmdb_map_size: settings.lmdb_map_size,
        ..store_config(settings, &service_url)
    };
    let root = settings.git.root.as_ref().map(GitRoot::new);
    if let Some(root) = &root {
        create_dir(root.path())?;
    }
    let purgatory = root.as_ref().map(|root| PurgatoryParts {
        config: PurgatoryConfig {
            max_announcements: settings.git.max_purgatory_announcements,
            ..PurgatoryConfig::default()
        },
        probe: Arc::new(root.clone()),
    });
    let store = LmdbStore::open_with_purgatory(
        &path,
        config,
        Arc::new(TokioClock::from_system()),
        purgatory,
    )
    .await
    .with_context(|| format!("opening the store in {}", path.display()))?;
    let relay = EmbeddedRelay::start(listener, &store, settings.relay.clone())
        .context("starting the relay")?;
    let mut parts = EngineParts::new(
        Arc::new(relay_connector(settings)),
        Arc::new(store.clone()),
        Arc::new(RestartingFeed::new(store.feed())),
    );
    if root.is_some() {
        parts = parts.purgatory(Arc::new(store.clone()));
    }
    let git = follow_git(
        settings,
        &service_domain(&service_url),
        &metrics.meter(),
        Arc::new(store.clone()),
        Some(store.clone()),
    )?;
    Ok((
        service_url,
        Own::Embedded {
            relay: Box::new(relay),
            store,
        },
        parts,
        git,
    ))
}

/// The store's configuration in either mode: the policy for `service_url`, the rejected-events
/// index's bound and the `created_at` window.
fn store_config(settings: &Settings, service_url: &RelayUrl) -> StoreConfig {
    let mut config = StoreConfig::new(service_url.clone(), service_domain(service_url));
    config.max_future_created_at = settings.max_future_created_at;
    config.rejected.cold_capacity = settings.max_rejected_ids;
    config
}

/// The link to the external own relay, the local index and the store core over them, with
/// the fetcher and the hook the git-data keys ask for (no purgatory: the external relay
/// decides what it stores).
async fn external(
    settings: &Settings,
    own_relay: &RelayUrl,
    metrics: &MetricsRegistry,
) -> anyhow::Result<(RelayUrl, Own, EngineParts, GitData)> {
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
    let store = ExternalStore::open(
        Arc::clone(&link),
        index,
        &path,
        store_config(settings, &service_url),
        Arc::new(TokioClock::from_system()),
    )
    .await
    .with_context(|| format!("opening the store over the index in {}", path.display()))?;
    let feed = RestartingFeed::new(ExternalFeed::new(Arc::clone(&link), store.clone()));
    // A state event's repositories are the announcements the store's policy accepted, as in
    // embedded mode.
    let git = follow_git(
        settings,
        &service_domain(&service_url),
        &metrics.meter(),
        Arc::new(store.clone()) as Arc<dyn RepositoryLookup>,
        None,
    )?;
    let parts = EngineParts::new(
        Arc::new(relay_connector(settings)),
        Arc::new(store.clone()),
        Arc::new(feed),
    );
    Ok((service_url, Own::External { link, store }, parts, git))
}

/// The fetcher (with `git_root`), the hook (with `on_sync_hook`) and the follower feeding them
/// from `lookup`; with `promote`, the promoter of that store's purgatory.
fn follow_git(
    settings: &Settings,
    own_domain: &str,
    meter: &opentelemetry::metrics::Meter,
    lookup: Arc<dyn RepositoryLookup>,
    promote: Option<LmdbStore>,
) -> anyhow::Result<GitData> {
    let root = settings.git.root.as_ref().map(GitRoot::new);
    if let Some(root) = &root {
        create_dir(root.path())?;
    }
    let mut git = GitData::default();
    let fetched = Arc::new(Notify::new());
    let fetcher = root.as_ref().map(|root| {
        GitFetcher::new(
            root.clone(),
            CloneUrlRules {
                address_policy: settings.address_policy.clone(),
                allow_file: settings.git.allow_file_urls,
                own_domain: own_domain.to_owned(),
            },
            GitLimits {
                timeout: settings.git.fetch_timeout,
                max_bytes: settings.git.fetch_max_size,
                allow_file: settings.git.allow_file_urls,
            },
            settings.git.fetch_concurrency,
            UrlBackoffConfig::default(),
            Arc::clone(&fetched),
            meter,
        )
    });
    if let (Some(_), Some(store)) = (&root, promote) {
        git.promoter = Some(Promoter::start(store, fetched, meter));
    }
    let hook = settings
        .git
        .on_sync_hook
        .as_ref()
        .map(|command| SyncHook::start(HookConfig::new(command.clone()), meter));
    if fetcher.is_some() || hook.is_some() {
        git.follower = Some(GitFollower::new(lookup, root, fetcher, hook));
    }
    Ok(git)
}

/// The domain clone URLs must be on: the service URL's host.
fn service_domain(service_url: &RelayUrl) -> String {
    service_url
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

/// The transport to remote relays: the address policy, and the NIP-42 key when one is set.
fn relay_connector(settings: &Settings) -> SdkConnector {
    let connector = SdkConnector::default().with_address_policy(settings.address_policy.clone());
    match &settings.auth_key {
        Some(key) => connector.with_auth_keys(key.keys().clone()),
        None => connector,
    }
}

fn create_dir(path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))
}

#[cfg(test)]
mod tests;
