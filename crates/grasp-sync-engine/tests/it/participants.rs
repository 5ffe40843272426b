//! Participants' own relays: an event published only to its author's NIP-65 write relay (a
//! relay no announcement lists) is found through the author's kind-10002 list, and a newer
//! list moves the probes to the new relay.

use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EventStore};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RootKind, root};
use grasp_sync_testkit::{
    Dialect, FilterLimit, RefusalKind, StrictLimits, TestRelay, TestRelayConfig,
};
use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, start_engine, test_config, wait_for_store, wait_until,
};

/// A signed kind-10002 list of `relays`, each with its marker.
fn relay_list(keys: &Keys, relays: &[(String, Option<RelayMetadata>)], created_at: u64) -> Event {
    let relays = relays
        .iter()
        .map(|(url, marker)| (nostr::RelayUrl::parse(url).expect("relay url"), *marker));
    EventBuilder::relay_list(relays)
        .custom_created_at(Timestamp::from_secs(created_at))
        .sign_with_keys(keys)
        .expect("relay list")
}

/// An issue by `author` on `fixture`'s repository.
fn issue(author: &Keys, fixture: &RepoFixture, content: &str, created_at: u64) -> Event {
    root(
        author,
        RootKind::Issue,
        std::slice::from_ref(&fixture.repo),
        content,
        Timestamp::from_secs(created_at),
    )
    .expect("issue")
}

fn outbox_config(bootstrap: &[String], index: &[String]) -> EngineConfig {
    let mut config = test_config(bootstrap);
    config.outbox.index_relays = index
        .iter()
        .map(|u| RelayUrl::parse(u).expect("index relay"))
        .collect();
    config.outbox.mailbox_probe_interval = Duration::from_secs(1);
    config.outbox.relay_list_refresh = Duration::from_secs(2);
    config.outbox.relay_list_retry = Duration::from_secs(2);
    config
}

