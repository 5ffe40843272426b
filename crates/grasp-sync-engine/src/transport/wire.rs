//! Bytes one connection moves: the text frames of the WebSocket (the serialised client and
//! relay messages), counted where the transport writes and reads them. Control frames (ping,
//! pong, close), the HTTP upgrade and the NIP-11 fetch are not counted.

use std::ops::{Add, AddAssign};
use std::sync::atomic::{AtomicU64, Ordering};

/// Text-frame bytes sent to and received from a relay. Both only grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireBytes {
    /// Bytes of the client messages sent (REQ, CLOSE, NEG-OPEN, NEG-MSG, NEG-CLOSE, AUTH,
    /// EVENT).
    pub sent: u64,
    /// Bytes of the relay messages received (EVENT, EOSE, CLOSED, NOTICE, OK, AUTH, NEG-*).
    pub received: u64,
}

impl WireBytes {
    /// Sent and received together.
    pub fn total(self) -> u64 {
        self.sent.saturating_add(self.received)
    }
}

impl Add for WireBytes {
    type Output = WireBytes;

    fn add(self, other: WireBytes) -> WireBytes {
        WireBytes {
            sent: self.sent.saturating_add(other.sent),
            received: self.received.saturating_add(other.received),
        }
    }
}

impl AddAssign for WireBytes {
    fn add_assign(&mut self, other: WireBytes) {
        *self = *self + other;
    }
}

/// The shared counter of one connection: the sending half and the reading half add to it,
/// the session reads it.
#[derive(Debug, Default)]
pub(crate) struct WireCounter {
    sent: AtomicU64,
    received: AtomicU64,
}

impl WireCounter {
    /// A text frame of `len` bytes was handed to the connection.
    pub(crate) fn handle_sent(&self, len: usize) {
        self.sent.fetch_add(len as u64, Ordering::Relaxed);
    }

    /// A text frame of `len` bytes was read from the connection.
    pub(crate) fn handle_received(&self, len: usize) {
        self.received.fetch_add(len as u64, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> WireBytes {
        WireBytes {
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests;
