//! Tests of the in-memory store: the accept-all mode, the policy mode and its self feed.

use grasp_sync_model::RelayUrl;
use nostr::{Event, EventBuilder, Keys, Kind, SecretKey, Timestamp};

use super::MemoryStore;
use crate::boundary::{EventStore, IngestOutcome, SelfFeed};
use crate::store::StoreConfig;

fn note(kind: u16, created_at: u64) -> Event {
    let keys = Keys::new(SecretKey::from_slice(&[7; 32]).expect("valid secret key"));
    EventBuilder::new(Kind::from(kind), "")
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(&keys)
        .expect("signing works")
}

fn source() -> RelayUrl {
    RelayUrl::parse("wss://source.example.org").expect("valid url")
}

#[tokio::test]
async fn accept_all_stores_every_verified_event_and_feeds_feed_kinds() {
    let store = MemoryStore::accept_all().await.expect("store opens");
    let mut feed = store.start().await.expect("feed starts");
    let unrelated = note(1, 10);
    let issue = note(1621, 11);
    assert_eq!(
        store.ingest(unrelated.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert_eq!(
        store.ingest(issue.clone(), &source()).await,
        Ok(IngestOutcome::Saved)
    );
    assert_eq!(
        store.ingest(issue.clone(), &source()).await,
        Ok(IngestOutcome::Duplicate)
    );
    assert!(store.contains(&unrelated.id).await.expect("contains"));
    assert_eq!(feed.recv().await.map(|e| e.id), Some(issue.id));
}

#[tokio::test]
async fn policy_mode_rejects_unrelated_events() {
    let config = StoreConfig::new(
        RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        "relay.example.com",
    );
    let store = MemoryStore::new(config).await.expect("store opens");
    let unrelated = note(1, 10);
    let outcome = store.ingest(unrelated.clone(), &source()).await;
    assert!(
        matches!(outcome, Ok(IngestOutcome::Rejected(ref reason)) if reason.starts_with("blocked: ")),
        "{outcome:?}"
    );
    assert!(store.contains(&unrelated.id).await.expect("contains"));
    assert!(
        store
            .rejection_reason(&unrelated.id)
            .expect("lock")
            .is_some()
    );
}
