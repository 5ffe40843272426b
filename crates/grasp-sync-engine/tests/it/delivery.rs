//! Delivery under real relay behaviour: live events, pagination past a per-filter limit, a
//! small advertised subscription budget, and a relay that dies mid-sync.

use std::time::Duration;

use grasp_sync_health::HealthConfig;
use grasp_sync_testkit::nip34::{RepoTag, RootKind, ThreadTag, reply, repo_comment, root};
use grasp_sync_testkit::{Nip11Mode, StrictLimits, TestRelay, TestRelayConfig};
use nostr::{Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, ids, start_engine, test_config, wait_for_store, wait_until,
};

/// A relay that caps every filter at `limit` results and does not speak NIP-77, so history
/// arrives only through paged REQ+EOSE.
pub(crate) fn without_negentropy(limit: usize) -> TestRelayConfig {
    TestRelayConfig {
        default_filter_limit: limit,
        ..TestRelayConfig::strict(StrictLimits {
            negentropy_enabled: false,
            ..StrictLimits::default()
        })
    }
}

/// Announcement on the bootstrap relay, thread on `home`; returns the fixture.
pub(crate) async fn seed_repo(
    bootstrap: &TestRelay,
    home: &TestRelay,
    identifier: &str,
) -> (RepoFixture, Vec<nostr::Event>) {
    let fixture = RepoFixture::new(identifier);
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
    bootstrap
        .seed([announcement])
        .await
        .expect("seed bootstrap");
    let thread = fixture.thread(1_700_000_100);
    home.seed(thread.clone()).await.expect("seed home");
    (fixture, thread)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_published_after_startup_arrive_live() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("home");
    let (fixture, thread) = seed_repo(&bootstrap, &home, "live").await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let history = ids(&thread);
    assert!(
        wait_until(Duration::from_secs(30), || async {
            store.count_stored(&history).await == history.len()
        })
        .await,
        "history did not arrive"
    );
    // Wait until historic sync is over and every root of the thread is tracked (no generation
    // of coverage is still to come), so what follows can only arrive through live coverage.
    let home_key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    let roots = thread
        .iter()
        .filter(|e| matches!(e.kind.as_u16(), 1617 | 1618 | 1621))
        .count();
    assert!(
        wait_until(Duration::from_secs(30), || async {
            engine.status().await.is_some_and(|s| {
                s.root_events_tracked == roots
                    && s.relays
                        .get(&home_key)
                        .is_some_and(|r| r.connection == "connected" && r.pending_batches == 0)
            })
        })
        .await,
        "historic sync never completed"
    );
    let historic_reqs =
        engine.status().await.expect("status").relays[&home_key].req_starts_historic;

    // A comment on the repository: live coverage holds it, and it is nobody's direct member, so
    // no descendant query follows it.
    let late = repo_comment(
        &Keys::generate(),
        &fixture.repo,
        RepoTag::UpperA,
        "late",
        Timestamp::from_secs(1_700_001_000),
    )
    .expect("comment");
    home.publish(late.clone()).await.expect("publish");
    let late_ids = ids(std::slice::from_ref(&late));
    assert!(
        wait_until(Duration::from_secs(10), || async {
            store.count_stored(&late_ids).await == 1
        })
        .await,
        "the live event did not arrive"
    );
    let status = engine.status().await.expect("status");
    assert_eq!(
        status.relays[&home_key].req_starts_historic, historic_reqs,
        "it came by a new query, not live"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_beyond_the_per_filter_limit_is_paged_through() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(without_negentropy(100))
        .await
        .expect("home");
    let (_fixture, thread) = seed_repo(&bootstrap, &home, "paged").await;
    let issue = thread.last().expect("issue").clone();
    // 260 replies, several in the same second, so pages end mid-second.
    let author = Keys::generate();
    let replies: Vec<nostr::Event> = (0..260u64)
        .map(|i| {
            reply(
                &author,
                &issue,
                ThreadTag::LowerE,
                &format!("r{i}"),
                Timestamp::from_secs(1_700_002_000 + i / 3),
            )
            .expect("reply")
        })
        .collect();
    home.seed(replies.clone()).await.expect("seed replies");
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let mut expected = ids(&thread);
    expected.extend(ids(&replies));
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(60)).await;
    let home_key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    assert!(
        status.relays[&home_key].req_starts_historic >= 3,
        "no pagination happened: {status:#?}"
    );
    engine.shutdown().await;
}

