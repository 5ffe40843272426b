//! Shared fixtures: a service identity, an engine on paused time over the testkit's memory
//! network with a memory store on its clock (or, for the transport's tests, wired to real relays
//! with an LMDB store), memory networks of a bootstrap and a home relay, the pacing rule read
//! from what a relay counted, and waiting on conditions with deadlines.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{
    AddressPolicy, EngineConfig, EngineHandle, EngineParts, EventStore, LmdbStore, MemoryStore,
    SdkConnector, StoreConfig, SyncEngine, TokioClock, store::RejectedConfig,
};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{MemoryNetwork, QueryStart, StartKind, StrictStats};
use nostr::EventId;

/// The service's own relay URL: listed by announcements, never dialled.
pub(crate) const SERVICE_URL: &str = "wss://grasp.test";

/// A store on a temporary LMDB directory, removed on drop.
pub(crate) struct TestStore {
    pub(crate) store: LmdbStore,
    _dir: tempfile::TempDir,
}

impl TestStore {
    /// Closes the store and opens it again from the same directory (a daemon restart).
    pub(crate) async fn reopen(self) -> Self {
        let Self { store, _dir: dir } = self;
        drop(store);
        let store = LmdbStore::open(dir.path(), Self::config())
            .await
            .expect("reopen store");
        Self { store, _dir: dir }
    }

    fn config() -> StoreConfig {
        StoreConfig::new(
            RelayUrl::parse(SERVICE_URL).expect("service url"),
            "grasp.test",
        )
    }

    pub(crate) async fn open() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = StoreConfig::new(
            RelayUrl::parse(SERVICE_URL).expect("service url"),
            "grasp.test",
        );
        let store = LmdbStore::open(dir.path(), config)
            .await
            .expect("open store");
        Self { store, _dir: dir }
    }

    /// How many of `ids` the store holds (not counting rejections).
    pub(crate) async fn count_stored(&self, ids: &BTreeSet<EventId>) -> usize {
        let mut held = 0;
        for id in ids {
            if self.store.rejection_reason(id).ok().flatten().is_none()
                && self.store.contains(id).await.expect("contains")
            {
                held += 1;
            }
        }
        held
    }
}

/// Engine settings for tests: fast windows, loopback allowed, the service excluded.
pub(crate) fn test_config(bootstrap: &[String]) -> EngineConfig {
    EngineConfig {
        own_relay: Some(RelayUrl::parse(SERVICE_URL).expect("service url")),
        bootstrap_relays: bootstrap
            .iter()
            .map(|u| RelayUrl::parse(u).expect("relay url"))
            .collect(),
        address_policy: AddressPolicy::allow_all(),
        batch_window: Duration::from_secs(1),
        purgatory_interval: Duration::from_millis(500),
        health_tick: Duration::from_millis(200),
        completion_recheck: Duration::from_millis(500),
        rng_seed: Some(7),
        ..EngineConfig::default()
    }
}

/// Sends the engine's logs to the test output when `RUST_LOG` asks for them.
pub(crate) fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Starts the engine on real relays with `store` as the own store and self feed.
pub(crate) async fn start_engine(store: &TestStore, config: EngineConfig) -> EngineHandle {
    init_logs();
    let connector =
        SdkConnector::default().with_address_policy(grasp_sync_engine::AddressPolicy::allow_all());
    let parts = EngineParts::new(
        Arc::new(connector),
        Arc::new(store.store.clone()),
        Arc::new(store.store.feed()),
    );
    SyncEngine::start(config, parts)
        .await
        .expect("engine starts")
}

/// The unix time a paused-time engine's clock starts at: after every fixture's events, so
/// none is from the store's future.
pub(crate) const PAUSED_START: u64 = 1_800_000_000;

/// An engine on paused time over a memory network, with its store on the engine's clock.
pub(crate) struct PausedEngine {
    pub(crate) store: MemoryStore,
    pub(crate) engine: EngineHandle,
    pub(crate) clock: Arc<TokioClock>,
}

