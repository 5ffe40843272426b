//! NIP-77 historic sync: only the difference crosses the wire, the fallbacks when a relay
//! cannot serve what it advertises, rejected IDs never fetched twice, the store's "have" sets
//! read before a round's pacing decision, and what a relay without NIP-77 costs (nothing when
//! its NIP-11 says so, one short probe an hour when it ignores NEG-OPEN). Every test runs on paused
//! time over memory relays, and counts what the relays sent from their own stats.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::negentropy::NIP77_NO_ANSWER_TTL;
use grasp_sync_engine::{
    EventStore, MemoryStore, NEGENTROPY_DEADLINE, StoreError, negentropy::RecoveryConfig,
    store::RejectedConfig,
};
use grasp_sync_health::HealthConfig;
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{ThreadTag, reply};
use grasp_sync_testkit::{
    Dialect, FilterLimit, MemoryNetwork, ServeById, SimulatedRelay, StartKind, StrictLimits,
    TestRelayConfig,
};
use nostr::{Event, Keys, Timestamp};

use crate::support::{
    PausedEngine, RepoFixture, SERVICE_URL, background, ids, memory_network, paused_store,
    paused_store_rejecting, restart_paused_engine, start_paused_engine, start_paused_engine_with,
    test_config, tight_background_starts, wait_until,
};

const BOOTSTRAP: &str = "ws://bootstrap.memory";
const HOME: &str = "ws://home.memory";

/// A passthrough strict relay (counts what it sends) with NIP-77 on or off.
fn counted(negentropy: bool, serve_by_id: Option<ServeById>) -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        negentropy_enabled: negentropy,
        serve_by_id,
        ..StrictLimits::default()
    })
}

/// [`counted`] with NIP-77 on and an advertised ceiling of 20 filters per REQ, as the
/// rust-nostr relay builder advertises: a REQ may pack several filters without a refusal.
fn counted_with_known_ceiling() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        negentropy_enabled: true,
        filters_per_req: Some(FilterLimit {
            max: 20,
            dialect: Dialect::RustNostr,
            advertised: true,
        }),
        ..StrictLimits::default()
    })
}

/// `n` replies to `issue`, one second apart.
fn replies(issue: &Event, n: u64, start: u64) -> Vec<Event> {
    let author = Keys::generate();
    (0..n)
        .map(|i| {
            reply(
                &author,
                issue,
                ThreadTag::LowerE,
                &format!("r{i}"),
                Timestamp::from_secs(start + i),
            )
            .expect("reply")
        })
        .collect()
}

/// Syncs a relay holding a thread plus `total` replies into a store that already holds the
/// announcement, the thread and the first `held` replies; returns the EVENT messages the relay
/// sent to the engine.
async fn sync_with_store_holding(negentropy: bool, total: u64, held: usize) -> u64 {
    let fixture = RepoFixture::new("reconciled");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let issue = thread.last().expect("issue").clone();
    let many = replies(&issue, total, 1_700_010_000);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![announcement.clone()],
        ),
        (
            HOME,
            counted(negentropy, None),
            thread.iter().chain(&many).cloned().collect(),
        ),
    ]);
    let urls = network.urls();
    let home = &urls[1];

    let (store, clock) = paused_store().await;
    let source = RelayUrl::parse(home).expect("url");
    for event in std::iter::once(&announcement)
        .chain(&thread)
        .chain(many.iter().take(held))
    {
        store.ingest(event.clone(), &source).await.expect("preload");
    }
    let run = restart_paused_engine(&network, test_config(&urls[..1]), (store, clock)).await;
    let mut expected = ids(&thread);
    expected.extend(ids(&many));
    run.wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert!(
        run.wait_for_relay(home, Duration::from_secs(600), |r| r.connection
            == "connected")
            .await,
        "the batch never confirmed: {:#?}",
        run.relay(home).await
    );
    run.engine.shutdown().await;
    network.stats(home).events_sent()
}

#[tokio::test(start_paused = true)]
async fn negentropy_moves_only_the_missing_events_and_req_moves_them_all() {
    let by_negentropy = sync_with_store_holding(true, 5_000, 4_000).await;
    let by_req = sync_with_store_holding(false, 5_000, 4_000).await;
    eprintln!(
        "EVENT messages for 1,000 missing of 5,000: negentropy {by_negentropy}, REQ+EOSE {by_req}"
    );
    assert!(
        (1_000..=1_020).contains(&by_negentropy),
        "negentropy sent {by_negentropy} events"
    );
    assert!(by_req >= 5_000, "REQ+EOSE sent {by_req} events");
}

