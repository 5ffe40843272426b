//! NIP-42 and participant discovery: an index relay or a participant's mailbox relay that
//! reads only to authenticated clients (strfry's read restriction, enforced by the testkit's
//! proxy) refuses the identity query or mailbox probe it gets first. With a key, the refused
//! request is sent again once after the relay accepted the engine's AUTH; when the relay
//! accepts no key, the refusal pauses only that relay's discovery of that kind — neither
//! repository coverage nor the relay. On paused time over memory relays, which answer the
//! relays' challenges with the engine's key.

use std::time::Duration;

use grasp_sync_engine::{EngineConfig, RelayStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RootKind, root};
use grasp_sync_testkit::{
    AuthAccepts, FilterPredicate, MemoryNetwork, RefusalKind, StrictAuth, StrictLimits,
    TestRelayConfig,
};
use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, Keys, Timestamp};

use crate::support::{
    BOOTSTRAP, PausedEngine, RepoFixture, SERVICE_URL, memory_network, start_paused_engine,
    test_config, wait_until,
};

const INDEX: &str = "ws://index.memory";
const MAILBOX: &str = "ws://mailbox.memory";

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
/// naming the mailbox relay as their write relay, and an issue only on the mailbox relay.
struct Network {
    relays: MemoryNetwork,
    bootstrap: String,
    index: String,
    mailbox: String,
    only_on_mailbox: Event,
}

impl Network {
    fn new(index: TestRelayConfig, mailbox: TestRelayConfig) -> Self {
        let fixture = RepoFixture::new("guarded");
        let announcement = fixture.announcement(
            &[SERVICE_URL.to_owned(), BOOTSTRAP.to_owned()],
            1_700_000_000,
        );
        let relays = [(
            nostr::RelayUrl::parse(MAILBOX).expect("url"),
            Some(RelayMetadata::Write),
        )];
        let list = EventBuilder::relay_list(relays)
            .custom_created_at(Timestamp::from_secs(1_700_000_010))
            .sign_with_keys(&fixture.keys)
            .expect("relay list");
        let only_on_mailbox = root(
            &fixture.keys,
            RootKind::Issue,
            std::slice::from_ref(&fixture.repo),
            "only on my relay",
            Timestamp::from_secs(1_700_000_100),
        )
        .expect("issue");
        let relays = memory_network(vec![
            (BOOTSTRAP, TestRelayConfig::default(), vec![announcement]),
            (INDEX, index, vec![list]),
            (MAILBOX, mailbox, vec![only_on_mailbox.clone()]),
        ]);
        let urls = relays.urls();
        Self {
            bootstrap: urls[0].clone(),
            index: urls[1].clone(),
            mailbox: urls[2].clone(),
            relays,
            only_on_mailbox,
        }
    }

    /// Engine settings: the index relay, probes and relay-list retries every second or two,
    /// so a discovery pause (5 min at first) is what would keep anything out.
    fn config(&self) -> EngineConfig {
        let mut config = test_config(std::slice::from_ref(&self.bootstrap));
        config.outbox.index_relays =
            std::iter::once(RelayUrl::parse(&self.index).expect("index")).collect();
        // Long enough that no discovery-only session is closed as idle (after half of it)
        // while a test reads its AUTH state.
        config.outbox.mailbox_probe_interval = Duration::from_secs(60);
        config.outbox.relay_list_refresh = Duration::from_secs(2);
        config.outbox.relay_list_retry = Duration::from_secs(2);
        config
    }

    /// The engine over the network, answering challenges with a fresh key.
    async fn start_authenticating(&self) -> PausedEngine {
        self.relays.answer_auth_with(Keys::generate());
        start_paused_engine(&self.relays, self.config()).await
    }
}

