//! [`OffloadedReads`]: the store as the embedded relay reads it. The LMDB backend answers
//! `query`, `count` and `negentropy_items` synchronously inside their futures, so a large read
//! would hold an async worker thread, and on a small host stall the sync engine and the
//! endpoints with it. Here every such read runs on tokio's blocking threads, at most
//! `concurrent` at once; the others wait their turn without holding a worker. Writes and
//! lookups by ID are small and pass straight through.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use nostr::util::BoxedFuture;
use nostr::{Event, EventId, Filter, Timestamp};
use nostr_database::{
    Backend, DatabaseError, DatabaseEventStatus, Events, NostrDatabase, SaveEventStatus,
};
use tokio::sync::Semaphore;

/// A database whose heavy reads run off the async workers.
pub(crate) struct OffloadedReads {
    inner: Arc<dyn NostrDatabase>,
    permits: Arc<Semaphore>,
}

impl fmt::Debug for OffloadedReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffloadedReads")
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl OffloadedReads {
    /// Reads `inner` with at most `concurrent` heavy reads at once.
    pub(crate) fn new(inner: Arc<dyn NostrDatabase>, concurrent: usize) -> OffloadedReads {
        OffloadedReads {
            inner,
            permits: Arc::new(Semaphore::new(concurrent.max(1))),
        }
    }

    /// Runs `read` on a blocking thread once a permit is free.
    async fn offload<R, F, Fut>(&self, read: F) -> Result<R, DatabaseError>
    where
        F: FnOnce(Arc<dyn NostrDatabase>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<R, DatabaseError>>,
        R: Send + 'static,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(DatabaseError::backend)?;
        let inner = Arc::clone(&self.inner);
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || handle.block_on(read(inner)))
            .await
            .map_err(DatabaseError::backend)?
    }
}

impl NostrDatabase for OffloadedReads {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn save_event<'a>(
        &'a self,
        event: &'a Event,
    ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
        self.inner.save_event(event)
    }

    fn check_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
        self.inner.check_id(event_id)
    }

    fn event_by_id<'a>(
        &'a self,
        event_id: &'a EventId,
    ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
        self.inner.event_by_id(event_id)
    }

    fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
        Box::pin(self.offload(move |db| async move { db.count(filter).await }))
    }

    fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
        Box::pin(self.offload(move |db| async move { db.query(filter).await }))
    }

    fn negentropy_items(
        &self,
        filter: Filter,
    ) -> BoxedFuture<'_, Result<Vec<(EventId, Timestamp)>, DatabaseError>> {
        Box::pin(self.offload(move |db| async move { db.negentropy_items(filter).await }))
    }

    fn delete(&self, filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.delete(filter)
    }

    fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
        self.inner.wipe()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::mpsc;
    use std::time::Duration;

    use nostr_database::{MemoryDatabase, MemoryDatabaseOptions};
    use tokio::sync::oneshot;

    use super::*;

    /// A database whose `count` blocks its thread until released (or gives up after a
    /// while), to see where reads run.
    #[derive(Debug)]
    struct Blocking {
        inner: MemoryDatabase,
        started: Mutex<Option<oneshot::Sender<()>>>,
        release: Mutex<mpsc::Receiver<()>>,
    }

    impl NostrDatabase for Blocking {
        fn backend(&self) -> Backend {
            self.inner.backend()
        }
        fn save_event<'a>(
            &'a self,
            event: &'a Event,
        ) -> BoxedFuture<'a, Result<SaveEventStatus, DatabaseError>> {
            self.inner.save_event(event)
        }
        fn check_id<'a>(
            &'a self,
            event_id: &'a EventId,
        ) -> BoxedFuture<'a, Result<DatabaseEventStatus, DatabaseError>> {
            self.inner.check_id(event_id)
        }
        fn event_by_id<'a>(
            &'a self,
            event_id: &'a EventId,
        ) -> BoxedFuture<'a, Result<Option<Event>, DatabaseError>> {
            self.inner.event_by_id(event_id)
        }
        fn count(&self, filter: Filter) -> BoxedFuture<'_, Result<usize, DatabaseError>> {
            if let Some(started) = self.started.lock().expect("lock").take() {
                let _ = started.send(());
            }
            let released = self
                .release
                .lock()
                .expect("lock")
                .recv_timeout(Duration::from_secs(10));
            match released {
                Ok(()) => self.inner.count(filter),
                Err(_) => Box::pin(async { Err(DatabaseError::backend(std::fmt::Error)) }),
            }
        }
        fn query(&self, filter: Filter) -> BoxedFuture<'_, Result<Events, DatabaseError>> {
            self.inner.query(filter)
        }
        fn delete(&self, filter: Filter) -> BoxedFuture<'_, Result<(), DatabaseError>> {
            self.inner.delete(filter)
        }
        fn wipe(&self) -> BoxedFuture<'_, Result<(), DatabaseError>> {
            self.inner.wipe()
        }
    }

    /// On a runtime with one worker, a read that blocks its thread leaves the worker free to
    /// run the task that releases it. (Run on the worker itself, the read would time out.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_blocking_read_leaves_the_async_worker_free() {
        let (started_tx, started_rx) = oneshot::channel();
        let (release_tx, release_rx) = mpsc::channel();
        let database = Arc::new(OffloadedReads::new(
            Arc::new(Blocking {
                inner: MemoryDatabase::with_opts(MemoryDatabaseOptions {
                    events: true,
                    max_events: None,
                }),
                started: Mutex::new(Some(started_tx)),
                release: Mutex::new(release_rx),
            }),
            1,
        ));
        let reader = Arc::clone(&database);
        let read = tokio::spawn(async move { reader.count(Filter::new()).await });
        let releaser = tokio::spawn(async move {
            started_rx.await.expect("the read started");
            release_tx.send(()).expect("release");
        });
        assert_eq!(read.await.expect("join").expect("count"), 0);
        releaser.await.expect("releaser");
    }
}
