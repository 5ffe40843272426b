//! Byte accounting: the engine counts the text-frame bytes of every relay connection, and its
//! counts are the strict relay's counts of the same connection; a restart over a complete store
//! reconciles by NIP-77, downloads no event again (a small share of the bytes the first sync
//! received) and sends about what the first sync sent (the same coverage, named again).
//!
//! Both run on real sockets, on real time, against real relays, as no other engine test does:
//! the bytes are counted by the SDK transport, and NIP-77's fingerprint frames exist only on
//! a real connection (the memory network computes a round's difference without them).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use grasp_sync_engine::{EngineHandle, EngineStatus, WireBytes};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::nip34::{RepoTag, repo_comment};
use grasp_sync_testkit::{
    NetworkSpec, RootCount, StartKind, StrictLimits, StrictStats, TestNetwork, TestRelay,
    TestRelayConfig,
};
use nostr::{JsonUtil, Keys, Timestamp};

use crate::support::{
    RepoFixture, SERVICE_URL, TestStore, history_settled, ids, start_engine, test_config,
    wait_for_store, wait_until,
};

/// How long a wait on real time may take: generous, as nothing here is timed, so a loaded
/// machine makes a test slower, never failed.
const DEADLINE: Duration = Duration::from_secs(180);

/// A relay that passes every message through its proxy, so both directions are counted.
fn counted() -> TestRelayConfig {
    TestRelayConfig::strict(StrictLimits::default())
}

/// Announcement on the bootstrap relay, thread on `home`; returns the fixture.
async fn seed_repo(
    bootstrap: &TestRelay,
    home: &TestRelay,
    identifier: &str,
) -> (RepoFixture, Vec<nostr::Event>) {
    let fixture = RepoFixture::new(identifier);
    let announcement = fixture.announcement(&[SERVICE_URL.to_owned(), home.url()], 1_700_000_000);
    bootstrap
        .seed([announcement])
        .await
        .expect("seed bootstrap");
    let thread = fixture.thread(1_700_000_100);
    home.seed(thread.clone()).await.expect("seed home");
    (fixture, thread)
}

/// The engine's byte counts of the relay at `url`.
fn engine_bytes(status: &EngineStatus, url: &str) -> Option<WireBytes> {
    let key = RelayUrl::parse(url).expect("relay url").to_string();
    status.relays.get(&key).map(|r| WireBytes {
        sent: r.bytes_sent,
        received: r.bytes_received,
    })
}

/// What a strict relay counted on its connections from `first` on, from the client's side:
/// what the client sent is what the relay received.
fn relay_bytes(stats: &StrictStats, first: usize) -> WireBytes {
    stats
        .per_connection
        .iter()
        .skip(first)
        .fold(WireBytes::default(), |sum, c| {
            sum + WireBytes {
                sent: c.bytes_received,
                received: c.bytes_sent,
            }
        })
}

/// Waits until the engine's counts of every relay equal the relay's own (nothing left in
/// flight), and returns them by URL.
async fn settled_counts(
    engine: &EngineHandle,
    relays: &[&TestRelay],
) -> BTreeMap<String, WireBytes> {
    let last = RefCell::new(BTreeMap::new());
    let equal = wait_until(DEADLINE, || async {
        let Some(status) = engine.status().await else {
            return false;
        };
        let mut last = last.borrow_mut();
        last.clear();
        relays.iter().all(|relay| {
            let ours = engine_bytes(&status, &relay.url());
            let theirs = relay_bytes(&relay.strict_stats(), 0);
            last.insert(relay.url(), (ours, theirs));
            ours == Some(theirs)
        })
    })
    .await;
    let last = last.into_inner();
    assert!(equal, "engine and relay counts differ: {last:#?}");
    last.into_iter()
        .map(|(url, (_, theirs))| (url, theirs))
        .collect()
}

