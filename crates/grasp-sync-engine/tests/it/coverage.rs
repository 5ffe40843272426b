//! Coverage under refusals that concern part of it, end to end against strict relays: a policy
//! refusal pauses only the refused coverage (and probes it once per pause, exactly when the
//! pause ends), a learned retained-byte cap rebuilds live coverage within it and fetches the
//! rest by paced catch-up, and fragmented live coverage is consolidated. The refusal tests run
//! on paused time over memory relays, so pauses are measured exactly; the consolidation test
//! runs on real sockets.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EngineHandle, MemoryStore, RelayStatus, TokioClock};
use grasp_sync_testkit::nip34::{
    KIND_ISSUE, KIND_REPO_ANNOUNCEMENT, RepoRef, RepoTag, ThreadTag, reply, repo_comment,
};
use grasp_sync_testkit::{
    AuthRefusal, Dialect, FilterLimit, FilterPredicate, MemoryNetwork, MessageFate, NetworkHooks,
    PolicyRule, RefusalKind, SimulatedRelay, StrictAuth, StrictLimits, SubscriptionLimit,
    TestRelayConfig,
};
use nostr::{Event, EventId, JsonUtil, Keys, TagKind, Timestamp};

use crate::support::{
    PausedEngine, RepoFixture, SERVICE_URL, history_settled, ids, paused_store,
    start_paused_engine, start_paused_engine_with, test_config, wait_until,
};

const BOOTSTRAP: &str = "ws://bootstrap.memory";
const HOME: &str = "ws://home.memory";

/// A memory network: a bootstrap relay listing `repos` repositories whose events are all on
/// `home`.
struct Network {
    relays: MemoryNetwork,
    bootstrap: String,
    home: String,
    events: Vec<Event>,
}

impl Network {
    fn start(home: TestRelayConfig, repos: usize) -> Self {
        Self::start_with_hooks(home, repos, None)
    }

    /// [`Network::start`], with `hooks` on the memory network.
    fn start_with_hooks(
        home: TestRelayConfig,
        repos: usize,
        hooks: Option<Arc<dyn NetworkHooks>>,
    ) -> Self {
        let fixtures: Vec<RepoFixture> = (0..repos)
            .map(|n| RepoFixture::new(&format!("repo-{n}")))
            .collect();
        let mut events = Vec::new();
        let mut announcements = Vec::new();
        for (n, fixture) in fixtures.iter().enumerate() {
            let announcement =
                fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
            announcements.push(announcement.clone());
            events.push(announcement);
            events.extend(fixture.thread(1_700_000_100 + n as u64 * 100));
        }
        let relays = vec![
            (
                BOOTSTRAP.to_owned(),
                SimulatedRelay::new(TestRelayConfig::default(), announcements),
            ),
            (HOME.to_owned(), SimulatedRelay::new(home, events.clone())),
        ];
        let relays = match hooks {
            Some(hooks) => MemoryNetwork::with_hooks(relays, hooks),
            None => MemoryNetwork::new(relays),
        };
        let urls = relays.urls();
        Self {
            bootstrap: urls[0].clone(),
            home: urls[1].clone(),
            relays,
            events,
        }
    }

    fn home_key(&self) -> String {
        self.home.clone()
    }

