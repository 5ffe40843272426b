//! Which NIP-77 rounds are in progress on a session, and the hand-off of each one's answers
//! from the session's reader.
//!
//! One reader of the relay's notification broadcast per session, apart from the one that feeds
//! the engine and never waiting on anything, hands each round its answers: a NEG-MSG, NEG-ERR
//! or CLOSED for its subscription ID, and every NOTICE, since a NOTICE cannot name what it
//! answers. A round then never reads the busy broadcast itself, so a burst of events on the
//! same connection does not make it lose an answer while it reconciles. When an answer can be
//! lost after all (the round's queue is full, or the reader lost messages from the broadcast),
//! the round's route is dropped and the round fails: a reconciliation that misses an answer
//! must not pass as complete.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use nostr::{RelayMessage, SubscriptionId};
use tokio::sync::mpsc;

#[cfg(test)]
mod tests;

/// How many answers a round may have waiting before its route is dropped. A round has one
/// frame in flight at a time, so its own answers never come near this; only NOTICEs could.
pub(super) const ROUTE_CAPACITY: usize = 64;

/// The rounds in progress on one session. Cloned handles share the routes.
#[derive(Debug, Clone, Default)]
pub(super) struct RoundRoutes(Arc<Mutex<Routes>>);

#[derive(Debug, Default)]
struct Routes {
    open: HashMap<SubscriptionId, mpsc::Sender<RelayMessage<'static>>>,
    /// The session's reader has stopped: no round can get an answer any more.
    ended: bool,
}

/// How a round's answers stopped coming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RouteEnd {
    /// The session ended.
    SessionEnded,
    /// Answers may have been lost: the round's queue was full or the reader fell behind.
    AnswersLost,
}

impl RoundRoutes {
    /// Opens the route of the round `id`; `None` once the session's reader has stopped.
    pub(super) fn open(
        &self,
        id: &SubscriptionId,
    ) -> Option<mpsc::Receiver<RelayMessage<'static>>> {
        let mut routes = self.lock();
        if routes.ended {
            return None;
        }
        let (tx, rx) = mpsc::channel(ROUTE_CAPACITY);
        routes.open.insert(id.clone(), tx);
        Some(rx)
    }

    /// The round `id` is over.
    pub(super) fn close(&self, id: &SubscriptionId) {
        self.lock().open.remove(id);
    }

    /// Closes the route of the round `id` when dropped, so a round that is cancelled leaves
    /// nothing behind.
    pub(super) fn closing(&self, id: SubscriptionId) -> ClosingRoute<'_> {
        ClosingRoute { routes: self, id }
    }

    /// Why the round's route closed (asked after its receiver returned `None`).
    pub(super) fn end_of(&self) -> RouteEnd {
        if self.lock().ended {
            RouteEnd::SessionEnded
        } else {
            RouteEnd::AnswersLost
        }
    }

    /// Hands `message` to the rounds it answers: a NEG-MSG, NEG-ERR or CLOSED to the round
    /// with its subscription ID, a NOTICE to every round.
    pub(super) fn deliver(&self, message: &RelayMessage<'static>) {
        let round = match message {
            RelayMessage::NegMsg {
                subscription_id, ..
            }
            | RelayMessage::NegErr {
                subscription_id, ..
            }
            | RelayMessage::Closed {
                subscription_id, ..
            } => subscription_id.as_ref(),
            RelayMessage::Notice(_) => {
                self.lock()
                    .open
                    .retain(|_, route| route.try_send(message.clone()).is_ok());
                return;
            }
            _ => return,
        };
        let mut routes = self.lock();
        let Some(route) = routes.open.get(round) else {
            return;
        };
        if route.try_send(message.clone()).is_err() {
            // Full: the round cannot keep up and would miss this answer. Dropping the route
            // fails it; a closed receiver means the round is already gone.
            routes.open.remove(round);
        }
    }

    /// Whether no round has a route.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().open.is_empty()
    }

    /// The reader lost messages: every round in progress may have lost an answer.
    pub(super) fn fail_all(&self) {
        self.lock().open.clear();
    }

    /// The session's reader has stopped.
    pub(super) fn end(&self) {
        let mut routes = self.lock();
        routes.ended = true;
        routes.open.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Closes a round's route when dropped ([`RoundRoutes::closing`]).
pub(super) struct ClosingRoute<'a> {
    routes: &'a RoundRoutes,
    id: SubscriptionId,
}

impl Drop for ClosingRoute<'_> {
    fn drop(&mut self) {
        self.routes.close(&self.id);
    }
}
