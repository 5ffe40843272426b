//! NIP-77 rounds refused with `auth-required:` (strfry's and khatru's NEG-ERR for a NEG-OPEN
//! of filters they serve to authenticated clients only): with a key the round's coverage is
//! reconciled again by NIP-77 once the relay accepted the engine's AUTH; without one only
//! that coverage is paused. Neither falls back to a REQ+EOSE the relay would refuse the same
//! way. On paused time over memory relays, which answer the relay's challenge with the
//! engine's key when it holds one.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_engine::EngineConfig;
use grasp_sync_testkit::{
    FilterPredicate, MemoryNetwork, RefusalKind, StartKind, StrictAuth, StrictLimits, StrictStats,
    TestRelayConfig,
};
use nostr::{Event, EventId, Filter, JsonUtil, Keys};

use crate::support::{history_settled, repo_network, start_paused_engine, test_config};

/// History of tagged coverage (every filter with a tag condition that is not live and not by
/// ID): served to authenticated connections only. Live subscriptions, exact-ID fetches and
/// the announcements are served to anyone.
fn restricted(filter: &Filter) -> bool {
    filter.limit != Some(0) && filter.ids.is_none() && !filter.generic_tags.is_empty()
}

fn tagged_history_needs_auth() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        auth: Some(StrictAuth::new(FilterPredicate::custom(restricted))),
        ..StrictLimits::default()
    })
}

/// The filter as coverage: no time bounds, and no page size (a live `limit: 0` kept).
fn coverage(filter: &Filter) -> String {
    let mut filter = filter.clone();
    filter.since = None;
    filter.until = None;
    if filter.limit != Some(0) {
        filter.limit = None;
    }
    filter.as_json()
}

/// The coverage of every NEG-OPEN refused for want of authentication.
fn refused_rounds(stats: &StrictStats) -> BTreeSet<String> {
    stats
        .starts
        .iter()
        .filter(|s| s.kind == StartKind::NegOpen && s.refused == Some(RefusalKind::AuthRequired))
        .flat_map(|s| s.filters.iter().map(coverage))
        .collect()
}

/// REQs carrying the coverage of a refused round: a REQ+EOSE fallback.
fn fallback_reqs(stats: &StrictStats) -> Vec<String> {
    let refused = refused_rounds(stats);
    stats
        .req_starts()
        .flat_map(|s| s.filters.iter().map(coverage))
        .filter(|c| refused.contains(c))
        .collect()
}

/// A bootstrap relay listing one repository whose announcement and thread are on a home
/// relay whose tagged history needs authentication; with the announcement and the thread.
fn network() -> (MemoryNetwork, Vec<Event>) {
    let (network, _fixture, thread) = repo_network(tagged_history_needs_auth(), "reconciled-0");
    let urls = network.urls();
    let mut events = network.events(&urls[0]);
    for announcement in &events {
        network.store(&urls[1], announcement.clone());
    }
    events.extend(thread);
    (network, events)
}

/// History by NIP-77 only: a new store's first sync would take it by REQ+EOSE, its first
/// pages on the live groups.
fn config(network: &MemoryNetwork) -> EngineConfig {
    EngineConfig {
        first_sync_by_req: false,
        live_first_page: false,
        ..test_config(&network.urls()[..1])
    }
}

#[tokio::test(start_paused = true)]
async fn a_round_refused_for_auth_is_reconciled_by_nip77_after_authenticating() {
    let (network, events) = network();
    let home = &network.urls()[1];
    network.answer_auth_with(Keys::generate());
    let run = start_paused_engine(&network, config(&network)).await;
    let ids: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
    run.wait_for_store(&ids, Duration::from_secs(600)).await;
    run.settle(home, Duration::from_secs(600)).await;
    let stats = network.stats(home);
    let refused = refused_rounds(&stats);
    assert!(!refused.is_empty(), "no round was refused: {stats:#?}");
    // Each refused round's coverage was reconciled again by NIP-77, once.
    for filter in &refused {
        let opens: Vec<_> = stats
            .starts
            .iter()
            .filter(|s| s.kind == StartKind::NegOpen)
            .filter(|s| s.filters.iter().any(|f| coverage(f) == *filter))
            .collect();
        assert!(
            opens.iter().any(|s| s.refused.is_none()),
            "{filter} not reconciled after AUTH: {opens:#?}"
        );
        assert!(opens.len() <= 2, "{filter} opened {} times", opens.len());
    }
    assert_eq!(
        fallback_reqs(&stats),
        Vec::<String>::new(),
        "fell back to REQ"
    );
    let status = run.relay(home).await.expect("relay status");
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_key_a_round_refused_for_auth_pauses_its_coverage_without_a_fallback() {
    let (network, _) = network();
    let home = &network.urls()[1];
    let run = start_paused_engine(&network, config(&network)).await;
    let settled = run
        .wait_for_relay(home, Duration::from_secs(600), |s| {
            s.paused_filters >= 1 && history_settled(s)
        })
        .await;
    let status = run.relay(home).await.expect("relay status");
    assert!(settled, "{status:#?}");
    let stats = network.stats(home);
    assert!(!refused_rounds(&stats).is_empty(), "{stats:#?}");
    assert_eq!(
        fallback_reqs(&stats),
        Vec::<String>::new(),
        "fell back to REQ"
    );
    assert_eq!(status.auth, "unchallenged", "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    run.engine.shutdown().await;
}