    fn home_stats(&self) -> grasp_sync_testkit::StrictStats {
        self.relays.stats(&self.home)
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

/// Syncs a network whose relay refuses every `#q` filter, on paused time; returns the network,
/// the engine with its store, and the IDs it must hold.
async fn sync_without_quotes(
    config: impl FnOnce(EngineConfig) -> EngineConfig,
) -> (Network, PausedEngine, BTreeSet<EventId>) {
    let network = Network::start(no_quotes(), 3);
    let run = start_paused_engine(
        &network.relays,
        config(test_config(std::slice::from_ref(&network.bootstrap))),
    )
    .await;
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    run.wait_for_store(&reachable, Duration::from_secs(60))
        .await;
    (network, run, reachable)
}

#[tokio::test(start_paused = true)]
async fn a_policy_refusal_pauses_only_the_refused_coverage() {
    // The default policy pause is 24 h: pausing the relay's whole history for it (rather than
    // the refused `#q` coverage) would leave the store incomplete.
    let (network, run, _) = sync_without_quotes(|c| c).await;
    let engine = &run.engine;
    let key = network.home_key();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    assert!(!quotes.is_empty());
    assert_eq!(
        run.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    let status = home_status(engine, &key).await;
    assert!(status.paused_filters >= 1, "{status:#?}");
    assert_eq!(status.connections, 1, "the connection must stay open");
    let refusals = network.home_stats().refusals_of(RefusalKind::Policy);
    assert!(refusals >= 1);

    // Live coverage of what was not refused still works, and nothing refused is sent again.
    let author = Keys::generate();
    let now = run.unix_now();
    let fresh = reply(&author, network.issue(), ThreadTag::LowerE, "live", now).expect("reply");
    network.relays.publish(&network.home, fresh.clone());
    run.wait_for_store(&ids(&[fresh]), Duration::from_secs(30))
        .await;
    let stats = network.home_stats();
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
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn refused_coverage_is_probed_once_per_pause() {
    const PAUSE: Duration = Duration::from_secs(4);
    let (network, run, _) = sync_without_quotes(|mut c| {
        c.health.policy_pause = PAUSE;
        c
    })
    .await;
    let engine = &run.engine;
    let key = network.home_key();
    // Refusals of a filter sent alone, by filter (time bounds and limit removed), in order.
    let refusals_by_filter = || {
        let mut by_filter: BTreeMap<String, Vec<(tokio::time::Instant, String)>> = BTreeMap::new();
        for start in network.home_stats().starts {
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
    // Each refused filter is sent again only once its pause has ended: never within one.
    for (filter, times) in refusals_by_filter() {
        for pair in times.windows(2) {
            let gap = pair[1].0.duration_since(pair[0].0);
            assert!(
                gap >= PAUSE,
                "{filter} was sent again {gap:?} after its refusal: {pair:?}"
            );
        }
    }
    assert_eq!(network.home_stats().connections(), 1);
    assert_eq!(home_status(engine, &key).await.connections, 1);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
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
    let network = Network::start(home, 100);
    let key = network.home_key();
    let mut config = test_config(std::slice::from_ref(&network.bootstrap));
    config.catch_up_interval = Duration::from_secs(3);
    // History fetched apart from the live groups: its pages, held beside them, reach the cap.
    config.live_first_page = false;
    let dir = tempfile::tempdir().expect("dir");
    let limits = dir.path().join("learned-limits.json");
    let run = start_keeping_limits(&network, config.clone(), &limits, None).await;
    let engine = &run.engine;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    run.wait_for_store(&all, Duration::from_secs(120)).await;
    let status = home_status(engine, &key).await;
    let refusals = network
        .home_stats()
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
        run.unix_now(),
    )
    .expect("quote");
    network.relays.publish(&network.home, quote.clone());
    let status = run
        .wait_for_store(&ids(&[quote]), Duration::from_secs(30))
        .await;
    let status = status.relays.get(&key).cloned().expect("home status");
    let stats = network.home_stats();
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
    let PausedEngine {
        store,
        engine,
        clock,
    } = run;
    engine.shutdown().await;

    // The cap is kept: a restart opens its live set inside it at once.
    let kept = grasp_sync_engine::FileLimitsMemory::new(&limits);
    let kept = grasp_sync_engine::LimitsMemory::load(&kept).expect("kept limits");
    assert!(
        kept.iter()
            .any(|(relay, record)| relay.as_str() == key && record.retained_byte_cap.is_some()),
        "{kept:?}"
    );
    let run = start_keeping_limits(&network, config, &limits, Some((store, clock))).await;
    let engine = &run.engine;
    let settled = wait_until(Duration::from_secs(120), || async {
        engine.status().await.is_some_and(|s| {
            s.relays
                .get(&key)
                .is_some_and(|r| history_settled(r) && r.catch_up_filters >= 1)
        })
    })
    .await;
    let status = home_status(engine, &key).await;
    assert!(settled, "{status:#?}");
    assert_eq!(
        network
            .home_stats()
            .refusals_of(RefusalKind::RetainedBytesExceeded),
        refusals,
        "a restart with the kept cap exceeded it again"
    );
    run.engine.shutdown().await;
}

/// Starts an engine over `network` keeping learned limits in `limits`; with `restart`, over
/// a shut-down engine's store and clock, as a daemon restarted over its store.
async fn start_keeping_limits(
    network: &Network,
    config: EngineConfig,
    limits: &std::path::Path,
    restart: Option<(MemoryStore, Arc<TokioClock>)>,
) -> PausedEngine {
    let (store, clock) = match restart {
        Some(before) => before,
        None => paused_store().await,
    };
    let memory = Arc::new(grasp_sync_engine::FileLimitsMemory::new(limits));
    start_paused_engine_with(
        &network.relays,
        config,
        store.clone(),
        Arc::new(store),
        clock,
        Some(memory),
    )
    .await
}

#[tokio::test(start_paused = true)]
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
    let relays = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), Vec::new()),
        ),
        (HOME.to_owned(), SimulatedRelay::new(home, Vec::new())),
    ]);
    let urls = relays.urls();
    let (bootstrap, home) = (urls[0].clone(), urls[1].clone());
    let mut config = test_config(std::slice::from_ref(&bootstrap));
    config.consolidation_margin = 3;
    let run = start_paused_engine(&relays, config).await;
    let mut last_issue = None;
    // One repository per batch window: each arrives after the previous one is stored.
    for n in 0..6 {
        let fixture = RepoFixture::new(&format!("incremental-{n}"));
        let announcement =
            fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
        let thread = fixture.thread(1_700_000_100 + n * 100);
        for event in thread.iter().chain([&announcement]) {
            relays.publish(&home, event.clone());
        }
        relays.publish(&bootstrap, announcement);
        run.wait_for_store(&ids(&thread), Duration::from_secs(60))
            .await;
        last_issue = thread.last().cloned();
    }
    // A consolidation waits for the relay to have no pending batch; history that is still
    // being paged (a first page on a live group walks on in paced pages) delays it.
    let consolidated = wait_until(Duration::from_secs(120), || async {
        home_status(&run.engine, &home).await.consolidations >= 1
    })
    .await;
    let status = home_status(&run.engine, &home).await;
    assert!(consolidated, "{status:#?}");
    // Live coverage is intact after the rebuild.
    let author = Keys::generate();
    let issue = last_issue.expect("an issue");
    let fresh = reply(&author, &issue, ThreadTag::LowerE, "live", run.unix_now()).expect("reply");
    relays.publish(&home, fresh.clone());
    run.wait_for_store(&ids(&[fresh]), Duration::from_secs(10))
        .await;
    let stats = relays.stats(&home);
    assert_eq!(stats.total_refusals(), 0, "{:?}", stats.refusals);
    assert_eq!(stats.connections(), 1);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
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
    let home = TestRelayConfig::strict(StrictLimits {
        policies: vec![PolicyRule::new(
            closes_descendants,
            "error: descendant subscriptions are not kept",
        )],
        ..StrictLimits::default()
    });
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement.clone()]),
        ),
        (
            HOME.to_owned(),
            SimulatedRelay::new(
                home,
                thread
                    .iter()
                    .cloned()
                    .chain([announcement, member.clone()])
                    .collect(),
            ),
        ),
    ]);
    let urls = network.urls();
    let (bootstrap, key) = (&urls[0], &urls[1]);
    let mut config = test_config(std::slice::from_ref(bootstrap));
    config.health.request_pause_base = Duration::from_secs(1);
    config.health.request_pause_max = Duration::from_secs(2);
    let run = start_paused_engine(&network, config).await;
    let mut expected = ids(&thread);
    expected.insert(member.id);
    run.wait_for_store(&expected, Duration::from_secs(60)).await;
    // The descendant live group was refused and closed.
    assert!(
        wait_until(Duration::from_secs(30), || async {
            network.stats(key).refusals_of(RefusalKind::Policy) >= 1
        })
        .await,
        "the descendant subscription was never opened"
    );
    // The CLOSED went out, and was read, at the instant the relay refused the descendant
    // group.
    let closed_at = network
        .stats(key)
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
        run.unix_now(),
    )
    .expect("descendant");
    network.publish(key, descendant.clone());
    let status = run
        .wait_for_store(&ids(&[descendant]), Duration::from_secs(30))
        .await;
    let status = status.relays.get(key).cloned().expect("home status");
    assert_eq!(status.auxiliary_subscriptions, 0, "{status:#?}");
    let stats = network.stats(key);
    // Core coverage was not rebuilt: no live REQ after the auxiliary one was closed.
    let live_after: Vec<_> = stats
        .starts
        .iter()
        .filter(|s| s.at > closed_at && s.subscription_id.starts_with("gs-live-"))
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
            .all(|(at, id)| *at == closed_at && id.starts_with("gs-live-")),
        "{refused:?}"
    );
    assert_eq!(stats.connections(), 1);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_descendant_fallback_asks_one_group_of_members_per_tick() {
    // 900 direct members of one issue on a relay that closes every live subscription to their
    // descendants: the paced fallback sweeps them, one group (at most 400 members) per tick,
    // and rests a minute from one sweep's start to the next.
    let fixture = RepoFixture::new("crowded");
    let author = Keys::generate();
    let thread = fixture.thread(1_700_000_100);
    let issue = thread.last().expect("issue").clone();
    let members: Vec<Event> = (0..900)
        .map(|n| {
            let at = Timestamp::from_secs(1_700_000_500 + n);
            reply(
                &author,
                &issue,
                ThreadTag::LowerE,
                &format!("member {n}"),
                at,
            )
            .expect("member")
        })
        .collect();
    let member_hex: BTreeSet<String> = members.iter().map(|m| m.id.to_hex()).collect();
    let live_hex = member_hex.clone();
    let closes_descendants = FilterPredicate::custom(move |filter| {
        filter.limit == Some(0)
            && filter
                .generic_tags
                .values()
                .any(|values| values.iter().any(|v| live_hex.contains(v)))
    });
    let home = TestRelayConfig::strict(StrictLimits {
        policies: vec![PolicyRule::new(
            closes_descendants,
            "error: descendant subscriptions are not kept",
        )],
        ..StrictLimits::default()
    });
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let held = thread
        .iter()
        .chain(&members)
        .cloned()
        .chain([announcement.clone()]);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement]),
        ),
        (HOME.to_owned(), SimulatedRelay::new(home, held.collect())),
    ]);
    let urls = network.urls();
    let (bootstrap, key) = (&urls[0], &urls[1]);
    let run = start_paused_engine(&network, test_config(std::slice::from_ref(bootstrap))).await;
    let mut expected = ids(&thread);
    expected.extend(members.iter().map(|m| m.id));
    run.wait_for_store(&expected, Duration::from_secs(120))
        .await;
    // Long enough for two sweeps of three groups at one tick each, and the rest between them.
    tokio::time::sleep(Duration::from_secs(90)).await;
    // The fallback's REQs: bounded below by `since`, asking about members.
    let fallback: Vec<(Duration, BTreeSet<String>)> = {
        let stats = network.stats(key);
        let first = stats.starts.first().map(|s| s.at).expect("a start");
        stats
            .starts
            .iter()
            .filter(|s| s.refused.is_none())
            .filter_map(|s| {
                let asked: BTreeSet<String> = s
                    .filters
                    .iter()
                    .filter(|f| f.since.is_some() && f.limit != Some(0))
                    .flat_map(|f| f.generic_tags.values().flatten())
                    .filter(|v| member_hex.contains(*v))
                    .cloned()
                    .collect();
                (!asked.is_empty()).then(|| (s.at - first, asked))
            })
            .collect()
    };
    assert!(fallback.len() >= 6, "{} fallback REQs", fallback.len());
    for (at, asked) in &fallback {
        assert!(
            asked.len() <= 400,
            "{} members asked at {at:?}",
            asked.len()
        );
    }
    for pair in fallback.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 >= Duration::from_secs(1),
            "two fallback groups in one tick: {:?} and {:?}",
            pair[0].0,
            pair[1].0
        );
    }
    let swept: BTreeSet<&String> = fallback[..3].iter().flat_map(|(_, a)| a).collect();
    assert_eq!(
        swept.len(),
        member_hex.len(),
        "one sweep asks for every member"
    );
    assert!(
        fallback[3].0 - fallback[0].0 >= Duration::from_secs(60),
        "the second sweep began {:?} after the first",
        fallback[3].0 - fallback[0].0
    );
    run.engine.shutdown().await;
}

