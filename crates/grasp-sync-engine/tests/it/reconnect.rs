//! Reconnect windows and the daily timer, on paused time over the testkit's memory network.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{
    EngineParts, FileHoldingsMemory, HoldingsMemory, MemoryStore, StoreConfig, SyncEngine,
    TokioClock, store::RejectedConfig,
};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{ThreadTag, reply};
use grasp_sync_testkit::{MemoryNetwork, SimulatedRelay, TestRelayConfig};
use nostr::{Keys, Timestamp};

use crate::support::{RepoFixture, SERVICE_URL, ids, test_config, wait_until};

const BOOTSTRAP: &str = "ws://bootstrap.test";
const HOME: &str = "ws://home.test";
const START: u64 = 1_800_000_000;

struct Setup {
    network: MemoryNetwork,
    store: MemoryStore,
    clock: Arc<TokioClock>,
    engine: grasp_sync_engine::EngineHandle,
    issue: nostr::Event,
    repo: grasp_sync_testkit::nip34::RepoRef,
}

async fn setup() -> Setup {
    setup_with(None).await
}

/// [`setup`], keeping relays' holdings in `holdings` when given.
async fn setup_with(holdings: Option<Arc<dyn HoldingsMemory>>) -> Setup {
    setup_home(holdings, TestRelayConfig::default()).await
}

/// [`setup_with`], the home relay configured by `home`.
async fn setup_home(holdings: Option<Arc<dyn HoldingsMemory>>, home: TestRelayConfig) -> Setup {
    setup_rejecting(holdings, home, RejectedConfig::default()).await
}

/// [`setup_home`], the store's rejected-events index bounded by `rejected`.
async fn setup_rejecting(
    holdings: Option<Arc<dyn HoldingsMemory>>,
    home: TestRelayConfig,
    rejected: RejectedConfig,
) -> Setup {
    let fixture = RepoFixture::new("paused");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], START - 1000);
    let thread = fixture.thread(START - 900);
    let issue = thread.last().expect("issue").clone();
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement]),
        ),
        (HOME.to_owned(), SimulatedRelay::new(home, thread.clone())),
    ]);
    // The store reads the engine's clock, so events dated by it are not "in the future".
    let clock = Arc::new(TokioClock::anchored_at(Timestamp::from_secs(START)));
    let config = StoreConfig {
        rejected,
        ..StoreConfig::new(RelayUrl::parse(SERVICE_URL).expect("url"), "grasp.test")
    };
    let store = MemoryStore::with_clock(config, clock.clone())
        .await
        .expect("store");
    let engine = start_engine(&network, &store, &clock, holdings).await;
    let expected = ids(&thread);
    assert!(
        wait_until(Duration::from_secs(120), || async {
            count(&store, &expected).await == expected.len()
        })
        .await,
        "initial sync did not complete"
    );
    Setup {
        network,
        store,
        clock,
        engine,
        issue,
        repo: fixture.repo.clone(),
    }
}

/// An engine over `network` and `store`, on `clock`, keeping relays' holdings in `holdings`
/// when given.
async fn start_engine(
    network: &MemoryNetwork,
    store: &MemoryStore,
    clock: &Arc<TokioClock>,
    holdings: Option<Arc<dyn HoldingsMemory>>,
) -> grasp_sync_engine::EngineHandle {
    let mut parts = EngineParts::new(
        Arc::new(network.clone()),
        Arc::new(store.clone()),
        Arc::new(store.clone()),
    )
    .clock(clock.clone());
    if let Some(holdings) = holdings {
        parts = parts.holdings_memory(holdings);
    }
    SyncEngine::start(test_config(&[BOOTSTRAP.to_owned()]), parts)
        .await
        .expect("engine")
}

async fn count(store: &MemoryStore, ids: &std::collections::BTreeSet<nostr::EventId>) -> usize {
    use grasp_sync_engine::EventStore;
    let mut n = 0;
    for id in ids {
        if store.contains(id).await.expect("contains") {
            n += 1;
        }
    }
    n
}

/// Waits (on virtual time, up to ten minutes) until the store knows `event`; whether it did.
async fn arrives(store: &MemoryStore, event: &nostr::Event) -> bool {
    let expected = ids(std::slice::from_ref(event));
    wait_until(Duration::from_secs(600), || async {
        count(store, &expected).await == 1
    })
    .await
}

async fn home_status(engine: &grasp_sync_engine::EngineHandle) -> grasp_sync_engine::RelayStatus {
    let key = RelayUrl::parse(HOME).expect("url").to_string();
    engine.status().await.expect("status").relays[&key].clone()
}

