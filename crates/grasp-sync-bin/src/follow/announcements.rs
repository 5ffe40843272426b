//! External mode's repository lookup: [`AnnouncementIndex`] remembers the announcements the
//! own relay's feed delivers that list the service (the newest version of each, at most
//! [`MAX_ANNOUNCEMENTS`]), and [`RecordingFeed`] is the self feed that fills it on the way to
//! the engine. The external relay holds no purgatory, so every repository found is accepted.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use grasp_sync_engine::{SelfFeed, StoreError};
use grasp_sync_model::{AnnouncementLimits, RelayUrl, RepoAnnouncement, RepoCoordinate};
use nostr::{Event, PublicKey};
use tokio::sync::mpsc;

use super::RepositoryLookup;

/// Announcements remembered at most; new repositories past it are not.
pub const MAX_ANNOUNCEMENTS: usize = 100_000;
/// Kind of a repository announcement.
const ANNOUNCEMENT_KIND: u16 = 30617;

/// The announcements listing the service that the feed delivered.
#[derive(Debug)]
pub struct AnnouncementIndex {
    service_url: RelayUrl,
    state: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    by_coordinate: HashMap<RepoCoordinate, RepoAnnouncement>,
    by_identifier: HashMap<String, BTreeSet<RepoCoordinate>>,
}

impl AnnouncementIndex {
    /// An empty index of announcements listing `service_url`.
    pub fn new(service_url: RelayUrl) -> Self {
        Self {
            service_url,
            state: Mutex::new(Known::default()),
        }
    }

    /// Remembers `event` if it is an announcement listing the service, newer than the one
    /// remembered for its coordinate.
    pub fn handle_event(&self, event: &Event) {
        if event.kind.as_u16() != ANNOUNCEMENT_KIND {
            return;
        }
        let Ok(announcement) = RepoAnnouncement::from_event(event, &AnnouncementLimits::default())
        else {
            return;
        };
        if !announcement.relays.contains(&self.service_url) {
            return;
        }
        let mut known = self.lock();
        let coordinate = announcement.coordinate.clone();
        match known.by_coordinate.get(&coordinate) {
            Some(held) if held.version() >= announcement.version() => return,
            None if known.by_coordinate.len() >= MAX_ANNOUNCEMENTS => return,
            _ => {}
        }
        known
            .by_identifier
            .entry(coordinate.identifier().to_owned())
            .or_default()
            .insert(coordinate.clone());
        known.by_coordinate.insert(coordinate, announcement);
    }

    /// Announcements remembered.
    pub fn len(&self) -> usize {
        self.lock().by_coordinate.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl RepositoryLookup for AnnouncementIndex {
    fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Vec<(RepoAnnouncement, bool)> {
        let known = self.lock();
        known
            .by_identifier
            .get(identifier)
            .into_iter()
            .flatten()
            .filter_map(|coordinate| known.by_coordinate.get(coordinate))
            .filter(|a| a.coordinate.owner() == author || a.maintainers.contains(author))
            .map(|a| (a.clone(), false))
            .collect()
    }
}

/// A self feed that records every announcement it passes on in an [`AnnouncementIndex`].
pub struct RecordingFeed<F> {
    inner: F,
    index: Arc<AnnouncementIndex>,
}

impl<F> RecordingFeed<F> {
    /// Wraps `inner`, recording into `index`.
    pub fn new(inner: F, index: Arc<AnnouncementIndex>) -> Self {
        Self { inner, index }
    }
}

#[async_trait]
impl<F: SelfFeed> SelfFeed for RecordingFeed<F> {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let mut events = self.inner.start().await?;
        let (tx, rx) = mpsc::channel(events.max_capacity().max(1));
        let index = Arc::clone(&self.index);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                index.handle_event(&event);
                if tx.send(event).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }
}