/// A relay that advertises five subscriptions per connection and one filter per REQ, as a
/// strfry with those settings would: two live groups fit one connection (five slots less the
/// margin and a transient slot), and each holds one filter. It lists no NIP-77.
fn narrow_relay() -> TestRelayConfig {
    let mut config = TestRelayConfig::strict(StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 5,
            dialect: Dialect::Strfry,
            counts_negentropy: true,
            advertised: true,
        }),
        filters_per_req: Some(FilterLimit {
            max: 1,
            dialect: Dialect::Strfry,
            advertised: true,
        }),
        negentropy_enabled: false,
        ..StrictLimits::default()
    });
    config.advertise_negentropy = false;
    config
}

/// Waits for the store to hold `expected` and the home relay's history to settle; returns the
/// home relay's status then.
async fn settle_home(
    network: &Network,
    run: &PausedEngine,
    expected: &BTreeSet<EventId>,
) -> RelayStatus {
    run.wait_for_store(expected, Duration::from_secs(120)).await;
    let key = network.home_key();
    let engine = &run.engine;
    let settled = wait_until(Duration::from_secs(60), || async {
        engine
            .status()
            .await
            .is_some_and(|s| s.relays.get(&key).is_some_and(history_settled))
    })
    .await;
    let status = home_status(engine, &key).await;
    assert!(settled, "{status:#?}");
    status
}

