//! Discovery: which relays the engine connects to, driven only by announcements the store
//! accepted; on paused time over memory relays.

use std::time::Duration;

use grasp_sync_testkit::{MemoryNetwork, SimulatedRelay, TestRelayConfig};

use crate::support::{
    BOOTSTRAP, HOME, RepoFixture, SERVICE_URL, ids, memory_network, start_paused_engine,
    test_config, wait_until,
};

#[tokio::test(start_paused = true)]
async fn announcement_listing_us_leads_to_its_relay_and_every_tag_style_lands() {
    let fixture = RepoFixture::new("listed");
    let announcement =
        fixture.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let thread = fixture.thread(1_700_000_100);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![announcement.clone()],
        ),
        (HOME, TestRelayConfig::default(), thread.clone()),
    ]);
    let urls = network.urls();
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    let mut expected = ids(&thread);
    expected.insert(announcement.id);
    let status = run
        .wait_for_store(&expected, Duration::from_secs(600))
        .await;
    assert!(network.stats(&urls[1]).connections() >= 1);
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn announcement_not_listing_us_is_rejected_and_causes_no_connection() {
    const UNLISTED: &str = "ws://unlisted.memory";
    let stranger = RepoFixture::new("stranger");
    let foreign = stranger.announcement(&[UNLISTED.to_owned()], 1_700_000_000);
    let ours = RepoFixture::new("ours");
    let listed = ours.announcement(&[SERVICE_URL.to_owned(), HOME.to_owned()], 1_700_000_000);
    let network = memory_network(vec![
        (
            BOOTSTRAP,
            TestRelayConfig::default(),
            vec![foreign.clone(), listed],
        ),
        (
            UNLISTED,
            TestRelayConfig::default(),
            stranger.thread(1_700_000_100),
        ),
        (HOME, TestRelayConfig::default(), Vec::new()),
    ]);
    let urls = network.urls();
    let (unlisted, listed_relay) = (&urls[1], &urls[2]);

    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    // The listed relay being reached proves discovery ran past the point where the foreign
    // announcement was seen.
    let reached = wait_until(Duration::from_secs(600), || async {
        network.stats(listed_relay).connections() >= 1
    })
    .await;
    assert!(reached, "the listed relay was never dialled");
    let rejected = wait_until(Duration::from_secs(600), || async {
        run.store
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
    let status = run.engine.status().await.expect("status");
    assert!(!status.relays.contains_key(unlisted), "{status:#?}");
    assert_eq!(network.stats(unlisted).connections(), 0);
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn newer_announcement_moves_coverage_and_older_changes_nothing() {
    const OLD_HOME: &str = "ws://old-home.memory";
    const NEW_HOME: &str = "ws://new-home.memory";
    const STALE_HOME: &str = "ws://stale-home.memory";
    let fixture = RepoFixture::new("moving");
    let first = fixture.announcement(
        &[SERVICE_URL.to_owned(), OLD_HOME.to_owned()],
        1_700_000_000,
    );
    let thread = fixture.thread(1_700_000_100);
    let network = memory_network(vec![
        (BOOTSTRAP, TestRelayConfig::default(), vec![first]),
        (OLD_HOME, TestRelayConfig::default(), Vec::new()),
        (NEW_HOME, TestRelayConfig::default(), thread.clone()),
        (STALE_HOME, TestRelayConfig::default(), Vec::new()),
    ]);
    let urls = network.urls();
    let (bootstrap, old_home, stale_home) = (&urls[0], &urls[1], &urls[3]);

    let run = start_paused_engine(&network, test_config(&urls[..1])).await;
    assert!(
        wait_until(Duration::from_secs(600), || async {
            network.stats(old_home).connections() >= 1
        })
        .await,
        "the first home was never dialled"
    );

    // An older announcement listing another relay changes nothing; a newer one moves coverage.
    let older = fixture.announcement(
        &[SERVICE_URL.to_owned(), STALE_HOME.to_owned()],
        1_600_000_000,
    );
    let newer = fixture.announcement(
        &[SERVICE_URL.to_owned(), NEW_HOME.to_owned()],
        1_700_000_500,
    );
    network.publish(bootstrap, older);
    network.publish(bootstrap, newer);
    let expected = ids(&thread);
    let moved = wait_until(Duration::from_secs(600), || async {
        run.count_stored(&expected).await == expected.len()
    })
    .await;
    let status = run.engine.status().await.expect("status");
    assert!(moved, "events on the new home did not arrive: {status:#?}");
    assert_eq!(
        network.stats(stale_home).connections(),
        0,
        "an older announcement moved coverage"
    );
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_shard_dials_only_the_bootstrap_relays_it_owns() {
    use grasp_sync_model::{RelayUrl, Shard};

    // A relay URL for each shard of two, each relay holding an announcement of its own.
    let mut by_shard: [Option<(String, nostr::Event)>; 2] = [None, None];
    for attempt in 0..32 {
        if by_shard.iter().all(Option::is_some) {
            break;
        }
        let url = format!("ws://relay-{attempt}.memory");
        let owner = Shard::owner_of(&RelayUrl::parse(&url).expect("url"), 2);
        let slot = &mut by_shard[usize::from(owner)];
        if slot.is_none() {
            let fixture = RepoFixture::new(&format!("repo-{attempt}"));
            let announcement = fixture.announcement(&[SERVICE_URL.to_owned()], 1_700_000_000);
            *slot = Some((url, announcement));
        }
    }
    let [Some((mine, ours)), Some((theirs, their_announcement))] = by_shard else {
        panic!("no relay of each shard in 32 tries");
    };
    let network = memory_network(vec![
        (&mine, TestRelayConfig::default(), vec![ours.clone()]),
        (
            &theirs,
            TestRelayConfig::default(),
            vec![their_announcement.clone()],
        ),
    ]);
    let urls = network.urls();
    let (mine, theirs) = (&urls[0], &urls[1]);

    let mut config = test_config(&[theirs.clone(), mine.clone()]);
    config.tracking.shard = Shard::new(0, 2).expect("shard");
    let run = start_paused_engine(&network, config).await;
    let status = run
        .wait_for_store(&ids(&[ours]), Duration::from_secs(600))
        .await;
    let tracked: Vec<&String> = status.relays.keys().collect();
    assert_eq!(tracked, [mine], "{status:#?}");
    assert_eq!(network.stats(theirs).connections(), 0);
    assert_eq!(run.count_stored(&ids(&[their_announcement])).await, 0);
    assert_eq!(status.tracking.shard, "0/2");
    run.engine.shutdown().await;
}

/// A bootstrap relay holding an announcement of repository `name` that lists this service and
/// the home relay, which holds the repository's thread: the network, the announcement and the
/// thread.
fn bootstrap_and_home(name: &str) -> (MemoryNetwork, nostr::Event, Vec<nostr::Event>) {
    let fixture = RepoFixture::new(name);
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
    (network, announcement, thread)
}

/// The batch window only collects a discovery generation: once nothing is in flight, the
/// buffered announcements and roots are applied at once. With an hour-long window the
/// announcement's relay and the replies reached through the thread's roots (two generations
/// after the bootstrap relay's announcement) are synced within a minute of virtual time.
#[tokio::test(start_paused = true)]
async fn each_discovery_generation_is_planned_once_it_settles_not_when_the_window_ends() {
    let (network, announcement, thread) = bootstrap_and_home("settled");
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

/// A relay an announcement leads to is dialled as soon as the index tracks it, not at the
/// next health tick: with an hour between ticks (the first one dials the bootstrap relay), the
/// home relay's thread is synced within a minute of virtual time.
#[tokio::test(start_paused = true)]
async fn a_relay_discovery_finds_is_dialled_at_once_not_at_the_next_health_tick() {
    let (network, _, thread) = bootstrap_and_home("dialled");
    let config = grasp_sync_engine::EngineConfig {
        health_tick: Duration::from_secs(3600),
        ..test_config(&[BOOTSTRAP.to_owned()])
    };
    let run = start_paused_engine(&network, config).await;
    let status = run
        .wait_for_store(&ids(&thread), Duration::from_secs(60))
        .await;
    assert_eq!(network.stats(HOME).connections(), 1, "{status:#?}");
    run.engine.shutdown().await;
}
