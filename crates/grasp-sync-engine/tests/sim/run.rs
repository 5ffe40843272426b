//! One seed's run: a generated network on simulated relays with the seed's limits, quirks and
//! faults, the real engine and the real store policy on virtual time, and the checks after
//! every step of virtual time:
//!
//! - `confirmed-unstored`: every repository and root event the engine has confirmed on a
//!   relay has every event that relay held for it, and a correct sync keeps, in the store;
//! - the monitor's rules on every client message (see `monitor.rs`);
//! - `converged`: once faults stop, the store reaches exactly the expected set (nothing the
//!   policy excludes) within the deadline.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{
    AddressPolicy, Clock, EngineConfig, EngineHandle, EngineParts, MemoryHoldings, MemoryStore,
    StoreConfig, SyncEngine, TokioClock,
};
use grasp_sync_model::{RelayUrl, SyncLevel};
use grasp_sync_testkit::{
    AuthRefusal, FilterPredicate, GeneratedNetwork, NetworkSpec, RootCount, SimulatedRelay,
    StrictAuth, TestRelayConfig, generate,
};
use nostr::{Event, EventId, JsonUtil, Kind, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::faults::FaultPlan;
use crate::network::SimNetwork;
use crate::restart;

/// The service the store accepts repositories for.
const SERVICE_URL: &str = "wss://grasp.test";
/// Its git host, as the generator writes clone URLs.
const SERVICE_DOMAIN: &str = "grasp.test";
/// How often the run checks the engine and the store.
const STEP: Duration = Duration::from_millis(500);
/// The share of strict relays that serve authenticated connections only.
const AUTH_REQUIRED: f64 = 0.25;
/// How long after faults stop the store has to converge.
const CONVERGENCE_DEADLINE: Duration = Duration::from_secs(15 * 60);
/// How long [`Shape::Restart`]'s daily run is given before the engine stops.
const DAILY_RUN_SETTLES: Duration = Duration::from_secs(120);

/// What a passing run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Digest of every client message and when it was read.
    pub(crate) trace: u64,
    /// Client messages read.
    pub(crate) messages: u64,
    /// Virtual seconds until convergence.
    pub(crate) virtual_secs: u64,
    /// Events the store had to end with.
    pub(crate) expected: usize,
}

/// Runs one seed on its own paused single-threaded runtime.
pub(crate) fn run(seed: u64, shape: Shape) -> Result<Outcome, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(run_seed(seed, shape))
}

/// What each relay held at the start, by the item it is confirmed for.
#[derive(Default)]
struct Coverage {
    /// Every event, to describe one in a failure.
    events: BTreeMap<EventId, Event>,
    /// Per relay, per repository coordinate: the expected events tagging it.
    repos: BTreeMap<String, BTreeMap<String, Vec<EventId>>>,
    /// Per relay, per root event: the expected events tagging it.
    roots: BTreeMap<String, BTreeMap<EventId, Vec<EventId>>>,
}