#[tokio::test(start_paused = true)]
async fn discovery_refused_for_auth_is_sent_again_once_the_relay_accepts_ours() {
    let network = Network::new(
        reads_need_auth(AuthAccepts::Anyone),
        reads_need_auth(AuthAccepts::Anyone),
    );
    let run = network.start_authenticating().await;
    // Within seconds: a refused query that fell into its discovery pause would wait 5 min.
    let expected = [network.only_on_mailbox.id].into_iter().collect();
    let status = run.wait_for_store(&expected, Duration::from_secs(20)).await;
    let participants = &status.participants;
    assert_eq!(participants.identity_failures, 0, "{participants:?}");
    assert_eq!(participants.mailbox_failures, 0, "{participants:?}");
    assert_eq!(participants.identity_paused_relays, 0, "{participants:?}");
    assert_eq!(participants.mailbox_paused_relays, 0, "{participants:?}");
    for relay in [&network.index, &network.mailbox] {
        // Each relay refused the first discovery request it got, before the AUTH.
        let stats = network.relays.stats(relay);
        assert!(
            stats.refusals_of(RefusalKind::AuthRequired) >= 1,
            "{stats:#?}"
        );
        let status: RelayStatus = run.relay(relay).await.expect("relay status");
        assert_eq!(status.auth, "authenticated", "{status:#?}");
        assert_eq!(status.health, "healthy", "{status:#?}");
        assert_eq!(status.paused_filters, 0, "{status:#?}");
    }
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_identity_query_the_relay_keeps_refusing_pauses_only_its_identity_discovery() {
    let network = Network::new(
        reads_need_auth(AuthAccepts::Nobody),
        TestRelayConfig::default(),
    );
    let run = network.start_authenticating().await;
    // Once the AUTH failed, and what that cost is in place.
    let failed = wait_until(Duration::from_secs(20), || async {
        let paused = run
            .engine
            .status()
            .await
            .is_some_and(|s| s.participants.identity_paused_relays >= 1);
        let refused = run
            .relay(&network.index)
            .await
            .is_some_and(|r| r.auth == "failed");
        paused && refused
    })
    .await;
    let status = run.engine.status().await.expect("status");
    assert!(failed, "no identity pause: {status:#?}");
    assert!(status.participants.identity_failures >= 1, "{status:#?}");
    let index = run.relay(&network.index).await.expect("index status");
    assert_eq!(index.auth, "failed", "{index:#?}");
    // Not repository coverage, not the relay.
    assert_eq!(index.paused_filters, 0, "{index:#?}");
    assert_eq!(index.health, "healthy", "{index:#?}");
    assert!(
        network
            .relays
            .stats(&network.index)
            .refusals_of(RefusalKind::AuthRequired)
            >= 1
    );
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_mailbox_probe_the_relay_keeps_refusing_pauses_only_its_mailbox_probes() {
    let network = Network::new(
        TestRelayConfig::default(),
        reads_need_auth(AuthAccepts::Nobody),
    );
    let run = network.start_authenticating().await;
    // Once the AUTH failed, and what that cost is in place.
    let failed = wait_until(Duration::from_secs(20), || async {
        let paused = run
            .engine
            .status()
            .await
            .is_some_and(|s| s.participants.mailbox_paused_relays >= 1);
        let refused = run
            .relay(&network.mailbox)
            .await
            .is_some_and(|r| r.auth == "failed");
        paused && refused
    })
    .await;
    let status = run.engine.status().await.expect("status");
    assert!(failed, "no mailbox pause: {status:#?}");
    assert!(status.participants.mailbox_failures >= 1, "{status:#?}");
    assert_eq!(status.participants.identity_paused_relays, 0, "{status:#?}");
    let mailbox = run.relay(&network.mailbox).await.expect("mailbox status");
    assert_eq!(mailbox.auth, "failed", "{mailbox:#?}");
    assert_eq!(mailbox.paused_filters, 0, "{mailbox:#?}");
    assert_eq!(mailbox.health, "healthy", "{mailbox:#?}");
    assert_eq!(
        run.count_stored(&[network.only_on_mailbox.id].into_iter().collect())
            .await,
        0
    );
    run.engine.shutdown().await;
}