/// Takes the home relay down for `gap`, publishes a reply meanwhile, brings it back, and waits
/// for the reply to arrive.
async fn outage(setup: &Setup, gap: Duration, offset: u64) -> nostr::Event {
    setup.network.kill(HOME);
    tokio::time::sleep(gap / 2).await;
    let missed = reply(
        &Keys::generate(),
        &setup.issue,
        ThreadTag::LowerE,
        "while away",
        Timestamp::from_secs(START + offset),
    )
    .expect("reply");
    setup.network.store(HOME, missed.clone());
    tokio::time::sleep(gap / 2).await;
    setup.network.revive(HOME);
    assert!(
        arrives(&setup.store, &missed).await,
        "the event published during the outage never arrived"
    );
    missed
}

#[tokio::test(start_paused = true)]
async fn a_five_minute_outage_is_a_quick_reconnect_that_catches_the_gap() {
    let setup = setup().await;
    outage(&setup, Duration::from_secs(5 * 60), 120).await;
    let status = home_status(&setup.engine).await;
    assert_eq!(
        (status.quick_reconnects, status.long_reconnects),
        (1, 0),
        "{status:#?}"
    );
    // The catch-up asked only for what happened since the last connection (minus the overlap).
    let since_bounded = setup
        .network
        .stats(HOME)
        .req_starts()
        .flat_map(|start| start.filters.iter())
        .any(|f| {
            f.since
                .is_some_and(|s| s.as_secs() >= START - 60 && s.as_secs() <= START + 10)
        });
    assert!(
        since_bounded,
        "no historic filter carried the reconnect `since`"
    );
    setup.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_twenty_minute_outage_is_a_fresh_start() {
    let setup = setup().await;
    outage(&setup, Duration::from_secs(20 * 60), 600).await;
    let status = home_status(&setup.engine).await;
    assert_eq!(
        (status.quick_reconnects, status.long_reconnects),
        (0, 1),
        "{status:#?}"
    );
    setup.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_daily_reconciliation_fires_between_23_and_25_hours() {
    let setup = setup().await;
    tokio::time::sleep(Duration::from_secs(23 * 3600 - 60)).await;
    assert_eq!(home_status(&setup.engine).await.daily_reconciliations, 0);
    tokio::time::sleep(Duration::from_secs(2 * 3600 + 120)).await;
    let status = home_status(&setup.engine).await;
    assert_eq!(status.daily_reconciliations, 1, "{status:#?}");
    assert_eq!(
        status.long_reconnects + status.quick_reconnects,
        0,
        "a daily run is not a reconnect"
    );
    setup.engine.shutdown().await;
}

/// An event the relay stored while the live subscription was up, without sending it (as a
/// relay that drops a live event does), arrives only by a reconciliation: asked for now, it
/// runs on the connection that is up and finds it, and sends none of the live coverage the
/// connection holds again, though that coverage was packed over two plans.
#[tokio::test(start_paused = true)]
async fn a_reconciliation_asked_for_now_finds_what_the_live_subscription_missed() {
    let setup = setup().await;
    // A second issue, published live: its replies are covered by a live group of their own,
    // so the coverage held is no longer what one fresh plan would open.
    let second = grasp_sync_testkit::nip34::root(
        &Keys::generate(),
        grasp_sync_testkit::nip34::RootKind::Issue,
        std::slice::from_ref(&setup.repo),
        "second issue",
        Timestamp::from_secs(START + 20),
    )
    .expect("issue");
    setup.network.publish(HOME, second.clone());
    let second_ids = ids(std::slice::from_ref(&second));
    assert!(
        wait_until(Duration::from_secs(120), || async {
            count(&setup.store, &second_ids).await == 1
        })
        .await,
        "the second issue did not arrive live"
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    let missed = store_missed(&setup);
    let missed_ids = ids(std::slice::from_ref(&missed));
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        count(&setup.store, &missed_ids).await,
        0,
        "nothing but a reconciliation can find it"
    );

    let starts_before = setup.network.stats(HOME).starts.len();
    let started = setup.engine.reconcile_now().await.expect("engine running");
    assert_eq!(started, 2, "the bootstrap and home relays are connected");
    assert!(
        wait_until(Duration::from_secs(600), || async {
            count(&setup.store, &missed_ids).await == 1
        })
        .await,
        "the reconciliation did not find the event"
    );
    let status = home_status(&setup.engine).await;
    assert_eq!(status.daily_reconciliations, 1, "{status:#?}");
    assert_eq!(
        status.long_reconnects + status.quick_reconnects,
        0,
        "the connection stayed up"
    );
    let stats = setup.network.stats(HOME);
    let since_the_call = &stats.starts[starts_before..];
    assert!(
        !since_the_call.is_empty(),
        "the reconciliation queried the relay"
    );
    let live_again: Vec<_> = since_the_call
        .iter()
        .filter(|start| start.filters.iter().any(|f| f.limit == Some(0)))
        .collect();
    assert!(
        live_again.is_empty(),
        "the live subscriptions held were sent again: {live_again:?}"
    );
    setup.engine.shutdown().await;
}

/// A reply to the issue that the home relay stores without sending it live (as a relay that
/// drops a live event does).
fn store_missed(setup: &Setup) -> nostr::Event {
    let missed = reply(
        &Keys::generate(),
        &setup.issue,
        ThreadTag::LowerE,
        "never sent live",
        Timestamp::from_secs(START + 30),
    )
    .expect("reply");
    setup.network.store(HOME, missed.clone());
    missed
}

/// Stores an event the home relay never sends live, asks for daily run number `n` and waits
/// for it, which must find the event: the event, and what the home relay was asked meanwhile
/// (NEG-OPENs' filters, REQs' filters).
async fn daily_finds_missed(
    setup: &Setup,
    n: u64,
) -> (nostr::Event, Vec<nostr::Filter>, Vec<Vec<nostr::Filter>>) {
    let missed = store_missed(setup);
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(daily_done(setup, n).await, "daily run {n} did not end");
    assert_eq!(
        count(&setup.store, &ids(std::slice::from_ref(&missed))).await,
        1,
        "daily run {n} did not find the event"
    );
    let (negs, reqs) = asked_since(setup, from);
    (missed, negs, reqs)
}

/// [`setup_home`] with holdings kept in a temporary directory (returned, to live as long as
/// the test) and the home relay enforcing `limits`, a minute after its first sync.
async fn setup_keeping_holdings(
    limits: grasp_sync_testkit::StrictLimits,
) -> (Setup, Arc<FileHoldingsMemory>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let holdings = Arc::new(FileHoldingsMemory::new(dir.path().join("held")));
    let setup = setup_home(Some(holdings.clone()), TestRelayConfig::strict(limits)).await;
    // Paused time: a virtual minute, in which the first sync's last layer (the replies'
    // coverage, opened by a maintenance tick) is opened and settles.
    tokio::time::sleep(Duration::from_secs(60)).await;
    (setup, holdings, dir)
}

/// Waits (on virtual time) until the home relay's kept holdings are events whose IDs pass
/// `check`; those IDs.
async fn held_events(
    holdings: &FileHoldingsMemory,
    check: impl Fn(&std::collections::BTreeSet<nostr::EventId>) -> bool,
) -> std::collections::BTreeSet<nostr::EventId> {
    let home = RelayUrl::parse(HOME).expect("url");
    let read = || match holdings.load(&home).expect("load").map(|kept| kept.held) {
        Some(grasp_sync_engine::holdings::Held::Events(events)) => {
            events.into_iter().map(|(id, _)| id).collect()
        }
        _ => std::collections::BTreeSet::new(),
    };
    assert!(
        wait_until(Duration::from_secs(60), || async { check(&read()) }).await,
        "the kept holdings never held what was expected: {:?}",
        read().len()
    );
    read()
}

/// The IDs `reqs` asked for by exact ID.
fn fetched_by_id(reqs: &[Vec<nostr::Filter>]) -> Vec<nostr::EventId> {
    reqs.iter()
        .flatten()
        .flat_map(|f| f.ids.iter().flatten().copied())
        .collect()
}

/// The relay was asked one round over `{}` (`negs`, the NEG-OPENs' filters), and then for
/// exactly `fetched` by ID (`reqs`, the REQs' filters).
fn assert_one_round_over_everything(
    negs: &[nostr::Filter],
    reqs: &[Vec<nostr::Filter>],
    fetched: &[nostr::EventId],
) {
    assert_eq!(negs, [nostr::Filter::new()], "one round over {{}}");
    assert_fetched(reqs, fetched);
}

/// A session that started over the relay's kept holdings asked rounds over `{}` only: the
/// first, and one more for the history of the direct members' descendants, covered again
/// once that first round had started (the members' live REQs go out after it); then it
/// fetched exactly `fetched` by ID.
fn assert_rounds_over_everything(
    negs: &[nostr::Filter],
    reqs: &[Vec<nostr::Filter>],
    fetched: &[nostr::EventId],
) {
    assert!(
        matches!(negs.len(), 1 | 2) && negs.iter().all(|f| *f == nostr::Filter::new()),
        "rounds over {{}} only, one and the members' next: {negs:?}"
    );
    assert_fetched(reqs, fetched);
}

/// The REQs by ID (`reqs`, the REQs' filters) asked for exactly `fetched`.
fn assert_fetched(reqs: &[Vec<nostr::Filter>], fetched: &[nostr::EventId]) {
    assert_eq!(
        fetched_by_id(reqs),
        fetched,
        "only these are fetched: {reqs:?}"
    );
}

/// No REQ asked for every event the relay holds.
fn assert_no_req_over_everything(reqs: &[Vec<nostr::Filter>]) {
    assert!(
        reqs.iter().flatten().all(|f| *f != nostr::Filter::new()),
        "a REQ over everything was sent: {reqs:?}"
    );
}

/// Whether the store holds `id` (not merely rejected it).
async fn stored(store: &MemoryStore, id: nostr::EventId) -> bool {
    use grasp_sync_engine::EventStore;
    !store
        .negentropy_items(nostr::Filter::new().id(id))
        .await
        .expect("read")
        .is_empty()
}

/// Waits until the home relay ran `n` daily reconciliations and has nothing pending or queued.
async fn daily_done(setup: &Setup, n: u64) -> bool {
    wait_until(Duration::from_secs(600), || async {
        let status = home_status(&setup.engine).await;
        status.daily_reconciliations == n
            && status.pending_batches == 0
            && status.queued_starts == 0
            && status.connection == "connected"
    })
    .await
}

/// What the home relay was asked since `from` (its starts' index): the NEG-OPENs' filters, and
/// the REQs' filters.
fn asked_since(setup: &Setup, from: usize) -> (Vec<nostr::Filter>, Vec<Vec<nostr::Filter>>) {
    let stats = setup.network.stats(HOME);
    let mut negs = Vec::new();
    let mut reqs = Vec::new();
    for start in &stats.starts[from..] {
        match start.kind {
            grasp_sync_testkit::StartKind::NegOpen => negs.extend(start.filters.clone()),
            grasp_sync_testkit::StartKind::Req => reqs.push(start.filters.clone()),
        }
    }
    (negs, reqs)
}

/// An event the relay holds that no repository here covers: the policy refuses it.
fn foreign_issue() -> nostr::Event {
    grasp_sync_testkit::nip34::root(
        &Keys::generate(),
        grasp_sync_testkit::nip34::RootKind::Issue,
        &[grasp_sync_testkit::nip34::RepoRef {
            owner: Keys::generate().public_key(),
            identifier: "elsewhere".to_owned(),
        }],
        "an issue of a repository not listed here",
        Timestamp::from_secs(START + 5),
    )
    .expect("issue")
}

/// With holdings kept, what a relay delivers during its historic sync is kept as its
/// holdings, and a caught-up relay's daily run is one NIP-77 round over `{}`: the first fetches
/// once, by ID, the event of a repository nobody here tracks, which the policy refuses, and
/// learns it is held; each later one asks the same question with what the relay held, so it
/// fetches only what is new: an event the live subscription missed, and nothing at all when
/// nothing is new. The confirmed state and the live subscriptions stay.
#[tokio::test(start_paused = true)]
async fn a_daily_run_over_the_relays_holdings_asks_once_and_fetches_only_what_is_new() {
    let dir = tempfile::tempdir().expect("dir");
    let holdings = Arc::new(FileHoldingsMemory::new(dir.path().join("held")));
    let setup = setup_with(Some(holdings.clone())).await;
    let foreign = foreign_issue();
    setup.network.store(HOME, foreign.clone());
    // Paused time: a virtual minute, in which the first sync's last layer (the replies'
    // coverage, opened by a maintenance tick) is opened and settles.
    tokio::time::sleep(Duration::from_secs(60)).await;
    // What the relay delivered during its historic sync is kept as its holdings.
    let learned = held_events(&holdings, |held| held.contains(&setup.issue.id)).await;
    assert!(!learned.contains(&foreign.id));

    // The first daily run asks once over everything, and learns the rest.
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(
        daily_done(&setup, 1).await,
        "the first daily run did not end"
    );
    let (negs, reqs) = asked_since(&setup, from);
    assert_one_round_over_everything(&negs, &reqs, &[foreign.id]);
    assert!(
        reqs.iter().flatten().all(|f| f.limit != Some(0)),
        "no live subscription is sent again: {reqs:?}"
    );
    // Offered to the policy, which refused it: not stored, but known.
    assert!(!stored(&setup.store, foreign.id).await);
    assert_eq!(
        count(&setup.store, &ids(std::slice::from_ref(&foreign))).await,
        1
    );
    let held = held_events(&holdings, |held| held.contains(&foreign.id)).await;
    assert!(held.contains(&setup.issue.id), "the issue is held");

    // An event the relay stored without sending it live.
    let (missed, negs, reqs) = daily_finds_missed(&setup, 2).await;
    assert_one_round_over_everything(&negs, &reqs, &[missed.id]);

    // Nothing new: one question, nothing fetched. The new reply's own coverage (its replies)
    // opens on a maintenance tick: a virtual minute first.
    held_events(&holdings, |held| held.contains(&missed.id)).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(
        daily_done(&setup, 3).await,
        "the third daily run did not end"
    );
    let (negs, reqs) = asked_since(&setup, from);
    assert_eq!(negs, vec![nostr::Filter::new()]);
    assert!(reqs.is_empty(), "{reqs:?}");
    let status = home_status(&setup.engine).await;
    assert_eq!(status.long_reconnects + status.quick_reconnects, 0);
    setup.engine.shutdown().await;
}

/// A refused event the relay keeps holding stays out of every later daily run: each run over
/// the relay's holdings that finds it there, past half of its lifetime in the rejected-events
/// index, renews it, so it stays in the "have" set after its first lifetime has ended.
/// Without the renewal the third daily run would fetch it again.
#[tokio::test(start_paused = true)]
async fn a_refused_event_the_relay_keeps_holding_is_not_fetched_again_by_later_daily_runs() {
    const LIFETIME: Duration = Duration::from_secs(3600);
    let dir = tempfile::tempdir().expect("dir");
    let holdings = Arc::new(FileHoldingsMemory::new(dir.path().join("held")));
    let rejected = RejectedConfig {
        cold_ttl: LIFETIME,
        ..RejectedConfig::default()
    };
    let setup = setup_rejecting(Some(holdings.clone()), TestRelayConfig::default(), rejected).await;
    let foreign = foreign_issue();
    setup.network.store(HOME, foreign.clone());
    tokio::time::sleep(Duration::from_secs(60)).await;
    held_events(&holdings, |held| held.contains(&setup.issue.id)).await;
    // The first daily run fetches it once, and the policy refuses it.
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(daily_done(&setup, 1).await, "daily run 1 did not end");
    assert_eq!(
        fetched_by_id(&asked_since(&setup, from).1),
        vec![foreign.id]
    );
    assert!(!stored(&setup.store, foreign.id).await);
    held_events(&holdings, |held| held.contains(&foreign.id)).await;
    // Two more, each 0.6 of the lifetime after the last: the third comes after the first
    // lifetime has ended.
    for n in 2..=3 {
        tokio::time::sleep(LIFETIME * 6 / 10).await;
        let from = setup.network.stats(HOME).starts.len();
        setup.engine.reconcile_now().await.expect("engine running");
        assert!(daily_done(&setup, n).await, "daily run {n} did not end");
        let (negs, reqs) = asked_since(&setup, from);
        assert_eq!(negs, vec![nostr::Filter::new()], "daily run {n}");
        assert!(
            fetched_by_id(&reqs).is_empty(),
            "daily run {n} fetched again: {reqs:?}"
        );
    }
    assert_eq!(
        count(&setup.store, &ids(std::slice::from_ref(&foreign))).await,
        1,
        "the refused event is still known"
    );
    setup.engine.shutdown().await;
}

/// A relay that refuses a round over `{}` (strfry answers `NEG-ERR "blocked: too many query
/// results"` when a filter matches more events than its `maxSyncEvents`; here the rule stands
/// for a relay over that cap) gets the daily run as named rounds, which still find what the
/// live subscription missed. The relay is remembered as too large, so the next daily run goes
/// by named rounds without asking, and no REQ over `{}` is ever sent.
#[tokio::test(start_paused = true)]
async fn a_relay_that_refuses_a_round_over_everything_gets_named_rounds() {
    let (setup, holdings, _dir) = setup_keeping_holdings(grasp_sync_testkit::StrictLimits {
        policies: vec![grasp_sync_testkit::PolicyRule::new(
            grasp_sync_testkit::FilterPredicate::custom(|f| *f == nostr::Filter::new()),
            "blocked: too many query results",
        )],
        ..grasp_sync_testkit::StrictLimits::default()
    })
    .await;
    let (_, negs, reqs) = daily_finds_missed(&setup, 1).await;
    assert_eq!(negs.first(), Some(&nostr::Filter::new()), "{negs:?}");
    assert!(negs.len() > 1, "named rounds follow the refusal: {negs:?}");
    assert_no_req_over_everything(&reqs);
    let home = RelayUrl::parse(HOME).expect("url");
    assert!(
        wait_until(Duration::from_secs(60), || async {
            holdings.load(&home).expect("load").map(|kept| kept.held)
                == Some(grasp_sync_engine::holdings::Held::TooLarge)
        })
        .await,
        "the relay was not kept as too large"
    );

    let from = setup.network.stats(HOME).starts.len();
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(
        daily_done(&setup, 2).await,
        "the second daily run did not end"
    );
    let (negs, _) = asked_since(&setup, from);
    assert!(!negs.is_empty(), "named rounds");
    assert!(
        negs.iter().all(|f| *f != nostr::Filter::new()),
        "asked over everything again: {negs:?}"
    );
    setup.engine.shutdown().await;
}

/// [`setup_keeping_holdings`] with NIP-77 turned off on the home relay (strfry's
/// `NOTICE "ERROR: bad msg: negentropy disabled"`).
async fn without_nip77_keeping_holdings() -> (Setup, Arc<FileHoldingsMemory>, tempfile::TempDir) {
    setup_keeping_holdings(grasp_sync_testkit::StrictLimits {
        negentropy_enabled: false,
        ..grasp_sync_testkit::StrictLimits::default()
    })
    .await
}

/// A relay with NIP-77 turned off (strfry's `NOTICE "ERROR: bad msg: negentropy disabled"`)
/// gets its daily run by REQ+EOSE, which still finds what the live subscription missed, and
/// is never sent a REQ over `{}`.
#[tokio::test(start_paused = true)]
async fn a_relay_without_nip77_gets_its_daily_run_by_req_and_never_a_req_over_everything() {
    let (setup, _, _dir) = without_nip77_keeping_holdings().await;
    let (_, _, reqs) = daily_finds_missed(&setup, 1).await;
    assert!(!reqs.is_empty(), "the daily run went by REQ+EOSE");
    assert_no_req_over_everything(&reqs);
    setup.engine.shutdown().await;
}

/// [`setup_with`] keeping holdings in a temporary directory (returned, to live as long as the
/// test), `on_home` stored on the home relay after the first sync, then one daily run; returns
/// once the kept holdings name the issue and `on_home`.
async fn after_a_daily_run(
    on_home: &[nostr::Event],
) -> (Setup, Arc<FileHoldingsMemory>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let holdings = Arc::new(FileHoldingsMemory::new(dir.path().join("held")));
    let setup = setup_with(Some(holdings.clone())).await;
    for event in on_home {
        setup.network.store(HOME, event.clone());
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(daily_done(&setup, 1).await, "the daily run did not end");
    held_events(&holdings, |held| {
        held.contains(&setup.issue.id) && on_home.iter().all(|e| held.contains(&e.id))
    })
    .await;
    (setup, holdings, dir)
}

/// Stores an event on the home relay that it never sends live, stops `setup`'s engine and
/// starts another over the same store, network and clock, keeping relays' holdings in
/// `holdings` (a daemon restarted over its data directory); waits until it fetched the event
/// and the home relay has nothing pending or queued. The event, and what the home relay was
/// asked since the restart (NEG-OPENs' filters, REQs' filters).
async fn restart_finds_missed(
    setup: Setup,
    holdings: Arc<dyn HoldingsMemory>,
) -> (
    Setup,
    nostr::Event,
    Vec<nostr::Filter>,
    Vec<Vec<nostr::Filter>>,
) {
    let missed = store_missed(&setup);
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.shutdown().await;
    let engine = start_engine(&setup.network, &setup.store, &setup.clock, Some(holdings)).await;
    let setup = Setup { engine, ..setup };
    let missed_ids = ids(std::slice::from_ref(&missed));
    assert!(
        wait_until(Duration::from_secs(600), || async {
            // The home relay is known once discovery found it again.
            let status = setup.engine.status().await.expect("status");
            let home = status
                .relays
                .get(&RelayUrl::parse(HOME).expect("url").to_string());
            count(&setup.store, &missed_ids).await == 1
                && home.is_some_and(|home| {
                    home.connection == "connected"
                        && home.pending_batches == 0
                        && home.queued_starts == 0
                })
        })
        .await,
        "the restarted engine did not find the event"
    );
    let (negs, reqs) = asked_since(&setup, from);
    (setup, missed, negs, reqs)
}

/// A daemon restarted over a complete store with the relays' holdings kept reconciles a relay
/// by one NIP-77 round over `{}` against what the relay held at its last daily run, not by
/// named rounds that send its whole coverage again: it fetches only what is new (an event
/// stored while no daemon ran), not the refused event the relay still holds, opens the live
/// subscriptions, and confirms the relay's coverage when the round's fetch is done.
#[tokio::test(start_paused = true)]
async fn a_restart_over_kept_holdings_asks_each_relay_one_round_over_everything() {
    let foreign = foreign_issue();
    let (setup, holdings, _dir) = after_a_daily_run(std::slice::from_ref(&foreign)).await;
    let (setup, missed, negs, reqs) = restart_finds_missed(setup, holdings).await;
    assert_rounds_over_everything(&negs, &reqs, &[missed.id]);
    assert!(
        reqs.iter().flatten().any(|f| f.limit == Some(0)),
        "the live subscriptions are opened: {reqs:?}"
    );
    assert_no_req_over_everything(&reqs);
    let status = home_status(&setup.engine).await;
    assert!(
        status.confirmed_repos == 1 && status.confirmed_root_events > 0,
        "the relay's coverage is confirmed: {status:#?}"
    );
    setup.engine.shutdown().await;
}

/// Where a restarted daemon keeps no holdings for a relay, its fresh start goes by named
/// rounds, as before holdings were kept, and still finds what is new.
#[tokio::test(start_paused = true)]
async fn a_restart_without_kept_holdings_reconciles_by_named_rounds() {
    let setup = setup().await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let dir = tempfile::tempdir().expect("dir");
    let holdings = Arc::new(FileHoldingsMemory::new(dir.path().join("held")));
    let (setup, _, negs, reqs) = restart_finds_missed(setup, holdings).await;
    assert!(
        !negs.is_empty() && negs.iter().all(|f| *f != nostr::Filter::new()),
        "named rounds only: {negs:?}"
    );
    assert_no_req_over_everything(&reqs);
    setup.engine.shutdown().await;
}

/// Coverage the index adds to a session that started over kept holdings is reconciled by
/// another round over `{}`, not by a named round: a new issue saved here after the restart's
/// round ended makes the home relay fetch, by ID, the reply to it that it holds and never sent
/// live.
#[tokio::test(start_paused = true)]
async fn coverage_added_after_a_restart_over_kept_holdings_gets_another_round_over_everything() {
    use grasp_sync_engine::EventStore;
    let (setup, holdings, _dir) = after_a_daily_run(&[]).await;
    let (setup, missed, negs, reqs) = restart_finds_missed(setup, holdings).await;
    assert_rounds_over_everything(&negs, &reqs, &[missed.id]);

    let author = Keys::generate();
    let later = grasp_sync_testkit::nip34::root(
        &author,
        grasp_sync_testkit::nip34::RootKind::Issue,
        std::slice::from_ref(&setup.repo),
        "an issue saved after the restart",
        Timestamp::from_secs(START + 40),
    )
    .expect("issue");
    let answer = reply(
        &Keys::generate(),
        &later,
        ThreadTag::LowerE,
        "held by the home relay only",
        Timestamp::from_secs(START + 50),
    )
    .expect("reply");
    setup.network.store(HOME, answer.clone());
    let from = setup.network.stats(HOME).starts.len();
    let source = RelayUrl::parse(BOOTSTRAP).expect("url");
    setup.store.ingest(later, &source).await.expect("ingest");
    assert!(
        arrives(&setup.store, &answer).await,
        "the reply to the new issue never arrived"
    );
    assert!(daily_done(&setup, 0).await, "the home relay did not settle");
    let (negs, reqs) = asked_since(&setup, from);
    assert_one_round_over_everything(&negs, &reqs, &[answer.id]);
    setup.engine.shutdown().await;
}

/// A long outage in the run that filled the store starts over the relay's kept holdings too:
/// its historic sync completed, so the store holds its coverage, and the fresh start is one
/// round over `{}` that fetches what was published meanwhile.
#[tokio::test(start_paused = true)]
async fn a_long_outage_after_a_completed_sync_reconciles_over_kept_holdings() {
    let (setup, _, _dir) = after_a_daily_run(&[]).await;
    let from = setup.network.stats(HOME).starts.len();
    let missed = outage(&setup, Duration::from_secs(20 * 60), 600).await;
    assert!(daily_done(&setup, 1).await, "the home relay did not settle");
    let (negs, reqs) = asked_since(&setup, from);
    assert_rounds_over_everything(&negs, &reqs, &[missed.id]);
    assert_eq!(home_status(&setup.engine).await.long_reconnects, 1);
    setup.engine.shutdown().await;
}

/// A relay with NIP-77 turned off whose holdings were kept (learned from what it delivered)
/// answers the restart's round over `{}` with strfry's refusal: the restart falls back to the
/// fresh start by named coverage, which goes by REQ+EOSE, still finds what was stored while no
/// daemon ran, and never sends a REQ over `{}`.
#[tokio::test(start_paused = true)]
async fn a_restart_over_kept_holdings_of_a_relay_without_nip77_goes_by_req() {
    let (setup, holdings, _dir) = without_nip77_keeping_holdings().await;
    held_events(&holdings, |held| held.contains(&setup.issue.id)).await;
    let (setup, _, negs, reqs) = restart_finds_missed(setup, holdings).await;
    assert_eq!(
        negs,
        vec![nostr::Filter::new()],
        "the round over {{}} was asked"
    );
    assert!(
        reqs.iter()
            .flatten()
            .any(|f| f.limit != Some(0) && f.ids.is_none()),
        "the fresh start went by REQ+EOSE: {reqs:?}"
    );
    assert_no_req_over_everything(&reqs);
    setup.engine.shutdown().await;
}

/// A relay that refuses lookups by ID fails the fetch of what the restart's round over `{}`
/// found: that failure, like any failure of the round, is the fresh start by named rounds,
/// not a batch left waiting for a round that never ends.
#[tokio::test(start_paused = true)]
async fn a_restart_whose_fetch_by_id_is_refused_goes_on_by_named_rounds() {
    let (setup, holdings, _dir) = setup_keeping_holdings(grasp_sync_testkit::StrictLimits {
        policies: vec![grasp_sync_testkit::PolicyRule::new(
            grasp_sync_testkit::FilterPredicate::custom(|f| f.ids.is_some()),
            "blocked: no lookups by id",
        )],
        ..grasp_sync_testkit::StrictLimits::default()
    })
    .await;
    setup.engine.reconcile_now().await.expect("engine running");
    assert!(daily_done(&setup, 1).await, "the daily run did not end");
    held_events(&holdings, |held| held.contains(&setup.issue.id)).await;
    store_missed(&setup);
    let from = setup.network.stats(HOME).starts.len();
    setup.engine.shutdown().await;
    let engine = start_engine(&setup.network, &setup.store, &setup.clock, Some(holdings)).await;
    let setup = Setup { engine, ..setup };
    // The named rounds name the repository and its roots by tag.
    assert!(
        wait_until(Duration::from_secs(600), || async {
            let (negs, _) = asked_since(&setup, from);
            negs.iter().any(|f| !f.generic_tags.is_empty())
        })
        .await,
        "the refused fetch left the restart's coverage waiting: {:?}",
        asked_since(&setup, from).0
    );
    let (negs, reqs) = asked_since(&setup, from);
    assert_eq!(
        negs[0],
        nostr::Filter::new(),
        "the round over {{}} came first"
    );
    assert!(
        reqs.iter().flatten().any(|f| f.ids.is_some()),
        "its fetch by ID was asked: {reqs:?}"
    );
    assert_no_req_over_everything(&reqs);
    setup.engine.shutdown().await;
}

/// A restarted engine keeps covering the descendants of the direct members the store holds,
/// although no relay delivers those members again (a NIP-77 fresh start only fetches what
/// the store lacks): it reads them from the store. A reply to a stored reply that the home
/// relay received while no engine ran is found in history, and one published after the
/// restart arrives live.
#[tokio::test(start_paused = true)]
async fn a_restart_keeps_covering_the_descendants_of_the_members_the_store_holds() {
    let setup = setup().await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let issue = setup.issue.id.to_hex();
    let member = setup
        .network
        .events(HOME)
        .into_iter()
        .find(|e| {
            e.tags.iter().any(|t| {
                t.as_slice().first().is_some_and(|n| n == "e") && t.content() == Some(&issue)
            })
        })
        .expect("a reply to the issue");
    // Live descendant coverage asks for `#e` and `#q` only (`#E` is historic-only).
    let to_member = |how: ThreadTag, content: &str, at: u64| {
        reply(
            &Keys::generate(),
            &member,
            how,
            content,
            Timestamp::from_secs(START + at),
        )
        .expect("reply")
    };
    let while_down = to_member(ThreadTag::UpperE, "received while no engine ran", 30);
    setup.engine.shutdown().await;
    setup.network.store(HOME, while_down.clone());

    let engine = start_engine(&setup.network, &setup.store, &setup.clock, None).await;
    let setup = Setup { engine, ..setup };
    assert!(
        arrives(&setup.store, &while_down).await,
        "the member's descendant stored while no engine ran was not found"
    );
    assert!(
        wait_until(Duration::from_secs(600), || async {
            let home = home_status(&setup.engine).await;
            home.pending_batches == 0 && home.queued_starts == 0
        })
        .await,
        "the restarted engine did not settle"
    );
    let live = to_member(ThreadTag::LowerE, "published after the restart", 40);
    setup.network.publish(HOME, live.clone());
    assert!(
        arrives(&setup.store, &live).await,
        "the member's descendant published after the restart did not arrive"
    );
    setup.engine.shutdown().await;
}
