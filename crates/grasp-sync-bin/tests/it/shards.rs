//! Two shards of one deployment: external-mode daemons `0/2` and `1/2` share one own relay.
//! Each reads the whole self feed, dials only the source relays rendezvous hashing gives it
//! (checked on the relays' side), and together they fill the own relay with everything; a
//! shard's relays stay the same whether the other shard runs, starts or stops.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_model::{RelayUrl, Shard};
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, EventId, Keys, Timestamp};

use crate::support::{http_get, test_settings, wait_until};

/// Source relays each shard of two gets at least (more make the test slower, not stronger).
const PER_SHARD: usize = 1;
/// Source relays started at most while looking for `PER_SHARD` of each shard.
const MAX_SOURCES: usize = 24;

struct Source {
    relay: TestRelay,
    url: RelayUrl,
    owner: u16,
    /// The issue only this relay holds.
    issue: Event,
}

fn at(seconds: u64) -> Timestamp {
    Timestamp::from_secs(1_700_000_000 + seconds)
}

/// A repository listing the own relay and `sources`, announced on the own relay and on every
/// source, with one issue on each source.
async fn repository(own: &TestRelay, sources: &[&TestRelay], identifier: &str) -> Vec<Event> {
    let owner = Keys::generate();
    let mut relays = vec![own.url()];
    relays.extend(sources.iter().map(|s| s.url()));
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: identifier.to_owned(),
            name: identifier.to_owned(),
            relays,
            clone: vec![format!(
                "http://{}/{}/{identifier}.git",
                own.addr().ip(),
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: at(0),
        },
    )
    .expect("announcement");
    own.seed([announcement.clone()]).await.expect("seed own");
    let repo = RepoRef::new(owner.public_key(), identifier);
    let mut issues = Vec::new();
    for (n, source) in sources.iter().enumerate() {
        let issue = nip34::root(
            &Keys::generate(),
            RootKind::Issue,
            std::slice::from_ref(&repo),
            &format!("issue {n} of {identifier}"),
            at(10 + n as u64),
        )
        .expect("issue");
        source
            .seed([announcement.clone(), issue.clone()])
            .await
            .expect("seed source");
        issues.push(issue);
    }
    issues
}

fn shard_settings(dir: &std::path::Path, own: &TestRelay, shard: &str) -> Settings {
    let mut settings = Settings {
        own_relay: Some(RelayUrl::parse(&own.url()).expect("url")),
        ..test_settings(dir)
    };
    settings.tracking.shard = shard.parse().expect("shard");
    // A first sync by REQ+EOSE packs the coverage into few paced starts.
    settings.first_sync_by_req = true;
    settings
}

/// The relays a daemon's engine tracks.
async fn tracked(daemon: &Daemon) -> BTreeSet<String> {
    daemon
        .status()
        .await
        .map(|status| status.relays.into_keys().collect())
        .unwrap_or_default()
}

fn urls_of(sources: &[Source], owner: u16) -> BTreeSet<String> {
    sources
        .iter()
        .filter(|s| s.owner == owner)
        .map(|s| s.url.to_string())
        .collect()
}

