//! NIP-42 and participant discovery: an index relay or a participant's mailbox relay that
//! reads only to authenticated clients (strfry's read restriction, enforced by the testkit's
//! proxy) refuses the identity query or mailbox probe it gets first. With a key, the refused
//! request is sent again once after the relay accepted the engine's AUTH; when the relay
//! accepts no key, the refusal pauses only that relay's discovery of that kind — neither
//! repository coverage nor the relay.

use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EngineHandle, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RootKind, root};
use grasp_sync_testkit::{
    AuthAccepts, FilterPredicate, RefusalKind, StrictAuth, StrictLimits, TestRelay, TestRelayConfig,
};
use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, start_engine_authenticating, test_config, wait_for_store,
    wait_until,
};

/// A relay whose every read needs an authenticated connection; `accepts` says whose AUTH.
fn reads_need_auth(accepts: AuthAccepts) -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits {
        auth: Some(StrictAuth {
            accepts,
            ..StrictAuth::new(FilterPredicate::custom(|_| true))
        }),
        ..StrictLimits::default()
    })
}

/// A bootstrap relay with one announcement, an index relay with the maintainer's relay list
/// naming `mailbox` as their write relay, and an issue only on `mailbox`.
struct Network {
    bootstrap: TestRelay,
    index: TestRelay,
    mailbox: TestRelay,
    only_on_mailbox: Event,
}

impl Network {
    async fn start(index: TestRelayConfig, mailbox: TestRelayConfig) -> Self {
        let bootstrap = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("bootstrap");
        let index = TestRelay::start(index).await.expect("index");
        let mailbox = TestRelay::start(mailbox).await.expect("mailbox");
        let fixture = RepoFixture::new("guarded");
        let announcement =
            fixture.announcement(&[SERVICE_URL.to_owned(), bootstrap.url()], 1_700_000_000);
        bootstrap
            .seed([announcement])
            .await
            .expect("seed bootstrap");
        let relays = [(
            nostr::RelayUrl::parse(&mailbox.url()).expect("url"),
            Some(RelayMetadata::Write),
        )];
        let list = EventBuilder::relay_list(relays)
            .custom_created_at(Timestamp::from_secs(1_700_000_010))
            .sign_with_keys(&fixture.keys)
            .expect("relay list");
        index.seed([list]).await.expect("seed index");
        let only_on_mailbox = root(
            &fixture.keys,
            RootKind::Issue,
            std::slice::from_ref(&fixture.repo),
            "only on my relay",
            Timestamp::from_secs(1_700_000_100),
        )
        .expect("issue");
        mailbox
            .seed([only_on_mailbox.clone()])
            .await
            .expect("seed mailbox");
        Self {
            bootstrap,
            index,
            mailbox,
            only_on_mailbox,
        }
    }

    /// Engine settings: the index relay, probes and relay-list retries every second or two,
    /// so a discovery pause (5 min at first) is what would keep anything out.
    fn config(&self) -> EngineConfig {
        let mut config = test_config(&[self.bootstrap.url()]);
        config.outbox.index_relays =
            std::iter::once(RelayUrl::parse(&self.index.url()).expect("index")).collect();
        // Long enough that no discovery-only session is closed as idle (after half of it)
        // while a test reads its AUTH state.
        config.outbox.mailbox_probe_interval = Duration::from_secs(60);
        config.outbox.relay_list_refresh = Duration::from_secs(2);
        config.outbox.relay_list_retry = Duration::from_secs(2);
        config
    }
}

fn key(relay: &TestRelay) -> String {
    RelayUrl::parse(&relay.url()).expect("url").to_string()
}