impl Coverage {
    fn new(urls: &[String], network: &GeneratedNetwork) -> Self {
        let mut coverage = Self::default();
        for (url, events) in urls.iter().zip(&network.relay_events) {
            let repos = coverage.repos.entry(url.clone()).or_default();
            let roots = coverage.roots.entry(url.clone()).or_default();
            for event in events {
                coverage.events.insert(event.id, event.clone());
            }
            for event in events.iter().filter(|e| network.expected.contains(&e.id)) {
                for (name, value) in tag_values(event) {
                    match name {
                        "a" | "A" | "q" if value.contains(':') => {
                            repos.entry(value.to_owned()).or_default().push(event.id);
                        }
                        "e" | "E" | "q" => {
                            if let Ok(root) = EventId::from_hex(value) {
                                roots.entry(root).or_default().push(event.id);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        coverage
    }
}

/// An event's ID, kind and time, for a failure message.
fn describe(coverage: &Coverage, id: EventId) -> String {
    match coverage.events.get(&id) {
        Some(event) if std::env::var_os("GRASP_SYNC_SIM_SEED").is_some() => event.as_json(),
        Some(event) => format!("{id} (kind {}, created {})", event.kind, event.created_at),
        None => id.to_string(),
    }
}

fn tag_values(event: &Event) -> impl Iterator<Item = (&str, &str)> {
    event.tags.iter().filter_map(|tag| match tag.as_slice() {
        [name, value, ..] => Some((name.as_str(), value.as_str())),
        _ => None,
    })
}

/// Which networks and pages a run draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Shape {
    /// Small networks, whose filters rarely fill a page: hundreds of runs a minute.
    Small,
    /// Repositories with up to 160 roots on relays paging at 100 to 160 events, so history
    /// pages on every quirk.
    Paging,
    /// [`Shape::Small`] networks where only the first relay is a bootstrap relay, holding every
    /// announcement (as a directory relay does): the others are found by discovery and dialled
    /// when an index update tracks them.
    Discovered,
    /// [`Shape::Small`] networks synced by an engine that keeps relays' holdings, runs its
    /// daily reconciliation once converged, and stops; relays then store new events while no
    /// engine runs, and a second engine over the same store and holdings reconciles over them
    /// under a new draw of faults (see `restart.rs`).
    Restart,
}

impl Shape {
    /// The shape's name in the runner's report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Shape::Small => "small",
            Shape::Paging => "paging",
            Shape::Discovered => "discovered",
            Shape::Restart => "restart",
        }
    }
}

/// The network one seed syncs: a few relays and repositories, varied enough to regroup and
/// reconnect, and with [`Shape::Paging`] to page.
fn network_spec(rng: &mut ChaCha8Rng, seed: u64, shape: Shape) -> NetworkSpec {
    let relays = rng.random_range(2..=4);
    let (repos, roots) = match shape {
        Shape::Small | Shape::Discovered | Shape::Restart => {
            (rng.random_range(2..=4), rng.random_range(5..=30))
        }
        Shape::Paging => (rng.random_range(1..=3), rng.random_range(10..=160)),
    };
    NetworkSpec {
        relays,
        repos,
        roots: RootCount::PerRepo(roots),
        replies_per_root: rng.random_range(0..=2),
        comments_per_repo: rng.random_range(0..=2),
        descendants_per_reply: rng.random_range(0..=1),
        relays_per_repo: 2.min(relays),
        ..NetworkSpec::small(seed, SERVICE_URL)
    }
}

/// One relay's behaviour: a real relay's profile with its caps cut down (never below the
/// smallest page real relays send, which the engine relies on) so small networks still page
/// and fill the subscription budget.
fn relay_config(rng: &mut ChaCha8Rng, shape: Shape) -> TestRelayConfig {
    let profiles = [
        TestRelayConfig::rust_nostr_like(),
        TestRelayConfig::strfry_filter_validation_like(),
        TestRelayConfig::nostream_like(),
        TestRelayConfig::nos_lol_like(),
        TestRelayConfig::ditto_like(),
        TestRelayConfig::oldest_first_without_limit_like(),
        TestRelayConfig::exclusive_until_like(),
        TestRelayConfig::per_req_cap_like(),
        TestRelayConfig::quirks_mixed(),
    ];
    let mut config = profiles[rng.random_range(0..profiles.len())].clone();
    let page = match shape {
        Shape::Small | Shape::Discovered | Shape::Restart => rng.random_range(100..=250),
        Shape::Paging => rng.random_range(100..=160),
    };
    config.default_filter_limit = page;
    config.max_filter_limit = match shape {
        Shape::Small | Shape::Discovered | Shape::Restart => config.max_filter_limit.map(|_| page),
        Shape::Paging => Some(page),
    };
    config.max_subscriptions = rng.random_range(3..=10);
    if let Some(strict) = config.strict.as_mut() {
        if let Some(limit) = strict.subscriptions.as_mut() {
            limit.max = rng.random_range(3..=10);
        }
        if let Some(limit) = strict.filters_per_req.as_mut() {
            limit.max = rng.random_range(2..=8);
        }
        if let Some(cap) = strict.quirks.per_req_cap.as_mut() {
            *cap = (*cap).min(page);
        }
        // Some relays serve authenticated connections only (strfry's NIP-42 read restriction),
        // answering a refused REQ in any of the ways real relays do.
        if rng.random_bool(AUTH_REQUIRED) {
            let refusal = [
                AuthRefusal::Closed,
                AuthRefusal::Notice,
                AuthRefusal::NoticeThenClosed,
            ][rng.random_range(0..3)];
            strict.auth = Some(StrictAuth {
                refusal,
                ..StrictAuth::new(FilterPredicate::custom(|_| true))
            });
        }
    }
    config
}

/// Puts every announcement on the first relay too ([`Shape::Discovered`]).
fn hold_every_announcement(network: &mut GeneratedNetwork) {
    let (first, others) = network
        .relay_events
        .split_first_mut()
        .expect("a network has relays");
    let held: BTreeSet<EventId> = first.iter().map(|e| e.id).collect();
    let mut announcements: Vec<Event> = others
        .iter()
        .flatten()
        .filter(|e| e.kind == Kind::GitRepoAnnouncement && !held.contains(&e.id))
        .cloned()
        .collect();
    announcements.sort_unstable_by_key(|e| e.id);
    announcements.dedup_by_key(|e| e.id);
    first.extend(announcements);
}

/// The engine's configuration: `bootstrap` relays, the seed's randomness, short windows.
fn engine_config(bootstrap: &[String], seed: u64) -> EngineConfig {
    EngineConfig {
        own_relay: Some(RelayUrl::parse(SERVICE_URL).expect("service url")),
        bootstrap_relays: bootstrap
            .iter()
            .map(|u| RelayUrl::parse(u).expect("relay url"))
            .collect(),
        address_policy: AddressPolicy::allow_all(),
        batch_window: Duration::from_secs(1),
        purgatory_interval: Duration::from_secs(1),
        health_tick: Duration::from_millis(500),
        completion_recheck: Duration::from_millis(500),
        rng_seed: Some(seed),
        ..EngineConfig::default()
    }
}

async fn run_seed(seed: u64, shape: Shape) -> Result<Outcome, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let spec = network_spec(&mut rng, seed, shape);
    let urls: Vec<String> = (0..spec.relay_count())
        .map(|i| {
            RelayUrl::parse(&format!("ws://relay-{i}.sim"))
                .expect("relay url")
                .to_string()
        })
        .collect();
    let mut network = generate(&spec, &urls).map_err(|e| format!("generate: {e}"))?;
    let bootstrap = match shape {
        Shape::Discovered => {
            hold_every_announcement(&mut network);
            &urls[..1]
        }
        Shape::Small | Shape::Paging | Shape::Restart => &urls[..],
    };
    let relays: Vec<(String, SimulatedRelay)> = urls
        .iter()
        .zip(&network.relay_events)
        .map(|(url, events)| {
            let relay = SimulatedRelay::new(relay_config(&mut rng, shape), events.clone());
            (url.clone(), relay)
        })
        .collect();
    let faults = draw_faults(&mut rng);
    let sim = SimNetwork::new(
        relays,
        ChaCha8Rng::seed_from_u64(rng.random()),
        faults.clone(),
    );

    // A day after the newest event: the store refuses events from its future.
    let newest = network
        .relay_events
        .iter()
        .flatten()
        .map(|e| e.created_at.as_secs())
        .max()
        .unwrap_or(spec.base_created_at);
    let start = newest.max(spec.base_created_at + spec.time_span_secs) + 86_400;
    let clock = Arc::new(TokioClock::anchored_at(Timestamp::from_secs(start)));
    let store = MemoryStore::with_clock(
        StoreConfig::new(
            RelayUrl::parse(SERVICE_URL).expect("service url"),
            SERVICE_DOMAIN,
        ),
        clock.clone(),
    )
    .await
    .map_err(|e| format!("store: {e}"))?;
    let holdings = (shape == Shape::Restart).then(|| Arc::new(MemoryHoldings::default()));
    let engine_parts = || {
        let parts = EngineParts::new(
            Arc::new(sim.clone()),
            Arc::new(store.clone()),
            Arc::new(store.clone()),
        )
        .clock(clock.clone());
        match &holdings {
            Some(holdings) => parts.holdings_memory(holdings.clone()),
            None => parts,
        }
    };
    let engine = SyncEngine::start(engine_config(bootstrap, seed), engine_parts())
        .await
        .map_err(|e| format!("engine: {e}"))?;

    let began = tokio::time::Instant::now();
    let mut stored: BTreeSet<EventId> = BTreeSet::new();
    let watched = Watched {
        sim: &sim,
        store: &store,
        network: &network,
        coverage: &Coverage::new(&urls, &network),
    };
    let mut result = watched.converge(&engine, &faults, &mut stored).await;
    let engine = if shape == Shape::Restart && result.is_ok() {
        // The daily run learns what each relay holds, then the engine stops.
        engine.reconcile_now().await;
        tokio::time::sleep(DAILY_RUN_SETTLES).await;
        engine.shutdown().await;
        for late in restart::late_events(&mut rng, &network, clock.unix_now())? {
            sim.store(&urls[late.relay], late.event.clone());
            if late.expected {
                network.expected.insert(late.event.id);
            } else {
                network.excluded.insert(late.event.id);
            }
            network.relay_events[late.relay].push(late.event);
        }
        let faults = draw_faults(&mut rng);
        sim.start_faults(faults.clone());
        let engine = SyncEngine::start(engine_config(bootstrap, seed), engine_parts())
            .await
            .map_err(|e| format!("restarted engine: {e}"))?;
        let watched = Watched {
            sim: &sim,
            store: &store,
            network: &network,
            coverage: &Coverage::new(&urls, &network),
        };
        result = watched
            .converge(&engine, &faults, &mut stored)
            .await
            .map_err(|broken| format!("after the restart: {broken}"));
        engine
    } else {
        engine
    };
    let outcome = result.map(|()| {
        let world = sim.world();
        Outcome {
            trace: world.trace(),
            messages: world.messages,
            virtual_secs: began.elapsed().as_secs(),
            expected: network.expected.len(),
        }
    });
    engine.shutdown().await;
    outcome
}

/// What a run watches while an engine syncs.
#[derive(Clone, Copy)]
struct Watched<'a> {
    sim: &'a SimNetwork,
    store: &'a MemoryStore,
    network: &'a GeneratedNetwork,
    coverage: &'a Coverage,
}

impl Watched<'_> {
    /// Steps virtual time until the store holds exactly the expected events once `faults`
    /// have stopped (counted from now), checking every invariant at each step; `stored` is
    /// what the store is known to hold.
    async fn converge(
        &self,
        engine: &EngineHandle,
        faults: &FaultPlan,
        stored: &mut BTreeSet<EventId>,
    ) -> Result<(), String> {
        let Watched {
            sim,
            store,
            network,
            coverage,
        } = *self;
        let began = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(STEP).await;
            let elapsed = began.elapsed();
            let faults_over = elapsed >= faults.until;
            if faults_over {
                sim.stop_faults();
            }
            if let Some(violation) = sim.world().monitor.violation.clone() {
                return Err(violation);
            }
            for id in &network.expected {
                if !stored.contains(id) && held(store, id).await {
                    stored.insert(*id);
                }
            }
            if let Some(confirmed) = engine.confirmed().await
                && let Some(broken) =
                    unstored_confirmation(coverage, &confirmed, stored, store).await
            {
                return Err(format!(
                    "confirmed-unstored broken at {:.3} s: {broken}",
                    elapsed.as_secs_f64()
                ));
            }
            if faults_over && stored.len() == network.expected.len() {
                let mut leaked = Vec::new();
                for id in &network.excluded {
                    if held(store, id).await {
                        leaked.push(describe(coverage, *id));
                    }
                }
                if !leaked.is_empty() {
                    return Err(format!(
                        "converged broken: {} excluded events stored: {}",
                        leaked.len(),
                        leaked.join(", ")
                    ));
                }
                return Ok(());
            }
            if elapsed > faults.until + CONVERGENCE_DEADLINE {
                let missing: Vec<&EventId> = network.expected.difference(stored).collect();
                let descendants = missing
                    .iter()
                    .filter(|id| network.expected_descendants.contains(id))
                    .count();
                let missing: Vec<String> = missing
                    .iter()
                    .take(3)
                    .map(|id| describe(coverage, **id))
                    .collect();
                return Err(format!(
                    "converged broken: {} of {} expected events stored {} s after faults \
                     stopped ({descendants} of the missing are descendants of direct members); \
                     missing {}",
                    stored.len(),
                    network.expected.len(),
                    (elapsed - faults.until).as_secs(),
                    missing.join(", ")
                ));
            }
        }
    }
}

