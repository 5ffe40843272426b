//! The self feed: `FeedHub` fans newly saved events of the feed kinds out to subscribers, and
//! `StoreFeed` (the engine's `SelfFeed`) preloads what is stored, then follows the hub.
//!
//! Delivery is at least once: an event saved while a feed starts may arrive twice. A subscriber
//! that falls more than its live capacity behind is cut off rather than silently skipped: its
//! receiver ends (returns `None`) after the events it did get, a warning is logged, and the
//! consumer recovers by calling `start` again, which preloads everything stored.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nostr::{Event, Filter, Kind};
use nostr_database::NostrDatabase;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::boundary::SelfFeed;
use crate::error::StoreError;
use crate::store::database::GraspDatabase;

/// Kinds the self feed carries: announcements, patches, pull requests and issues.
pub const FEED_KINDS: [u16; 4] = [
    grasp_sync_model::REPO_ANNOUNCEMENT_KIND,
    grasp_sync_model::PATCH_KIND,
    grasp_sync_model::PULL_REQUEST_KIND,
    grasp_sync_model::ISSUE_KIND,
];

/// Default number of live events buffered per subscriber before it is cut off.
pub const DEFAULT_FEED_CAPACITY: usize = 4_096;

/// Capacity of the receiver handed to the consumer.
const OUTPUT_CAPACITY: usize = 256;

/// Fans saved feed events out to live subscribers without blocking the saver.
#[derive(Debug)]
pub(crate) struct FeedHub {
    capacity: usize,
    subscribers: Mutex<Vec<mpsc::Sender<Event>>>,
}

impl FeedHub {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            subscribers: Mutex::new(Vec::new()),
        }
    }

    /// A new live subscription.
    fn subscribe(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let (sender, receiver) = mpsc::channel(self.capacity);
        self.lock()?.push(sender);
        Ok(receiver)
    }

    /// Offers a saved event to every subscriber; drops subscribers that are full or gone.
    pub(crate) fn publish(&self, event: &Event) {
        if !FEED_KINDS.contains(&event.kind.as_u16()) {
            return;
        }
        let Ok(mut subscribers) = self.lock() else {
            return;
        };
        subscribers.retain(|sender| match sender.try_send(event.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::warn!("self feed consumer fell behind; closing its feed so it restarts");
                false
            }
            Err(TrySendError::Closed(_)) => false,
        });
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Vec<mpsc::Sender<Event>>>, StoreError> {
        self.subscribers
            .lock()
            .map_err(|_| StoreError::Backend("self feed lock poisoned".to_owned()))
    }
}

/// The own store's [`SelfFeed`]: stored events of [`FEED_KINDS`], then every newly saved one,
/// whether it came from sync or from a client of the embedded relay.
#[derive(Debug, Clone)]
pub struct StoreFeed {
    database: Arc<GraspDatabase>,
}

impl StoreFeed {
    pub(crate) fn new(database: Arc<GraspDatabase>) -> Self {
        Self { database }
    }
}

#[async_trait]
impl SelfFeed for StoreFeed {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        // Subscribe before reading the store, so nothing saved in between is missed.
        let mut live = self.database.hub().subscribe()?;
        let filter = Filter::new().kinds(FEED_KINDS.map(Kind::from));
        let stored = self
            .database
            .query(filter)
            .await
            .map_err(|error| StoreError::Backend(error.to_string()))?;
        let (sender, receiver) = mpsc::channel(OUTPUT_CAPACITY);
        tokio::spawn(async move {
            for event in stored {
                if sender.send(event).await.is_err() {
                    return;
                }
            }
            while let Some(event) = live.recv().await {
                if sender.send(event).await.is_err() {
                    return;
                }
            }
        });
        Ok(receiver)
    }
}
