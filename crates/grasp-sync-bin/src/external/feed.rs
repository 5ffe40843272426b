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
//!
//! A live subscription can lose events without a disconnect: a relay whose subscriber falls
//! behind skips what it could not deliver (nostr-relay-builder drops the oldest of the 1,024
//! new events a connection has not taken yet, silently), as it does when several shards write
//! at once. So after the live subscription delivered anything, once it has been quiet for
//! [`REREAD_QUIET`], the stored events are paged through again; the pause between two re-reads
//! starts at [`REREAD_MIN`] and doubles up to [`REREAD_MAX`] while re-reads find nothing the
//! live subscription missed (`created_at` is the author's, so `since` cannot ask for what
//! arrived lately: each re-read pages everything, which the policy answers as duplicates).

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
use tokio::time::Instant;

use super::link::{OwnRelayLink, SubscriptionMessage};
use super::store::ExternalStore;

/// Longest wait for a page's end of stored events.
const PAGE_DEADLINE: Duration = Duration::from_secs(30);
/// Pause before starting over after a failed page.
const RETRY_DELAY: Duration = Duration::from_secs(2);
/// Capacity of a subscription's route.
const CHANNEL_CAPACITY: usize = 1024;
/// How long the live subscription is quiet, after it delivered, before a re-read.
pub(crate) const REREAD_QUIET: Duration = Duration::from_secs(5);
/// The shortest pause between two re-reads of the stored events.
pub(crate) const REREAD_MIN: Duration = Duration::from_secs(30);
/// The longest pause between two re-reads, reached while re-reads find nothing new.
pub(crate) const REREAD_MAX: Duration = Duration::from_secs(3600);
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
        if self.order.len() > MAX_RECENT_IDS
            && let Some(oldest) = self.order.pop_front()
        {
            self.set.remove(&oldest);
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
                reread: Reread::new(tokio::time::Instant::now()),
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
    reread: Reread,
}

/// When the stored events are paged through again (see the module documentation).
#[derive(Debug)]
struct Reread {
    /// Live events offered since the last pass through the stored events began.
    live_since_read: usize,
    /// Events the last pass accepted as new (the live subscription had missed them).
    found_by_read: usize,
    last_live_at: Instant,
    last_read_at: Instant,
    pause: Duration,
}

impl Reread {
    fn new(now: Instant) -> Self {
        Self {
            live_since_read: 0,
            found_by_read: 0,
            last_live_at: now,
            last_read_at: now,
            pause: REREAD_MIN,
        }
    }

    /// A pass through the stored events begins.
    fn handle_read_started(&mut self, now: Instant) {
        self.live_since_read = 0;
        self.found_by_read = 0;
        self.last_read_at = now;
    }

    /// A pass through the stored events ended: the next pause doubles if it found nothing the
    /// live subscription had not delivered.
    fn handle_read_done(&mut self, first: bool) {
        if first {
            return;
        }
        self.pause = if self.found_by_read > 0 {
            REREAD_MIN
        } else {
            (self.pause * 2).min(REREAD_MAX)
        };
    }

    fn handle_live(&mut self, now: Instant) {
        self.live_since_read += 1;
        self.last_live_at = now;
    }

    /// When the next re-read is due: `None` while the live subscription delivered nothing
    /// since the last one.
    fn poll_timeout(&self) -> Option<Instant> {
        (self.live_since_read > 0)
            .then(|| (self.last_live_at + REREAD_QUIET).max(self.last_read_at + self.pause))
    }
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
        let end = self.read_stored(epoch, &mut live, true).await;
        let end = match end {
            Some(end) => end,
            None => loop {
                let reread = self.reread.poll_timeout();
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
                    () = sleep_until_some(reread) => {
                        if let Some(end) = self.read_stored(epoch, &mut live, false).await {
                            break end;
                        }
                    }
                }
            },
        };
        self.link.unsubscribe(&live_id);
        end
    }

    /// One pass through the stored events ([`Self::history`]), timed for the re-reads: the
    /// `first` of a connection, or a re-read.
    async fn read_stored(
        &mut self,
        epoch: &mut watch::Receiver<u64>,
        live: &mut mpsc::Receiver<SubscriptionMessage>,
        first: bool,
    ) -> Option<RoundEnd> {
        self.reread.handle_read_started(Instant::now());
        let end = self.history(epoch, live).await;
        if end.is_none() {
            if !first {
                tracing::debug!(
                    found = self.reread.found_by_read,
                    "re-read the own relay's stored feed events"
                );
                if self.reread.found_by_read > 0 {
                    tracing::info!(
                        found = self.reread.found_by_read,
                        "the own relay's live feed had skipped events; a re-read of its stored events found them"
                    );
                }
            }
            self.reread.handle_read_done(first);
        }
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
                            if delivered.insert(event.id)
                                && matches!(self.offer(*event).await, Some(IngestOutcome::Saved))
                            {
                                self.reread.found_by_read += 1;
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
                self.reread.handle_live(Instant::now());
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

    /// Offers one event the relay holds to the policy; accepted, it reaches the feed. The
    /// policy's answer, `None` when the offer failed.
    async fn offer(&self, event: Event) -> Option<IngestOutcome> {
        let outcome = match self.store.offer_from_relay(&event).await {
            Ok(IngestOutcome::Rejected(reason)) => {
                tracing::debug!(id = %event.id, %reason, "the policy refused an event the own relay holds");
                Some(IngestOutcome::Rejected(reason))
            }
            Ok(outcome) => Some(outcome),
            Err(error) => {
                tracing::warn!(id = %event.id, %error, "cannot offer an event the own relay holds");
                None
            }
        };
        // Full: a request is pending already, and covers this offer too.
        let _ = self.settle.try_send(());
        outcome
    }

    fn next_id(&mut self, what: &str) -> SubscriptionId {
        self.serial += 1;
        SubscriptionId::new(format!("grasp-sync-feed-{what}-{}", self.serial))
    }
}

#[cfg(test)]
mod tests;

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
