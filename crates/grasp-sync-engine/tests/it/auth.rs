//! NIP-42 end to end: a relay that requires authentication for reads (the rust-nostr relay
//! builder's NIP-42 read mode) serves an engine that holds a key; without a key, or where
//! coverage stays refused after authenticating, an `auth-required:` refusal pauses only the
//! refused coverage, not the relay, and is never retried in a loop. On paused time over memory
//! relays, which answer the relay's challenges with the engine's key when it holds one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use grasp_sync_testkit::nip34::{KIND_ISSUE, KIND_REPO_ANNOUNCEMENT, ThreadTag, reply};
use grasp_sync_testkit::{
    FilterPredicate, MemoryNetwork, PolicyRule, RefusalKind, RelayAuth, StrictLimits,
    TestRelayConfig,
};
use nostr::{Event, EventId, Keys, TagKind};

use crate::support::{
    BOOTSTRAP, HOME, PausedEngine, RepoFixture, SERVICE_URL, history_settled, ids, memory_network,
    start_paused_engine, test_config,
};

/// The text of a relay that serves quotes to authenticated members only.
const QUOTES_NEED_AUTH: &str = "auth-required: quotes are for members";

/// A bootstrap relay (no authentication) listing repositories whose events are all on the
/// home relay.
struct Network {
    relays: MemoryNetwork,
    home: String,
    events: Vec<Event>,
}

impl Network {
    fn new(home: TestRelayConfig) -> Self {
        let mut events = Vec::new();
        let mut announcements = Vec::new();
        for n in 0..2u64 {
            let fixture = RepoFixture::new(&format!("repo-{n}"));
            let announcement =
                fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
            announcements.push(announcement.clone());
            events.push(announcement);
            events.extend(fixture.thread(1_700_000_100 + n * 100));
        }
        let relays = memory_network(vec![
            (BOOTSTRAP, TestRelayConfig::default(), announcements),
            (HOME, home, events.clone()),
        ]);
        Self {
            home: relays.urls()[1].clone(),
            relays,
            events,
        }
    }

    /// The engine over the network; answering challenges with a fresh key when `key`.
    async fn start(&self, key: bool) -> PausedEngine {
        if key {
            self.relays.answer_auth_with(Keys::generate());
        }
        start_paused_engine(&self.relays, test_config(&self.relays.urls()[..1])).await
    }

    fn issue(&self) -> &Event {
        self.events
            .iter()
            .find(|e| e.kind.as_u16() == KIND_ISSUE)
            .expect("an issue")
    }

    /// Publishes a fresh reply to the first issue on the home relay and waits 10 virtual
    /// seconds at most for the store to hold it: long before a retry or the paced catch-up
    /// would run, so only live coverage brings it.
    async fn live_reply_arrives(&self, run: &PausedEngine) {
        let fresh = reply(
            &Keys::generate(),
            self.issue(),
            ThreadTag::LowerE,
            "live",
            run.unix_now(),
        )
        .expect("reply");
        self.relays.publish(&self.home, fresh.clone());
        run.wait_for_store(&ids(&[fresh]), Duration::from_secs(10))
            .await;
    }
}

fn auth_reads() -> TestRelayConfig {
    TestRelayConfig {
        auth: RelayAuth::Reads,
        ..TestRelayConfig::default()
    }
}

/// A relay that refuses every `#q` filter with `auth-required:`, whether or not the client
/// authenticated; `auth` says whether the relay itself requires authentication for reads.
fn quotes_refused(auth: RelayAuth) -> TestRelayConfig {
    TestRelayConfig {
        auth,
        ..TestRelayConfig::strict(StrictLimits {
            policies: vec![PolicyRule::new(FilterPredicate::Tag('q'), QUOTES_NEED_AUTH)],
            ..StrictLimits::default()
        })
    }
}

/// Whether the event is reachable only through a `#q` filter.
fn quote_only(event: &Event) -> bool {
    event.kind.as_u16() != KIND_REPO_ANNOUNCEMENT
        && !event.tags.iter().any(|tag| {
            matches!(tag.kind(), TagKind::SingleLetter(letter)
                if matches!(letter.as_char(), 'a' | 'A' | 'e' | 'E'))
        })
}

