//! [`ExternalFeed`]: the engine's `SelfFeed` in external mode: the store core's feed of
//! accepted events (what the index holds, then every event saved through the store), plus an
//! intake that offers what the own relay holds to the acceptance policy.
//!
//! The intake starts with the first feed. On every (re)connection to the own relay it opens a
//! live subscription (`limit: 0`) for kinds 30617, 1617, 1618 and 1621, then pages through the
//! stored ones with the engine's pagination planner (the same `GroupedPagination` that pages
//! remote relays, so the own relay's paging quirks are learned and paged around too), and
//! offers every event to the store as one read from the relay. Only what the policy accepts
//! reaches the feed, and so discovery; a refused event waits in the rejected-events index like a
//! synced one, and is re-processed if its dependency arrives while its copy is hot (else it is
//! offered again on the next reconnection). A reconnect starts over, so events published
//! during an outage are not missed; delivery is at least once.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::store::FEED_KINDS;
use grasp_sync_engine::{IngestOutcome, SelfFeed, StoreError};
use grasp_sync_filters::{GroupedPagination, PageHints, PageStep, RelayPageSession};
use nostr::{Event, EventId, Filter, Kind, SubscriptionId};
use tokio::sync::{mpsc, watch};

use super::link::{OwnRelayLink, SubscriptionMessage};
use super::store::ExternalStore;

/// Longest wait for a page's end of stored events.
const PAGE_DEADLINE: Duration = Duration::from_secs(30);
/// Pause before starting over after a failed page.
const RETRY_DELAY: Duration = Duration::from_secs(2);
/// Capacity of a subscription's route.
const CHANNEL_CAPACITY: usize = 1024;
/// Event IDs one history round remembers to skip a page boundary's re-read: the newest this
/// many. The own relay's history may be far larger; an event re-read past them is offered again,
/// which the policy answers as a duplicate.
pub(crate) const MAX_RECENT_IDS: usize = 10_000;

/// The newest event IDs seen, at most [`MAX_RECENT_IDS`].
#[derive(Debug, Default)]
struct RecentIds {
    order: VecDeque<EventId>,
    set: HashSet<EventId>,
}

impl RecentIds {
    /// Remembers `id`; whether it is new.
    fn insert(&mut self, id: EventId) -> bool {
        if !self.set.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > MAX_RECENT_IDS {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
        true
    }
}

/// The accepted events of the own relay.
#[derive(Debug, Clone)]
pub struct ExternalFeed {
    link: Arc<OwnRelayLink>,
    store: ExternalStore,
    intake_started: Arc<AtomicBool>,
}

impl ExternalFeed {
    /// A feed of `store`'s accepted events, whose intake reads the relay through `link`.
    pub fn new(link: Arc<OwnRelayLink>, store: ExternalStore) -> Self {
        Self {
            link,
            store,
            intake_started: Arc::new(AtomicBool::new(false)),
        }
    }
}

#[async_trait]
impl SelfFeed for ExternalFeed {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        // The store's feed first, so nothing the intake accepts from now on is missed.
        let feed = self.store.guarded().feed().start().await?;
        if !self.intake_started.swap(true, Ordering::SeqCst) {
            let (settle, requests) = mpsc::channel(1);
            tokio::spawn(settler(self.store.clone(), requests));
            let reader = Reader {
                link: Arc::clone(&self.link),
                store: self.store.clone(),
                settle,
                serial: 0,
            };
            tokio::spawn(reader.run());
        }
        Ok(feed)
    }
}

/// Why a round of the feed ended.
enum RoundEnd {
    /// The connection changed: start over.
    Reconnected,
    /// A page failed: wait, then start over.
    Failed,
    /// The link is gone.
    Stopped,
}

struct Reader {
    link: Arc<OwnRelayLink>,
    store: ExternalStore,
    /// Asks the settler to publish what the last offers released (one request pending at most).
    settle: mpsc::Sender<()>,
    serial: u64,
}

/// Publishes what the intake's acceptances released, apart from the reader: those
/// publications wait for the relay's `OK`, which comes through the messages the reader drains.
/// Ends with the reader.
async fn settler(store: ExternalStore, mut requests: mpsc::Receiver<()>) {
    while requests.recv().await.is_some() {
        if let Err(error) = store.settle().await {
            tracing::warn!(%error, "publishing released rejected events failed");
        }
    }
}

impl Reader {
    async fn run(mut self) {
        let mut epoch = self.link.epoch();
        loop {
            // Wait for a connection; the epoch changes whenever one is made.
            while !self.link.is_connected() {
                if epoch.changed().await.is_err() {
                    return;
                }
            }
            epoch.borrow_and_update();
            match self.round(&mut epoch).await {
                RoundEnd::Stopped => return,
                RoundEnd::Reconnected => {}
                RoundEnd::Failed => tokio::time::sleep(RETRY_DELAY).await,
            }
        }
    }

