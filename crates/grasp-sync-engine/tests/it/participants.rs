//! Participants' own relays: an event published only to its author's NIP-65 write relay (a
//! relay no announcement lists) is found through the author's kind-10002 list, and a newer
//! list moves the probes to the new relay; on paused time over memory relays.

use std::time::Duration;

use grasp_sync_engine::{EngineConfig, EventStore};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RootKind, root};
use grasp_sync_testkit::{Dialect, FilterLimit, RefusalKind, StrictLimits, TestRelayConfig};
use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, Keys, Timestamp};

use crate::support::{
    BOOTSTRAP, RepoFixture, SERVICE_URL, memory_network, start_paused_engine, test_config,
    wait_until,
};

/// The relay holding a maintainer's or contributor's events and nothing a repository lists.
const OUTBOX: &str = "ws://outbox.memory";

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

#[tokio::test(start_paused = true)]
async fn issue_only_on_the_maintainers_write_relay_is_found_through_an_index_relay() {
    const INDEX: &str = "ws://index.memory";
    let fixture = RepoFixture::new("mailbox");
    let announcement = fixture.announcement(
        &[SERVICE_URL.to_owned(), BOOTSTRAP.to_owned()],
        1_700_000_000,
    );
    let list = relay_list(
        &fixture.keys,
        &[(OUTBOX.to_owned(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    let only_there = issue(&fixture.keys, &fixture, "only on my relay", 1_700_000_100);
    let network = memory_network(vec![
        (BOOTSTRAP, TestRelayConfig::default(), vec![announcement]),
        (INDEX, TestRelayConfig::default(), vec![list.clone()]),
        (OUTBOX, TestRelayConfig::default(), vec![only_there.clone()]),
    ]);
    let urls = network.urls();

    let run = start_paused_engine(&network, outbox_config(&urls[..1], &urls[1..2])).await;
    let expected = [only_there.id].into_iter().collect();
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    let mailbox = status
        .relays
        .get(&urls[2])
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
    assert!(!run.store.contains(&list.id).await.expect("contains"));
    assert_eq!(run.store.rejection_reason(&list.id).expect("reason"), None);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_contributor_whose_relay_list_changes_is_followed_to_the_new_relay() {
    const LISTED: &str = "ws://listed.memory";
    const FIRST_HOME: &str = "ws://first-home.memory";
    const SECOND_HOME: &str = "ws://second-home.memory";
    let fixture = RepoFixture::new("moving-contributor");
    let contributor = Keys::generate();
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), LISTED.to_owned()], 1_700_000_000);
    let first_issue = issue(
        &contributor,
        &fixture,
        "posted where the repo lives",
        1_700_000_100,
    );
    let second_issue = issue(
        &contributor,
        &fixture,
        "posted at my first home",
        1_700_000_200,
    );
    let third_issue = issue(
        &contributor,
        &fixture,
        "posted at my second home",
        1_700_000_300,
    );
    let network = memory_network(vec![
        (
            LISTED,
            TestRelayConfig::default(),
            vec![
                announcement,
                first_issue.clone(),
                relay_list(
                    &contributor,
                    &[(FIRST_HOME.to_owned(), None)],
                    1_700_000_050,
                ),
            ],
        ),
        (
            FIRST_HOME,
            TestRelayConfig::default(),
            vec![second_issue.clone()],
        ),
        (
            SECOND_HOME,
            TestRelayConfig::default(),
            vec![third_issue.clone()],
        ),
    ]);
    let urls = network.urls();
    let (listed, first_home, second_home) = (&urls[0], &urls[1], &urls[2]);

    // History by REQ+EOSE keeps the listed relay's first sync short; discovery waits for it.
    let config = EngineConfig {
        first_sync_by_req: true,
        ..outbox_config(&urls[..1], &[])
    };
    let run = start_paused_engine(&network, config).await;
    let expected = [first_issue.id, second_issue.id].into_iter().collect();
    run.wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert_eq!(network.stats(second_home).connections(), 0);

    // A newer list names only the second home (stored on the relay, sent to nobody).
    network.store(
        listed,
        relay_list(
            &contributor,
            &[(SECOND_HOME.to_owned(), Some(RelayMetadata::Write))],
            1_700_000_250,
        ),
    );
    let expected = [third_issue.id].into_iter().collect();
    run.wait_for_store(&expected, Duration::from_secs(600))
        .await;
    let left = wait_until(Duration::from_secs(600), || async {
        !run.engine
            .status()
            .await
            .expect("status")
            .relays
            .contains_key(first_home)
    })
    .await;
    assert!(left, "the old home is no longer tracked");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_mailbox_only_relay_is_closed_between_probes_and_dialled_again_for_the_next() {
    let fixture = RepoFixture::new("closed-between-probes");
    let announcement = fixture.announcement(
        &[SERVICE_URL.to_owned(), BOOTSTRAP.to_owned()],
        1_700_000_000,
    );
    let list = relay_list(
        &fixture.keys,
        &[(OUTBOX.to_owned(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    let first = issue(
        &fixture.keys,
        &fixture,
        "first, only on my relay",
        1_700_000_100,
    );
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![announcement, list],
        ),
        (OUTBOX, TestRelayConfig::default(), vec![first.clone()]),
    ]);
    let urls = network.urls();
    let outbox = &urls[1];

    let mut config = outbox_config(&urls[..1], &[]);
    config.outbox.mailbox_probe_interval = Duration::from_secs(3);
    let run = start_paused_engine(&network, config).await;
    let expected = [first.id].into_iter().collect();
    run.wait_for_store(&expected, Duration::from_secs(600))
        .await;
    // Nothing left to do there until the next probe: the connection is closed.
    let closed = wait_until(Duration::from_secs(600), || async {
        network.open_connections(outbox) == 0
    })
    .await;
    assert!(
        closed,
        "the mailbox-only connection stays open between probes"
    );
    let accepted = network.stats(outbox).connections();
    // The next probe dials again and finds what was published since.
    // Probes after the first ask from the last one's start (minus an overlap): a new event.
    let second = issue(
        &fixture.keys,
        &fixture,
        "second, only on my relay",
        run.unix_now().as_secs(),
    );
    network.publish(outbox, second.clone());
    let expected = [first.id, second.id].into_iter().collect();
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert!(
        network.stats(outbox).connections() > accepted,
        "{status:#?}"
    );
    let mailbox = &status.relays[outbox];
    assert_eq!(mailbox.live_subscriptions, 0, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_mailbox_probe_refused_for_its_filter_count_is_asked_again_within_the_learned_ceiling() {
    // A relay that takes one filter per REQ and does not say so.
    let outbox_config_strict = TestRelayConfig::strict(StrictLimits {
        filters_per_req: Some(FilterLimit {
            max: 1,
            dialect: Dialect::Strfry,
            advertised: false,
        }),
        ..StrictLimits::default()
    });
    let fixture = RepoFixture::new("probe-over-the-cap");
    let announcement = fixture.announcement(
        &[SERVICE_URL.to_owned(), BOOTSTRAP.to_owned()],
        1_700_000_000,
    );
    let list = relay_list(
        &fixture.keys,
        &[(OUTBOX.to_owned(), Some(RelayMetadata::Write))],
        1_700_000_010,
    );
    let on_listed = issue(
        &fixture.keys,
        &fixture,
        "on the repository's relay",
        1_700_000_050,
    );
    let only_there = issue(&fixture.keys, &fixture, "only on my relay", 1_700_000_100);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![announcement, list, on_listed.clone()],
        ),
        (OUTBOX, outbox_config_strict, vec![only_there.clone()]),
    ]);
    let urls = network.urls();
    let outbox = &urls[1];

    let mut config = outbox_config(&urls[..1], &[]);
    config.outbox.mailbox_probe_interval = Duration::from_secs(60);
    let run = start_paused_engine(&network, config).await;
    // Within seconds: a probe whose refusal cost the mailbox pause would wait 5 minutes.
    let expected = [on_listed.id, only_there.id].into_iter().collect();
    let status = run.wait_for_store(&expected, Duration::from_secs(30)).await;
    assert!(
        network
            .stats(outbox)
            .refusals_of(RefusalKind::TooManyFilters)
            >= 1,
        "the probe never went over the cap: {:#?}",
        network.stats(outbox)
    );
    assert_eq!(status.participants.mailbox_paused_relays, 0, "{status:#?}");
    run.engine.shutdown().await;
}
