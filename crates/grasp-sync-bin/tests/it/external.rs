//! External mode end to end: a test relay is the own relay, others are sources; the daemon
//! discovers repositories on the own relay's feed and publishes what the sources hold into it,
//! all under the GRASP acceptance policy. The test relays accept everything, as a
//! general-purpose relay does, so only the daemon's policy decides.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind, ThreadTag};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{EventBuilder, Keys, Timestamp};

use crate::support::{http_get, test_settings, wait_until};

/// How many of `events` the daemon does not hold yet.
async fn unread(daemon: &Daemon, events: &[nostr::Event]) -> usize {
    let mut left = 0;
    for event in events {
        if !daemon.holds(&event.id).await.expect("holds") {
            left += 1;
        }
    }
    left
}

/// A clone URL on the own relay's host, as the policy wants from an announcement.
fn clone_url(own: &TestRelay, owner: &Keys, identifier: &str) -> String {
    format!(
        "http://{}/{}/{identifier}.git",
        own.addr().ip(),
        owner.public_key().to_hex()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_from_a_listed_relay_arrive_in_the_external_own_relay() {
    let own = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("own relay");
    let source = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("source");

    let owner = Keys::generate();
    let at = |s: u64| Timestamp::from_secs(1_700_000_000 + s);
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "tool".to_owned(),
            name: "tool".to_owned(),
            relays: vec![own.url(), source.url()],
            clone: vec![clone_url(&own, &owner, "tool")],
            maintainers: Vec::new(),
            created_at: at(0),
        },
    )
    .expect("announcement");
    let repo = RepoRef::new(owner.public_key(), "tool");
    let author = Keys::generate();
    let issue = nip34::root(
        &author,
        RootKind::Issue,
        std::slice::from_ref(&repo),
        "bug",
        at(10),
    )
    .expect("issue");
    let patch = nip34::root(&author, RootKind::Patch, &[repo], "fix", at(11)).expect("patch");
    let reply = nip34::reply(&author, &issue, ThreadTag::LowerE, "me too", at(12)).expect("reply");
    let unrelated = EventBuilder::text_note("unrelated")
        .custom_created_at(at(13))
        .sign_with_keys(&author)
        .expect("note");

    own.seed([announcement.clone()]).await.expect("seed own");
    source
        .seed([
            announcement,
            issue.clone(),
            patch.clone(),
            reply.clone(),
            unrelated.clone(),
        ])
        .await
        .expect("seed source");

    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings {
        own_relay: Some(RelayUrl::parse(&own.url()).expect("url")),
        ..test_settings(dir.path())
    };
    let daemon = Daemon::start(&settings).await.expect("daemon");
    assert_eq!(daemon.relay_addr(), None);
    assert_eq!(daemon.service_url().as_str(), own.url());

    let wanted: BTreeSet<_> = [issue.id, patch.id, reply.id].into();
    let arrived = wait_until(Duration::from_secs(45), || async {
        let held = own.event_ids().await.expect("ids");
        wanted.is_subset(&held)
    })
    .await;
    let status = daemon.status().await;
    assert!(
        arrived,
        "own relay holds {:?}; status {status:#?}",
        own.event_ids().await
    );
    assert!(!own.event_ids().await.expect("ids").contains(&unrelated.id));
    // The own relay stores an event before its OK reaches the daemon, so the daemon's record of
    // the OK can trail what the relay shows: wait for the record itself.
    let unconfirmed = || async {
        let mut left = Vec::new();
        for id in &wanted {
            if !daemon.holds(id).await.expect("holds") {
                left.push(*id);
            }
        }
        left
    };
    let confirmed = wait_until(Duration::from_secs(10), || async {
        unconfirmed().await.is_empty()
    })
    .await;
    assert!(confirmed, "not confirmed by OK: {:?}", unconfirmed().await);
    // The three events were newly saved by sync; the announcement was already there.
    let counted = wait_until(Duration::from_secs(10), || async {
        let (_, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
        metrics.contains("grasp_sync_events_synced_total 3")
    })
    .await;
    assert!(
        counted,
        "{}",
        http_get(daemon.metrics_addr(), "/metrics").await.1
    );
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_reads_every_announcement_from_an_own_relay_with_exclusive_until_and_a_small_cap()
{
    // 250 announcements in five seconds on an own relay that caps results at 120 and reads
    // `until` as exclusive: a walk that steps `until` to each page's oldest second and stops
    // at a page without news misses the rest of the second a page ends in.
    let own = TestRelay::start(TestRelayConfig::exclusive_until_like())
        .await
        .expect("own relay");
    let owner = Keys::generate();
    let announcements: Vec<_> = (0..250u64)
        .map(|i| {
            nip34::announcement(
                &owner,
                &Announcement {
                    identifier: format!("repo-{i}"),
                    name: format!("repo {i}"),
                    relays: vec![own.url()],
                    clone: vec![clone_url(&own, &owner, &format!("repo-{i}"))],
                    maintainers: Vec::new(),
                    created_at: Timestamp::from_secs(1_700_000_000 + i % 5),
                },
            )
            .expect("announcement")
        })
        .collect();
    own.seed(announcements.clone()).await.expect("seed own");

    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings {
        own_relay: Some(RelayUrl::parse(&own.url()).expect("url")),
        ..test_settings(dir.path())
    };
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let unread = || unread(&daemon, &announcements);
    let all_read = wait_until(Duration::from_secs(30), || async { unread().await == 0 }).await;
    assert!(all_read, "{} announcements never read", unread().await);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcements_the_own_relay_skips_on_the_live_feed_are_read_from_its_stored_events() {
    // The own relay delivers only every other new event live, as a relay whose subscriber
    // lags skips events without a word; the feed must find the rest among the stored ones.
    let own = TestRelay::start(TestRelayConfig::live_skipping_like())
        .await
        .expect("own relay");
    let owner = Keys::generate();
    let announcement = |i: u64| {
        nip34::announcement(
            &owner,
            &Announcement {
                identifier: format!("repo-{i}"),
                name: format!("repo {i}"),
                relays: vec![own.url()],
                clone: vec![clone_url(&own, &owner, &format!("repo-{i}"))],
                maintainers: Vec::new(),
                created_at: Timestamp::from_secs(1_700_000_000 + i),
            },
        )
        .expect("announcement")
    };
    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings {
        own_relay: Some(RelayUrl::parse(&own.url()).expect("url")),
        ..test_settings(dir.path())
    };
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let first = announcement(0);
    own.publish(first.clone()).await.expect("publish");
    let read = wait_until(Duration::from_secs(20), || async {
        daemon.holds(&first.id).await.expect("holds")
    })
    .await;
    assert!(read, "the first announcement was never read");
    // Published live, one at a time: the relay skips every other one.
    let later: Vec<_> = (1..=4).map(announcement).collect();
    for event in &later {
        own.publish(event.clone()).await.expect("publish");
    }
    let unread = || unread(&daemon, &later);
    let all_read = wait_until(Duration::from_secs(90), || async { unread().await == 0 }).await;
    assert!(all_read, "{} announcements never read", unread().await);
    assert!(
        own.strict_stats().connections() == 1,
        "read without reconnecting: {:?}",
        own.strict_stats()
    );
    daemon.shutdown().await;
}