    /// One connection's worth: live subscription, history pages, then live until the epoch
    /// changes.
    async fn round(&mut self, epoch: &mut watch::Receiver<u64>) -> RoundEnd {
        let kinds = FEED_KINDS.map(Kind::from);
        let (live_tx, mut live) = mpsc::channel(CHANNEL_CAPACITY);
        let live_id = self.next_id("live");
        if self
            .link
            .subscribe(
                live_id.clone(),
                vec![Filter::new().kinds(kinds).limit(0)],
                live_tx,
            )
            .is_err()
        {
            return RoundEnd::Failed;
        }
        let end = self.history(epoch, &mut live).await;
        let end = match end {
            Some(end) => end,
            None => loop {
                tokio::select! {
                    changed = epoch.changed() => break match changed {
                        Ok(()) => RoundEnd::Reconnected,
                        Err(_) => RoundEnd::Stopped,
                    },
                    message = live.recv() => match message {
                        Some(message) => {
                            if let Some(end) = self.handle_live(message).await {
                                break end;
                            }
                        }
                        None => break RoundEnd::Failed,
                    },
                }
            },
        };
        self.link.unsubscribe(&live_id);
        end
    }

    /// Pages through stored events, forwarding live events meanwhile. `None` when history is
    /// done.
    async fn history(
        &mut self,
        epoch: &mut watch::Receiver<u64>,
        live: &mut mpsc::Receiver<SubscriptionMessage>,
    ) -> Option<RoundEnd> {
        let kinds = FEED_KINDS.map(Kind::from);
        let mut session = RelayPageSession::new(PageHints::default());
        let mut pages = vec![GroupedPagination::new(
            vec![Filter::new().kinds(kinds)],
            &session,
        )];
        let mut delivered = RecentIds::default();
        while let Some(mut planner) = pages.pop() {
            let (page_tx, mut page) = mpsc::channel(CHANNEL_CAPACITY);
            let page_id = self.next_id("page");
            if self
                .link
                .subscribe(page_id.clone(), planner.current_filters(), page_tx)
                .is_err()
            {
                return Some(RoundEnd::Failed);
            }
            let deadline = tokio::time::sleep(PAGE_DEADLINE);
            tokio::pin!(deadline);
            let end = loop {
                tokio::select! {
                    _ = &mut deadline => {
                        tracing::warn!("own relay did not finish a feed page in time");
                        break Some(RoundEnd::Failed);
                    }
                    changed = epoch.changed() => break Some(match changed {
                        Ok(()) => RoundEnd::Reconnected,
                        Err(_) => RoundEnd::Stopped,
                    }),
                    message = live.recv() => match message {
                        Some(message) => {
                            if let Some(end) = self.handle_live(message).await {
                                break Some(end);
                            }
                        }
                        None => break Some(RoundEnd::Failed),
                    },
                    message = page.recv() => match message {
                        Some(SubscriptionMessage::Event(event)) => {
                            planner.handle_event(&event);
                            if delivered.insert(event.id) {
                                self.offer(*event).await;
                            }
                        }
                        Some(SubscriptionMessage::Eose) => break None,
                        Some(SubscriptionMessage::Closed(reason)) => {
                            tracing::warn!(%reason, "own relay closed a feed page");
                            break Some(RoundEnd::Failed);
                        }
                        None => break Some(RoundEnd::Failed),
                    },
                }
            };
            self.link.unsubscribe(&page_id);
            if end.is_some() {
                return end;
            }
            match planner.handle_eose(&mut session) {
                PageStep::Next(next) => pages.extend(next),
                PageStep::Complete { truncated } => {
                    for cut in truncated {
                        tracing::warn!(at = %cut.at, delivered = cut.delivered, part = ?cut.part,
                            "own relay holds more feed events in one second than it returns in a page; some are not read");
                    }
                }
            }
        }
        None
    }

    async fn handle_live(&mut self, message: SubscriptionMessage) -> Option<RoundEnd> {
        match message {
            SubscriptionMessage::Event(event) => {
                self.offer(*event).await;
                None
            }
            SubscriptionMessage::Eose => None,
            SubscriptionMessage::Closed(reason) => {
                tracing::warn!(%reason, "own relay closed the live feed");
                Some(RoundEnd::Failed)
            }
        }
    }

    /// Offers one event the relay holds to the policy; accepted, it reaches the feed.
    async fn offer(&self, event: Event) {
        match self.store.offer_from_relay(&event).await {
            Ok(IngestOutcome::Rejected(reason)) => {
                tracing::debug!(id = %event.id, %reason, "the policy refused an event the own relay holds");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(id = %event.id, %error, "cannot offer an event the own relay holds");
            }
        }
        // Full: a request is pending already, and covers this offer too.
        let _ = self.settle.try_send(());
    }

    fn next_id(&mut self, what: &str) -> SubscriptionId {
        self.serial += 1;
        SubscriptionId::new(format!("grasp-sync-feed-{what}-{}", self.serial))
    }
}

#[cfg(test)]
mod tests;
