//! Reconnect windows and the daily timer, on paused time over the testkit's memory network.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{EngineParts, MemoryStore, StoreConfig, SyncEngine, TokioClock};
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
    engine: grasp_sync_engine::EngineHandle,
    issue: nostr::Event,
    repo: grasp_sync_testkit::nip34::RepoRef,
}

async fn setup() -> Setup {
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
        (
            HOME.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), thread.clone()),
        ),
    ]);
    // The store reads the engine's clock, so events dated by it are not "in the future".
    let clock = Arc::new(TokioClock::anchored_at(Timestamp::from_secs(START)));
    let store = MemoryStore::with_clock(
        StoreConfig::new(RelayUrl::parse(SERVICE_URL).expect("url"), "grasp.test"),
        clock.clone(),
    )
    .await
    .expect("store");
    let parts = EngineParts::new(
        Arc::new(network.clone()),
        Arc::new(store.clone()),
        Arc::new(store.clone()),
    )
    .clock(clock);
    let engine = SyncEngine::start(test_config(&[BOOTSTRAP.to_owned()]), parts)
        .await
        .expect("engine");
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
        engine,
        issue,
        repo: fixture.repo.clone(),
    }
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
    let missed_ids = ids(std::slice::from_ref(&missed));
    assert!(
        wait_until(Duration::from_secs(600), || async {
            count(&setup.store, &missed_ids).await == 1
        })
        .await,
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
    let missed = reply(
        &Keys::generate(),
        &setup.issue,
        ThreadTag::LowerE,
        "never sent live",
        Timestamp::from_secs(START + 30),
    )
    .expect("reply");
    setup.network.store(HOME, missed.clone());
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