/// Publishes a fresh reply to a root on the home relay and waits 10 virtual seconds at most
/// for the store to hold it: long before the paced catch-up would run, so only a live
/// subscription brings it.
async fn a_fresh_reply_arrives_live(network: &Network, run: &PausedEngine) {
    let root_reply = reply(
        &Keys::generate(),
        network.issue(),
        ThreadTag::LowerE,
        "live",
        run.unix_now(),
    )
    .expect("reply");
    network.relays.publish(&network.home, root_reply.clone());
    run.wait_for_store(&ids(&[root_reply]), Duration::from_secs(10))
        .await;
}

#[tokio::test(start_paused = true)]
async fn essential_live_coverage_too_big_for_one_connection_is_held_on_extra_connections() {
    let network = Network::start(narrow_relay(), 3);
    let run = start_paused_engine(
        &network.relays,
        test_config(std::slice::from_ref(&network.bootstrap)),
    )
    .await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    let status = settle_home(&network, &run, &all).await;
    assert!(status.extra_connections >= 1, "{status:#?}");
    assert!(
        status.extra_connections < grasp_sync_engine::MAX_CONNECTIONS_PER_RELAY,
        "{status:#?}"
    );
    assert_eq!(status.catch_up_filters, 0, "{status:#?}");

    // A reply to a root, and a new issue of a repository: essential coverage, which must
    // arrive live, long before the paced catch-up would run.
    a_fresh_reply_arrives_live(&network, &run).await;

    let stats = network.home_stats();
    assert_eq!(stats.total_refusals(), 0, "{stats:#?}");
    assert!(stats.peak_open_subscriptions() <= 5, "{stats:#?}");
    // The session and its extra connections, nothing more: no connection was replaced.
    assert_eq!(
        stats.connections(),
        1 + status.extra_connections,
        "{stats:#?}"
    );
    // Each extra connection was opened for live subscriptions only, and was asked for nothing
    // stored: every REQ it sent asks for `limit: 0`.
    let live_only: Vec<usize> = (0..stats.connections())
        .filter(|&i| stats.per_connection[i].live_only)
        .collect();
    assert_eq!(live_only.len(), status.extra_connections, "{stats:#?}");
    assert!(!stats.per_connection[0].live_only, "the session is not");
    for start in stats
        .starts
        .iter()
        .filter(|s| live_only.contains(&s.connection))
    {
        assert!(
            start.filters.iter().all(|f| f.limit == Some(0)),
            "a live-only connection asked for stored events: {start:?}"
        );
    }
    eprintln!(
        "narrow relay: {} extra connections, {} + {} live subscriptions",
        status.extra_connections, status.live_subscriptions, status.extra_live_subscriptions
    );
    run.engine.shutdown().await;
}

