//! Delivery under real relay behaviour: live events, pagination past a per-filter limit, a
//! small advertised subscription budget, and a relay that dies mid-sync; on paused time over
//! memory relays.

use std::time::Duration;

use grasp_sync_engine::EngineConfig;
use grasp_sync_health::HealthConfig;
use grasp_sync_testkit::nip34::{RepoTag, RootKind, ThreadTag, reply, repo_comment, root};
use grasp_sync_testkit::{MemoryNetwork, Nip11Mode, StrictLimits, TestRelayConfig};
use nostr::{Keys, Timestamp};

use crate::support::{
    BOOTSTRAP, HOME, RepoFixture, SERVICE_URL, ids, memory_network, repo_network,
    start_paused_engine, test_config, wait_until,
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

#[tokio::test(start_paused = true)]
async fn events_published_after_startup_arrive_live() {
    let (network, fixture, thread) = repo_network(TestRelayConfig::default(), "live");
    let urls = network.urls();
    let home = &urls[1];
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let history = ids(&thread);
    run.wait_for_store(&history, Duration::from_secs(600)).await;
    // Wait until historic sync is over and every root of the thread is tracked (no generation
    // of coverage is still to come), so what follows can only arrive through live coverage.
    let roots = thread
        .iter()
        .filter(|e| matches!(e.kind.as_u16(), 1617 | 1618 | 1621))
        .count();
    assert!(
        wait_until(Duration::from_secs(600), || async {
            run.engine.status().await.is_some_and(|s| {
                s.root_events_tracked == roots
                    && s.relays
                        .get(home)
                        .is_some_and(|r| r.connection == "connected" && r.pending_batches == 0)
            })
        })
        .await,
        "historic sync never completed"
    );
    let historic_reqs = run
        .relay(home)
        .await
        .expect("home status")
        .req_starts_historic;

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
    network.publish(home, late.clone());
    run.wait_for_store(&ids(std::slice::from_ref(&late)), Duration::from_secs(600))
        .await;
    let status = run.relay(home).await.expect("home status");
    assert_eq!(
        status.req_starts_historic, historic_reqs,
        "it came by a new query, not live"
    );
    run.engine.shutdown().await;
}

/// [`repo_network`] whose home relay also holds what `replies` makes of the thread's issue;
/// with the thread and those replies.
fn with_replies(
    home: TestRelayConfig,
    identifier: &str,
    replies: impl Fn(&nostr::Event) -> Vec<nostr::Event>,
) -> (MemoryNetwork, Vec<nostr::Event>, Vec<nostr::Event>) {
    let (network, _fixture, thread) = repo_network(home, identifier);
    let issue = thread.last().expect("issue").clone();
    let replies = replies(&issue);
    for reply in &replies {
        network.store(HOME, reply.clone());
    }
    (network, thread, replies)
}

#[tokio::test(start_paused = true)]
async fn history_beyond_the_per_filter_limit_is_paged_through() {
    // 260 replies, several in the same second, so pages end mid-second.
    let author = Keys::generate();
    let (network, thread, replies) = with_replies(without_negentropy(100), "paged", |issue| {
        (0..260u64)
            .map(|i| {
                reply(
                    &author,
                    issue,
                    ThreadTag::LowerE,
                    &format!("r{i}"),
                    Timestamp::from_secs(1_700_002_000 + i / 3),
                )
                .expect("reply")
            })
            .collect()
    });
    let urls = network.urls();
    // Historic REQs only: `live_page::a_longer_history_walks_on_from_the_live_page_in_paced_pages` pages through
    // history whose first page rides on a live group.
    let config = EngineConfig {
        live_first_page: false,
        ..test_config(&urls[..1])
    };
    let run = start_paused_engine(&network, config).await;
    let mut expected = ids(&thread);
    expected.extend(ids(&replies));
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert!(
        status.relays[&urls[1]].req_starts_historic >= 3,
        "no pagination happened: {status:#?}"
    );
    run.engine.shutdown().await;
}

/// A home relay limited to `budget` subscriptions holding `repos` repositories with `issues`
/// issues each: complete live coverage needs more REQs than the budget allows.
fn crowded_home(
    budget: usize,
    nip11: Nip11Mode,
    repos: usize,
    issues: u64,
) -> (MemoryNetwork, std::collections::BTreeSet<nostr::EventId>) {
    let mut expected = std::collections::BTreeSet::new();
    let mut announcements = Vec::new();
    let mut held = Vec::new();
    let author = Keys::generate();
    for n in 0..repos {
        let fixture = RepoFixture::new(&format!("crowded-{n}"));
        announcements
            .push(fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000));
        let thread = fixture.thread(1_700_000_100);
        expected.extend(ids(&thread));
        held.extend(thread);
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
        held.extend(issues);
    }
    let home = TestRelayConfig {
        max_subscriptions: budget,
        nip11,
        ..Default::default()
    };
    let network = memory_network(vec![
        (BOOTSTRAP, TestRelayConfig::default(), announcements),
        (HOME, home, held),
    ]);
    (network, expected)
}

