//! Tests of the LMDB store on a temporary directory: the ingest outcomes, the have set,
//! concurrent ingest, rebuilding the policy at open, the self feed, and the write policy
//! through a real `LocalRelay` on 127.0.0.1. The rejected-events index's store-level rules are
//! in `lmdb/tests/rejected.rs`.

mod rejected;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use grasp_sync_model::{RelayUrl, RepoCoordinate};
use nostr::{Event, EventBuilder, Filter, JsonUtil, Keys, Kind, SecretKey, Tag, Timestamp};
use nostr_relay_builder::builder::RateLimit;
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tempfile::TempDir;

use super::LmdbStore;
use crate::boundary::{EventStore, IngestOutcome, SelfFeed};
use crate::store::{BAD_SIGNATURE_REASON, StoreConfig};

const SERVICE: &str = "wss://relay.example.com";

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).expect("valid secret key"))
}

fn event(keys: &Keys, kind: u16, created_at: u64, tags: &[&[&str]]) -> Event {
    let tags = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("valid tag"));
    EventBuilder::new(Kind::from(kind), format!("event at {created_at}"))
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .expect("signing works")
}

fn announcement(owner: &Keys) -> Event {
    event(
        owner,
        30617,
        10,
        &[
            &["d", "repo"],
            &["relays", SERVICE],
            &["clone", "https://relay.example.com/repo.git"],
        ],
    )
}

fn repo(owner: &Keys) -> String {
    RepoCoordinate::new(owner.public_key(), "repo")
        .expect("valid coordinate")
        .to_string()
}

fn issue(author: &Keys, owner: &Keys, created_at: u64) -> Event {
    event(author, 1621, created_at, &[&["a", &repo(owner)]])
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("valid url")
}

fn config() -> StoreConfig {
    StoreConfig::new(
        RelayUrl::parse(SERVICE).expect("valid url"),
        "relay.example.com",
    )
}

async fn open(dir: &TempDir) -> LmdbStore {
    LmdbStore::open(dir.path(), config())
        .await
        .expect("store opens")
}

#[tokio::test]
async fn ingest_saves_then_reports_duplicate() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let root = announcement(&keys(1));
    assert!(!store.contains(&root.id).await.expect("contains"));
    assert_eq!(
        store.ingest(root.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert_eq!(
        store.ingest(root.clone(), &source()).await,
        Ok(IngestOutcome::Duplicate)
    );
    assert!(store.contains(&root.id).await.expect("contains"));
    let items = store
        .negentropy_items(Filter::new().kind(Kind::from(30617u16)))
        .await
        .expect("items");
    assert_eq!(items, vec![(root.id, root.created_at)]);
}

#[tokio::test]
async fn the_stored_events_tagging_roots_are_their_replies_by_e_upper_e_and_q() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let owner = keys(1);
    let first = issue(&keys(2), &owner, 11);
    let second = issue(&keys(2), &owner, 12);
    let replies: Vec<Event> = ["e", "E", "q"]
        .iter()
        .enumerate()
        .map(|(i, letter)| {
            event(
                &keys(3),
                1111,
                20 + i as u64,
                &[&[letter, &first.id.to_hex()]],
            )
        })
        .collect();
    let to_second = event(&keys(3), 1, 30, &[&["e", &second.id.to_hex()]]);
    let mentions = event(&keys(3), 1, 31, &[&["p", &first.id.to_hex()]]);
    for e in [announcement(&owner), first.clone(), second]
        .into_iter()
        .chain(replies.clone())
        .chain([to_second, mentions])
    {
        store.ingest(e, &source()).await.expect("ingest");
    }
    let read = |until: Option<u64>, limit: usize| {
        let store = &store;
        async move {
            store
                .events_tagging(&[first.id], until.map(Timestamp::from), limit)
                .await
                .expect("read")
                .into_iter()
                .map(|e| e.id)
                .collect::<Vec<_>>()
        }
    };
    // Newest first: the replies were created at 20, 21 and 22.
    let newest_first: Vec<_> = replies.iter().rev().map(|e| e.id).collect();
    assert_eq!(
        read(None, 10).await,
        newest_first,
        "the replies to the first issue, not a `p` mention"
    );
    assert_eq!(read(None, 2).await, newest_first[..2], "at most the limit");
    assert_eq!(read(Some(21), 10).await, newest_first[1..], "up to `until`");
    assert!(
        store
            .events_tagging(&[], None, 10)
            .await
            .expect("read")
            .is_empty()
    );
}