/// A bootstrap relay with our announcement, and `n` it serves by ID per `serve`.
/// A memory network: a bootstrap relay announcing a repository on a home relay that serves
/// `serve` of what is asked by ID, holding its thread and `missing` replies; with the IDs a
/// sync must store.
fn home_serving(
    serve: ServeById,
    missing: u64,
) -> (MemoryNetwork, std::collections::BTreeSet<nostr::EventId>) {
    let fixture = RepoFixture::new("hydrated");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let issue = thread.last().expect("issue").clone();
    let mut many = replies(&issue, missing, 1_700_020_000);
    // Enough repository comments that the repository batch advertises at least 20 IDs too.
    let commenter = Keys::generate();
    many.extend((0..25).map(|i| {
        grasp_sync_testkit::nip34::repo_comment(
            &commenter,
            &fixture.repo,
            grasp_sync_testkit::nip34::RepoTag::LowerA,
            &format!("c{i}"),
            Timestamp::from_secs(1_700_030_000 + i),
        )
        .expect("comment")
    }));
    let mut expected = ids(&thread);
    expected.extend(ids(&many));
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement]),
        ),
        (
            HOME.to_owned(),
            SimulatedRelay::new(
                counted(true, Some(serve)),
                thread.into_iter().chain(many).collect(),
            ),
        ),
    ]);
    (network, expected)
}

#[tokio::test(start_paused = true)]
async fn a_relay_advertising_ids_it_cannot_serve_gets_the_semantic_fallback() {
    let (network, expected) = home_serving(ServeById::new(0), 40);
    let run = start_paused_engine(&network, test_config(&network.urls()[..1])).await;
    // By ID nothing arrives, ever: only the semantic REQ+EOSE fallback can complete the store.
    let status = run.wait_for_store(&expected, Duration::from_secs(60)).await;
    assert_eq!(status.negentropy.recovery_pending_ids, 0, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_partly_serving_relay_gets_one_retry_then_recovery_and_is_promoted_when_it_serves() {
    let serve = ServeById::new(80);
    let (network, expected) = home_serving(serve.clone(), 40);
    let urls = network.urls();
    let mut config = test_config(&urls[..1]);
    // NIP-77 reconciles the first sync: no page rides on the live groups.
    config.live_first_page = false;
    config.recovery = RecoveryConfig {
        base_backoff: Duration::from_millis(500),
        max_backoff: Duration::from_secs(2),
        ..RecoveryConfig::default()
    };
    let run = start_paused_engine(&network, config).await;
    let engine = &run.engine;
    let home_key = urls[1].clone();
    // 80 % arrive on the first pass, the retry brings nothing new: the batch fails and the
    // withheld IDs wait in the recovery index.
    let failed = wait_until(Duration::from_secs(60), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(&home_key)
                .is_some_and(|r| r.connection == "connected_historic_sync_failures")
                && s.negentropy.recovery_pending_ids > 0
        })
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(failed, "{status:#?}");
    assert!(run.count_stored(&expected).await < expected.len());
    // The relay starts serving: recovery completes and the relay is promoted.
    serve.set(100);
    let recovered = wait_until(Duration::from_secs(60), || async {
        run.count_stored(&expected).await == expected.len()
            && engine.status().await.is_some_and(|s| {
                s.relays
                    .get(&home_key)
                    .is_some_and(|r| r.connection == "connected")
            })
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(
        recovered,
        "stored {} of {}: {status:#?}",
        run.count_stored(&expected).await,
        expected.len()
    );
    assert!(status.negentropy.recovered_ids > 0, "{status:#?}");
    run.engine.shutdown().await;
}

/// A counted bootstrap relay with NIP-77 holding an announcement that lists this service and
/// the home relay, and `count` announcements of other repositories that do not (the policy
/// refuses them); the home relay is empty. The network, and those refused announcements.
fn foreign_announcements(count: u64) -> (MemoryNetwork, Vec<Event>) {
    let ours = RepoFixture::new("ours");
    let announcement = ours.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let foreign: Vec<Event> = (0..count)
        .map(|n| {
            RepoFixture::new(&format!("foreign-{n}"))
                .announcement(&[HOME.to_owned()], 1_700_000_000 + n)
        })
        .collect();
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            counted(true, None),
            std::iter::once(announcement)
                .chain(foreign.iter().cloned())
                .collect(),
        ),
        (HOME, TestRelayConfig::default(), Vec::new()),
    ]);
    (network, foreign)
}