/// The transport smoke test: the SDK transport syncs a repository and a live event from real
/// relays over WebSocket, and counts every text frame as the relay does. Every other engine
/// test but the next one runs on the memory network, on paused time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_sent_and_received_are_the_relays_counts_of_the_same_connection() {
    let bootstrap = TestRelay::start(counted()).await.expect("bootstrap");
    let home = TestRelay::start(counted()).await.expect("home");
    let (fixture, thread) = seed_repo(&bootstrap, &home, "bytes").await;
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&[bootstrap.url()])).await;
    wait_for_store(&store, &engine, &ids(&thread), DEADLINE).await;
    let home_key = RelayUrl::parse(&home.url()).expect("url").to_string();
    assert!(
        wait_until(DEADLINE, || async {
            engine
                .status()
                .await
                .is_some_and(|s| s.relays.get(&home_key).is_some_and(history_settled))
        })
        .await,
        "historic sync never settled"
    );
    let synced = settled_counts(&engine, &[&bootstrap, &home]).await;
    let home_synced = synced[&home.url()];
    let thread_json: u64 = thread.iter().map(|e| e.as_json().len() as u64).sum();
    assert!(
        home_synced.received >= thread_json,
        "every event of the thread arrived inside a counted frame: {home_synced:?}, {thread_json}"
    );
    assert!(home_synced.sent > 0, "{home_synced:?}");
    assert_eq!(home.strict_stats().connections(), 1);

    // A live event adds its frame to the received count, on both sides alike.
    let late = repo_comment(
        &Keys::generate(),
        &fixture.repo,
        RepoTag::UpperA,
        "late",
        Timestamp::from_secs(1_700_001_000),
    )
    .expect("comment");
    home.publish(late.clone()).await.expect("publish");
    wait_for_store(&store, &engine, &ids(std::slice::from_ref(&late)), DEADLINE).await;
    let after = settled_counts(&engine, &[&bootstrap, &home]).await[&home.url()];
    assert!(
        after.received >= home_synced.received + late.as_json().len() as u64,
        "{home_synced:?} then {after:?}"
    );
    assert!(after.sent >= home_synced.sent);
    engine.shutdown().await;
}

