//! Limits a relay keeps hidden are learned once: an engine restarted with the kept limits
//! (`FileLimitsMemory`) starts inside them and is refused nothing, where one restarted without
//! them pays each refusal again. On paused time over memory relays.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{EngineConfig, FileLimitsMemory, LimitsMemory, MemoryStore, TokioClock};
use grasp_sync_testkit::{
    Dialect, FilterLimit, MemoryNetwork, NetworkSpec, Nip11Mode, RefusalKind, RootCount,
    StrictLimits, SubscriptionLimit, TestRelayConfig,
};

use crate::support::{
    SERVICE_URL, history_settled, paused_store, start_paused_engine_with, test_config, wait_until,
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
fn refusals(network: &MemoryNetwork, relay: &str) -> [u64; 2] {
    let stats = network.stats(relay);
    KINDS.map(|kind| stats.refusals_of(kind))
}

/// Runs over `store` and `clock` (a stopped run's, or a new store's) until the store holds
/// `expected` and the strict relay has nothing left to start or confirm, with its live set
/// open, then stops the engine; returns the store and clock, for a restart over them.
async fn sync_once(
    network: &MemoryNetwork,
    (store, clock): (MemoryStore, Arc<TokioClock>),
    config: EngineConfig,
    memory: Option<&Path>,
    strict: &str,
    expected: &std::collections::BTreeSet<nostr::EventId>,
) -> (MemoryStore, Arc<TokioClock>) {
    let memory = memory.map(|path| Arc::new(FileLimitsMemory::new(path)) as Arc<dyn LimitsMemory>);
    let run = start_paused_engine_with(
        network,
        config,
        store.clone(),
        Arc::new(store),
        clock,
        memory,
    )
    .await;
    let done = wait_until(Duration::from_secs(3600), || async {
        run.count_stored(expected).await == expected.len()
            && run.relay(strict).await.is_some_and(|r| history_settled(&r))
    })
    .await;
    let status = run.engine.status().await.expect("status");
    assert!(done, "did not finish: {:#?}", status.relays.get(strict));
    run.stop().await
}

#[tokio::test(start_paused = true)]
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
    let (network, generated) =
        MemoryNetwork::generate(&spec, &[TestRelayConfig::default(), hidden_limits()])
            .expect("network");
    let urls = network.urls();
    let expected = generated.expected;
    let strict = &urls[1];
    let dir = tempfile::tempdir().expect("dir");
    let memory = dir.path().join("learned-limits.json");
    let config = || test_config(&urls[..1]);

    // First run: each hidden limit costs a refusal, and what it taught is kept.
    let stopped = paused_store().await;
    let stopped = sync_once(
        &network,
        stopped,
        config(),
        Some(&memory),
        strict,
        &expected,
    )
    .await;
    let first = refusals(&network, strict);
    assert!(
        first.iter().all(|n| *n >= 1),
        "every hidden limit was met: {first:?}"
    );
    let kept = FileLimitsMemory::new(&memory).load().expect("kept limits");
    let record = kept
        .iter()
        .find(|(relay, _)| relay.as_str() == strict)
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
    let stopped = sync_once(&network, stopped, config(), None, strict, &expected).await;
    let forgetful = refusals(&network, strict);
    let relearned: Vec<u64> = forgetful.iter().zip(first).map(|(a, b)| a - b).collect();
    assert!(
        relearned.iter().all(|n| *n >= 1),
        "relearned: {relearned:?}"
    );

    // A restart with them is refused nothing.
    sync_once(
        &network,
        stopped,
        config(),
        Some(&memory),
        strict,
        &expected,
    )
    .await;
    let remembering = refusals(&network, strict);
    let again: Vec<u64> = remembering
        .iter()
        .zip(forgetful)
        .map(|(a, b)| a - b)
        .collect();
    assert_eq!(again, [0, 0], "refusals after a restart with kept limits");
    assert_eq!(
        network.stats(strict).total_refusals(),
        forgetful.iter().sum::<u64>(),
        "no refusal of any other kind either"
    );
}