#[tokio::test(start_paused = true)]
async fn rejected_ids_are_never_fetched_twice_across_reconciliations() {
    let (network, foreign) = foreign_announcements(60);
    let urls = network.urls();
    let bootstrap = &urls[0];

    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let foreign_ids = ids(&foreign);
    let rejected = wait_until(Duration::from_secs(600), || async {
        let mut all = true;
        for id in &foreign_ids {
            all &= run.store.rejection_reason(id).ok().flatten().is_some();
        }
        all
    })
    .await;
    assert!(
        rejected,
        "the foreign announcements were not all fetched and rejected"
    );
    let stopped = run.stop().await;
    let first_pass = network.stats(bootstrap).events_sent();

    // A restart reconciles again from scratch, over the same store.
    let run = restart_paused_engine(&network, test_config(&urls[..1]), stopped).await;
    let reconciled = wait_until(Duration::from_secs(600), || async {
        run.engine.status().await.is_some_and(|s| {
            s.relays
                .get(bootstrap)
                .is_some_and(|r| r.connection == "connected")
                && s.negentropy.rounds_completed > 0
        })
    })
    .await;
    assert!(reconciled, "the second reconciliation did not complete");
    run.engine.shutdown().await;
    let second_pass = network.stats(bootstrap).events_sent() - first_pass;
    assert!(
        first_pass >= foreign.len() as u64,
        "first pass sent {first_pass}"
    );
    assert_eq!(
        second_pass, 0,
        "the second reconciliation fetched {second_pass} events again"
    );
}

/// A refused event stays known for as long as the relay that sent it keeps offering it: a
/// reconciliation that finds the relay holding it, past half of its lifetime in the
/// rejected-events index, renews it there. So a reconciliation after that first lifetime has
/// ended fetches nothing again; without the renewal it would fetch every refused event again.
#[tokio::test(start_paused = true)]
async fn a_rejected_id_the_relay_keeps_offering_is_not_fetched_again_when_its_first_lifetime_ends()
{
    const LIFETIME: Duration = Duration::from_secs(3600);
    let (network, foreign) = foreign_announcements(20);
    let urls = network.urls();
    let bootstrap = urls[0].clone();
    let (store, clock) = paused_store_rejecting(RejectedConfig {
        cold_ttl: LIFETIME,
        ..RejectedConfig::default()
    })
    .await;
    let run = start_paused_engine_with(
        &network,
        test_config(&urls[..1]),
        store.clone(),
        Arc::new(store),
        clock,
        None,
    )
    .await;
    let foreign_ids = ids(&foreign);
    let all_rejected = || async {
        let mut all = true;
        for id in &foreign_ids {
            all &= run.store.rejection_reason(id).ok().flatten().is_some();
        }
        all
    };
    assert!(
        wait_until(Duration::from_secs(600), all_rejected).await,
        "the foreign announcements were not all fetched and rejected"
    );
    let first_pass = network.stats(&bootstrap).events_sent();
    assert!(
        first_pass > foreign.len() as u64,
        "first pass sent {first_pass}"
    );
    // Two reconciliations, each 0.6 of the lifetime after the last: the second comes after
    // the first lifetime has ended.
    for n in 1..=2 {
        tokio::time::sleep(LIFETIME * 6 / 10).await;
        run.engine.reconcile_now().await.expect("engine running");
        let done = wait_until(Duration::from_secs(600), || async {
            run.engine.status().await.is_some_and(|s| {
                s.relays.get(&bootstrap).is_some_and(|r| {
                    r.daily_reconciliations == n
                        && r.pending_batches == 0
                        && r.queued_starts == 0
                        && r.connection == "connected"
                })
            })
        })
        .await;
        assert!(done, "reconciliation {n} did not end");
        let again = network.stats(&bootstrap).events_sent() - first_pass;
        assert_eq!(again, 0, "reconciliation {n} fetched {again} events again");
        assert!(all_rejected().await, "after reconciliation {n}");
    }
    run.engine.shutdown().await;
}