/// The subscription ID of `text` when it is a REQ.
fn req_subscription(text: &str) -> Option<nostr::SubscriptionId> {
    match nostr::ClientMessage::from_json(text) {
        Ok(nostr::ClientMessage::Req {
            subscription_id, ..
        }) => Some(subscription_id.into_owned()),
        _ => None,
    }
}

/// Once armed, the next dial to the home relay is the session that replaces a dropped one,
/// and the first REQ it sends is answered in the relay's place with a query-rate refusal, as
/// a relay whose query allowance that session's opening burst exceeds.
#[derive(Default)]
struct QueryRateRefusalOnRedial {
    armed: std::sync::atomic::AtomicBool,
    refuse_next: std::sync::atomic::AtomicBool,
    refused: std::sync::atomic::AtomicBool,
}

impl NetworkHooks for QueryRateRefusalOnRedial {
    fn dial(&self, relay: &str) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        if relay.starts_with(HOME) && self.armed.swap(false, SeqCst) {
            self.refuse_next.store(true, SeqCst);
        }
        true
    }

    fn message(&self, relay: &str, _connection: usize, text: &str) -> MessageFate {
        use std::sync::atomic::Ordering::SeqCst;
        if !relay.starts_with(HOME) || !self.refuse_next.load(SeqCst) {
            return MessageFate::Read;
        }
        let Some(subscription_id) = req_subscription(text) else {
            return MessageFate::Read;
        };
        self.refuse_next.store(false, SeqCst);
        self.refused.store(true, SeqCst);
        MessageFate::Answer(vec![
            nostr::RelayMessage::closed(subscription_id, "rate-limited: too many queries")
                .as_json(),
        ])
    }
}

