//! Coverage under refusals that concern part of it, end to end against strict relays: a policy
//! refusal pauses only the refused coverage (and probes it once per pause), a learned retained-
//! byte cap rebuilds live coverage within it and fetches the rest by paced catch-up, and
//! fragmented live coverage is consolidated.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EngineHandle, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{KIND_ISSUE, KIND_REPO_ANNOUNCEMENT, ThreadTag, reply};
use grasp_sync_testkit::{
    Dialect, FilterLimit, FilterPredicate, PolicyRule, RefusalKind, StrictLimits,
    SubscriptionLimit, TestRelay, TestRelayConfig,
};
use nostr::{Event, EventId, Keys, TagKind, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, history_settled, ids, start_engine,
    start_engine_keeping_limits, test_config, wait_for_store, wait_until,
};

/// A bootstrap relay listing `repos` repositories whose events are all on `home`.
struct Network {
    bootstrap: TestRelay,
    home: TestRelay,
    events: Vec<Event>,
}

impl Network {
    async fn start(home: TestRelayConfig, repos: usize) -> Self {
        let bootstrap = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("bootstrap");
        let home = TestRelay::start(home).await.expect("home");
        let fixtures: Vec<RepoFixture> = (0..repos)
            .map(|n| RepoFixture::new(&format!("repo-{n}")))
            .collect();
        let mut events = Vec::new();
        let mut announcements = Vec::new();
        for (n, fixture) in fixtures.iter().enumerate() {
            let announcement =
                fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
            announcements.push(announcement.clone());
            events.push(announcement);
            events.extend(fixture.thread(1_700_000_100 + n as u64 * 100));
        }
        bootstrap.seed(announcements).await.expect("seed bootstrap");
        home.seed(events.iter().cloned()).await.expect("seed home");
        Self {
            bootstrap,
            home,
            events,
        }
    }

    fn home_key(&self) -> String {
        RelayUrl::parse(&self.home.url()).expect("url").to_string()
    }

    /// An issue of the first repository, to reply to.
    fn issue(&self) -> &Event {
        self.events
            .iter()
            .find(|e| e.kind.as_u16() == KIND_ISSUE)
            .expect("an issue")
    }
}

async fn home_status(engine: &EngineHandle, key: &str) -> RelayStatus {
    engine
        .status()
        .await
        .and_then(|s| s.relays.get(key).cloned())
        .expect("home status")
}

/// Whether the event is reachable only through a `#q` filter.
fn quote_only(event: &Event) -> bool {
    event.kind.as_u16() != KIND_REPO_ANNOUNCEMENT
        && !event.tags.iter().any(|tag| {
            matches!(tag.kind(), TagKind::SingleLetter(letter)
                if matches!(letter.as_char(), 'a' | 'A' | 'e' | 'E'))
        })
}

fn no_quotes() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        policies: vec![PolicyRule::new(
            FilterPredicate::Tag('q'),
            "blocked: quote filters are not served here",
        )],
        ..StrictLimits::default()
    })
}

