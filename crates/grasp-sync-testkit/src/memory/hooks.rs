//! `NetworkHooks`: what a layer on top of a [`MemoryNetwork`](super::MemoryNetwork) may do to
//! it (refuse a dial, drop a connection, answer in the relay's place, reshape or delay what
//! the relay sends) and the starts it may watch. A fault-free network has none; the engine's
//! deterministic simulation puts its seeded faults and its invariant monitor here.

use std::time::Duration;

use grasp_sync_engine::RelayInbound;
use nostr::Filter;

use crate::RefusalKind;

/// What becomes of one client message, decided before the relay reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageFate {
    /// The relay reads and answers it.
    Read,
    /// The connection drops instead: nothing more is delivered on it.
    Cut,
    /// The relay never sees it; these frames answer it.
    Answer(Vec<String>),
}

/// One REQ or NEG-OPEN as the relay's connection state finds it, just before the relay
/// reads it.
#[derive(Debug)]
pub struct ClientStart<'a> {
    /// The relay's URL, in normal form.
    pub relay: &'a str,
    /// The connection, numbered across the whole network in the order they were opened.
    pub connection: usize,
    /// The REQ's subscription ID; `None` for a NEG-OPEN.
    pub subscription: Option<&'a str>,
    /// The filters it carries (one for a NEG-OPEN).
    pub filters: &'a [Filter],
    /// Whether a REQ reuses the ID of a subscription still open on the connection.
    pub replacing: bool,
    /// REQ subscriptions and negentropy sessions open before it.
    pub open: (usize, usize),
}

/// Hooks a [`MemoryNetwork`](super::MemoryNetwork) calls under its lock, so they must never
/// call back into the network. Every method has a fault-free default.
pub trait NetworkHooks: Send + Sync {
    /// Whether a dial to `relay` reaches it (`false`: the connection is refused).
    fn dial(&self, relay: &str) -> bool {
        let _ = relay;
        true
    }

    /// What becomes of client message `text` on `connection`.
    fn message(&self, relay: &str, connection: usize, text: &str) -> MessageFate {
        let _ = (relay, connection, text);
        MessageFate::Read
    }

    /// Watches a start before the relay reads it (even one [`message`](Self::message)
    /// answers in the relay's place).
    fn start(&self, start: &ClientStart<'_>) {
        let _ = start;
    }

    /// Watches a REQ the relay refused, with why.
    fn refused(&self, relay: &str, connection: usize, filters: &[Filter], kind: RefusalKind) {
        let _ = (relay, connection, filters, kind);
    }

    /// May reshape what the relay sends in one answer (repeat or reorder messages); returns
    /// how long after now it is delivered, after everything queued before it.
    fn deliver(&self, relay: &str, connection: usize, inbound: &mut Vec<RelayInbound>) -> Duration {
        let _ = (relay, connection, inbound);
        Duration::ZERO
    }

    /// How long an admitted NIP-77 round takes before its answer.
    fn negentropy_delay(&self, relay: &str, connection: usize) -> Duration {
        let _ = (relay, connection);
        Duration::ZERO
    }
}

/// The fault-free network's hooks.
#[derive(Debug, Default)]
pub(crate) struct NoHooks;

impl NetworkHooks for NoHooks {}