fn relay_key(url: &str) -> String {
    RelayUrl::parse(url).expect("url").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_only_on_the_maintainers_write_relay_is_found_through_an_index_relay() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let index = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("index");
    let outbox = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("outbox");
    let fixture = RepoFixture::new("mailbox");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), bootstrap.url()], 1_700_000_000);
    bootstrap
        .seed([announcement])
        .await
        .expect("seed bootstrap");
    let list = relay_list(
        &fixture.keys,
        &[(outbox.url(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    index.seed([list.clone()]).await.expect("seed index");
    let only_there = issue(&fixture.keys, &fixture, "only on my relay", 1_700_000_100);
    outbox
        .seed([only_there.clone()])
        .await
        .expect("seed outbox");

    let store = TestStore::open().await;
    let engine = start_engine(&store, outbox_config(&[bootstrap.url()], &[index.url()])).await;
    let expected = [only_there.id].into_iter().collect();
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    let mailbox = status
        .relays
        .get(&relay_key(&outbox.url()))
        .unwrap_or_else(|| panic!("the mailbox relay is tracked: {status:#?}"));
    assert_eq!(
        mailbox.live_subscriptions, 0,
        "a mailbox-only relay gets no live subscription: {status:#?}"
    );
    let participants = &status.participants;
    assert!(participants.participants >= 1, "{participants:?}");
    assert!(participants.relay_lists >= 1, "{participants:?}");
    assert_eq!(participants.mailbox_relays, 1, "{participants:?}");
    assert!(participants.mailbox_probes >= 1, "{participants:?}");
    // The relay list itself is neither stored nor offered to the store's policy.
    assert!(!store.store.contains(&list.id).await.expect("contains"));
    assert_eq!(
        store.store.rejection_reason(&list.id).expect("reason"),
        None
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contributor_whose_relay_list_changes_is_followed_to_the_new_relay() {
    let listed = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("listed");
    let first_home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("first home");
    let second_home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("second home");
    let fixture = RepoFixture::new("moving-contributor");
    let contributor = Keys::generate();
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), listed.url()], 1_700_000_000);
    let first_issue = issue(
        &contributor,
        &fixture,
        "posted where the repo lives",
        1_700_000_100,
    );
    listed
        .seed([
            announcement,
            first_issue.clone(),
            relay_list(&contributor, &[(first_home.url(), None)], 1_700_000_050),
        ])
        .await
        .expect("seed listed");
    let second_issue = issue(
        &contributor,
        &fixture,
        "posted at my first home",
        1_700_000_200,
    );
    first_home
        .seed([second_issue.clone()])
        .await
        .expect("seed first home");
    let third_issue = issue(
        &contributor,
        &fixture,
        "posted at my second home",
        1_700_000_300,
    );
    second_home
        .seed([third_issue.clone()])
        .await
        .expect("seed second home");

    let store = TestStore::open().await;
    // History by REQ+EOSE keeps the listed relay's first sync short; discovery waits for it.
    let config = EngineConfig {
        first_sync_by_req: true,
        ..outbox_config(&[listed.url()], &[])
    };
    let engine = start_engine(&store, config).await;
    let expected = [first_issue.id, second_issue.id].into_iter().collect();
    wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    assert_eq!(second_home.websocket_connections_accepted(), 0);

    // A newer list names only the second home.
    listed
        .seed([relay_list(
            &contributor,
            &[(second_home.url(), Some(RelayMetadata::Write))],
            1_700_000_250,
        )])
        .await
        .expect("seed newer list");
    let expected = [third_issue.id].into_iter().collect();
    wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    let first_key = relay_key(&first_home.url());
    let left = wait_until(Duration::from_secs(10), || async {
        !engine
            .status()
            .await
            .expect("status")
            .relays
            .contains_key(&first_key)
    })
    .await;
    assert!(left, "the old home is no longer tracked");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_only_relay_is_closed_between_probes_and_dialled_again_for_the_next() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let outbox = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("outbox");
    let fixture = RepoFixture::new("closed-between-probes");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), bootstrap.url()], 1_700_000_000);
    let list = relay_list(
        &fixture.keys,
        &[(outbox.url(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    bootstrap
        .seed([announcement, list])
        .await
        .expect("seed bootstrap");
    let first = issue(
        &fixture.keys,
        &fixture,
        "first, only on my relay",
        1_700_000_100,
    );
    outbox.seed([first.clone()]).await.expect("seed outbox");

    let store = TestStore::open().await;
    let mut config = outbox_config(&[bootstrap.url()], &[]);
    config.outbox.mailbox_probe_interval = Duration::from_secs(3);
    let engine = start_engine(&store, config).await;
    let expected = [first.id].into_iter().collect();
    wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    // Nothing left to do there until the next probe: the connection is closed.
    let closed = wait_until(Duration::from_secs(10), || async {
        outbox.open_websocket_connections() == 0
    })
    .await;
    assert!(
        closed,
        "the mailbox-only connection stays open between probes"
    );
    let accepted = outbox.websocket_connections_accepted();
    // The next probe dials again and finds what was published since.
    // Probes after the first ask from the last one's start (minus an overlap): a new event.
    let second = issue(
        &fixture.keys,
        &fixture,
        "second, only on my relay",
        Timestamp::now().as_secs(),
    );
    outbox.publish(second.clone()).await.expect("publish");
    let expected = [first.id, second.id].into_iter().collect();
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    assert!(
        outbox.websocket_connections_accepted() > accepted,
        "{status:#?}"
    );
    let mailbox = &status.relays[&relay_key(&outbox.url())];
    assert_eq!(mailbox.live_subscriptions, 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_probe_refused_for_its_filter_count_is_asked_again_within_the_learned_ceiling() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    // A relay that takes one filter per REQ and does not say so.
    let outbox = TestRelay::start(TestRelayConfig::strict(StrictLimits {
        filters_per_req: Some(FilterLimit {
            max: 1,
            dialect: Dialect::Strfry,
            advertised: false,
        }),
        ..StrictLimits::default()
    }))
    .await
    .expect("outbox");
    let fixture = RepoFixture::new("probe-over-the-cap");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), bootstrap.url()], 1_700_000_000);
    let list = relay_list(
        &fixture.keys,
        &[(outbox.url(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    let on_listed = issue(
        &fixture.keys,
        &fixture,
        "on the repository's relay",
        1_700_000_050,
    );
    bootstrap
        .seed([announcement, list, on_listed.clone()])
        .await
        .expect("seed bootstrap");
    let only_there = issue(&fixture.keys, &fixture, "only on my relay", 1_700_000_100);
    outbox
        .seed([only_there.clone()])
        .await
        .expect("seed outbox");

    let store = TestStore::open().await;
    let mut config = outbox_config(&[bootstrap.url()], &[]);
    config.outbox.mailbox_probe_interval = Duration::from_secs(60);
    let engine = start_engine(&store, config).await;
    // Within seconds: a probe whose refusal cost the mailbox pause would wait 5 minutes.
    let expected = [on_listed.id, only_there.id].into_iter().collect();
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    assert!(
        outbox
            .strict_stats()
            .refusals_of(RefusalKind::TooManyFilters)
            >= 1,
        "the probe never went over the cap: {:#?}",
        outbox.strict_stats()
    );
    assert_eq!(status.participants.mailbox_paused_relays, 0, "{status:#?}");
    engine.shutdown().await;
}