async fn relay_status(engine: &EngineHandle, relay: &TestRelay) -> Option<RelayStatus> {
    engine
        .status()
        .await
        .and_then(|s| s.relays.get(&key(relay)).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_refused_for_auth_is_sent_again_once_the_relay_accepts_ours() {
    let network = Network::start(
        reads_need_auth(AuthAccepts::Anyone),
        reads_need_auth(AuthAccepts::Anyone),
    )
    .await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(&store, network.config(), Keys::generate()).await;
    // Within seconds: a refused query that fell into its discovery pause would wait 5 min.
    let expected = [network.only_on_mailbox.id].into_iter().collect();
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(20)).await;
    let participants = &status.participants;
    assert_eq!(participants.identity_failures, 0, "{participants:?}");
    assert_eq!(participants.mailbox_failures, 0, "{participants:?}");
    assert_eq!(participants.identity_paused_relays, 0, "{participants:?}");
    assert_eq!(participants.mailbox_paused_relays, 0, "{participants:?}");
    for relay in [&network.index, &network.mailbox] {
        // Each relay refused the first discovery request it got, before the AUTH.
        assert!(
            relay.strict_stats().refusals_of(RefusalKind::AuthRequired) >= 1,
            "{:#?}",
            relay.strict_stats()
        );
        let status = relay_status(&engine, relay).await.expect("relay status");
        assert_eq!(status.auth, "authenticated", "{status:#?}");
        assert_eq!(status.health, "healthy", "{status:#?}");
        assert_eq!(status.paused_filters, 0, "{status:#?}");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_query_the_relay_keeps_refusing_pauses_only_its_identity_discovery() {
    let network = Network::start(
        reads_need_auth(AuthAccepts::Nobody),
        TestRelayConfig::default(),
    )
    .await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(&store, network.config(), Keys::generate()).await;
    // Once the AUTH failed, and what that cost is in place.
    let failed = wait_until(Duration::from_secs(20), || async {
        let paused = engine
            .status()
            .await
            .is_some_and(|s| s.participants.identity_paused_relays >= 1);
        let refused = relay_status(&engine, &network.index)
            .await
            .is_some_and(|r| r.auth == "failed");
        paused && refused
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(failed, "no identity pause: {status:#?}");
    assert!(status.participants.identity_failures >= 1, "{status:#?}");
    let index = relay_status(&engine, &network.index)
        .await
        .expect("index status");
    assert_eq!(index.auth, "failed", "{index:#?}");
    // Not repository coverage, not the relay.
    assert_eq!(index.paused_filters, 0, "{index:#?}");
    assert_eq!(index.health, "healthy", "{index:#?}");
    assert!(
        network
            .index
            .strict_stats()
            .refusals_of(RefusalKind::AuthRequired)
            >= 1
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_probe_the_relay_keeps_refusing_pauses_only_its_mailbox_probes() {
    let network = Network::start(
        TestRelayConfig::default(),
        reads_need_auth(AuthAccepts::Nobody),
    )
    .await;
    let store = TestStore::open().await;
    let engine = start_engine_authenticating(&store, network.config(), Keys::generate()).await;
    // Once the AUTH failed, and what that cost is in place.
    let failed = wait_until(Duration::from_secs(20), || async {
        let paused = engine
            .status()
            .await
            .is_some_and(|s| s.participants.mailbox_paused_relays >= 1);
        let refused = relay_status(&engine, &network.mailbox)
            .await
            .is_some_and(|r| r.auth == "failed");
        paused && refused
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(failed, "no mailbox pause: {status:#?}");
    assert!(status.participants.mailbox_failures >= 1, "{status:#?}");
    assert_eq!(status.participants.identity_paused_relays, 0, "{status:#?}");
    let mailbox = relay_status(&engine, &network.mailbox)
        .await
        .expect("mailbox status");
    assert_eq!(mailbox.auth, "failed", "{mailbox:#?}");
    assert_eq!(mailbox.paused_filters, 0, "{mailbox:#?}");
    assert_eq!(mailbox.health, "healthy", "{mailbox:#?}");
    assert_eq!(
        store
            .count_stored(&[network.only_on_mailbox.id].into_iter().collect())
            .await,
        0
    );
    engine.shutdown().await;
}