#[tokio::test]
async fn policy_rejection_is_remembered_by_contains() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let stray = issue(&keys(2), &keys(1), 11);
    let Ok(IngestOutcome::Rejected(reason)) = store.ingest(stray.clone(), &source()).await else {
        panic!("expected a rejection");
    };
    assert!(reason.starts_with("blocked: "), "{reason}");
    assert!(store.contains(&stray.id).await.expect("contains"));
    assert_eq!(store.rejection_reason(&stray.id), Ok(Some(reason)));
    assert!(
        store
            .negentropy_items(Filter::new())
            .await
            .expect("items")
            .is_empty()
    );
}

#[tokio::test]
async fn bad_signature_is_rejected_and_not_remembered() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let root = announcement(&keys(1));
    let json = root.as_json().replace("event at 10", "tampered");
    let forged = Event::from_json(json).expect("parses without verifying");
    assert_eq!(
        store.ingest(forged, &source()).await,
        Ok(IngestOutcome::Rejected(BAD_SIGNATURE_REASON.to_owned()))
    );
    assert!(!store.contains(&root.id).await.expect("contains"));
    assert_eq!(
        store.ingest(root, &source()).await,
        Ok(IngestOutcome::Saved)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ingest_of_2000_events_stores_all() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let owner = keys(1);
    assert_eq!(
        store.ingest(announcement(&owner), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let author = keys(2);
    let events: Vec<Event> = (0..2_000)
        .map(|n| issue(&author, &owner, 100 + n))
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for event in events.clone() {
        let store = store.clone();
        tasks.spawn(async move { store.ingest(event, &source()).await });
    }
    while let Some(outcome) = tasks.join_next().await {
        assert_eq!(outcome.expect("task finishes"), Ok(IngestOutcome::Saved));
    }
    let items = store
        .negentropy_items(Filter::new().kind(Kind::from(1621u16)))
        .await
        .expect("items");
    assert_eq!(items.len(), 2_000);
    for event in &events {
        assert!(store.contains(&event.id).await.expect("contains"));
    }
}

#[tokio::test]
async fn reopening_rebuilds_the_policy_from_the_store() {
    let dir = TempDir::new().expect("temp dir");
    let owner = keys(1);
    let first_issue = issue(&keys(2), &owner, 11);
    {
        let store = open(&dir).await;
        assert_eq!(
            store.ingest(announcement(&owner), &source()).await,
            Ok(IngestOutcome::Saved)
        );
        assert_eq!(
            store.ingest(first_issue.clone(), &source()).await,
            Ok(IngestOutcome::Saved)
        );
    }
    let store = open(&dir).await;
    let state = event(&owner, 30618, 12, &[&["d", "repo"]]);
    assert_eq!(
        store.ingest(state, &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let reply = event(&keys(3), 1111, 13, &[&["e", &first_issue.id.to_hex()]]);
    assert_eq!(
        store.ingest(reply, &source()).await,
        Ok(IngestOutcome::Saved)
    );
}

#[tokio::test]
async fn reopening_remembers_ids_referenced_by_stored_events() {
    let dir = TempDir::new().expect("temp dir");
    let owner = keys(1);
    let target = event(&keys(3), 1, 5, &[]);
    {
        let store = open(&dir).await;
        assert_eq!(
            store.ingest(announcement(&owner), &source()).await,
            Ok(IngestOutcome::Saved)
        );
        let citing = event(
            &keys(2),
            1621,
            11,
            &[&["a", &repo(&owner)], &["e", &target.id.to_hex()]],
        );
        assert_eq!(
            store.ingest(citing, &source()).await,
            Ok(IngestOutcome::Saved)
        );
    }
    let store = open(&dir).await;
    assert_eq!(
        store.ingest(target, &source()).await,
        Ok(IngestOutcome::Saved)
    );
}

#[tokio::test]
async fn feed_preloads_then_follows_feed_kinds_only() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let owner = keys(1);
    let root = announcement(&owner);
    assert_eq!(
        store.ingest(root.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let mut feed = store.feed().start().await.expect("feed starts");
    assert_eq!(feed.recv().await.map(|e| e.id), Some(root.id));
    let state = event(&owner, 30618, 12, &[&["d", "repo"]]);
    assert_eq!(
        store.ingest(state, &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let live = issue(&keys(2), &owner, 13);
    assert_eq!(
        store.ingest(live.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert_eq!(feed.recv().await.map(|e| e.id), Some(live.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_feed_consumer_is_cut_off_not_skipped() {
    let dir = TempDir::new().expect("temp dir");
    let mut config = config();
    config.feed_capacity = 1;
    let store = LmdbStore::open(dir.path(), config)
        .await
        .expect("store opens");
    let owner = keys(1);
    assert_eq!(
        store.ingest(announcement(&owner), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let mut feed = store.feed().start().await.expect("feed starts");
    let total = 600;
    for n in 0..total {
        assert_eq!(
            store
                .ingest(issue(&keys(2), &owner, 100 + n), &source())
                .await,
            Ok(IngestOutcome::Saved)
        );
    }
    let mut received = 0;
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while feed.recv().await.is_some() {
            received += 1;
        }
    })
    .await;
    assert!(drained.is_ok(), "the feed of a slow consumer must end");
    assert!(
        received < total,
        "received {received} of {total}: nothing was cut off"
    );
    // Restarting preloads everything stored.
    let mut again = store.feed().start().await.expect("feed restarts");
    let mut preloaded = 0;
    while preloaded < total + 1 {
        again.recv().await.expect("preloaded event");
        preloaded += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_write_policy_applies_the_store_policy() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&dir).await;
    let builder = RelayBuilder::default()
        .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .database(store.database())
        .write_policy(store.write_policy())
        .rate_limit(RateLimit {
            max_reqs: 100,
            notes_per_minute: 10_000,
        });
    let relay = LocalRelay::new(builder);
    relay.run().await.expect("relay runs");
    let url = relay.url().await;
    let mut feed = store.feed().start().await.expect("feed starts");

    let client = nostr_sdk::Client::default();
    client.add_relay(url.clone()).await.expect("relay added");
    client
        .try_connect_relay(url.clone(), Duration::from_secs(10))
        .await
        .expect("connects");

    let owner = keys(1);
    let root = announcement(&owner);
    let output = client.send_event(&root).await.expect("sent");
    assert!(output.success.contains(&url), "{:?}", output.failed);
    assert_eq!(feed.recv().await.map(|e| e.id), Some(root.id));
    assert_eq!(
        store.ingest(root.clone(), &source()).await,
        Ok(IngestOutcome::Duplicate)
    );

    let stray = issue(&keys(2), &keys(9), 11);
    let output = client.send_event(&stray).await.expect("sent");
    let reason = output.failed.get(&url).expect("stray event refused");
    assert!(
        reason.contains("blocked: event references no accepted repository"),
        "{reason}"
    );
    assert!(!reason.contains("blocked: blocked:"), "{reason}");
    assert!(store.contains(&stray.id).await.expect("contains"));

    let older = event(&owner, 30617, 5, &[&["d", "repo"], &["relays", SERVICE]]);
    let output = client.send_event(&older).await.expect("sent");
    let reason = output.failed.get(&url).expect("older announcement refused");
    assert!(
        reason.contains("blocked: invalid: older than the stored announcement"),
        "{reason}"
    );

    let accepted = issue(&keys(2), &owner, 12);
    let output = client.send_event(&accepted).await.expect("sent");
    assert!(output.success.contains(&url), "{:?}", output.failed);
    assert_eq!(feed.recv().await.map(|e| e.id), Some(accepted.id));
    assert!(store.contains(&accepted.id).await.expect("contains"));

    client.disconnect().await;
    relay.shutdown();
}

async fn open_with_map(dir: &TempDir, map_size: usize) -> LmdbStore {
    let config = StoreConfig {
        lmdb_map_size: Some(map_size),
        ..config()
    };
    LmdbStore::open(dir.path(), config)
        .await
        .expect("store opens")
}

#[tokio::test]
async fn a_store_whose_map_fills_says_it_is_full() {
    let dir = TempDir::new().expect("temp dir");
    let store = open_with_map(&dir, 256 * 1024).await;
    let owner = keys(1);
    let author = keys(2);
    assert_eq!(
        store.ingest(announcement(&owner), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    let mut failure = None;
    for n in 0..20_000u64 {
        match store
            .ingest(issue(&author, &owner, 100 + n), &source())
            .await
        {
            Ok(IngestOutcome::Saved) => {}
            other => {
                failure = Some(other);
                break;
            }
        }
    }
    let Some(Err(error)) = failure else {
        panic!("a 256 KiB map held 20,000 issues: {failure:?}");
    };
    assert_eq!(error.metric_label(), "full", "{error}");
    assert!(
        matches!(error, crate::StoreError::Full { map_size, .. } if map_size == 256 * 1024),
        "{error}"
    );
}

#[tokio::test]
async fn the_data_file_grows_with_use_not_with_the_map() {
    // What tells a full map apart: the data file is as large as the pages in use.
    let dir = TempDir::new().expect("temp dir");
    let map_size = 256 * 1024 * 1024;
    let store = open_with_map(&dir, map_size).await;
    let owner = keys(1);
    store
        .ingest(announcement(&owner), &source())
        .await
        .expect("saved");
    for n in 0..50u64 {
        store
            .ingest(issue(&keys(2), &owner, 100 + n), &source())
            .await
            .expect("saved");
    }
    let used = std::fs::metadata(dir.path().join("data.mdb"))
        .expect("data file")
        .len();
    assert!(used > 0);
    assert!(
        used + super::room::FULL_ROOM < map_size as u64,
        "{used} bytes used of {map_size}"
    );
}