/// The own store, except that building a negentropy "have" set takes `delay` (on the tokio
/// clock), like a large store on a loaded disk, and fails when `fail` is set.
struct HaveSets {
    inner: MemoryStore,
    delay: Duration,
    fail: bool,
}

#[async_trait::async_trait]
impl EventStore for HaveSets {
    async fn ingest(
        &self,
        event: Event,
        source: &RelayUrl,
    ) -> Result<grasp_sync_engine::IngestOutcome, StoreError> {
        self.inner.ingest(event, source).await
    }

    async fn contains(&self, id: &nostr::EventId) -> Result<bool, StoreError> {
        self.inner.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: nostr::Filter,
    ) -> Result<Vec<(nostr::EventId, Timestamp)>, StoreError> {
        tokio::time::sleep(self.delay).await;
        if self.fail {
            return Err(StoreError::Backend("have sets unavailable".to_owned()));
        }
        self.inner.negentropy_items(filter).await
    }

    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<nostr::EventId>)> {
        EventStore::poll_refetch(&self.inner)
    }
}

/// A counted bootstrap relay with an announcement listing a counted home relay that holds its
/// thread, in memory; the engine syncs them on paused time into a store whose "have" sets take
/// `delay` (and fail when `fail` is set). Returns once the thread is stored and the home
/// relay's historic sync confirmed, with the network and the status of that moment (the engine
/// is shut down).
async fn sync_through(
    delay: Duration,
    fail: bool,
) -> (MemoryNetwork, grasp_sync_engine::EngineStatus) {
    let fixture = RepoFixture::new("paced");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(counted(true, None), vec![announcement]),
        ),
        (
            HOME.to_owned(),
            SimulatedRelay::new(counted(true, None), thread.clone()),
        ),
    ]);
    let urls = network.urls();
    let (store, clock) = paused_store().await;
    let have_sets = HaveSets {
        inner: store.clone(),
        delay,
        fail,
    };
    // Every batch by NIP-77: what is measured is the rounds' reads and pacing.
    let config = grasp_sync_engine::EngineConfig {
        first_sync_by_req: false,
        ..test_config(&urls[..1])
    };
    let run: PausedEngine =
        start_paused_engine_with(&network, config, store, Arc::new(have_sets), clock, None).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(60))
        .await;
    let home_key = urls[1].clone();
    let settled = wait_until(Duration::from_secs(30), || async {
        run.engine.status().await.is_some_and(|s| {
            s.relays
                .get(&home_key)
                .is_some_and(|r| r.connection == "connected")
        })
    })
    .await;
    let status = run.engine.status().await.expect("status");
    run.engine.shutdown().await;
    assert!(settled, "{status:#?}");
    (network, status)
}

