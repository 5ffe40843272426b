//! NIP-77 historic sync against real relays: only the difference crosses the wire, the
//! fallbacks when a relay cannot serve what it advertises, and rejected IDs never fetched
//! twice.

use std::time::Duration;

use grasp_sync_engine::{EventStore, negentropy::RecoveryConfig};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{ThreadTag, reply};
use grasp_sync_testkit::{ServeById, StrictLimits, TestRelay, TestRelayConfig};
use nostr::{Event, Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, ids, start_engine, test_config, wait_for_store, wait_until,
};

/// A passthrough strict relay (counts what it sends) with NIP-77 on or off.
fn counted(negentropy: bool, serve_by_id: Option<ServeById>) -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        negentropy_enabled: negentropy,
        serve_by_id,
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
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(counted(negentropy, None))
        .await
        .expect("home");
    let fixture = RepoFixture::new("reconciled");
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
    bootstrap
        .seed([announcement.clone()])
        .await
        .expect("seed bootstrap");
    let thread = fixture.thread(1_700_000_100);
    let issue = thread.last().expect("issue").clone();
    let many = replies(&issue, total, 1_700_010_000);
    home.seed(thread.iter().cloned().chain(many.iter().cloned()))
        .await
        .expect("seed home");

    let store = TestStore::open().await;
    let source = RelayUrl::parse(&home.url()).expect("url");
    for event in std::iter::once(&announcement)
        .chain(&thread)
        .chain(many.iter().take(held))
    {
        store
            .store
            .ingest(event.clone(), &source)
            .await
            .expect("preload");
    }
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let mut expected = ids(&thread);
    expected.extend(ids(&many));
    wait_for_store(&store, &engine, &expected, Duration::from_secs(90)).await;
    let home_key = source.to_string();
    assert!(
        wait_until(Duration::from_secs(30), || async {
            engine.status().await.is_some_and(|s| {
                s.relays
                    .get(&home_key)
                    .is_some_and(|r| r.connection == "connected")
            })
        })
        .await,
        "the batch never confirmed"
    );
    engine.shutdown().await;
    home.strict_stats().events_sent()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
async fn home_serving(
    serve: ServeById,
    missing: u64,
) -> (
    TestRelay,
    TestRelay,
    TestStore,
    std::collections::BTreeSet<nostr::EventId>,
) {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(counted(true, Some(serve)))
        .await
        .expect("home");
    let fixture = RepoFixture::new("hydrated");
    bootstrap
        .seed([fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000)])
        .await
        .expect("seed bootstrap");
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
    home.seed(thread.iter().cloned().chain(many.iter().cloned()))
        .await
        .expect("seed home");
    let mut expected = ids(&thread);
    expected.extend(ids(&many));
    (bootstrap, home, TestStore::open().await, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_advertising_ids_it_cannot_serve_gets_the_semantic_fallback() {
    let (bootstrap, _home, store, expected) = home_serving(ServeById::new(0), 40).await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    // By ID nothing arrives, ever: only the semantic REQ+EOSE fallback can complete the store.
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(60)).await;
    assert_eq!(status.negentropy.recovery_pending_ids, 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_serving_relay_gets_one_retry_then_recovery_and_is_promoted_when_it_serves() {
    let serve = ServeById::new(80);
    let (bootstrap, home, store, expected) = home_serving(serve.clone(), 40).await;
    let mut config = test_config(&[bootstrap.url()]);
    config.recovery = RecoveryConfig {
        base_backoff: Duration::from_millis(500),
        max_backoff: Duration::from_secs(2),
        ..RecoveryConfig::default()
    };
    let engine = start_engine(&store, config).await;
    let home_key = RelayUrl::parse(&home.url()).expect("url").to_string();
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
    assert!(store.count_stored(&expected).await < expected.len());
    // The relay starts serving: recovery completes and the relay is promoted.
    serve.set(100);
    let recovered = wait_until(Duration::from_secs(60), || async {
        store.count_stored(&expected).await == expected.len()
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
        store.count_stored(&expected).await,
        expected.len()
    );
    assert!(status.negentropy.recovered_ids > 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_ids_are_never_fetched_twice_across_reconciliations() {
    let bootstrap = TestRelay::start(counted(true, None))
        .await
        .expect("bootstrap");
    let home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("home");
    let ours = RepoFixture::new("ours");
    let announcement = ours.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
    let foreign: Vec<Event> = (0..60)
        .map(|n| {
            RepoFixture::new(&format!("foreign-{n}")).announcement(&[home.url()], 1_700_000_000 + n)
        })
        .collect();
    bootstrap
        .seed(std::iter::once(announcement.clone()).chain(foreign.iter().cloned()))
        .await
        .expect("seed");

    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let foreign_ids = ids(&foreign);
    let rejected = wait_until(Duration::from_secs(60), || async {
        let mut all = true;
        for id in &foreign_ids {
            all &= store.store.rejection_reason(id).ok().flatten().is_some();
        }
        all
    })
    .await;
    assert!(
        rejected,
        "the foreign announcements were not all fetched and rejected"
    );
    engine.shutdown().await;
    let first_pass = bootstrap.strict_stats().events_sent();

    // A restart reconciles again from scratch, on a store reopened from disk.
    let store = store.reopen().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let bootstrap_key = RelayUrl::parse(&bootstrap.url()).expect("url").to_string();
    let reconciled = wait_until(Duration::from_secs(60), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(&bootstrap_key)
                .is_some_and(|r| r.connection == "connected")
                && s.negentropy.rounds_completed > 0
        })
    })
    .await;
    assert!(reconciled, "the second reconciliation did not complete");
    engine.shutdown().await;
    let second_pass = bootstrap.strict_stats().events_sent() - first_pass;
    assert!(
        first_pass >= foreign.len() as u64,
        "first pass sent {first_pass}"
    );
    assert_eq!(
        second_pass, 0,
        "the second reconciliation fetched {second_pass} events again"
    );
}
