//! A store that fails to save: no batch over a failed write is confirmed, and once the store
//! saves again every event arrives through the retry, long before the daily reconciliation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{
    EngineParts, EventStore, IngestOutcome, SdkConnector, StoreError, SyncEngine,
};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Event, EventId, Filter, Timestamp};

use crate::delivery::{seed_repo, without_negentropy};
use crate::support::{TestStore, ids, init_logs, test_config, wait_for_store, wait_until};

/// The test store, failing every save but announcements' while `failing` is set. A failure
/// takes a moment, as a real backend's does, so the relay's EOSE is usually read before the
/// store answered.
struct FailingStore {
    inner: TestStore,
    failing: AtomicBool,
    failed: AtomicU64,
}

#[async_trait]
impl EventStore for FailingStore {
    async fn ingest(&self, event: Event, source: &RelayUrl) -> Result<IngestOutcome, StoreError> {
        if self.failing.load(Ordering::SeqCst) && event.kind.as_u16() != 30617 {
            self.failed.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(StoreError::Backend("write failed".to_owned()));
        }
        self.inner.store.ingest(event, source).await
    }

    async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        self.inner.store.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.inner.store.negentropy_items(filter).await
    }

    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        EventStore::poll_refetch(&self.inner.store)
    }
}

/// Syncs a repository from `home` into a store whose saves fail, checks that the home relay's
/// batches are abandoned rather than confirmed, lets the store save again, and waits for every
/// event of the thread.
async fn a_failed_save_leaves_the_batch_incomplete(home: TestRelayConfig) {
    init_logs();
    let bootstrap = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("bootstrap");
    let home = TestRelay::start(home).await.expect("home");
    let (_fixture, thread) = seed_repo(&bootstrap, &home, "unsaved").await;
    let store = Arc::new(FailingStore {
        inner: TestStore::open().await,
        failing: AtomicBool::new(true),
        failed: AtomicU64::new(0),
    });
    let parts = EngineParts::new(
        Arc::new(
            SdkConnector::default()
                .with_address_policy(grasp_sync_engine::AddressPolicy::allow_all()),
        ),
        Arc::clone(&store) as Arc<dyn EventStore>,
        Arc::new(store.inner.store.feed()),
    );
    let engine = SyncEngine::start(test_config(&[bootstrap.url()]), parts)
        .await
        .expect("engine starts");
    let key = RelayUrl::parse(&home.url()).expect("url").to_string();
    let abandoned = wait_until(Duration::from_secs(60), || async {
        engine
            .status()
            .await
            .and_then(|s| s.relays.get(&key).cloned())
            .is_some_and(|r| r.events_unsaved > 0 && r.pending_batches == 0)
    })
    .await;
    let status = engine.status().await.expect("status");
    let relay = status.relays.get(&key).cloned().unwrap_or_default();
    assert!(abandoned, "{relay:#?}");
    assert!(store.failed.load(Ordering::SeqCst) > 0);
    assert!(relay.history_unsaved > 0, "{relay:#?}");
    // Nothing of the repository is confirmed for the home relay: it is derived again.
    assert_eq!(relay.confirmed_repos, 0, "{relay:#?}");
    assert!(
        relay
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("store failed to save")),
        "{relay:#?}"
    );
    assert_eq!(relay.daily_reconciliations, 0, "{relay:#?}");

    store.failing.store(false, Ordering::SeqCst);
    let status = wait_for_store(
        &store.inner,
        &engine,
        &ids(&thread),
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(status.relays[&key].daily_reconciliations, 0, "{status:#?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_in_a_negentropy_batch_is_fetched_again() {
    a_failed_save_leaves_the_batch_incomplete(TestRelayConfig::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_save_in_a_paged_batch_is_fetched_again() {
    a_failed_save_leaves_the_batch_incomplete(without_negentropy(4)).await;
}