#[tokio::test(start_paused = true)]
async fn a_slow_have_set_read_does_not_delay_neg_open_past_its_pacing_decision() {
    let (network, status) = sync_through(Duration::from_millis(300), false).await;
    assert!(status.negentropy.rounds_completed >= 2, "{status:#?}");
    for (name, relay) in ["bootstrap", "home"].into_iter().zip(network.urls()) {
        let stats = network.stats(&relay);
        let mut starts: Vec<_> = stats.starts.iter().filter(|s| background(s)).collect();
        starts.sort_by_key(|s| (s.connection, s.at));
        let gaps: Vec<_> = starts
            .windows(2)
            .filter(|w| w[0].connection == w[1].connection)
            .map(|w| (w[0].kind, w[1].kind, w[1].at.duration_since(w[0].at)))
            .collect();
        // The read happens before the pacing decision, so a NEG-OPEN goes out at its decision
        // and the next background start a full interval later. Read after the decision, the
        // NEG-OPEN would trail it by the 300 ms read and come 700 ms before the next start.
        let tight = tight_background_starts(&stats);
        assert!(
            tight.is_empty(),
            "{name}: background starts less than a second apart: {tight:?}"
        );
        // Not vacuous: a NEG-OPEN was followed on its connection by another background start.
        assert!(
            gaps.iter()
                .any(|(first, _, _)| *first == StartKind::NegOpen),
            "{name}: no background start followed a NEG-OPEN: {gaps:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_have_set_read_falls_back_to_req_eose() {
    let (network, status) = sync_through(Duration::ZERO, true).await;
    // No round ever started: every batch went to REQ+EOSE, counted as a protocol fallback.
    assert_eq!(status.negentropy.rounds_started, 0, "{status:#?}");
    assert!(
        status
            .negentropy
            .fallbacks
            .get("protocol")
            .is_some_and(|n| *n > 0),
        "{status:#?}"
    );
    for relay in network.urls() {
        let stats = network.stats(&relay);
        assert_eq!(stats.neg_opens(), 0);
        assert!(
            stats
                .req_starts()
                .any(|s| !s.subscription_id.starts_with("gs-live-"))
        );
    }
}

/// A memory network: a default bootstrap relay with an announcement listing a relay of
/// `home` config, which holds the repository's thread; with that thread.
fn repo_on(home: TestRelayConfig, identifier: &str) -> (MemoryNetwork, Vec<Event>) {
    let fixture = RepoFixture::new(identifier);
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = memory_network(vec![
        (BOOTSTRAP, TestRelayConfig::default(), vec![announcement]),
        (HOME, home, thread.clone()),
    ]);
    (network, thread)
}

#[tokio::test(start_paused = true)]
async fn a_relay_whose_nip11_leaves_out_nip77_gets_no_neg_open() {
    // It would answer NIP-77; its document says it does not.
    let (network, thread) = repo_on(
        TestRelayConfig {
            advertise_negentropy: false,
            ..counted(true, None)
        },
        "unlisted",
    );
    let urls = network.urls();
    let home = &urls[1];
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(600))
        .await;
    let nip77 = nip77_at(&run.engine, home).await;
    run.engine.shutdown().await;

    let stats = network.stats(home);
    let starts: Vec<_> = stats
        .starts
        .iter()
        .map(|s| (s.kind, s.subscription_id.as_str()))
        .collect();
    assert_eq!(stats.neg_opens(), 0, "{starts:?}");
    assert!(
        stats
            .req_starts()
            .any(|s| !s.subscription_id.starts_with("gs-live-")),
        "history did not come by REQ+EOSE"
    );
    assert_eq!(nip77.support, "unsupported", "{nip77:?}");
    assert_eq!(
        nip77.reason.as_deref(),
        Some("nip11_not_listed"),
        "{nip77:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_relay_that_ignores_neg_open_costs_one_short_probe_an_hour_and_is_remembered() {
    // NIP-11 lists NIP-77, but every NEG-OPEN goes unanswered.
    let ignoring = TestRelayConfig::strict(StrictLimits {
        ignore_neg_open: true,
        ..StrictLimits::default()
    });
    let fixture = RepoFixture::new("ignored");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement]),
        ),
        (
            HOME.to_owned(),
            SimulatedRelay::new(ignoring, thread.clone()),
        ),
    ]);
    let urls = network.urls();
    let (bootstrap, home) = (&urls[0], &urls[1]);
    let mut config = test_config(&urls[..1]);
    // The first sync's batches go to NIP-77 first: no page rides on the live groups.
    config.live_first_page = false;
    config.health = HealthConfig {
        connect_backoff_base: Duration::from_millis(200),
        connect_backoff_max: Duration::from_secs(60),
        stability_period: Duration::from_secs(1),
        ..HealthConfig::default()
    };
    let run = start_paused_engine(&network, config).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(60))
        .await;
    let synced_at = tokio::time::Instant::now();
    let nip77 = nip77_at(&run.engine, home).await;
    assert_eq!(nip77.support, "unsupported", "{nip77:?}");
    assert_eq!(nip77.reason.as_deref(), Some("no_answer"), "{nip77:?}");
    // Silence is remembered for an hour, not for the day an "unsupported" answer is.
    let hour = NIP77_NO_ANSWER_TTL.as_secs();
    assert!(
        nip77
            .reprobe_in_secs
            .is_some_and(|s| s > hour - 60 && s <= hour),
        "{nip77:?}"
    );
    let first = network.stats(home);
    let starts = |stats: &grasp_sync_testkit::StrictStats| -> Vec<(usize, StartKind, String)> {
        stats
            .starts
            .iter()
            .map(|s| (s.connection, s.kind, s.subscription_id.clone()))
            .collect()
    };
    assert_eq!(first.neg_opens(), 1, "{:?}", starts(&first));
    // Its history cost one short probe, not a round deadline per batch: the whole sync took
    // less than one NEGENTROPY_DEADLINE from the relay's first REQ (the probe's own deadline,
    // NEGENTROPY_PROBE_DEADLINE, and the paced REQs after it).
    let connected_at = first
        .starts
        .iter()
        .filter(|s| s.connection == 0)
        .map(|s| s.at)
        .min()
        .expect("a start on the first connection");
    let took = synced_at.duration_since(connected_at);
    assert!(
        took < NEGENTROPY_DEADLINE,
        "history took {took:?} after the relay's first REQ"
    );

    // A new session remembers: new history on it goes REQ+EOSE without another probe.
    network.kill(home);
    network.revive(home);
    let reconnected = wait_until(Duration::from_secs(30), || async {
        network.stats(home).connections() >= 2
    })
    .await;
    assert!(reconnected, "the engine did not reconnect");
    let later = RepoFixture::new("ignored-later");
    let announcement =
        later.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_500);
    let later_thread = later.thread(1_700_000_600);
    for event in &later_thread {
        network.store(home, event.clone());
    }
    network.publish(bootstrap, announcement);
    run.wait_for_store(&ids(&later_thread), Duration::from_secs(60))
        .await;

    let stats = network.stats(home);
    assert!(stats.connections() >= 2, "{stats:?}");
    assert_eq!(
        stats.neg_opens(),
        1,
        "a remembered unanswered probe was repeated: {:?}",
        starts(&stats)
    );
    let later_reqs = stats
        .req_starts()
        .filter(|s| s.connection > 0 && !s.subscription_id.starts_with("gs-live-"))
        .count();
    assert!(later_reqs > 0, "the later history did not come by REQ+EOSE");

    // An hour after the silent probe, the fresh start of a session after a long outage probes
    // once more (the relay is still silent, so history comes by REQ+EOSE again).
    let outage = Duration::from_secs(20 * 60);
    tokio::time::sleep_until(synced_at + NIP77_NO_ANSWER_TTL - outage).await;
    network.kill(home);
    tokio::time::sleep(outage).await;
    network.revive(home);
    // Dials during the outage backed off; the next one is within the backoff's cap (60 s).
    let reconnected = wait_until(Duration::from_secs(5 * 60), || async {
        network.stats(home).connections() >= 3
    })
    .await;
    assert!(reconnected, "the engine did not reconnect");
    let latest = RepoFixture::new("ignored-latest");
    let announcement =
        latest.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_700);
    let latest_thread = latest.thread(1_700_000_800);
    for event in &latest_thread {
        network.store(home, event.clone());
    }
    network.publish(bootstrap, announcement);
    run.wait_for_store(&ids(&latest_thread), Duration::from_secs(60))
        .await;
    run.engine.shutdown().await;
    let stats = network.stats(home);
    assert_eq!(
        stats.neg_opens(),
        2,
        "not one more probe after the hour: {:?}",
        starts(&stats)
    );
}

