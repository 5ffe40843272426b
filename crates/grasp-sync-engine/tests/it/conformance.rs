//! The strict-relay conformance suite: a gitnostr-shaped network scaled to run in seconds,
//! synced through relays that enforce the limits of real implementations (advertised or hidden)
//! with their refusal texts. For each profile: nothing the relay holds is lost, hidden limits
//! cost at most one refusal per kind, advertised ones none, and background starts never come
//! faster than one per second on a connection. Each run prints its figures.

use std::time::Duration;

use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    NetworkSpec, RefusalKind, RootCount, StartKind, TestNetwork, TestRelayConfig,
};

use crate::support::{SERVICE_URL, TestStore, start_engine, test_config, wait_until};

/// What one profile run showed.
struct Figures {
    refusals: u64,
    refusal_kinds: Vec<(RefusalKind, u64)>,
    req_starts: usize,
    neg_opens: usize,
    peak_subscriptions: usize,
    events_sent: u64,
    duplicate_events: u64,
    held: usize,
    synced: usize,
}

#[allow(clippy::print_stderr)]
async fn run_profile(name: &str, profile: TestRelayConfig) -> Figures {
    let spec = NetworkSpec {
        relays: 2,
        repos: 40,
        roots: RootCount::Total(240),
        replies_per_root: 1,
        relays_per_repo: 2,
        share_not_listing_service: 0.1,
        ..NetworkSpec::small(23, SERVICE_URL)
    };
    let network = TestNetwork::start(&spec, &[TestRelayConfig::default(), profile])
        .await
        .expect("network");
    let urls = network.urls();
    let strict = &network.relays[1];
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&urls[..1])).await;
    let expected = network.expected().clone();
    let complete = wait_until(Duration::from_secs(120), || async {
        store.count_stored(&expected).await == expected.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    let strict_key = RelayUrl::parse(&strict.url()).expect("url").to_string();
    assert!(
        complete,
        "{name}: stored {} of {}: {status:#?}",
        store.count_stored(&expected).await,
        expected.len()
    );
    // Every event the strict relay holds that a correct sync keeps ends in the store.
    let held: Vec<_> = strict
        .event_ids()
        .await
        .expect("ids")
        .into_iter()
        .filter(|id| expected.contains(id))
        .collect();
    let synced = {
        let set: std::collections::BTreeSet<_> = held.iter().copied().collect();
        store.count_stored(&set).await
    };
    engine.shutdown().await;
    let stats = strict.strict_stats();
    let refusal_kinds: Vec<(RefusalKind, u64)> =
        stats.refusals.iter().map(|(k, v)| (*k, *v)).collect();
    // Background starts (history, pages, exact-ID fetches, negentropy rounds) at most one per
    // second per connection; live subscriptions may start at once. The gate spaces decisions a
    // full second apart, and every start is handed to the transport at its decision: a
    // negentropy round's "have" set is read before the decision and its history slot taken at
    // it. The allowance covers the rest of the way to the relay. The client library never sets
    // TCP_NODELAY, so a start written while an earlier message of the connection is still
    // unacknowledged waits for the relay's ACK, which Linux delays by about 40 ms when the
    // relay has nothing to send back; and on a loaded two-core machine the tasks on either
    // side wait up to a few tens of milliseconds for a worker. Together that reaches 60 ms,
    // hence the 100 ms allowance.
    let spacing = Duration::from_millis(900);
    let background = stats.most_starts_within_by(spacing, |start| {
        start.kind == StartKind::NegOpen || !start.subscription_id.starts_with("gs-live-")
    });
    let mut starts: Vec<_> = stats
        .starts
        .iter()
        .filter(|s| s.kind == StartKind::NegOpen || !s.subscription_id.starts_with("gs-live-"))
        .map(|s| (s.connection, s.at, s.subscription_id.clone()))
        .collect();
    starts.sort_by_key(|s| (s.0, s.1));
    let tight: Vec<_> = starts
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[1].1.duration_since(w[0].1) <= spacing)
        .map(|w| {
            (
                w[0].2.clone(),
                w[1].2.clone(),
                w[1].1.duration_since(w[0].1),
            )
        })
        .collect();
    assert!(
        background <= 1,
        "{name}: {background} background starts within one second: {tight:?}"
    );
    let figures = Figures {
        refusals: stats.total_refusals(),
        refusal_kinds,
        req_starts: stats.req_starts().count(),
        neg_opens: stats.neg_opens(),
        peak_subscriptions: stats.peak_open_subscriptions(),
        events_sent: stats.events_sent(),
        duplicate_events: stats.duplicate_events(),
        held: held.len(),
        synced,
    };
    eprintln!(
        "| {name} | {} {:?} | {} | {} | {} | {} / {} | {} ({} twice) | {} |",
        figures.refusals,
        figures.refusal_kinds,
        figures.req_starts,
        figures.neg_opens,
        figures.peak_subscriptions,
        figures.synced,
        figures.held,
        figures.events_sent,
        figures.duplicate_events,
        status
            .relays
            .get(&strict_key)
            .map_or(0, |r| r.subscription_budget),
    );
    assert_eq!(figures.synced, figures.held, "{name}: events lost");
    assert_eq!(figures.duplicate_events, 0, "{name}: events fetched twice");
    figures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nos_lol_like_advertised_limits_cost_no_refusal() {
    let figures = run_profile("nos.lol-like", TestRelayConfig::nos_lol_like()).await;
    assert_eq!(figures.refusals, 0);
    assert!(figures.peak_subscriptions <= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostream_like_advertised_limits_cost_no_refusal() {
    let figures = run_profile("nostream-like", TestRelayConfig::nostream_like()).await;
    assert_eq!(figures.refusals, 0);
    assert!(figures.peak_subscriptions <= 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strfry_filter_validation_like_hidden_filter_cap_is_learned_from_one_refusal() {
    let figures = run_profile(
        "strfry-filterValidation-like",
        TestRelayConfig::strfry_filter_validation_like(),
    )
    .await;
    for (kind, count) in &figures.refusal_kinds {
        assert!(*count <= 1, "{kind:?} refused {count} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ditto_like_hidden_page_size_is_paged_through_without_refusal() {
    let figures = run_profile("ditto-like", TestRelayConfig::ditto_like()).await;
    assert_eq!(figures.refusals, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_nostr_like_hidden_limits_cost_at_most_one_refusal_each() {
    let figures = run_profile("rust-nostr-like", TestRelayConfig::rust_nostr_like()).await;
    for (kind, count) in &figures.refusal_kinds {
        assert!(*count <= 1, "{kind:?} refused {count} times");
    }
}