impl PausedEngine {
    /// How many of `ids` the store holds (not counting rejections).
    pub(crate) async fn count_stored(&self, ids: &BTreeSet<EventId>) -> usize {
        let mut held = 0;
        for id in ids {
            if self.store.rejection_reason(id).ok().flatten().is_none()
                && self.store.contains(id).await.expect("contains")
            {
                held += 1;
            }
        }
        held
    }

    /// Waits until the store holds every event of `expected`; fails the test with the
    /// engine's status if it does not within `deadline` (virtual time). Returns the status
    /// at that moment.
    pub(crate) async fn wait_for_store(
        &self,
        expected: &BTreeSet<EventId>,
        deadline: Duration,
    ) -> grasp_sync_engine::EngineStatus {
        let complete = wait_until(deadline, || async {
            self.count_stored(expected).await == expected.len()
        })
        .await;
        let status = self.engine.status().await.expect("status");
        assert!(
            complete,
            "stored {} of {}: {status:#?}",
            self.count_stored(expected).await,
            expected.len()
        );
        status
    }

    /// The engine's unix time now, for events published during a test.
    pub(crate) fn unix_now(&self) -> nostr::Timestamp {
        grasp_sync_engine::Clock::unix_now(&*self.clock)
    }

    /// The engine's status of the relay at `key` (a URL in normal form), once it tracks it.
    pub(crate) async fn relay(&self, key: &str) -> Option<grasp_sync_engine::RelayStatus> {
        self.engine
            .status()
            .await
            .and_then(|s| s.relays.get(key).cloned())
    }

    /// Waits until the engine tracks the relay at `key` and `check` holds of its status;
    /// returns whether it did within `deadline` (virtual time).
    pub(crate) async fn wait_for_relay(
        &self,
        key: &str,
        deadline: Duration,
        check: impl Fn(&grasp_sync_engine::RelayStatus) -> bool,
    ) -> bool {
        wait_until(deadline, || async {
            self.relay(key).await.is_some_and(|r| check(&r))
        })
        .await
    }

    /// Waits until the relay at `key` has its history settled ([`history_settled`]); fails
    /// the test with the relay's status if it does not within `deadline` (virtual time).
    pub(crate) async fn settle(&self, key: &str, deadline: Duration) {
        let settled = self.wait_for_relay(key, deadline, history_settled).await;
        assert!(settled, "{key} never settled: {:#?}", self.relay(key).await);
    }

    /// Shuts the engine down and gives back its store and clock, for a restart over them (as
    /// a daemon restarted over its store).
    pub(crate) async fn stop(self) -> (MemoryStore, Arc<TokioClock>) {
        self.engine.shutdown().await;
        (self.store, self.clock)
    }
}

/// The bootstrap relay of a memory network.
pub(crate) const BOOTSTRAP: &str = "ws://bootstrap.memory";

/// The relay a memory network's repository lives on.
pub(crate) const HOME: &str = "ws://home.memory";

/// A memory network: a default [`BOOTSTRAP`] relay with the announcement of a repository
/// listing [`HOME`], a relay configured as `home` that holds the repository's thread; with
/// the repository and its thread.
pub(crate) fn repo_network(
    home: grasp_sync_testkit::TestRelayConfig,
    identifier: &str,
) -> (MemoryNetwork, RepoFixture, Vec<nostr::Event>) {
    let fixture = RepoFixture::new(identifier);
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            grasp_sync_testkit::TestRelayConfig::default(),
            vec![announcement],
        ),
        (HOME, home, thread.clone()),
    ]);
    (network, fixture, thread)
}

/// A memory network of relays, each at its URL with its configuration and events.
pub(crate) fn memory_network(
    relays: Vec<(&str, grasp_sync_testkit::TestRelayConfig, Vec<nostr::Event>)>,
) -> MemoryNetwork {
    MemoryNetwork::new(
        relays
            .into_iter()
            .map(|(url, config, events)| {
                (
                    url.to_owned(),
                    grasp_sync_testkit::SimulatedRelay::new(config, events),
                )
            })
            .collect(),
    )
}