/// Syncs a network whose relay refuses every `#q` filter; returns the engine, the store and
/// the IDs it must hold.
async fn sync_without_quotes(
    config: impl FnOnce(EngineConfig) -> EngineConfig,
) -> (Network, TestStore, EngineHandle, BTreeSet<EventId>) {
    let network = Network::start(no_quotes(), 3).await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, config(test_config(&[network.bootstrap.url()]))).await;
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    wait_for_store(&store, &engine, &reachable, Duration::from_secs(60)).await;
    (network, store, engine, reachable)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_refusal_pauses_only_the_refused_coverage() {
    // The default policy pause is 24 h: pausing the relay's whole history for it (rather than
    // the refused `#q` coverage) would leave the store incomplete.
    let (network, store, engine, _) = sync_without_quotes(|c| c).await;
    let key = network.home_key();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    assert!(!quotes.is_empty());
    assert_eq!(
        store.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    let status = home_status(&engine, &key).await;
    assert!(status.paused_filters >= 1, "{status:#?}");
    assert_eq!(status.connections, 1, "the connection must stay open");
    let refusals = network.home.strict_stats().refusals_of(RefusalKind::Policy);
    assert!(refusals >= 1);

    // Live coverage of what was not refused still works, and nothing refused is sent again.
    let author = Keys::generate();
    let now = Timestamp::now();
    let fresh = reply(&author, network.issue(), ThreadTag::LowerE, "live", now).expect("reply");
    network.home.publish(fresh.clone()).await.expect("publish");
    wait_for_store(&store, &engine, &ids(&[fresh]), Duration::from_secs(30)).await;
    let stats = network.home.strict_stats();
    assert_eq!(
        stats.refusals_of(RefusalKind::Policy),
        refusals,
        "a refused filter was repeated"
    );
    assert_eq!(stats.connections(), 1);
    eprintln!(
        "policy pause: {refusals} policy refusals, {} REQ starts, {} filters paused",
        stats.req_starts().count(),
        status.paused_filters
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_coverage_is_probed_once_per_pause() {
    const PAUSE: Duration = Duration::from_secs(4);
    let (network, _store, engine, _) = sync_without_quotes(|mut c| {
        c.health.policy_pause = PAUSE;
        c
    })
    .await;
    let key = network.home_key();
    // Refusals of a filter sent alone, by filter (time bounds and limit removed), in order.
    let refusals_by_filter = || {
        let mut by_filter: BTreeMap<String, Vec<(tokio::time::Instant, String)>> = BTreeMap::new();
        for start in network.home.strict_stats().starts {
            if let (Some(RefusalKind::Policy), [filter]) = (start.refused, start.filters.as_slice())
            {
                let mut filter = filter.clone();
                filter.since = None;
                filter.until = None;
                filter.limit = None;
                by_filter
                    .entry(nostr::JsonUtil::as_json(&filter))
                    .or_default()
                    .push((start.at, start.subscription_id.clone()));
            }
        }
        by_filter
    };
    // The probe: refused coverage is sent again once its pause has ended, and refused again.
    assert!(
        wait_until(Duration::from_secs(30), || async {
            refusals_by_filter().values().any(|times| times.len() >= 3)
        })
        .await,
        "no two probes after the pause: {:?}",
        refusals_by_filter()
    );
    // Each refused filter is sent again only once its pause has ended: never twice within one.
    for (filter, times) in refusals_by_filter() {
        for pair in times.windows(2) {
            let gap = pair[1].0.duration_since(pair[0].0);
            assert!(
                gap >= PAUSE - Duration::from_millis(50),
                "{filter} was sent again {gap:?} after its refusal: {pair:?}"
            );
        }
    }
    assert_eq!(network.home.strict_stats().connections(), 1);
    assert_eq!(home_status(&engine, &key).await.connections, 1);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_byte_cap_rebuilds_live_coverage_and_catches_up_the_rest() {
    // 100 repositories and 300 roots: a live set of roughly 90 KB. The relay keeps one
    // maximum-sized transient REQ plus 60 KB of subscriptions, without saying so; live coverage
    // beyond the cap can only be had by the paced catch-up.
    let cap = grasp_sync_filters::PackLimits::default().max_req_bytes + 30_000;
    let home = TestRelayConfig::strict(StrictLimits {
        retained_req_bytes: Some(cap),
        negentropy_enabled: false,
        ..StrictLimits::default()
    });
    let network = Network::start(home, 100).await;
    let key = network.home_key();
    let store = TestStore::open().await;
    let mut config = test_config(&[network.bootstrap.url()]);
    config.catch_up_interval = Duration::from_secs(3);
    let dir = tempfile::tempdir().expect("dir");
    let limits = dir.path().join("learned-limits.json");
    let engine = start_engine_keeping_limits(&store, config.clone(), Some(&limits)).await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    wait_for_store(&store, &engine, &all, Duration::from_secs(120)).await;
    let status = home_status(&engine, &key).await;
    let refusals = network
        .home
        .strict_stats()
        .refusals_of(RefusalKind::RetainedBytesExceeded);
    assert!(refusals >= 1, "the cap was never reached: {status:#?}");
    assert!(status.catch_up_filters >= 1, "{status:#?}");

    // A quote of a root: compatibility coverage, which the cap keeps out of the live set.
    let author = Keys::generate();
    let quote = reply(
        &author,
        network.issue(),
        ThreadTag::Q,
        "quote",
        Timestamp::now(),
    )
    .expect("quote");
    network.home.publish(quote.clone()).await.expect("publish");
    let status = wait_for_store(&store, &engine, &ids(&[quote]), Duration::from_secs(30)).await;
    let status = status.relays.get(&key).cloned().expect("home status");
    let stats = network.home.strict_stats();
    assert!(status.catch_ups >= 1);
    assert_eq!(
        stats.refusals_of(RefusalKind::RetainedBytesExceeded),
        refusals,
        "the cap was exceeded again after it was learned"
    );
    assert_eq!(stats.connections(), 1);
    eprintln!(
        "byte cap: {refusals} refusals, {} live subscriptions, {} catch-up filters, {} catch-ups",
        status.live_subscriptions, status.catch_up_filters, status.catch_ups
    );
    engine.shutdown().await;

    // The cap is kept: a restart opens its live set inside it at once.
    let kept = grasp_sync_engine::FileLimitsMemory::new(&limits);
    let kept = grasp_sync_engine::LimitsMemory::load(&kept).expect("kept limits");
    assert!(
        kept.iter()
            .any(|(relay, record)| relay.as_str() == key && record.retained_byte_cap.is_some()),
        "{kept:?}"
    );
    let store = store.reopen().await;
    let engine = start_engine_keeping_limits(&store, config, Some(&limits)).await;
    let settled = wait_until(Duration::from_secs(120), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(&key)
                .is_some_and(|r| history_settled(r) && r.catch_up_filters >= 1)
        })
    })
    .await;
    let status = home_status(&engine, &key).await;
    assert!(settled, "{status:#?}");
    assert_eq!(
        network
            .home
            .strict_stats()
            .refusals_of(RefusalKind::RetainedBytesExceeded),
        refusals,
        "a restart with the kept cap exceeded it again"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fragmented_live_coverage_is_consolidated() {
    // One filter per REQ, advertised: every repository added in a later batch brings filters
    // of its own, which a rebuild from scratch merges. With a margin of 3, a few incremental
    // batches pass it.
    let home = TestRelayConfig::strict(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 100,
            dialect: Dialect::RustNostr,
            counts_negentropy: false,
            advertised: true,
        }),
        filters_per_req: Some(FilterLimit {
            max: 1,
            dialect: Dialect::RustNostr,
            advertised: true,
        }),
        ..StrictLimits::default()
    });
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(home).await.expect("home");
    let key = RelayUrl::parse(&home.url()).expect("url").to_string();
    let store = TestStore::open().await;
    let mut config = test_config(&[bootstrap.url()]);
    config.consolidation_margin = 3;
    let engine = start_engine(&store, config).await;
    let mut last_issue = None;
    // One repository per batch window: each arrives after the previous one is stored.
    for n in 0..6 {
        let fixture = RepoFixture::new(&format!("incremental-{n}"));
        let announcement =
            fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
        let thread = fixture.thread(1_700_000_100 + n * 100);
        home.seed(thread.iter().cloned().chain([announcement.clone()]))
            .await
            .expect("seed home");
        bootstrap.publish(announcement).await.expect("announce");
        wait_for_store(&store, &engine, &ids(&thread), Duration::from_secs(60)).await;
        last_issue = thread.last().cloned();
    }
    let status = home_status(&engine, &key).await;
    assert!(status.consolidations >= 1, "{status:#?}");
    // Live coverage is intact after the rebuild.
    let author = Keys::generate();
    let issue = last_issue.expect("an issue");
    let fresh = reply(&author, &issue, ThreadTag::LowerE, "live", Timestamp::now()).expect("reply");
    home.publish(fresh.clone()).await.expect("publish");
    wait_for_store(&store, &engine, &ids(&[fresh]), Duration::from_secs(30)).await;
    let stats = home.strict_stats();
    assert_eq!(stats.total_refusals(), 0, "{:?}", stats.refusals);
    assert_eq!(stats.connections(), 1);
    eprintln!(
        "consolidation: {} consolidations, {} live subscriptions held, peak {}",
        status.consolidations, status.live_subscriptions, status.peak_subscriptions
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auxiliary_closed_moves_descendants_to_history_and_leaves_core_coverage_alone() {
    // The relay holds the repository's thread, a reply that is a direct member of its issue,
    // and closes any live subscription to that member's descendants.
    let fixture = RepoFixture::new("threaded");
    let author = Keys::generate();
    let thread = fixture.thread(1_700_000_100);
    let issue = thread.last().expect("issue").clone();
    let member = reply(
        &author,
        &issue,
        ThreadTag::LowerE,
        "member",
        Timestamp::from_secs(1_700_000_500),
    )
    .expect("member");
    let member_hex = member.id.to_hex();
    let closes_descendants = FilterPredicate::custom(move |filter| {
        filter.limit == Some(0)
            && filter
                .generic_tags
                .values()
                .any(|values| values.contains(&member_hex))
    });
    let home = TestRelay::start(TestRelayConfig::strict(StrictLimits {
        policies: vec![PolicyRule::new(
            closes_descendants,
            "error: descendant subscriptions are not kept",
        )],
        ..StrictLimits::default()
    }))
    .await
    .expect("home");
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
    bootstrap
        .seed([announcement.clone()])
        .await
        .expect("seed bootstrap");
    home.seed(thread.iter().cloned().chain([announcement, member.clone()]))
        .await
        .expect("seed home");
    let key = RelayUrl::parse(&home.url()).expect("url").to_string();
    let store = TestStore::open().await;
    let mut config = test_config(&[bootstrap.url()]);
    config.health.request_pause_base = Duration::from_secs(1);
    config.health.request_pause_max = Duration::from_secs(2);
    let engine = start_engine(&store, config).await;
    let mut expected = ids(&thread);
    expected.insert(member.id);
    wait_for_store(&store, &engine, &expected, Duration::from_secs(60)).await;
    // The descendant live group was refused and closed.
    assert!(
        wait_until(Duration::from_secs(30), || async {
            home.strict_stats().refusals_of(RefusalKind::Policy) >= 1
        })
        .await,
        "the descendant subscription was never opened"
    );
    // The CLOSED went out when the relay refused the descendant group.
    let closed_at = home
        .strict_stats()
        .starts
        .iter()
        .find(|s| s.refused.is_some())
        .map(|s| s.at)
        .expect("a refused start");
    // A new descendant of the member arrives through the paced history fallback.
    let descendant = reply(
        &author,
        &member,
        ThreadTag::LowerE,
        "descendant",
        Timestamp::now(),
    )
    .expect("descendant");
    home.publish(descendant.clone()).await.expect("publish");
    let status = wait_for_store(
        &store,
        &engine,
        &ids(&[descendant]),
        Duration::from_secs(30),
    )
    .await;
    let status = status.relays.get(&key).cloned().expect("home status");
    assert_eq!(status.auxiliary_subscriptions, 0, "{status:#?}");
    let stats = home.strict_stats();
    // Core coverage was not rebuilt: no live REQ after the auxiliary one was closed.
    let live_after: Vec<_> = stats
        .starts
        .iter()
        .filter(|s| {
            s.at > closed_at + Duration::from_millis(5) && s.subscription_id.starts_with("gs-live-")
        })
        .map(|s| s.subscription_id.clone())
        .collect();
    assert!(
        live_after.is_empty(),
        "live REQs after the auxiliary CLOSED: {live_after:?}"
    );
    // Only the descendant live groups sent together were refused, and none was sent again.
    let refused: Vec<_> = stats
        .starts
        .iter()
        .filter(|s| s.refused.is_some())
        .map(|s| (s.at, s.subscription_id.clone()))
        .collect();
    assert!(
        refused
            .iter()
            .all(|(at, id)| *at <= closed_at + Duration::from_millis(5)
                && id.starts_with("gs-live-")),
        "{refused:?}"
    );
    assert_eq!(stats.connections(), 1);
    engine.shutdown().await;
}
