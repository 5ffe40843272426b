//! The ingest pipeline: events from every session are offered to the own store concurrently,
//! with a bounded number in flight, so the store can commit them in batches while a fast relay
//! is slowed down (its reader waits for a slot) instead of growing memory without limit.
//!
//! Newly saved events are counted per relay and handed, in 500 ms batches, to the
//! [`SyncedEventHook`] when one is configured, with the events of the same burst that the
//! store deferred to purgatory. Each session watches its own saves
//! ([`SessionSaves`]): its reader waits for them before it reports an EOSE, and hears of every
//! event the store failed to save, so a batch is never confirmed over a failed write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, SubscriptionId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::boundary::{EventStore, IngestOutcome, SyncedEventHook};
use crate::error::StoreError;

/// How long the synced-event hook batches saves before it is called.
pub const HOOK_BATCH_WINDOW: Duration = Duration::from_millis(500);

/// Per-relay counts of what the store did with that relay's events.
#[derive(Debug, Default)]
pub(crate) struct IngestCounts {
    saved: AtomicU64,
    duplicate: AtomicU64,
    rejected: AtomicU64,
    deferred: AtomicU64,
    failed: AtomicU64,
}

/// What the store did with one relay's events so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestTotals {
    /// Newly saved.
    pub saved: u64,
    /// Already stored.
    pub duplicate: u64,
    /// Refused by the acceptance policy.
    pub rejected: u64,
    /// Deferred to purgatory.
    pub deferred: u64,
    /// Store failures.
    pub failed: u64,
}