/// Refused REQ starts by filter (time bounds and limit removed): how often each refused
/// filter was sent, alone or beside others.
fn refused_sends_by_filter(network: &Network) -> BTreeMap<String, usize> {
    let mut by_filter = BTreeMap::new();
    for start in network.relays.stats(&network.home).req_starts() {
        if start.refused != Some(RefusalKind::Policy) {
            continue;
        }
        for filter in &start.filters {
            if !FilterPredicate::Tag('q').matches(filter) {
                continue;
            }
            let mut filter = filter.clone();
            filter.since = None;
            filter.until = None;
            filter.limit = None;
            *by_filter
                .entry(nostr::JsonUtil::as_json(&filter))
                .or_default() += 1;
        }
    }
    by_filter
}

#[tokio::test(start_paused = true)]
async fn a_relay_requiring_auth_serves_an_engine_holding_a_key() {
    let network = Network::new(auth_reads());
    let run = network.start(true).await;
    let key = &network.home;
    run.wait_for_store(&ids(&network.events), Duration::from_secs(600))
        .await;
    assert!(
        run.wait_for_relay(key, Duration::from_secs(600), |status| {
            history_settled(status) && status.connection == "connected"
        })
        .await,
        "history was not confirmed: {:#?}",
        run.relay(key).await
    );
    let status = run.relay(key).await.expect("relay status");
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "{status:#?}");
    assert_eq!(status.paused_filters, 0, "{status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    // Live coverage was sent after authenticating too.
    network.live_reply_arrives(&run).await;
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_key_auth_required_pauses_only_the_refused_coverage() {
    let network = Network::new(quotes_refused(RelayAuth::Off));
    let run = network.start(false).await;
    let key = &network.home;
    // A relay-wide pause (24 h) would leave all of this out of the store.
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    assert!(!quotes.is_empty());
    run.wait_for_store(&reachable, Duration::from_secs(600))
        .await;
    assert_eq!(
        run.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    let status = run.relay(key).await.expect("relay status");
    assert!(status.paused_filters >= 1, "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    assert_eq!(status.auth, "unchallenged", "{status:#?}");
    let refusals = network.relays.stats(key).refusals_of(RefusalKind::Policy);
    assert!(refusals >= 1);
    assert_eq!(
        status.refusals.get("auth_required").copied(),
        Some(refusals),
        "each refusal is counted once: {status:#?}"
    );

    // Live coverage of what was not refused keeps working, and nothing refused is sent again.
    network.live_reply_arrives(&run).await;
    assert_eq!(
        network.relays.stats(key).refusals_of(RefusalKind::Policy),
        refusals,
        "a refused filter was sent again"
    );
    let status = run.relay(key).await.expect("relay status");
    assert_eq!(status.health, "healthy", "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn coverage_refused_after_authenticating_is_retried_once_then_paused() {
    let network = Network::new(quotes_refused(RelayAuth::Reads));
    let run = network.start(true).await;
    let key = &network.home;
    let reachable: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| !quote_only(e))
        .map(|e| e.id)
        .collect();
    let quotes: BTreeSet<EventId> = network
        .events
        .iter()
        .filter(|e| quote_only(e))
        .map(|e| e.id)
        .collect();
    run.wait_for_store(&reachable, Duration::from_secs(600))
        .await;
    assert_eq!(
        run.count_stored(&quotes).await,
        0,
        "refused coverage was fetched"
    );
    assert!(
        run.wait_for_relay(key, Duration::from_secs(600), |r| r.paused_filters >= 1)
            .await,
        "refused coverage was not paused: {:#?}",
        run.relay(key).await
    );
    let status = run.relay(key).await.expect("relay status");
    assert_eq!(status.auth, "authenticated", "{status:#?}");
    assert_eq!(status.health, "healthy", "the relay is paused: {status:#?}");
    assert_eq!(status.connections, 1, "{status:#?}");
    let before = refused_sends_by_filter(&network);
    assert!(!before.is_empty());
    // Each refused filter went out at most three times: before the session authenticated, its
    // one retry after, and once alone if it shared a request (the policy refusal's suspects).
    for (filter, sends) in &before {
        assert!(*sends <= 3, "{filter} sent {sends} times: {before:#?}");
    }

    // Live coverage works; no refused filter is sent again.
    network.live_reply_arrives(&run).await;
    assert_eq!(
        refused_sends_by_filter(&network),
        before,
        "refused coverage was retried again"
    );
    run.engine.shutdown().await;
}