/// A home relay limited to `budget` subscriptions holding `repos` repositories with `issues`
/// issues each: complete live coverage needs more REQs than the budget allows.
async fn crowded_home(
    budget: usize,
    nip11: Nip11Mode,
    repos: usize,
    issues: u64,
) -> (
    TestRelay,
    TestRelay,
    std::collections::BTreeSet<nostr::EventId>,
) {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(TestRelayConfig {
        max_subscriptions: budget,
        nip11,
        ..Default::default()
    })
    .await
    .expect("home");
    let mut expected = std::collections::BTreeSet::new();
    let author = Keys::generate();
    for n in 0..repos {
        let (fixture, thread) = seed_repo(&bootstrap, &home, &format!("crowded-{n}")).await;
        expected.extend(ids(&thread));
        let issues: Vec<nostr::Event> = (0..issues)
            .map(|i| {
                root(
                    &author,
                    RootKind::Issue,
                    std::slice::from_ref(&fixture.repo),
                    &format!("i{i}"),
                    Timestamp::from_secs(1_700_004_000 + i),
                )
                .expect("issue")
            })
            .collect();
        expected.extend(ids(&issues));
        home.seed(issues).await.expect("seed issues");
    }
    (bootstrap, home, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_advertised_subscription_budget_is_never_exceeded() {
    const BUDGET: usize = 6;
    let (bootstrap, home, expected) = crowded_home(BUDGET, Nip11Mode::WithLimits, 6, 90).await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(60)).await;
    let home_key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    let relay = &status.relays[&home_key];
    assert_eq!(relay.subscription_budget, BUDGET, "{relay:#?}");
    assert!(relay.peak_subscriptions <= BUDGET, "{relay:#?}");
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_subscription_budget_is_learned_from_one_refusal() {
    const BUDGET: usize = 6;
    let (bootstrap, home, expected) = crowded_home(BUDGET, Nip11Mode::WithoutLimits, 12, 120).await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(90)).await;
    let home_key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    let relay = &status.relays[&home_key];
    assert_eq!(
        relay.refusals.get("too_many_subscriptions").copied(),
        Some(1),
        "{relay:#?}"
    );
    assert_eq!(relay.subscription_budget, BUDGET, "{relay:#?}");
    assert_eq!(
        relay.connections, 1,
        "learning must not cost a reconnect: {relay:#?}"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_killed_mid_sync_is_redialled_and_the_store_ends_complete() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let mut home = TestRelay::start(without_negentropy(100))
        .await
        .expect("home");
    let (_fixture, thread) = seed_repo(&bootstrap, &home, "restart").await;
    let issue = thread.last().expect("issue").clone();
    let author = Keys::generate();
    let replies: Vec<nostr::Event> = (0..600u64)
        .map(|i| {
            reply(
                &author,
                &issue,
                ThreadTag::LowerE,
                &format!("r{i}"),
                Timestamp::from_secs(1_700_003_000 + i),
            )
            .expect("reply")
        })
        .collect();
    home.seed(replies.clone()).await.expect("seed replies");
    let mut config = test_config(&[bootstrap.url()]);
    config.health = HealthConfig {
        connect_backoff_base: Duration::from_millis(200),
        stability_period: Duration::from_secs(1),
        ..HealthConfig::default()
    };
    let store = TestStore::open().await;
    let engine = start_engine(&store, config).await;
    let reply_ids = ids(&replies);
    // Paging runs one page per second: kill the relay once the first pages have landed.
    assert!(
        wait_until(Duration::from_secs(30), || async {
            store.count_stored(&reply_ids).await >= 100
        })
        .await,
        "the first page never arrived"
    );
    home.stop().await.expect("stop");
    let partial = store.count_stored(&reply_ids).await;
    assert!(
        partial < reply_ids.len(),
        "the relay was stopped too late to test anything"
    );
    home.restart().await.expect("restart");

    let mut expected = ids(&thread);
    expected.extend(reply_ids);
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(60)).await;
    let home_key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    assert!(status.relays[&home_key].connections >= 2, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_over_the_page_size_is_reported_truncated_and_never_confirmed() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(without_negentropy(100))
        .await
        .expect("home");
    let (_fixture, thread) = seed_repo(&bootstrap, &home, "burst").await;
    let issue = thread.last().expect("issue").clone();
    // 150 replies by one tag in one second: one value of one kind over a 100-event page.
    let author = Keys::generate();
    let burst: Vec<nostr::Event> = (0..150u64)
        .map(|i| {
            reply(
                &author,
                &issue,
                ThreadTag::LowerE,
                &format!("b{i}"),
                Timestamp::from_secs(1_700_003_000),
            )
            .expect("reply")
        })
        .collect();
    home.seed(burst).await.expect("seed burst");
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let key = grasp_sync_model::RelayUrl::parse(&home.url())
        .expect("url")
        .to_string();
    let reported = wait_until(Duration::from_secs(60), || async {
        engine
            .status()
            .await
            .and_then(|s| s.relays.get(&key).cloned())
            .is_some_and(|r| r.history_truncated > 0 && r.pending_batches == 0)
    })
    .await;
    let status = engine.status().await.expect("status");
    let relay = &status.relays[&key];
    assert!(reported, "{relay:#?}");
    // The batch was abandoned, not confirmed: none of the roots it covered (the issue, the
    // patch, the pull request) is confirmed for the relay, so they are derived again later.
    assert_eq!(relay.confirmed_root_events, 0, "{relay:#?}");
    assert!(
        relay
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("truncated")),
        "{relay:#?}"
    );
    engine.shutdown().await;
}
