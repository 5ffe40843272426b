//! Limits a relay keeps hidden are learned once: an engine restarted with the kept limits
//! (`FileLimitsMemory`) starts inside them and is refused nothing, where one restarted without
//! them pays each refusal again.

use std::path::Path;
use std::time::Duration;

use grasp_sync_engine::{EngineConfig, FileLimitsMemory, LimitsMemory};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    Dialect, FilterLimit, NetworkSpec, Nip11Mode, RefusalKind, RootCount, StrictLimits,
    SubscriptionLimit, TestNetwork, TestRelay, TestRelayConfig,
};

use crate::support::{
    SERVICE_URL, TestStore, history_settled, start_engine_keeping_limits, test_config, wait_until,
};

/// A relay that advertises neither of its limits: 4 subscriptions (rust-nostr's refusal text)
/// and 3 filters per REQ (strfry's), with no NIP-77, so history is paged by REQ and both
/// limits are met.
fn hidden_limits() -> TestRelayConfig {
    TestRelayConfig {
        name: "strict relay with hidden limits".to_owned(),
        nip11: Nip11Mode::WithLimits,
        advertise_negentropy: false,
        strict: Some(StrictLimits {
            subscriptions: Some(SubscriptionLimit {
                max: 4,
                dialect: Dialect::RustNostr,
                counts_negentropy: false,
                advertised: false,
            }),
            filters_per_req: Some(FilterLimit {
                max: 3,
                dialect: Dialect::Strfry,
                advertised: false,
            }),
            negentropy_enabled: false,
            ..StrictLimits::default()
        }),
        ..TestRelayConfig::default()
    }
}

const KINDS: [RefusalKind; 2] = [
    RefusalKind::TooManySubscriptions,
    RefusalKind::TooManyFilters,
];

/// The strict relay's refusals so far, by hidden limit.
fn refusals(relay: &TestRelay) -> [u64; 2] {
    let stats = relay.strict_stats();
    KINDS.map(|kind| stats.refusals_of(kind))
}

/// Runs until the store holds `expected` and the strict relay has nothing left to start or
/// confirm, with its live set open, then stops the engine.
async fn sync_once(
    store: &TestStore,
    config: EngineConfig,
    memory: Option<&Path>,
    strict: &str,
    expected: &std::collections::BTreeSet<nostr::EventId>,
) {
    let engine = start_engine_keeping_limits(store, config, memory).await;
    let done = wait_until(Duration::from_secs(120), || async {
        store.count_stored(expected).await == expected.len()
            && engine
                .status()
                .await
                .is_some_and(|status| status.relays.get(strict).is_some_and(history_settled))
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(done, "did not finish: {:#?}", status.relays.get(strict));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_kept_limits_is_refused_nothing() {
    let spec = NetworkSpec {
        relays: 2,
        repos: 3,
        roots: RootCount::Total(9),
        replies_per_root: 1,
        relays_per_repo: 2,
        share_not_listing_service: 0.0,
        ..NetworkSpec::small(41, SERVICE_URL)
    };
    let network = TestNetwork::start(&spec, &[TestRelayConfig::default(), hidden_limits()])
        .await
        .expect("network");
    let urls = network.urls();
    let expected = network.expected().clone();
    let strict = &network.relays[1];
    let strict_key = RelayUrl::parse(&strict.url()).expect("url").to_string();
    let dir = tempfile::tempdir().expect("dir");
    let memory = dir.path().join("learned-limits.json");
    let config = || test_config(&urls[..1]);

    // First run: each hidden limit costs a refusal, and what it taught is kept.
    let store = TestStore::open().await;
    sync_once(&store, config(), Some(&memory), &strict_key, &expected).await;
    let first = refusals(strict);
    assert!(
        first.iter().all(|n| *n >= 1),
        "every hidden limit was met: {first:?}"
    );
    let kept = FileLimitsMemory::new(&memory).load().expect("kept limits");
    let record = kept
        .iter()
        .find(|(relay, _)| relay.as_str() == strict_key)
        .map(|(_, record)| *record)
        .expect("the strict relay's limits are kept");
    assert_eq!(
        record.filter_ceiling.map(|c| c <= 3),
        Some(true),
        "{record:?}"
    );
    assert!(
        record.subscription_slots.is_some_and(|s| s <= 4),
        "{record:?}"
    );

    // A restart without them learns every limit again.
    let store = store.reopen().await;
    sync_once(&store, config(), None, &strict_key, &expected).await;
    let forgetful = refusals(strict);
    let relearned: Vec<u64> = forgetful.iter().zip(first).map(|(a, b)| a - b).collect();
    assert!(
        relearned.iter().all(|n| *n >= 1),
        "relearned: {relearned:?}"
    );

    // A restart with them is refused nothing.
    let store = store.reopen().await;
    sync_once(&store, config(), Some(&memory), &strict_key, &expected).await;
    let remembering = refusals(strict);
    let again: Vec<u64> = remembering
        .iter()
        .zip(forgetful)
        .map(|(a, b)| a - b)
        .collect();
    assert_eq!(again, [0, 0], "refusals after a restart with kept limits");
    assert_eq!(
        strict.strict_stats().total_refusals(),
        forgetful.iter().sum::<u64>(),
        "no refusal of any other kind either"
    );
}
