//! `TestRelay`: a real `nostr-relay-builder` relay on 127.0.0.1 behind our own listener and
//! HTTP front, with direct seeding, restart on the same port and connection counters, and
//! optionally strict per-connection limits enforced by a message proxy.

mod front;
mod nip11;
mod profiles;
pub(crate) mod simulated;
pub(crate) mod strict;

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use grasp_sync_engine::front::{Front, FrontLimits};
use nostr::{Event, EventId, Filter};
use nostr_database::{Events, MemoryDatabase, MemoryDatabaseOptions, NostrDatabase};
use nostr_lmdb::NostrLMDB;
use nostr_relay_builder::LocalRelay;
use nostr_relay_builder::builder::{
    RateLimit, RelayBuilder, RelayBuilderNip42, RelayBuilderNip42Mode,
};
use tempfile::TempDir;
use tokio::net::TcpSocket;
use tokio::task::JoinSet;

use crate::TestkitError;
use front::{Counters, RelaySite};
use strict::proxy::Strict;
use strict::{FilterCaps, Recorder, StrictLimits, StrictStats};

/// Events written to the store at once while seeding.
const SEED_IN_FLIGHT: usize = 1024;

/// What the relay says about itself in its NIP-11 document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nip11Mode {
    /// A document with a `limitation` object carrying the configured limits.
    #[default]
    WithLimits,
    /// A document without `limitation`: the limits are enforced but hidden.
    WithoutLimits,
    /// No document: a NIP-11 request gets `404 Not Found`.
    NotServed,
}

/// Where the relay keeps its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// An in-memory store without an event cap.
    #[default]
    Memory,
    /// An LMDB store in a temporary directory removed when the relay is dropped.
    Lmdb,
}

/// Whether the relay requires NIP-42 authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RelayAuth {
    /// No authentication: every client may read.
    #[default]
    Off,
    /// Reads need authentication, as the rust-nostr relay builder's NIP-42 `Read` mode (the
    /// relay itself runs that mode): no challenge on connect; a REQ from a client not
    /// authenticated yet gets a fresh `["AUTH", challenge]` followed by `["CLOSED", id,
    /// "auth-required: you must auth"]`; an `AUTH` naming any challenge the connection was
    /// sent, signed and at most two minutes old, is accepted (`OK` true) for reads by any
    /// key; a bad one gets `OK` false `"auth-required: ..."`. NEG-OPEN is served without
    /// authentication (that relay does not check it). Events a client publishes need no
    /// authentication either.
    Reads,
}

/// How a test relay behaves. Build it with struct update syntax from `Default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRelayConfig {
    /// The relay's NIP-11 `name`.
    pub name: String,
    /// Open subscriptions allowed per connection (the relay builder's `max_reqs`). One more
    /// REQ is refused with `CLOSED "rate-limited: too many REQs"`. Ignored when
    /// `strict.subscriptions` is set: the proxy enforces that limit instead.
    pub max_subscriptions: usize,
    /// Results per filter when the filter has no `limit`.
    pub default_filter_limit: usize,
    /// Cap on a filter's `limit`, if any.
    pub max_filter_limit: Option<usize>,
    /// `max_filters` for the NIP-11 document only: the relay does not enforce it. Ignored
    /// when `strict.filters_per_req` is set.
    pub max_filters: Option<usize>,
    /// Whether NIP-11 states `default_filter_limit` as `default_limit`.
    pub advertise_default_limit: bool,
    /// Whether NIP-11 states `max_filter_limit` as `max_limit`.
    pub advertise_max_limit: bool,
    /// EVENT messages accepted per minute per connection.
    pub notes_per_minute: u32,
    /// Whether NIP-11 lists NIP-77. The relay always answers negentropy messages.
    pub advertise_negentropy: bool,
    /// What NIP-11 serves.
    pub nip11: Nip11Mode,
    /// Where events are kept.
    pub store: StoreKind,
    /// Per-connection limits enforced by a message proxy in front of the relay, with real
    /// relays' refusal texts. `None`: clients talk to the relay directly.
    pub strict: Option<StrictLimits>,
    /// Whether reads need NIP-42 authentication.
    pub auth: RelayAuth,
}

