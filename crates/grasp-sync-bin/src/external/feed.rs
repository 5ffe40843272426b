//! [`ExternalFeed`]: the engine's `SelfFeed` in external mode. On every (re)connection to the
//! own relay it opens a live subscription (`limit: 0`) for kinds 30617, 1617, 1618 and 1621,
//! then pages through the stored ones with the engine's pagination planner (the same
//! `GroupedPagination` that pages remote relays, so the own relay's paging quirks are learned
//! and paged around too), and forwards every event (recording it as seen). A reconnect starts
//! over, so events published during an outage are not missed; delivery is at least once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::store::FEED_KINDS;
use grasp_sync_engine::{SelfFeed, StoreError};
use grasp_sync_filters::{GroupedPagination, PageHints, PageStep, RelayPageSession};
use nostr::{Event, EventId, Filter, Kind, SubscriptionId};
use tokio::sync::{mpsc, watch};

use super::index::HaveIndex;
use super::link::{OwnRelayLink, SubscriptionMessage};

/// Longest wait for a page's end of stored events.
const PAGE_DEADLINE: Duration = Duration::from_secs(30);
/// Pause before starting over after a failed page.
const RETRY_DELAY: Duration = Duration::from_secs(2);
/// Capacity of a subscription's route and of the receiver handed to the engine.
const CHANNEL_CAPACITY: usize = 1024;

/// The own relay's accepted events, by subscription.
#[derive(Debug, Clone)]
pub struct ExternalFeed {
    link: Arc<OwnRelayLink>,
    index: Arc<HaveIndex>,
}

impl ExternalFeed {
    /// A feed over `link`, recording what it sees in `index`.
    pub fn new(link: Arc<OwnRelayLink>, index: Arc<HaveIndex>) -> Self {
        Self { link, index }
    }
}

#[async_trait]
impl SelfFeed for ExternalFeed {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        let reader = Reader {
            link: Arc::clone(&self.link),
            index: Arc::clone(&self.index),
            out: sender,
            serial: 0,
        };
        tokio::spawn(reader.run());
        Ok(receiver)
    }
}

/// Why a round of the feed ended.
enum RoundEnd {
    /// The connection changed: start over.
    Reconnected,
    /// A page failed: wait, then start over.
    Failed,
    /// The engine is gone.
    Stopped,
}

struct Reader {
    link: Arc<OwnRelayLink>,
    index: Arc<HaveIndex>,
    out: mpsc::Sender<Event>,
    serial: u64,
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
        let mut delivered: HashSet<EventId> = HashSet::new();
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
                            if delivered.insert(event.id) && !self.forward(*event).await {
                                break Some(RoundEnd::Stopped);
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
                (!self.forward(*event).await).then_some(RoundEnd::Stopped)
            }
            SubscriptionMessage::Eose => None,
            SubscriptionMessage::Closed(reason) => {
                tracing::warn!(%reason, "own relay closed the live feed");
                Some(RoundEnd::Failed)
            }
        }
    }

    /// Records and forwards one event; false once the engine is gone.
    async fn forward(&self, event: Event) -> bool {
        if let Err(error) = self.index.record_seen(&event).await {
            tracing::warn!(%error, "cannot record a feed event in the local index");
        }
        self.out.send(event).await.is_ok()
    }

    fn next_id(&mut self, what: &str) -> SubscriptionId {
        self.serial += 1;
        SubscriptionId::new(format!("grasp-sync-feed-{what}-{}", self.serial))
    }
}
