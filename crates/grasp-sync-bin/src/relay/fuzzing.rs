//! [`ConnectionGuard`]: the embedded relay's per-connection guard behind a small public face,
//! built only with the `fuzzing` feature so the fuzz targets can drive it with arbitrary client
//! messages on injected time and check its counts. Nothing else should use it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nostr::{SubscriptionId, Timestamp};

use super::guard::{Guard, Verdict};
use super::limits::RelayLimits;

/// One connection's guard, on time measured from its creation.
#[derive(Debug)]
pub struct ConnectionGuard {
    guard: Guard,
    opened: Instant,
}

/// What the guard does with one client message, without the parsed filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Passed to the relay unchanged.
    Forward,
    /// This text is sent to the client; nothing reaches the relay.
    Answer(String),
    /// NIP-77 session `id` is opened (or replaced) from `initial` (hex).
    NegOpen {
        /// The session.
        id: String,
        /// The client's first message.
        initial: String,
    },
    /// The next message (hex) of NIP-77 session `id`.
    NegMsg {
        /// The session.
        id: String,
        /// The client's message.
        message: String,
    },
    /// NIP-77 session `id` is closed by the client.
    NegClose {
        /// The session.
        id: String,
    },
}

impl ConnectionGuard {
    /// A fresh connection within `limits`.
    pub fn new(limits: RelayLimits) -> ConnectionGuard {
        let opened = Instant::now();
        ConnectionGuard {
            guard: Guard::new(Arc::new(limits), opened),
            opened,
        }
    }

    /// Judges one text message received `elapsed` after the connection opened, when the unix
    /// clock reads `unix_now`.
    pub fn handle_client(
        &mut self,
        text: &str,
        elapsed: Duration,
        unix_now: Timestamp,
    ) -> Judgement {
        let now = self.opened.checked_add(elapsed).unwrap_or(self.opened);
        match self.guard.handle_client(text, now, unix_now) {
            Verdict::Forward => Judgement::Forward,
            Verdict::Answer(text) => Judgement::Answer(text),
            Verdict::NegOpen { id, initial, .. } => Judgement::NegOpen {
                id: id.to_string(),
                initial,
            },
            Verdict::NegMsg { id, message } => Judgement::NegMsg {
                id: id.to_string(),
                message,
            },
            Verdict::NegClose { id } => Judgement::NegClose { id: id.to_string() },
        }
    }

    /// The relay closed subscription `id` itself.
    pub fn relay_closed(&mut self, id: &str) {
        self.guard.relay_closed(&SubscriptionId::new(id));
    }

    /// NIP-77 session `id` ended with an error sent to the client.
    pub fn negentropy_failed(&mut self, id: &str) {
        self.guard.negentropy_failed(&SubscriptionId::new(id));
    }

    /// Open subscriptions.
    pub fn subscriptions(&self) -> usize {
        self.guard.subscriptions()
    }

    /// Open NIP-77 sessions.
    pub fn negentropy_sessions(&self) -> usize {
        self.guard.negentropy_sessions()
    }
}
