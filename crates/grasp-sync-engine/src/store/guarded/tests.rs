//! The store core over a backend it does not own (a memory database standing in for an
//! external relay): the policy guards the backend, the feed carries only accepted events, and
//! the rejected-events cold index persisted in the given directory survives a reopen over the
//! same backend, so a release after the reopen is reported for fetching.

use std::sync::Arc;

use grasp_sync_model::{RelayUrl, RepoCoordinate};
use nostr::{Event, EventBuilder, Keys, Kind, SecretKey, Tag, Timestamp};
use nostr_database::{MemoryDatabase, MemoryDatabaseOptions, NostrDatabase};
use tempfile::TempDir;

use super::GuardedStore;
use crate::boundary::{EventStore, IngestOutcome, SelfFeed};
use crate::clock::TokioClock;
use crate::store::config::StoreConfig;

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

fn announcement(owner: &Keys, relay: &str) -> Event {
    event(
        owner,
        30617,
        10,
        &[
            &["d", "repo"],
            &["relays", relay],
            &["clone", "https://relay.example.com/repo.git"],
        ],
    )
}

fn issue(owner: &Keys) -> Event {
    let repo = RepoCoordinate::new(owner.public_key(), "repo")
        .expect("valid coordinate")
        .to_string();
    event(&keys(9), 1621, 20, &[&["a", &repo]])
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("valid url")
}

fn backend() -> Arc<dyn NostrDatabase> {
    Arc::new(MemoryDatabase::with_opts(MemoryDatabaseOptions {
        events: true,
        max_events: None,
    }))
}

async fn open(backend: &Arc<dyn NostrDatabase>, dir: &TempDir) -> GuardedStore {
    let config = StoreConfig::new(
        RelayUrl::parse(SERVICE).expect("valid url"),
        "relay.example.com",
    );
    GuardedStore::open(
        Arc::clone(backend),
        Some(dir.path()),
        config,
        Arc::new(TokioClock::from_system()),
    )
    .await
    .expect("store opens")
}

#[tokio::test]
async fn the_backend_and_the_feed_get_only_accepted_events() {
    let dir = tempfile::tempdir().expect("dir");
    let backend = backend();
    let store = open(&backend, &dir).await;
    let owner = keys(1);
    let listed = announcement(&owner, SERVICE);
    let unlisted = announcement(&keys(2), "wss://other.example.org");
    assert_eq!(
        store.ingest(listed.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert!(matches!(
        store.offer(&unlisted).await,
        Ok(IngestOutcome::Rejected(_))
    ));
    let held: Vec<_> = backend
        .query(nostr::Filter::new())
        .await
        .expect("query")
        .into_iter()
        .map(|event| event.id)
        .collect();
    assert_eq!(held, vec![listed.id]);
    let mut feed = store.feed().start().await.expect("feed");
    assert_eq!(feed.recv().await.map(|event| event.id), Some(listed.id));
    assert!(feed.try_recv().is_err(), "nothing else is fed");
}

#[tokio::test]
async fn a_rejection_survives_a_reopen_and_its_release_is_reported_for_fetching() {
    let dir = tempfile::tempdir().expect("dir");
    let backend = backend();
    let owner = keys(1);
    let early = issue(&owner);
    {
        let store = open(&backend, &dir).await;
        assert!(matches!(
            store.ingest(early.clone(), &source()).await,
            Ok(IngestOutcome::Rejected(_))
        ));
        assert_eq!(store.rejected_usage().expect("usage").cold_ids, 1);
    }
    let store = open(&backend, &dir).await;
    assert!(store.contains(&early.id).await.expect("contains"));
    assert!(store.rejection_reason(&early.id).expect("reason").is_some());
    assert_eq!(
        store.ingest(announcement(&owner, SERVICE), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert!(!store.contains(&early.id).await.expect("contains"));
    assert_eq!(
        store.poll_refetch().expect("refetch"),
        vec![(source(), vec![early.id])]
    );
}