/// The status of the NIP-77 support of the relay at `key` as the engine reports it.
async fn nip77_at(
    engine: &grasp_sync_engine::EngineHandle,
    key: &str,
) -> grasp_sync_engine::RelayNip77Status {
    let status = engine.status().await.expect("status");
    status
        .negentropy
        .relays
        .get(key)
        .cloned()
        .unwrap_or_else(|| panic!("no NIP-77 status for {key}: {status:#?}"))
}

/// Syncs the thread on the NIP-77 relay at `home` over `restart` (a stopped engine's store
/// and clock) or a new store; returns the store and clock after, the relay's NEG-OPENs and the
/// EVENT messages it sent during this run.
async fn run_over(
    network: &MemoryNetwork,
    restart: Option<(MemoryStore, Arc<grasp_sync_engine::TokioClock>)>,
    expected: &std::collections::BTreeSet<nostr::EventId>,
    first_sync_by_req: bool,
) -> (
    (MemoryStore, Arc<grasp_sync_engine::TokioClock>),
    usize,
    u64,
) {
    let urls = network.urls();
    let home = &urls[1];
    let before = network.stats(home);
    // The rule under test routes batches between NIP-77 and REQ+EOSE: no page rides on the
    // live groups.
    let config = grasp_sync_engine::EngineConfig {
        first_sync_by_req,
        live_first_page: false,
        ..test_config(&urls[..1])
    };
    let over = match restart {
        Some(stopped) => stopped,
        None => paused_store().await,
    };
    let run = restart_paused_engine(network, config, over).await;
    run.wait_for_store(expected, Duration::from_secs(600)).await;
    run.settle(home, Duration::from_secs(600)).await;
    let stopped = run.stop().await;
    let after = network.stats(home);
    (
        stopped,
        after.neg_opens() - before.neg_opens(),
        after.events_sent() - before.events_sent(),
    )
}