/// Root events of the reconciled network.
const ROOTS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_over_a_complete_store_downloads_nothing_and_moves_few_bytes() {
    let spec = NetworkSpec {
        relays: 1,
        repos: 4,
        roots: RootCount::Total(ROOTS),
        replies_per_root: 6,
        relays_per_repo: 1,
        share_not_listing_service: 0.0,
        ..NetworkSpec::small(29, SERVICE_URL)
    };
    let network = TestNetwork::start(&spec, &[counted()])
        .await
        .expect("network");
    let urls = network.urls();
    let expected = network.expected().clone();
    let relays: Vec<&TestRelay> = network.relays.iter().collect();
    let keys: Vec<String> = urls
        .iter()
        .map(|u| RelayUrl::parse(u).expect("url").to_string())
        .collect();
    // Settled, with the repositories and root events each relay confirmed.
    let coverage = |status: &EngineStatus| -> Option<Vec<(usize, usize)>> {
        keys.iter()
            .map(|k| {
                let relay = status.relays.get(k).filter(|r| history_settled(r))?;
                Some((relay.confirmed_repos, relay.confirmed_root_events))
            })
            .collect()
    };

    // The first sync, into an empty store.
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&urls[..1])).await;
    wait_for_store(&store, &engine, &expected, DEADLINE).await;
    let covered = RefCell::new(None);
    assert!(
        wait_until(DEADLINE, || async {
            let status = engine.status().await.unwrap_or_default();
            *covered.borrow_mut() = coverage(&status);
            covered.borrow().as_ref().is_some_and(|c| {
                c.iter().map(|(repos, _)| repos).sum::<usize>() == spec.repos
                    && c.iter().map(|(_, roots)| roots).sum::<usize>() == ROOTS
            })
        })
        .await,
        "the first sync never settled: {:?}",
        covered.borrow()
    );
    // Every root and every direct member (the replies) named by `#e`, so the first sync
    // covers what the restart covers: the members' descendants too.
    let named = (ROOTS + ROOTS * spec.replies_per_root) as u64;
    assert!(
        wait_until(DEADLINE, || async {
            relays
                .iter()
                .map(|r| references(&r.strict_stats()))
                .sum::<u64>()
                >= named
        })
        .await,
        "the first sync never named every root and direct member: {} of {named}",
        relays
            .iter()
            .map(|r| references(&r.strict_stats()))
            .sum::<u64>()
    );
    let covered = covered.into_inner();
    let first: WireBytes = settled_counts(&engine, &relays)
        .await
        .into_values()
        .fold(WireBytes::default(), |sum, b| sum + b);
    engine.shutdown().await;
    let marks: Vec<(usize, u64)> = relays
        .iter()
        .map(|r| {
            let stats = r.strict_stats();
            (stats.connections(), stats.events_sent())
        })
        .collect();

    // A restart over the same, complete store reconciles every relay by NIP-77.
    let store = store.reopen().await;
    let engine = start_engine(&store, test_config(&urls[..1])).await;
    assert!(
        wait_until(DEADLINE, || async {
            coverage(&engine.status().await.unwrap_or_default()) == covered
        })
        .await,
        "the reconciliation never covered what the first sync did ({covered:?}): {:#?}",
        engine.status().await
    );
    let status = settle_after_restart(&engine, &relays, &marks).await;
    let again = relays
        .iter()
        .zip(&marks)
        .fold(WireBytes::default(), |sum, (r, (connections, _))| {
            sum + relay_bytes(&r.strict_stats(), *connections)
        });
    let resent: u64 = relays
        .iter()
        .zip(&marks)
        .map(|(r, (_, events))| r.strict_stats().events_sent() - events)
        .sum();
    assert_eq!(resent, 0, "events downloaded again: {status:#?}");
    assert!(
        status.negentropy.rounds_completed > 0,
        "it reconciled by NIP-77: {:#?}",
        status.negentropy
    );
    // The first sync downloads every event; the reconciliation only the NIP-77 fingerprints
    // of what both sides hold. It asks about what the first sync asked about: the live REQs
    // and the coverage named once more (roots, repositories and direct members).
    assert!(
        again.received * 20 < first.received && again.sent * 2 < first.sent * 3,
        "reconciliation {again:?} against the first sync {first:?}"
    );
    engine.shutdown().await;
}

/// The distinct `#e` values of the REQs a relay was sent.
fn references(stats: &StrictStats) -> u64 {
    let e = nostr::SingleLetterTag::lowercase(nostr::Alphabet::E);
    let values: std::collections::BTreeSet<&String> = stats
        .starts
        .iter()
        .filter(|start| start.kind == StartKind::Req)
        .flat_map(|start| &start.filters)
        .filter_map(|filter| filter.generic_tags.get(&e))
        .flatten()
        .collect();
    values.len() as u64
}

/// Waits until the restarted engine's counts equal what the relays counted on the connections
/// opened after `marks`; returns the engine's status then.
async fn settle_after_restart(
    engine: &EngineHandle,
    relays: &[&TestRelay],
    marks: &[(usize, u64)],
) -> EngineStatus {
    let last = RefCell::new(None);
    let equal = wait_until(DEADLINE, || async {
        let Some(status) = engine.status().await else {
            return false;
        };
        let same = relays.iter().zip(marks).all(|(relay, (connections, _))| {
            engine_bytes(&status, &relay.url())
                == Some(relay_bytes(&relay.strict_stats(), *connections))
        });
        *last.borrow_mut() = Some(status);
        same
    })
    .await;
    let status = last.into_inner().expect("a status");
    assert!(equal, "engine and relay counts differ: {status:#?}");
    status
}
