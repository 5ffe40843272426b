//! External mode under the GRASP policy, end to end: the own relay is a test relay that accepts
//! everything (as strfry does), so whatever it holds counts only if the daemon's policy admits
//! it. Announcements that do not list the service neither feed discovery nor bring their events
//! in, and events that reach the own relay before their announcement are taken once it comes.

use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind, ThreadTag};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, Keys, Timestamp};

use crate::support::{http_get, test_settings, wait_until};

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(1_700_000_000 + secs)
}

/// An announcement of `identifier` listing `relays`, with a clone URL on `clone_host`.
fn announcement(owner: &Keys, identifier: &str, relays: Vec<String>, clone_host: &str) -> Event {
    nip34::announcement(
        owner,
        &Announcement {
            identifier: identifier.to_owned(),
            name: identifier.to_owned(),
            relays,
            clone: vec![format!(
                "http://{clone_host}/{}/{identifier}.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: at(0),
        },
    )
    .expect("announcement")
}

fn issue(owner: &Keys, identifier: &str, n: u64) -> Event {
    let repo = RepoRef::new(owner.public_key(), identifier);
    nip34::root(&Keys::generate(), RootKind::Issue, &[repo], "bug", at(n)).expect("issue")
}

async fn relay() -> TestRelay {
    TestRelay::start(TestRelayConfig::default())
        .await
        .expect("relay")
}

fn external_settings(dir: &std::path::Path, own: &TestRelay) -> Settings {
    Settings {
        own_relay: Some(RelayUrl::parse(&own.url()).expect("url")),
        ..test_settings(dir)
    }
}

/// Rejected IDs the daemon's store remembers, as `/status` shows them.
async fn rejected_ids(daemon: &Daemon) -> usize {
    daemon
        .status()
        .await
        .and_then(|status| status.rejected_index)
        .map_or(0, |usage| usage.cold_ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_announcements_listing_the_service_feed_discovery_from_an_accept_everything_own_relay()
{
    let own = relay().await;
    let listed_source = relay().await;
    let other_source = relay().await;
    let host = own.addr().ip().to_string();

    // The own relay holds both announcements (it keeps anything a client sends); only one
    // lists the service.
    let owner = Keys::generate();
    let listed = announcement(
        &owner,
        "listed",
        vec![own.url(), listed_source.url()],
        &host,
    );
    let stranger = Keys::generate();
    let unlisted = announcement(&stranger, "unlisted", vec![other_source.url()], &host);
    let on_listed = issue(&owner, "listed", 10);
    let reply = nip34::reply(
        &Keys::generate(),
        &on_listed,
        ThreadTag::LowerE,
        "me too",
        at(11),
    )
    .expect("reply");
    let on_unlisted = issue(&stranger, "unlisted", 12);

    own.seed([listed.clone(), unlisted.clone()])
        .await
        .expect("seed own");
    listed_source
        .seed([listed.clone(), on_listed.clone(), reply.clone()])
        .await
        .expect("seed listed source");
    other_source
        .seed([unlisted.clone(), on_unlisted.clone()])
        .await
        .expect("seed other source");

    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&external_settings(dir.path(), &own))
        .await
        .expect("daemon");

    let synced = wait_until(Duration::from_secs(30), || async {
        let held = own.event_ids().await.expect("ids");
        held.contains(&on_listed.id)
            && held.contains(&reply.id)
            && daemon.holds(&reply.id).await.expect("holds")
    })
    .await;
    assert!(synced, "status {:#?}", daemon.status().await);
    // The refused announcement was read and judged, not merely not read yet.
    let judged = wait_until(Duration::from_secs(10), || async {
        rejected_ids(&daemon).await >= 1
    })
    .await;
    assert!(judged, "status {:#?}", daemon.status().await);

    assert!(daemon.holds(&listed.id).await.expect("holds"));
    assert!(!daemon.holds(&unlisted.id).await.expect("holds"));
    assert!(
        !own.event_ids()
            .await
            .expect("ids")
            .contains(&on_unlisted.id)
    );
    let status = daemon.status().await.expect("status");
    assert!(
        !status.relays.contains_key(&other_source.url()),
        "{:?}",
        status.relays.keys()
    );
    assert_eq!(other_source.connections_accepted(), 0);
    assert!(status.relays.contains_key(&listed_source.url()));
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_on_the_own_relay_before_its_announcement_is_taken_once_it_arrives() {
    let own = relay().await;
    let host = own.addr().ip().to_string();
    let owner = Keys::generate();
    let early = issue(&owner, "tool", 10);

    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings {
        max_rejected_ids: 5_000,
        ..external_settings(dir.path(), &own)
    };
    let daemon = Daemon::start(&settings).await.expect("daemon");

    // A client writes the issue first: the own relay keeps it, the policy does not take it.
    assert!(own.publish(early.clone()).await.expect("publish"));
    let refused = wait_until(Duration::from_secs(10), || async {
        rejected_ids(&daemon).await == 1
    })
    .await;
    assert!(refused, "status {:#?}", daemon.status().await);
    assert!(!daemon.holds(&early.id).await.expect("holds"));
    let (_, status) = http_get(daemon.metrics_addr(), "/status").await;
    assert!(status.contains("\"cold_capacity\": 5000"), "{status}");
    let gauged = wait_until(Duration::from_secs(10), || async {
        let (_, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
        metrics.contains("grasp_sync_rejected_index_entries{tier=\"cold\"} 1")
    })
    .await;
    assert!(
        gauged,
        "{}",
        http_get(daemon.metrics_addr(), "/metrics").await.1
    );

    // Then its announcement: the issue is released and taken.
    let tool = announcement(&owner, "tool", vec![own.url()], &host);
    assert!(own.publish(tool.clone()).await.expect("publish"));
    let taken = wait_until(Duration::from_secs(10), || async {
        daemon.holds(&tool.id).await.expect("holds")
            && daemon.holds(&early.id).await.expect("holds")
    })
    .await;
    assert!(taken, "status {:#?}", daemon.status().await);
    assert_eq!(rejected_ids(&daemon).await, 0);
    daemon.shutdown().await;
}