#[tokio::test(start_paused = true)]
async fn a_small_advertised_subscription_budget_is_never_exceeded() {
    const BUDGET: usize = 6;
    let (network, expected) = crowded_home(BUDGET, Nip11Mode::WithLimits, 6, 90);
    let urls = network.urls();
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    let relay = &status.relays[&urls[1]];
    assert_eq!(relay.subscription_budget, BUDGET, "{relay:#?}");
    assert!(relay.peak_subscriptions <= BUDGET, "{relay:#?}");
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    let stats = network.stats(&urls[1]);
    assert!(stats.peak_open_subscriptions() <= BUDGET, "{stats:?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_hidden_subscription_budget_is_learned_from_one_refusal() {
    const BUDGET: usize = 6;
    let (network, expected) = crowded_home(BUDGET, Nip11Mode::WithoutLimits, 12, 120);
    let urls = network.urls();
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    let relay = &status.relays[&urls[1]];
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
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_relay_killed_mid_sync_is_redialled_and_the_store_ends_complete() {
    let author = Keys::generate();
    let (network, thread, replies) = with_replies(without_negentropy(100), "restart", |issue| {
        (0..600u64)
            .map(|i| {
                reply(
                    &author,
                    issue,
                    ThreadTag::LowerE,
                    &format!("r{i}"),
                    Timestamp::from_secs(1_700_003_000 + i),
                )
                .expect("reply")
            })
            .collect()
    });
    let urls = network.urls();
    let home = &urls[1];
    let mut config = test_config(&urls[..1]);
    config.health = HealthConfig {
        connect_backoff_base: Duration::from_millis(200),
        stability_period: Duration::from_secs(1),
        ..HealthConfig::default()
    };
    let run = start_paused_engine(&network, config).await;
    let reply_ids = ids(&replies);
    // Paging runs one page per second: kill the relay once the first pages have landed.
    assert!(
        wait_until(Duration::from_secs(600), || async {
            run.count_stored(&reply_ids).await >= 100
        })
        .await,
        "the first page never arrived"
    );
    network.kill(home);
    let partial = run.count_stored(&reply_ids).await;
    assert!(
        partial < reply_ids.len(),
        "the relay was stopped too late to test anything"
    );
    network.revive(home);

    let mut expected = ids(&thread);
    expected.extend(reply_ids);
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert!(status.relays[home].connections >= 2, "{status:#?}");
    assert!(network.stats(home).connections() >= 2);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_second_over_the_page_size_is_reported_truncated_and_never_confirmed() {
    // 150 replies by one tag in one second: one value of one kind over a 100-event page.
    let author = Keys::generate();
    let (network, _thread, _burst) = with_replies(without_negentropy(100), "burst", |issue| {
        (0..150u64)
            .map(|i| {
                reply(
                    &author,
                    issue,
                    ThreadTag::LowerE,
                    &format!("b{i}"),
                    Timestamp::from_secs(1_700_003_000),
                )
                .expect("reply")
            })
            .collect()
    });
    let urls = network.urls();
    let key = &urls[1];
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let reported = run
        .wait_for_relay(key, Duration::from_secs(600), |r| {
            r.history_truncated > 0 && r.pending_batches == 0
        })
        .await;
    let relay = run.relay(key).await.unwrap_or_default();
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
    run.engine.shutdown().await;
}