impl IngestCounts {
    fn totals(&self) -> IngestTotals {
        IngestTotals {
            saved: self.saved.load(Ordering::Relaxed),
            duplicate: self.duplicate.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            deferred: self.deferred.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// An event of a subscription that the store failed to save.
#[derive(Debug)]
pub(crate) struct SaveFailure {
    /// The subscription the event was delivered for.
    pub(crate) subscription_id: SubscriptionId,
    /// The event.
    pub(crate) id: EventId,
    /// What the store said.
    pub(crate) error: StoreError,
}

/// The saves of one session's events: the reader takes a [`SaveWatch`] for every event it
/// submits, waits in [`SessionSaves::settled`] for all of them before it reports an EOSE, and
/// forwards the [`SaveFailure`]s, which are queued before their watch is released.
pub(crate) struct SessionSaves {
    permits: Arc<Semaphore>,
    capacity: u32,
    failures: mpsc::UnboundedSender<SaveFailure>,
}

/// One submitted event's tie to its session: held until the store answered.
pub(crate) struct SaveWatch {
    _permit: OwnedSemaphorePermit,
    subscription_id: SubscriptionId,
    failures: mpsc::UnboundedSender<SaveFailure>,
}

impl SessionSaves {
    /// Watches up to `capacity` saves at once (the ingestor's own bound, so taking a watch
    /// waits no longer than a free ingest slot would), and the receiver of their failures.
    /// The failure queue is unbounded in type; it holds at most the failures of the saves
    /// answered since the reader last looked.
    pub(crate) fn new(capacity: usize) -> (Self, mpsc::UnboundedReceiver<SaveFailure>) {
        let capacity = u32::try_from(capacity.max(1)).unwrap_or(u32::MAX);
        let (failures, rx) = mpsc::unbounded_channel();
        let saves = Self {
            permits: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            failures,
        };
        (saves, rx)
    }

    /// A watch for one event of `subscription_id`.
    pub(crate) async fn watch(&self, subscription_id: SubscriptionId) -> Option<SaveWatch> {
        let permit = Arc::clone(&self.permits).acquire_owned().await.ok()?;
        Some(SaveWatch {
            _permit: permit,
            subscription_id,
            failures: self.failures.clone(),
        })
    }

    /// Waits until the store answered every event watched so far; their failures are queued
    /// by then.
    pub(crate) async fn settled(&self) {
        if let Ok(all) = self.permits.acquire_many(self.capacity).await {
            drop(all);
        }
    }
}

/// Offers events to the store with bounded concurrency.
#[derive(Clone)]
pub(crate) struct Ingestor {
    store: Arc<dyn EventStore>,
    in_flight: usize,
    slots: Arc<Semaphore>,
    counts: Arc<DashMap<RelayUrl, Arc<IngestCounts>>>,
    saved: Option<mpsc::Sender<(Event, bool)>>,
    metrics: Option<crate::metrics::SyncMetrics>,
    /// A full store was reported, and nothing saved since: later failures log quietly.
    full_reported: Arc<AtomicBool>,
}

impl Ingestor {
    /// An ingestor with at most `in_flight` concurrent store calls; starts the hook batcher.
    pub(crate) fn new(
        store: Arc<dyn EventStore>,
        in_flight: usize,
        hook: Option<Arc<dyn SyncedEventHook>>,
        metrics: Option<crate::metrics::SyncMetrics>,
    ) -> Self {
        let saved = hook.map(|hook| {
            let (tx, rx) = mpsc::channel(in_flight.max(1) * 2);
            tokio::spawn(run_hook_batcher(rx, hook));
            tx
        });
        Self {
            store,
            in_flight: in_flight.max(1),
            slots: Arc::new(Semaphore::new(in_flight.max(1))),
            counts: Arc::new(DashMap::new()),
            saved,
            metrics,
            full_reported: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The most store calls in flight at once.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Store calls in flight now: events offered whose save has not been answered.
    pub(crate) fn saving(&self) -> usize {
        self.in_flight
            .saturating_sub(self.slots.available_permits())
    }

    /// Offers one event; waits only for a free slot, not for the store. `watch` is released
    /// once the store answered, after a failure was queued on it.
    pub(crate) async fn submit(&self, source: RelayUrl, event: Event, watch: Option<SaveWatch>) {
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return;
        };
        let counts = self.counts_for(&source);
        let store = Arc::clone(&self.store);
        let saved = self.saved.clone();
        let metrics = self.metrics.clone();
        let full_reported = Arc::clone(&self.full_reported);
        tokio::spawn(async move {
            let keep = saved.as_ref().map(|_| event.clone());
            let id = event.id;
            match store.ingest(event, &source).await {
                Ok(IngestOutcome::Saved) => {
                    counts.saved.fetch_add(1, Ordering::Relaxed);
                    full_reported.store(false, Ordering::Relaxed);
                    if let (Some(tx), Some(event)) = (saved, keep) {
                        // The hook batcher never stops before the ingestor; a closed channel
                        // means shutdown, when the trigger no longer matters.
                        let _ = tx.send((event, false)).await;
                    }
                }
                Ok(IngestOutcome::Duplicate) => {
                    counts.duplicate.fetch_add(1, Ordering::Relaxed);
                }
                Ok(IngestOutcome::Rejected(reason)) => {
                    counts.rejected.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(relay = %source, %reason, "store rejected a synced event");
                }
                Ok(IngestOutcome::Deferred) => {
                    counts.deferred.fetch_add(1, Ordering::Relaxed);
                    if let (Some(tx), Some(event)) = (saved, keep) {
                        let _ = tx.send((event, true)).await;
                    }
                }
                Err(error) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    if let Some(metrics) = &metrics {
                        metrics.record_write_failure(error.metric_label());
                    }
                    match &error {
                        StoreError::Full { .. } if !full_reported.swap(true, Ordering::Relaxed) => {
                            tracing::error!(relay = %source, %error,
                                "the own store is full: synced events are not saved, and their batches are retried, until it is restarted with a larger lmdb_map_size");
                        }
                        StoreError::Full { .. } => {
                            tracing::debug!(relay = %source, %error, "store full: a synced event was not saved");
                        }
                        _ => {
                            tracing::warn!(relay = %source, %error, "store failed to ingest a synced event");
                        }
                    }
                    if let Some(watch) = &watch {
                        // The reader outlives every watch it handed out, unless the session
                        // ended, when nobody needs the failure any more.
                        let _ = watch.failures.send(SaveFailure {
                            subscription_id: watch.subscription_id.clone(),
                            id,
                            error,
                        });
                    }
                }
            }
            drop(watch);
            drop(slot);
        });
    }

    /// Waits until every submitted event has been answered by the store.
    pub(crate) async fn drain(&self, in_flight: usize) {
        let total = u32::try_from(in_flight.max(1)).unwrap_or(u32::MAX);
        if let Ok(all) = self.slots.acquire_many(total).await {
            drop(all);
        }
    }

    /// The store events are offered to.
    pub(crate) fn store(&self) -> Arc<dyn EventStore> {
        Arc::clone(&self.store)
    }

    /// Counts for one relay.
    pub(crate) fn totals(&self, relay: &RelayUrl) -> IngestTotals {
        self.counts
            .get(relay)
            .map(|c| c.totals())
            .unwrap_or_default()
    }

    fn counts_for(&self, relay: &RelayUrl) -> Arc<IngestCounts> {
        Arc::clone(self.counts.entry(relay.clone()).or_default().value())
    }
}

async fn run_hook_batcher(mut rx: mpsc::Receiver<(Event, bool)>, hook: Arc<dyn SyncedEventHook>) {
    while let Some(first) = rx.recv().await {
        let mut saved = Vec::new();
        let mut deferred = Vec::new();
        let mut sort = |(event, was_deferred): (Event, bool)| {
            if was_deferred {
                deferred.push(event);
            } else {
                saved.push(event);
            }
        };
        sort(first);
        let deadline = tokio::time::Instant::now() + HOOK_BATCH_WINDOW;
        while let Ok(Some(item)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            sort(item);
        }
        hook.burst_synced(saved, deferred).await;
    }
}

#[cfg(test)]
mod tests;