#[tokio::test(start_paused = true)]
async fn extra_connections_take_the_coverage_a_query_rate_cooldown_held_back_once_it_ends() {
    use std::sync::atomic::Ordering::SeqCst;
    const COOLDOWN: Duration = Duration::from_secs(5);
    let hook = Arc::new(QueryRateRefusalOnRedial::default());
    let hooks: Arc<dyn NetworkHooks> = Arc::clone(&hook) as Arc<dyn NetworkHooks>;
    let network = Network::start_with_hooks(narrow_relay(), 3, Some(hooks));
    let key = network.home_key();
    let mut config = test_config(std::slice::from_ref(&network.bootstrap));
    config.health.rate_limit_cooldown = COOLDOWN;
    let run = start_paused_engine(&network.relays, config).await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    let status = settle_home(&network, &run, &all).await;
    assert!(status.extra_connections >= 1, "{status:#?}");

    // The relay drops every connection once history is settled, so no coverage found later
    // offers the extra connections anything. The new session plans the same overflow and
    // dials an extra connection for it, but the relay refuses its opening burst: the
    // connection opens during the cooldown and is offered nothing. When the cooldown ends,
    // the repaired plan overflows with exactly the coverage that waits.
    hook.armed.store(true, SeqCst);
    network.relays.kill(&network.home);
    network.relays.revive(&network.home);
    let refused = wait_until(Duration::from_secs(60), || async {
        hook.refused.load(SeqCst)
    })
    .await;
    assert!(refused, "the new session sent no REQ");
    let refused_at = tokio::time::Instant::now();
    tokio::time::sleep(COOLDOWN / 2).await;
    let status = home_status(&run.engine, &key).await;
    assert_eq!(status.refusals.get("rate_limited"), Some(&1), "{status:#?}");
    assert_eq!(
        (status.extra_connections, status.extra_live_subscriptions),
        (1, 0),
        "not one extra connection open and offered nothing during the cooldown: {status:#?}"
    );
    // The cooldown is over, the extra connections have had time to open one by one, and the
    // new session's history since the drop is fetched, so that only live groups fetch what
    // is published next.
    tokio::time::sleep_until(refused_at + COOLDOWN + Duration::from_secs(3)).await;
    run.settle(&key, Duration::from_secs(60)).await;

    // A fresh event for each tag style of the repository's and the roots' coverage: the
    // session's two groups hold two of these filters at most, so the rest arrive within
    // 10 s only if the coverage that waited went to the extra connections.
    let author = Keys::generate();
    let announcement = network
        .events
        .iter()
        .find(|e| e.kind.as_u16() == KIND_REPO_ANNOUNCEMENT)
        .expect("an announcement");
    let repo = RepoRef::new(
        announcement.pubkey,
        announcement.tags.identifier().expect("an identifier"),
    );
    let now = run.unix_now();
    let mut fresh = Vec::new();
    for how in [ThreadTag::LowerE, ThreadTag::UpperE] {
        fresh.push(reply(&author, network.issue(), how, "live", now).expect("reply"));
    }
    for how in [RepoTag::LowerA, RepoTag::UpperA] {
        fresh.push(repo_comment(&author, &repo, how, "live", now).expect("comment"));
    }
    for event in &fresh {
        network.relays.publish(&network.home, event.clone());
    }
    let status = run
        .wait_for_store(&ids(&fresh), Duration::from_secs(10))
        .await;
    let status = status.relays.get(&key).cloned().expect("home status");
    assert!(status.extra_live_subscriptions >= 1, "{status:#?}");
    assert_eq!(status.refusals.get("rate_limited"), Some(&1), "{status:#?}");
    run.engine.shutdown().await;
}

/// The narrow relay serving authenticated connections only, as strfry restricts reads: every
/// REQ of a connection that has not authenticated is refused with `auth-required:`, and the
/// first such refusal carries the connection's challenge.
fn narrow_relay_requiring_auth(refusal: AuthRefusal) -> TestRelayConfig {
    let mut config = narrow_relay();
    if let Some(strict) = config.strict.as_mut() {
        strict.auth = Some(StrictAuth {
            refusal,
            ..StrictAuth::new(FilterPredicate::custom(|_| true))
        });
    }
    config
}

#[tokio::test(start_paused = true)]
async fn extra_connections_authenticate_on_their_own_and_hold_their_coverage_live() {
    extra_connections_authenticate(AuthRefusal::Closed).await;
}

#[tokio::test(start_paused = true)]
async fn extra_connections_asked_to_authenticate_in_a_notice_hold_their_coverage_live() {
    // The refusal names no subscription: each NOTICE answers the oldest unanswered REQ.
    extra_connections_authenticate(AuthRefusal::Notice).await;
}

#[tokio::test(start_paused = true)]
async fn extra_connections_refused_in_a_notice_and_a_closed_hold_their_coverage_live() {
    extra_connections_authenticate(AuthRefusal::NoticeThenClosed).await;
}