/// [`start_paused_engine`] over `store` and `clock`, a stopped engine's ([`PausedEngine::stop`]).
pub(crate) async fn restart_paused_engine(
    network: &MemoryNetwork,
    config: EngineConfig,
    (store, clock): (MemoryStore, Arc<TokioClock>),
) -> PausedEngine {
    start_paused_engine_with(network, config, store.clone(), Arc::new(store), clock, None).await
}

/// Starts the engine over `network`, with a memory store as the own store and self feed and
/// the engine's clock at [`PAUSED_START`]. Call it on paused time.
pub(crate) async fn start_paused_engine(
    network: &MemoryNetwork,
    config: EngineConfig,
) -> PausedEngine {
    let (store, clock) = paused_store().await;
    start_paused_engine_with(network, config, store.clone(), Arc::new(store), clock, None).await
}

/// An empty memory store on a clock at [`PAUSED_START`], and that clock.
pub(crate) async fn paused_store() -> (MemoryStore, Arc<TokioClock>) {
    paused_store_rejecting(RejectedConfig::default()).await
}

/// [`paused_store`] with its rejected-events index bounded by `rejected`.
pub(crate) async fn paused_store_rejecting(
    rejected: RejectedConfig,
) -> (MemoryStore, Arc<TokioClock>) {
    let clock = Arc::new(TokioClock::anchored_at(nostr::Timestamp::from_secs(
        PAUSED_START,
    )));
    let config = StoreConfig {
        rejected,
        ..TestStore::config()
    };
    let store = MemoryStore::with_clock(config, clock.clone())
        .await
        .expect("memory store");
    (store, clock)
}

/// [`start_paused_engine`] with `events` as the own store (over `store`, the self feed), on
/// `clock`, keeping learned relay limits in `limits` when given.
pub(crate) async fn start_paused_engine_with(
    network: &MemoryNetwork,
    config: EngineConfig,
    store: MemoryStore,
    events: Arc<dyn EventStore>,
    clock: Arc<TokioClock>,
    limits: Option<Arc<dyn grasp_sync_engine::LimitsMemory>>,
) -> PausedEngine {
    init_logs();
    let mut parts = EngineParts::new(Arc::new(network.clone()), events, Arc::new(store.clone()))
        .clock(clock.clone());
    if let Some(limits) = limits {
        parts = parts.limits_memory(limits);
    }
    let engine = SyncEngine::start(config, parts)
        .await
        .expect("engine starts");
    PausedEngine {
        store,
        engine,
        clock,
    }
}

/// The pacing rule's background starts: every NEG-OPEN and every REQ but a live one.
pub(crate) fn background(start: &QueryStart) -> bool {
    start.kind == StartKind::NegOpen || !start.subscription_id.starts_with("gs-live-")
}

/// The design's background spacing: one non-urgent start per second per connection.
pub(crate) const BACKGROUND_SPACING: Duration = Duration::from_secs(1);

/// Consecutive background starts on one connection closer than [`BACKGROUND_SPACING`], as
/// (earlier subscription, later subscription, gap); empty when the rule held exactly.
pub(crate) fn tight_background_starts(stats: &StrictStats) -> Vec<(String, String, Duration)> {
    let mut starts: Vec<&QueryStart> = stats.starts.iter().filter(|s| background(s)).collect();
    starts.sort_by_key(|s| (s.connection, s.at));
    starts
        .windows(2)
        .filter(|w| w[0].connection == w[1].connection)
        .map(|w| {
            (
                w[0].subscription_id.clone(),
                w[1].subscription_id.clone(),
                w[1].at.duration_since(w[0].at),
            )
        })
        .filter(|(_, _, gap)| *gap < BACKGROUND_SPACING)
        .collect()
}