/// The seed's next draw of faults, or none where the environment turns them off
/// (`GRASP_SYNC_SIM_NO_FAULTS`); the draw is made either way, so the seed's other draws stay.
fn draw_faults(rng: &mut ChaCha8Rng) -> FaultPlan {
    let faults = FaultPlan::draw(rng);
    if std::env::var_os("GRASP_SYNC_SIM_NO_FAULTS").is_some() {
        return FaultPlan::none();
    }
    faults
}

/// Whether the store holds the event (`EventStore::contains` also answers yes for events it
/// rejected).
async fn held(store: &MemoryStore, id: &EventId) -> bool {
    use nostr_database::NostrDatabase;
    matches!(store.database().event_by_id(id).await, Ok(Some(_)))
}

/// The first confirmed item whose events are not all stored, if any.
async fn unstored_confirmation(
    coverage: &Coverage,
    confirmed: &BTreeMap<RelayUrl, grasp_sync_model::RelayState>,
    stored: &BTreeSet<EventId>,
    store: &MemoryStore,
) -> Option<String> {
    for (relay, state) in confirmed {
        let key = relay.to_string();
        let repos = coverage.repos.get(&key);
        for (coordinate, level) in &state.repos {
            if *level != SyncLevel::Full {
                continue;
            }
            let needed = repos.and_then(|r| r.get(&coordinate.to_string()));
            for id in needed.into_iter().flatten() {
                if !stored.contains(id) && !held(store, id).await {
                    return Some(format!(
                        "{coordinate} confirmed on {key} without {}",
                        describe(coverage, *id)
                    ));
                }
            }
        }
        let roots = coverage.roots.get(&key);
        for root in &state.root_events {
            let needed = roots.and_then(|r| r.get(root));
            for id in needed.into_iter().flatten() {
                if !stored.contains(id) && !held(store, id).await {
                    return Some(format!(
                        "root {root} confirmed on {key} without {}",
                        describe(coverage, *id)
                    ));
                }
            }
        }
    }
    None
}