async fn own_holds(own: &TestRelay, wanted: &BTreeSet<EventId>) -> bool {
    wanted.is_subset(&own.event_ids().await.expect("ids"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_fill_one_own_relay_each_dialling_only_its_relays() {
    let own = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("own relay");
    // Ports are the system's choice, so which shard owns a source is known only once it runs.
    let mut sources: Vec<Source> = Vec::new();
    while (0..2).any(|shard| sources.iter().filter(|s| s.owner == shard).count() < PER_SHARD) {
        assert!(sources.len() < MAX_SOURCES, "no even enough split");
        let relay = TestRelay::start(TestRelayConfig::default())
            .await
            .expect("source");
        let url = RelayUrl::parse(&relay.url()).expect("url");
        let owner = Shard::owner_of(&url, 2);
        let identifier = format!("repo-{}", sources.len());
        let issues = repository(&own, &[&relay], &identifier).await;
        let issue = issues.into_iter().next().expect("one issue");
        sources.push(Source {
            relay,
            url,
            owner,
            issue,
        });
    }
    // One repository on a relay of each shard: each shard fetches the part its relay holds.
    let first_of = |shard: u16| {
        sources
            .iter()
            .position(|s| s.owner == shard)
            .expect("a relay")
    };
    let (a, b) = (first_of(0), first_of(1));
    let shared = repository(&own, &[&sources[a].relay, &sources[b].relay], "shared").await;
    let issues_of = |shard: u16| -> BTreeSet<EventId> {
        let mut ids: BTreeSet<EventId> = sources
            .iter()
            .filter(|s| s.owner == shard)
            .map(|s| s.issue.id)
            .collect();
        ids.insert(shared[usize::from(shard)].id);
        ids
    };

    // Shard 0 alone tracks its relays and no other.
    let dir0 = tempfile::tempdir().expect("dir");
    let zero = Daemon::start(&shard_settings(dir0.path(), &own, "0/2"))
        .await
        .expect("shard 0");
    let zero_relays = urls_of(&sources, 0);
    let one_relays = urls_of(&sources, 1);
    let alone = wait_until(Duration::from_secs(10), || async {
        tracked(&zero).await == zero_relays
    })
    .await;
    assert!(alone, "shard 0 tracks {:?}", tracked(&zero).await);
    let status = zero.status().await.expect("status");
    assert_eq!(status.tracking.shard, "0/2");
    assert_eq!(status.tracking.other_shards, one_relays.len());
    assert_eq!(status.tracking.relays_over_cap, 0);
    let gauge = format!("grasp_sync_relays_other_shards {}", one_relays.len());
    let counted = wait_until(Duration::from_secs(10), || async {
        http_get(zero.metrics_addr(), "/metrics")
            .await
            .1
            .contains(&gauge)
    })
    .await;
    assert!(
        counted,
        "{}",
        http_get(zero.metrics_addr(), "/metrics").await.1
    );

    // Shard 1 joins: together they hold everything.
    let dir1 = tempfile::tempdir().expect("dir");
    let one = Daemon::start(&shard_settings(dir1.path(), &own, "1/2"))
        .await
        .expect("shard 1");
    let everything: BTreeSet<EventId> = issues_of(0).union(&issues_of(1)).copied().collect();
    let converged = wait_until(Duration::from_secs(30), || async {
        own_holds(&own, &everything).await
    })
    .await;
    assert!(
        converged,
        "shard 0: {:#?}\nshard 1: {:#?}",
        zero.status().await,
        one.status().await
    );
    assert_eq!(tracked(&one).await, one_relays);
    assert_eq!(tracked(&zero).await, zero_relays, "shard 0 unaffected by 1");
    let status = one.status().await.expect("status");
    assert_eq!(status.tracking.shard, "1/2");
    assert_eq!(status.tracking.other_shards, zero_relays.len());
    // On the relays' side: every WebSocket a source accepted is a session of its own shard.
    for (shard, daemon) in [(0, &zero), (1, &one)] {
        let status = daemon.status().await.expect("status");
        for source in sources.iter().filter(|s| s.owner == shard) {
            let sessions = status
                .relays
                .get(source.url.as_str())
                .map_or(0, |r| r.connections);
            assert!(sessions >= 1, "{} never connected", source.url);
            assert_eq!(
                source.relay.websocket_connections_accepted(),
                sessions,
                "{} accepted connections its shard {shard} did not open",
                source.url
            );
        }
    }

    // Shard 1 leaves: shard 0 keeps its relays and keeps syncing them live.
    one.shutdown().await;
    let late = nip34::reply(
        &Keys::generate(),
        &sources[a].issue,
        nip34::ThreadTag::LowerE,
        "late reply",
        at(100),
    )
    .expect("reply");
    assert!(
        sources[a]
            .relay
            .publish(late.clone())
            .await
            .expect("publish")
    );
    let live = wait_until(Duration::from_secs(30), || async {
        own_holds(&own, &BTreeSet::from([late.id])).await
    })
    .await;
    assert!(live, "shard 0 status: {:#?}", zero.status().await);
    assert_eq!(
        tracked(&zero).await,
        zero_relays,
        "shard 0 unaffected by 1 leaving"
    );

    zero.shutdown().await;
}