#[tokio::test(start_paused = true)]
async fn with_first_sync_by_req_only_coverage_the_store_holds_is_reconciled_by_nip77() {
    let (network, thread) = repo_on(counted_with_known_ceiling(), "first-sync");
    let expected = ids(&thread);

    // Reconciling every fresh-start batch: one NIP-77 round per filter.
    let (_, rounds_always, _) = run_over(&network, None, &expected, false).await;
    // The store holds only the announcement (from the bootstrap relay): the thread's coverage
    // goes by REQ+EOSE, and NIP-77 reconciles only what the store holds.
    let (stopped, rounds_first, sent) = run_over(&network, None, &expected, true).await;
    assert!(
        rounds_first < rounds_always,
        "NIP-77 rounds: {rounds_first} with the rule, {rounds_always} without"
    );
    assert!(sent >= expected.len() as u64, "sent {sent}");

    // A restart over the complete store reconciles by NIP-77 and moves no event.
    let (_, rounds_again, sent) = run_over(&network, Some(stopped), &expected, true).await;
    assert!(
        rounds_again >= 1,
        "the complete store was not reconciled by NIP-77"
    );
    assert_eq!(sent, 0, "events downloaded again");
    eprintln!(
        "NIP-77 rounds: {rounds_always} reconciling every batch, {rounds_first} with first sync by REQ, {rounds_again} over the complete store"
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_stores_first_sync_takes_what_another_relay_delivered_a_little_of_by_req() {
    const SECOND: &str = "ws://second.memory";
    let fixture = RepoFixture::new("second-relay");
    let listed_once =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = memory_network(vec![
        (BOOTSTRAP, TestRelayConfig::default(), vec![listed_once]),
        (HOME, counted_with_known_ceiling(), thread.clone()),
        (SECOND, counted_with_known_ceiling(), thread.clone()),
    ]);
    let urls = network.urls();
    let (bootstrap, first, second) = (&urls[0], &urls[1], &urls[2]);
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    run.wait_for_store(&ids(&thread), Duration::from_secs(600))
        .await;
    run.settle(first, Duration::from_secs(600)).await;

    // The store holds the thread, which the second relay did not deliver: its first sync of
    // the repository's coverage (several filters per batch) goes by REQ+EOSE.
    let listed_twice = fixture.announcement(
        &[SERVICE_URL.to_owned(), HOME.to_owned(), SECOND.to_owned()],
        1_700_000_050,
    );
    network.publish(bootstrap, listed_twice);
    let connected = wait_until(Duration::from_secs(600), || async {
        network.stats(second).connections() >= 1
    })
    .await;
    assert!(connected, "the second relay was never dialled");
    run.settle(second, Duration::from_secs(600)).await;
    run.engine.shutdown().await;

    let stats = network.stats(second);
    let starts: Vec<_> = stats
        .starts
        .iter()
        .map(|s| (s.kind, s.subscription_id.clone(), s.filters.len()))
        .collect();
    let history_reqs = stats
        .req_starts()
        .filter(|s| !s.subscription_id.starts_with("gs-live-"))
        .count();
    // Layer 1 alone (one filter, the announcement held) is reconciled by NIP-77; each batch of
    // several filters would cost one round per filter.
    assert!(
        stats.neg_opens() <= 1,
        "NIP-77 rounds on the second relay: {starts:?}"
    );
    assert!(history_reqs >= 1, "no historic REQ: {starts:?}");
    eprintln!(
        "second relay: {} NIP-77 rounds, {history_reqs} historic REQs, {} events sent",
        stats.neg_opens(),
        stats.events_sent()
    );
}