impl Default for TestRelayConfig {
    fn default() -> Self {
        Self {
            name: "grasp-sync test relay".to_owned(),
            max_subscriptions: 500,
            default_filter_limit: 500,
            max_filter_limit: None,
            max_filters: None,
            advertise_default_limit: true,
            advertise_max_limit: true,
            notes_per_minute: 1_000_000,
            advertise_negentropy: true,
            nip11: Nip11Mode::WithLimits,
            store: StoreKind::Memory,
            strict: None,
            auth: RelayAuth::Off,
        }
    }
}

impl TestRelayConfig {
    /// The per-filter caps the relay applies: `default_filter_limit` and `max_filter_limit`.
    pub fn filter_caps(&self) -> FilterCaps {
        FilterCaps {
            default_limit: self.default_filter_limit,
            max_limit: self.max_filter_limit,
        }
    }
}

/// A real WebSocket relay on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub struct TestRelay {
    config: TestRelayConfig,
    addr: SocketAddr,
    database: Arc<dyn NostrDatabase>,
    counters: Arc<Counters>,
    recorder: Arc<Recorder>,
    running: Option<Running>,
    // Declared last so the store is closed before its directory is removed.
    _dir: Option<TempDir>,
}

/// The parts of a relay that exist only while it runs.
#[derive(Debug)]
struct Running {
    relay: LocalRelay,
    front: Front,
}

impl TestRelay {
    /// Starts a relay on a free port of `127.0.0.1` with an empty store.
    pub async fn start(config: TestRelayConfig) -> Result<TestRelay, TestkitError> {
        let (database, dir): (Arc<dyn NostrDatabase>, Option<TempDir>) = match config.store {
            StoreKind::Memory => (
                Arc::new(MemoryDatabase::with_opts(MemoryDatabaseOptions {
                    events: true,
                    max_events: None,
                })),
                None,
            ),
            StoreKind::Lmdb => {
                let dir = tempfile::tempdir()?;
                (Arc::new(NostrLMDB::open(dir.path())?), Some(dir))
            }
        };
        let mut relay = TestRelay {
            config,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            database,
            counters: Arc::new(Counters::default()),
            recorder: Arc::new(Recorder::default()),
            running: None,
            _dir: dir,
        };
        relay.listen().await?;
        Ok(relay)
    }

    /// The relay's URL, `ws://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// The URL to fetch the NIP-11 document from, `http://127.0.0.1:PORT`.
    pub fn nip11_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the relay listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The relay's configuration.
    pub fn config(&self) -> &TestRelayConfig {
        &self.config
    }

    /// Whether the relay accepts connections.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Writes events straight into the store: no network, no rate limit, no live
    /// notification. Works whether or not the relay runs. Returns how many were newly stored
    /// (duplicates and replaced addressable events are not counted).
    pub async fn seed(
        &self,
        events: impl IntoIterator<Item = Event>,
    ) -> Result<usize, TestkitError> {
        seed_database(&self.database, events).await
    }

    /// Stores an event and pushes it to the running relay's live subscribers, as if a client
    /// had published it. Returns whether it was newly stored (a duplicate is not pushed).
    /// The relay's fan-out channel holds 1,024 events: a subscriber that falls further behind
    /// a burst silently misses events, so publish bursts in smaller steps.
    pub async fn publish(&self, event: Event) -> Result<bool, TestkitError> {
        let running = self.running.as_ref().ok_or(TestkitError::NotRunning)?;
        let status = self.database.save_event(&event).await?;
        if !status.is_success() {
            return Ok(false);
        }
        running.relay.notify_event(event);
        Ok(true)
    }

    /// Events in the store matching `filter` (no result limit unless the filter has one).
    pub async fn query(&self, filter: Filter) -> Result<Events, TestkitError> {
        Ok(self.database.query(filter).await?)
    }

    /// IDs of every stored event.
    pub async fn event_ids(&self) -> Result<BTreeSet<EventId>, TestkitError> {
        let events = self.database.query(Filter::new()).await?;
        Ok(events.into_iter().map(|e| e.id).collect())
    }

    /// Number of stored events.
    pub async fn count(&self) -> Result<usize, TestkitError> {
        Ok(self.database.count(Filter::new()).await?)
    }

    /// The relay's store, shared with the relay (writes here are not pushed to subscribers).
    pub fn database(&self) -> Arc<dyn NostrDatabase> {
        Arc::clone(&self.database)
    }

    /// TCP connections accepted since the relay was created (NIP-11 fetches included).
    pub fn connections_accepted(&self) -> u64 {
        self.counters.tcp_accepted.load(Ordering::Relaxed)
    }