/// Waits until the store holds every event of `expected`; fails the test with the engine's
/// status if it does not within `deadline`. Returns the status at that moment.
pub(crate) async fn wait_for_store(
    store: &TestStore,
    engine: &EngineHandle,
    expected: &BTreeSet<EventId>,
    deadline: Duration,
) -> grasp_sync_engine::EngineStatus {
    let complete = wait_until(deadline, || async {
        store.count_stored(expected).await == expected.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(
        complete,
        "stored {} of {}: {status:#?}",
        store.count_stored(expected).await,
        expected.len()
    );
    status
}

/// Whether a relay's historic sync has ended (complete, or with failures it records) with
/// nothing left to start or confirm, and its live set open.
pub(crate) fn history_settled(relay: &grasp_sync_engine::RelayStatus) -> bool {
    matches!(
        relay.connection.as_str(),
        "connected" | "connected_historic_sync_failures"
    ) && relay.pending_batches == 0
        && relay.queued_starts == 0
        && relay.live_subscriptions > 0
}

/// Polls `check` until it returns true or `deadline` passes; returns whether it became true.
pub(crate) async fn wait_until<F, Fut>(deadline: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A repository owned by a fresh key, with builders for its announcement and thread.
pub(crate) struct RepoFixture {
    pub(crate) keys: nostr::Keys,
    pub(crate) repo: grasp_sync_testkit::nip34::RepoRef,
}

impl RepoFixture {
    pub(crate) fn new(identifier: &str) -> Self {
        let keys = nostr::Keys::generate();
        let repo = grasp_sync_testkit::nip34::RepoRef::new(keys.public_key(), identifier);
        Self { keys, repo }
    }

    /// An announcement listing exactly `relays`, cloned on the service's domain.
    pub(crate) fn announcement(&self, relays: &[String], created_at: u64) -> nostr::Event {
        let clone = format!(
            "https://grasp.test/{}/{}.git",
            self.keys.public_key().to_hex(),
            self.repo.identifier
        );
        grasp_sync_testkit::nip34::announcement(
            &self.keys,
            &grasp_sync_testkit::nip34::Announcement {
                identifier: self.repo.identifier.clone(),
                name: self.repo.identifier.clone(),
                relays: relays.to_vec(),
                clone: vec![clone],
                maintainers: Vec::new(),
                created_at: nostr::Timestamp::from_secs(created_at),
            },
        )
        .expect("announcement")
    }

    /// An issue, a patch and a pull request, replies to the issue by `e`, `E` and `q`, and
    /// comments on the repository by `a`, `A` and `q`: nine events, one per tag style.
    pub(crate) fn thread(&self, created_at: u64) -> Vec<nostr::Event> {
        use grasp_sync_testkit::nip34::{RepoTag, RootKind, ThreadTag, reply, repo_comment, root};
        let at = |offset: u64| nostr::Timestamp::from_secs(created_at + offset);
        let author = nostr::Keys::generate();
        let repos = std::slice::from_ref(&self.repo);
        let issue = root(&author, RootKind::Issue, repos, "issue", at(0)).expect("issue");
        let mut events = vec![
            root(&author, RootKind::Patch, repos, "patch", at(1)).expect("patch"),
            root(&author, RootKind::PullRequest, repos, "pr", at(2)).expect("pr"),
        ];
        for (i, how) in ThreadTag::ALL.into_iter().enumerate() {
            events.push(reply(&author, &issue, how, "reply", at(10 + i as u64)).expect("reply"));
        }
        for (i, how) in RepoTag::ALL.into_iter().enumerate() {
            events.push(
                repo_comment(&author, &self.repo, how, "comment", at(20 + i as u64))
                    .expect("comment"),
            );
        }
        events.push(issue);
        events
    }
}

/// The IDs of `events`.
pub(crate) fn ids(events: &[nostr::Event]) -> BTreeSet<EventId> {
    events.iter().map(|e| e.id).collect()
}
