//! Discovery: which relays the engine connects to, driven only by announcements the store
//! accepted.

use std::time::Duration;

use grasp_sync_testkit::{MemoryNetwork, SimulatedRelay, TestRelay, TestRelayConfig};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, ids, start_engine, start_paused_engine, test_config,
    wait_for_store, wait_until,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcement_listing_us_leads_to_its_relay_and_every_tag_style_lands() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let relay_b = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay b");
    let fixture = RepoFixture::new("listed");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), relay_b.url()], 1_700_000_000);
    bootstrap
        .seed([announcement.clone()])
        .await
        .expect("seed bootstrap");
    let thread = fixture.thread(1_700_000_100);
    relay_b.seed(thread.clone()).await.expect("seed b");

    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    let mut expected = ids(&thread);
    expected.insert(announcement.id);
    let status = wait_for_store(&store, &engine, &expected, Duration::from_secs(30)).await;
    assert!(relay_b.websocket_connections_accepted() >= 1);
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcement_not_listing_us_is_rejected_and_causes_no_connection() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let unlisted_relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay c");
    let listed_relay = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay b");
    let stranger = RepoFixture::new("stranger");
    let foreign = stranger.announcement(&[unlisted_relay.url()], 1_700_000_000);
    let ours = RepoFixture::new("ours");
    let listed = ours.announcement(&[SERVICE_URL.to_owned(), listed_relay.url()], 1_700_000_000);
    bootstrap
        .seed([foreign.clone(), listed.clone()])
        .await
        .expect("seed");
    unlisted_relay
        .seed(stranger.thread(1_700_000_100))
        .await
        .expect("seed c");

    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    // The listed relay being reached proves discovery ran past the point where the foreign
    // announcement was seen.
    let reached = wait_until(Duration::from_secs(30), || async {
        listed_relay.websocket_connections_accepted() >= 1
    })
    .await;
    assert!(reached, "the listed relay was never dialled");
    let rejected = wait_until(Duration::from_secs(10), || async {
        store
            .store
            .rejection_reason(&foreign.id)
            .ok()
            .flatten()
            .is_some()
    })
    .await;
    assert!(
        rejected,
        "the foreign announcement was not rejected by the store"
    );
    // A rejected announcement never enters the index, so its relay is not even tracked.
    let status = engine.status().await.expect("status");
    let unlisted = grasp_sync_model::RelayUrl::parse(&unlisted_relay.url())
        .expect("url")
        .to_string();
    assert!(!status.relays.contains_key(&unlisted), "{status:#?}");
    assert_eq!(unlisted_relay.websocket_connections_accepted(), 0);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_announcement_moves_coverage_and_older_changes_nothing() {
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let old_home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("old");
    let new_home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("new");
    let stale_home = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("stale");
    let fixture = RepoFixture::new("moving");
    let first = fixture.announcement(&[SERVICE_URL.to_owned(), old_home.url()], 1_700_000_000);
    bootstrap.seed([first]).await.expect("seed");
    let thread = fixture.thread(1_700_000_100);
    new_home.seed(thread.clone()).await.expect("seed new home");

    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    assert!(
        wait_until(Duration::from_secs(30), || async {
            old_home.websocket_connections_accepted() >= 1
        })
        .await,
        "the first home was never dialled"
    );

    // An older announcement listing another relay changes nothing; a newer one moves coverage.
    let older = fixture.announcement(&[SERVICE_URL.to_owned(), stale_home.url()], 1_600_000_000);
    let newer = fixture.announcement(&[SERVICE_URL.to_owned(), new_home.url()], 1_700_000_500);
    bootstrap.publish(older).await.expect("publish older");
    bootstrap.publish(newer).await.expect("publish newer");
    let expected = ids(&thread);
    let moved = wait_until(Duration::from_secs(30), || async {
        store.count_stored(&expected).await == expected.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(moved, "events on the new home did not arrive: {status:#?}");
    assert_eq!(
        stale_home.websocket_connections_accepted(),
        0,
        "an older announcement moved coverage"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_dials_only_the_bootstrap_relays_it_owns() {
    use grasp_sync_model::{RelayUrl, Shard};

    // Ports are the system's choice: start relays until each shard of two owns one.
    let mut by_shard: [Option<(TestRelay, nostr::Event)>; 2] = [None, None];
    for attempt in 0..32 {
        if by_shard.iter().all(Option::is_some) {
            break;
        }
        let relay = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("relay");
        let owner = Shard::owner_of(&RelayUrl::parse(&relay.url()).expect("url"), 2);
        let slot = &mut by_shard[usize::from(owner)];
        if slot.is_none() {
            let fixture = RepoFixture::new(&format!("repo-{attempt}"));
            let announcement = fixture.announcement(&[SERVICE_URL.to_owned()], 1_700_000_000);
            relay.seed([announcement.clone()]).await.expect("seed");
            *slot = Some((relay, announcement));
        }
    }
    let [Some((mine, ours)), Some((theirs, their_announcement))] = by_shard else {
        panic!("no relay of each shard in 32 tries");
    };

    let store = TestStore::open().await;
    let mut config = test_config(&[theirs.url(), mine.url()]);
    config.tracking.shard = Shard::new(0, 2).expect("shard");
    let engine = start_engine(&store, config).await;
    let status = wait_for_store(&store, &engine, &ids(&[ours]), Duration::from_secs(30)).await;
    let tracked: Vec<&String> = status.relays.keys().collect();
    assert_eq!(tracked, [&mine.url()], "{status:#?}");
    assert_eq!(theirs.websocket_connections_accepted(), 0);
    assert_eq!(store.count_stored(&ids(&[their_announcement])).await, 0);
    assert_eq!(status.tracking.shard, "0/2");
    engine.shutdown().await;
}

/// The batch window only collects a discovery generation: once nothing is in flight, the
/// buffered announcements and roots are applied at once. With an hour-long window the
/// announcement's relay and the replies reached through the thread's roots (two generations
/// after the bootstrap relay's announcement) are synced within a minute of virtual time.
#[tokio::test(start_paused = true)]
async fn each_discovery_generation_is_planned_once_it_settles_not_when_the_window_ends() {
    const BOOTSTRAP: &str = "ws://bootstrap.memory";
    const HOME: &str = "ws://home.memory";
    let fixture = RepoFixture::new("settled");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = MemoryNetwork::new(vec![
        (
            BOOTSTRAP.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), vec![announcement.clone()]),
        ),
        (
            HOME.to_owned(),
            SimulatedRelay::new(TestRelayConfig::default(), thread.clone()),
        ),
    ]);
    let config = grasp_sync_engine::EngineConfig {
        batch_window: Duration::from_secs(3600),
        ..test_config(&[BOOTSTRAP.to_owned()])
    };
    let run = start_paused_engine(&network, config).await;
    let mut expected = ids(&thread);
    expected.insert(announcement.id);
    let status = run.wait_for_store(&expected, Duration::from_secs(60)).await;
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    run.engine.shutdown().await;
}