    /// WebSocket upgrades handed to the relay since it was created.
    pub fn websocket_connections_accepted(&self) -> u64 {
        self.counters.websockets_accepted.load(Ordering::Relaxed)
    }

    /// WebSocket connections open right now.
    pub fn open_websocket_connections(&self) -> u64 {
        self.counters.websockets_open.load(Ordering::Relaxed)
    }

    /// NIP-11 documents requested since the relay was created (served or not).
    pub fn nip11_requests(&self) -> u64 {
        self.counters.nip11_requests.load(Ordering::Relaxed)
    }

    /// What the strict relay's proxy counted since the relay was created, restarts
    /// included. Empty when the relay has no strict limits.
    pub fn strict_stats(&self) -> StrictStats {
        self.recorder.snapshot()
    }

    /// Stops accepting and closes every connection; clients see a disconnect. The store and
    /// the port number are kept for [`TestRelay::restart`]. Stopping a stopped relay does
    /// nothing.
    pub async fn stop(&mut self) -> Result<(), TestkitError> {
        if let Some(running) = self.running.take() {
            running.relay.shutdown();
            running.front.stop().await;
        }
        Ok(())
    }

    /// Starts a stopped relay again on the same port with the same store.
    pub async fn restart(&mut self) -> Result<(), TestkitError> {
        if self.running.is_some() {
            return Err(TestkitError::AlreadyRunning);
        }
        self.listen().await
    }

    /// Binds `self.addr` (port 0 the first time) and spawns the accept loop.
    async fn listen(&mut self) -> Result<(), TestkitError> {
        let socket = TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(self.addr)?;
        let listener = socket.listen(1024)?;
        self.addr = listener.local_addr()?;
        let relay = LocalRelay::new(builder(&self.config, Arc::clone(&self.database)));
        let strict = self.config.strict.clone().map(|limits| Strict {
            limits: Arc::new(limits),
            recorder: Arc::clone(&self.recorder),
            store: Arc::clone(&self.database),
            caps: self.config.filter_caps(),
        });
        let site = RelaySite::new(
            relay.clone(),
            nip11::document(&self.config),
            Arc::clone(&self.counters),
            strict,
        );
        let front = Front::start(listener, FrontLimits::default(), site)?;
        self.running = Some(Running { relay, front });
        Ok(())
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.relay.shutdown();
            // Aborting the accept loop drops its connection set, which aborts every
            // connection task.
            running.front.abort();
        }
    }
}

/// The relay builder for a config and a store.
fn builder(config: &TestRelayConfig, database: Arc<dyn NostrDatabase>) -> RelayBuilder {
    let proxy_counts_subscriptions = config
        .strict
        .as_ref()
        .is_some_and(|strict| strict.subscriptions.is_some());
    let max_reqs = if proxy_counts_subscriptions {
        usize::MAX
    } else {
        config.max_subscriptions
    };
    let mut builder = RelayBuilder::default()
        .database(database)
        .rate_limit(RateLimit {
            max_reqs,
            notes_per_minute: config.notes_per_minute,
        })
        .default_filter_limit(config.default_filter_limit);
    if let Some(max) = config.max_filter_limit {
        builder = builder.max_filter_limit(max);
    }
    if config.auth == RelayAuth::Reads {
        builder = builder.nip42(RelayBuilderNip42 {
            mode: RelayBuilderNip42Mode::Read,
        });
    }
    builder
}

/// Writes events into a store, many at once; returns how many were newly stored.
pub(crate) async fn seed_database(
    database: &Arc<dyn NostrDatabase>,
    events: impl IntoIterator<Item = Event>,
) -> Result<usize, TestkitError> {
    let mut stored = 0;
    let mut tasks = JoinSet::new();
    for event in events {
        if tasks.len() >= SEED_IN_FLIGHT {
            stored += join_one(&mut tasks).await?;
        }
        let database = Arc::clone(database);
        tasks.spawn(async move { database.save_event(&event).await });
    }
    while !tasks.is_empty() {
        stored += join_one(&mut tasks).await?;
    }
    Ok(stored)
}

/// Waits for one seeding write; 1 if it stored a new event.
async fn join_one(
    tasks: &mut JoinSet<Result<nostr_database::SaveEventStatus, nostr_database::DatabaseError>>,
) -> Result<usize, TestkitError> {
    match tasks.join_next().await {
        Some(joined) => Ok(usize::from(joined??.is_success())),
        None => Ok(0),
    }
}
