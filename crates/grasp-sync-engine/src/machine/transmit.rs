//! What a session asks of its connection, as data: the REQs, CLOSEs and the disconnect its
//! machine decided, in order, waiting for the driver to perform them ([`Transmits`]).
//!
//! The actor queues a message where it decides it and drains every session's queue once per
//! step, so no decision waits on a channel and the order on the wire is the order decided.
//! The queue belongs to the session and dies with it; the driver performs what is left when a
//! session is dropped. Nothing follows a disconnect: a message queued after one is dropped,
//! since no connection is left to carry it.

use std::collections::VecDeque;

use grasp_sync_model::RelayUrl;
use nostr::{Filter, SubscriptionId};

#[cfg(test)]
mod tests;

/// Identifies one connection session of one relay.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The relay.
    pub relay: RelayUrl,
    /// Which of its connections: a new session takes a new generation.
    pub generation: u64,
}

/// One message for a session's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    /// Open a subscription.
    Req {
        /// Its subscription.
        subscription_id: SubscriptionId,
        /// Its filters.
        filters: Vec<Filter>,
    },
    /// Close a subscription.
    Close(SubscriptionId),
    /// End the session.
    Disconnect,
}

/// One session's messages waiting to be performed, oldest first.
#[derive(Debug, Default)]
pub struct Transmits {
    queue: VecDeque<Outbound>,
    /// A disconnect was queued: nothing after it is kept.
    ended: bool,
}

impl Transmits {
    /// Queues `message` after those already waiting; `false` if it was dropped because a
    /// disconnect came before it.
    pub fn push(&mut self, message: Outbound) -> bool {
        if self.ended {
            return false;
        }
        self.ended = message == Outbound::Disconnect;
        self.queue.push_back(message);
        true
    }

    /// The oldest message waiting, to be performed now.
    pub fn poll_transmit(&mut self) -> Option<Outbound> {
        self.queue.pop_front()
    }
}