/// The narrow relay serves authenticated connections only, refusing the others' REQs as
/// `refusal` says: every connection authenticates on its own and holds its coverage live.
async fn extra_connections_authenticate(refusal: AuthRefusal) {
    let network = Network::start(narrow_relay_requiring_auth(refusal), 3);
    network.relays.answer_auth_with(Keys::generate());
    let run = start_paused_engine(
        &network.relays,
        test_config(std::slice::from_ref(&network.bootstrap)),
    )
    .await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    let status = settle_home(&network, &run, &all).await;
    assert!(status.extra_connections >= 1, "{status:#?}");
    // Every extra connection's refused REQ was parked for its own AUTH and sent again, so
    // nothing was left to the catch-up and no connection was closed.
    assert_eq!(status.catch_up_filters, 0, "{status:#?}");
    let stats = network.home_stats();
    assert_eq!(
        stats.connections(),
        1 + status.extra_connections,
        "{stats:#?}"
    );

    a_fresh_reply_arrives_live(&network, &run).await;
    assert!(stats.peak_open_subscriptions() <= 5, "{stats:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_group_an_extra_connection_is_refused_for_costs_that_group_only() {
    // The narrow relay, serving no quote filters: the compatibility coverage the session
    // cannot hold lands on extra connections, whose `#q` groups it refuses by policy.
    let mut home = narrow_relay();
    if let Some(strict) = home.strict.as_mut() {
        strict.policies = vec![PolicyRule::new(
            FilterPredicate::Tag('q'),
            "blocked: quote filters are not served here",
        )];
    }
    let network = Network::start(home, 3);
    let run = start_paused_engine(
        &network.relays,
        test_config(std::slice::from_ref(&network.bootstrap)),
    )
    .await;
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    let status = settle_home(&network, &run, &reachable).await;
    let stats = network.home_stats();
    assert!(
        stats.refusals_of(RefusalKind::Policy) >= 1,
        "no quote group was refused: {stats:#?}"
    );
    assert!(status.extra_connections >= 1, "{status:#?}");
    // No connection was closed for it, and nothing went to the catch-up: the refused groups
    // are paused by policy, the rest stays live.
    assert_eq!(
        stats.connections(),
        1 + status.extra_connections,
        "{stats:#?}"
    );
    assert_eq!(status.catch_up_filters, 0, "{status:#?}");

    a_fresh_reply_arrives_live(&network, &run).await;
    run.engine.shutdown().await;
}

/// Once an extra connection to the home relay has spoken, answers the next REQ on the home
/// relay's first connection (the session) in the relay's place with a retained-byte refusal,
/// as strfry-family relays refuse a connection past their hidden byte cap: the engine learns
/// the cap and rebuilds its live set from scratch while extra connections are open. Notes
/// whether the session sent live REQs after the refusal, as a rebuild does.
#[derive(Default)]
struct ByteCapOnceExtraConnectionsOpen {
    session: std::sync::Mutex<Option<usize>>,
    extra_spoke: std::sync::atomic::AtomicBool,
    refused: std::sync::atomic::AtomicBool,
    live_after_refusal: std::sync::atomic::AtomicBool,
}

impl NetworkHooks for ByteCapOnceExtraConnectionsOpen {
    fn message(&self, relay: &str, connection: usize, text: &str) -> MessageFate {
        use std::sync::atomic::Ordering::SeqCst;
        if !relay.starts_with(HOME) {
            return MessageFate::Read;
        }
        let session = *self.session.lock().expect("lock").get_or_insert(connection);
        if connection != session {
            self.extra_spoke.store(true, SeqCst);
            return MessageFate::Read;
        }
        let Some(subscription_id) = req_subscription(text) else {
            return MessageFate::Read;
        };
        if self.refused.load(SeqCst) {
            if subscription_id.to_string().starts_with("gs-live-") {
                self.live_after_refusal.store(true, SeqCst);
            }
            return MessageFate::Read;
        }
        if !self.extra_spoke.load(SeqCst) {
            return MessageFate::Read;
        }
        self.refused.store(true, SeqCst);
        let cap = grasp_sync_filters::PackLimits::default().max_req_bytes + 30_000;
        let text = format!("error: active subscriptions exceed max size {cap} bytes");
        MessageFate::Answer(vec![
            nostr::RelayMessage::closed(subscription_id, text).as_json(),
        ])
    }
}

#[tokio::test(start_paused = true)]
async fn a_live_set_rebuilt_with_extra_connections_open_repacks_them_without_new_handshakes() {
    // Ten filters per REQ: the session's two live groups hold the essential coverage, and the
    // tiers below it overflow onto extra connections.
    rebuild_with_extra_connections_open(Some(10)).await;
}

#[tokio::test(start_paused = true)]
async fn a_rebuild_whose_essential_coverage_needs_extra_connections_hands_them_the_rest() {
    // One filter per REQ: the essential coverage alone does not fit the session, so the
    // rebuild from scratch splits it between the session and the extra connections.
    rebuild_with_extra_connections_open(None).await;
}

/// The narrow relay (with `filters_per_req` filters per REQ when given) refuses one session
/// REQ for a retained-byte cap once an extra connection is open: the live set is rebuilt from
/// scratch on the connections already open, and holds its coverage live.
async fn rebuild_with_extra_connections_open(filters_per_req: Option<usize>) {
    let hook = Arc::new(ByteCapOnceExtraConnectionsOpen::default());
    let hooks: Arc<dyn NetworkHooks> = Arc::clone(&hook) as Arc<dyn NetworkHooks>;
    let mut home = narrow_relay();
    if let (Some(max), Some(limit)) = (
        filters_per_req,
        home.strict
            .as_mut()
            .and_then(|s| s.filters_per_req.as_mut()),
    ) {
        limit.max = max;
    }
    let network = Network::start_with_hooks(home, 3, Some(hooks));
    let run = start_paused_engine(
        &network.relays,
        test_config(std::slice::from_ref(&network.bootstrap)),
    )
    .await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    let status = settle_home(&network, &run, &all).await;
    use std::sync::atomic::Ordering::SeqCst;
    assert!(
        hook.refused.load(SeqCst),
        "the session sent nothing once an extra connection was open"
    );
    // The learned cap rebuilt the session's live set from scratch.
    assert!(
        hook.live_after_refusal.load(SeqCst),
        "the session's live set was not rebuilt after the refusal"
    );
    assert!(status.extra_connections >= 1, "{status:#?}");
    assert_eq!(status.catch_up_filters, 0, "{status:#?}");
    // The rebuild kept the extra connections open and repacked them: the relay saw no
    // connection closed and none opened in its place.
    let stats = network.home_stats();
    assert_eq!(
        stats.connections(),
        1 + status.extra_connections,
        "{stats:#?}"
    );

    a_fresh_reply_arrives_live(&network, &run).await;
    assert!(stats.peak_open_subscriptions() <= 5, "{stats:#?}");
    run.engine.shutdown().await;
}

/// Refuses every dial to the home relay after the first `allowed`, as a relay that caps the
/// connections one address may hold (chorus takes five) refuses the next handshake.
struct ConnectionCap {
    allowed: usize,
    dials: std::sync::atomic::AtomicUsize,
}

impl NetworkHooks for ConnectionCap {
    fn dial(&self, relay: &str) -> bool {
        if !relay.starts_with(HOME) {
            return true;
        }
        let dials = self.dials.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        dials < self.allowed
    }
}

#[tokio::test(start_paused = true)]
async fn an_extra_connection_the_relay_refuses_is_not_retried_and_its_coverage_is_caught_up() {
    // The narrow relay needs three extra connections for this coverage; it takes two in all.
    let cap = Arc::new(ConnectionCap {
        allowed: 2,
        dials: std::sync::atomic::AtomicUsize::new(0),
    });
    let hooks: Arc<dyn NetworkHooks> = Arc::clone(&cap) as Arc<dyn NetworkHooks>;
    let network = Network::start_with_hooks(narrow_relay(), 3, Some(hooks));
    let key = network.home_key();
    let mut config = test_config(std::slice::from_ref(&network.bootstrap));
    config.catch_up_interval = Duration::from_secs(60);
    let run = start_paused_engine(&network.relays, config).await;
    let all: BTreeSet<EventId> = network.events.iter().map(|e| e.id).collect();
    let status = settle_home(&network, &run, &all).await;
    assert_eq!(status.extra_connections, 1, "{status:#?}");
    assert!(status.catch_up_filters >= 1, "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");

    // Coverage no connection holds still arrives, by the paced catch-up.
    let author = Keys::generate();
    let quote = reply(
        &author,
        network.issue(),
        ThreadTag::Q,
        "caught up",
        run.unix_now(),
    )
    .expect("quote");
    network.relays.publish(&network.home, quote.clone());
    let status = run
        .wait_for_store(&ids(&[quote]), Duration::from_secs(150))
        .await;
    let status = status.relays.get(&key).cloned().expect("home status");
    assert!(status.catch_ups >= 1, "{status:#?}");

    // Ten minutes on, the refused third connection was never tried again.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(cap.dials.load(std::sync::atomic::Ordering::SeqCst), 3);
    let stats = network.home_stats();
    assert_eq!(stats.total_refusals(), 0, "{stats:#?}");
    assert_eq!(stats.connections(), 2, "{stats:#?}");
    run.engine.shutdown().await;
}
