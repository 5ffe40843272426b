//! A store that fails to save: no batch over a failed write is confirmed, and once the store
//! saves again every event arrives through the retry, long before the daily reconciliation;
//! on paused time over memory relays.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{EventStore, IngestOutcome, MemoryStore, StoreError};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::TestRelayConfig;
use nostr::{Event, EventId, Filter, Timestamp};

use crate::delivery::without_negentropy;
use crate::support::{ids, paused_store, repo_network, start_paused_engine_with, test_config};

/// The test store, failing every save but announcements' while `failing` is set. A failure
/// takes a moment, as a real backend's does, so the relay's EOSE is usually read before the
/// store answered.
struct FailingStore {
    inner: MemoryStore,
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
        self.inner.ingest(event, source).await
    }

    async fn contains(&self, id: &EventId) -> Result<bool, StoreError> {
        self.inner.contains(id).await
    }

    async fn negentropy_items(
        &self,
        filter: Filter,
    ) -> Result<Vec<(EventId, Timestamp)>, StoreError> {
        self.inner.negentropy_items(filter).await
    }

    fn poll_refetch(&self) -> Vec<(RelayUrl, Vec<EventId>)> {
        EventStore::poll_refetch(&self.inner)
    }
}

/// Syncs a repository from `home` into a store whose saves fail, checks that the home relay's
/// batches are abandoned rather than confirmed, lets the store save again, and waits for every
/// event of the thread.
async fn a_failed_save_leaves_the_batch_incomplete(home: TestRelayConfig) {
    let (network, _fixture, thread) = repo_network(home, "unsaved");
    let urls = network.urls();
    let key = &urls[1];
    let (inner, clock) = paused_store().await;
    let store = Arc::new(FailingStore {
        inner: inner.clone(),
        failing: AtomicBool::new(true),
        failed: AtomicU64::new(0),
    });
    let run = start_paused_engine_with(
        &network,
        test_config(&urls[..1]),
        inner,
        Arc::clone(&store) as Arc<dyn EventStore>,
        clock,
        None,
    )
    .await;
    let abandoned = run
        .wait_for_relay(key, Duration::from_secs(600), |r| {
            r.events_unsaved > 0 && r.pending_batches == 0
        })
        .await;
    let relay = run.relay(key).await.unwrap_or_default();
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
    let status = run
        .wait_for_store(&ids(&thread), Duration::from_secs(600))
        .await;
    assert_eq!(status.relays[key].daily_reconciliations, 0, "{status:#?}");
    run.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_save_in_a_negentropy_batch_is_fetched_again() {
    a_failed_save_leaves_the_batch_incomplete(TestRelayConfig::default()).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_save_in_a_paged_batch_is_fetched_again() {
    a_failed_save_leaves_the_batch_incomplete(without_negentropy(4)).await;
}
