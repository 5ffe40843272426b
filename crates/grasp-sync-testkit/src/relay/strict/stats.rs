//! What the strict relay counts for assertions: connections, query starts with their times,
//! refusals by kind, peak open subscriptions, events sent and the bytes of the text frames
//! each way, per connection and in total.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Why the proxy refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefusalKind {
    /// Open-subscription cap ([`crate::SubscriptionLimit`]).
    TooManySubscriptions,
    /// Filters per REQ ([`crate::FilterLimit`]).
    TooManyFilters,
    /// Retained REQ bytes.
    RetainedBytesExceeded,
    /// Query starts per minute.
    TooManyQueries,
    /// Concurrent negentropy sessions, alone or in the shared subscription budget.
    TooManyConcurrentNeg,
    /// NIP-77 turned off.
    NegentropyDisabled,
    /// A [`crate::PolicyRule`].
    Policy,
    /// A restricted request from a connection not authenticated ([`crate::StrictAuth`]).
    AuthRequired,
}

/// What kind of query a client started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartKind {
    /// A REQ.
    Req,
    /// A NEG-OPEN.
    NegOpen,
}

/// One REQ or NEG-OPEN a client sent, refused or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryStart {
    /// Index of the connection in [`StrictStats::per_connection`].
    pub connection: usize,
    /// REQ or NEG-OPEN.
    pub kind: StartKind,
    /// The subscription ID the client chose.
    pub subscription_id: String,
    /// The filters it carried (one for a NEG-OPEN).
    pub filters: Vec<nostr::Filter>,
    /// When the proxy read it (the tokio clock, so paused time applies).
    pub at: Instant,
    /// Why it was refused, if it was.
    pub refused: Option<RefusalKind>,
}

/// Counters of one client connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Text messages the client sent.
    pub client_messages: u64,
    /// Bytes of the text frames the client sent (every message, refused or not).
    pub bytes_received: u64,
    /// Bytes of the text frames sent to the client (the relay's messages, the proxy's own
    /// answers and its refusals; events withheld are not sent and not counted).
    pub bytes_sent: u64,
    /// [`bytes_received`](Self::bytes_received) by message verb ([`frame_verb`]).
    pub received_by_verb: BTreeMap<&'static str, u64>,
    /// [`bytes_sent`](Self::bytes_sent) by message verb ([`frame_verb`]).
    pub sent_by_verb: BTreeMap<&'static str, u64>,
    /// Most REQ subscriptions open at once.
    pub peak_subscriptions: usize,
    /// Most negentropy sessions open at once.
    pub peak_negentropy: usize,
    /// EVENT messages the relay sent to this client.
    pub events_sent: u64,
    /// EVENT messages carrying an event already sent to this client before.
    pub duplicate_events: u64,
    /// Whether the proxy dropped the connection after its message budget.
    pub dropped: bool,
    /// Whether the client opened it as a connection for live subscriptions only
    /// (`RelayConnector::connect_live_only`). Only the in-memory network sees how a
    /// connection was opened; a WebSocket relay cannot tell.
    pub live_only: bool,
}

/// The verbs [`frame_verb`] tells apart, client and relay messages.
pub const FRAME_VERBS: [&str; 13] = [
    "REQ",
    "CLOSE",
    "EVENT",
    "AUTH",
    "COUNT",
    "NEG-OPEN",
    "NEG-MSG",
    "NEG-CLOSE",
    "NEG-ERR",
    "EOSE",
    "CLOSED",
    "NOTICE",
    "OK",
];

/// The verb of a Nostr message frame (`REQ` for `["REQ", ...]`), one of [`FRAME_VERBS`], or
/// `other` for any other text, so a count by verb stays bounded whatever a client sends.
pub fn frame_verb(frame: &str) -> &'static str {
    let rest = frame.trim_start().strip_prefix('[').unwrap_or_default();
    let rest = rest.trim_start().strip_prefix('"').unwrap_or_default();
    let verb = rest.split('"').next().unwrap_or_default();
    FRAME_VERBS
        .into_iter()
        .find(|known| *known == verb)
        .unwrap_or("other")
}

/// A snapshot of everything the strict relay counted since it was created (restarts
/// included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrictStats {
    /// Every REQ and NEG-OPEN, in arrival order per connection.
    pub starts: Vec<QueryStart>,
    /// Refusals sent, by kind.
    pub refusals: BTreeMap<RefusalKind, u64>,
    /// One entry per client connection, in the order they were accepted.
    pub per_connection: Vec<ConnectionStats>,
}

impl StrictStats {
    /// WebSocket connections the proxy served.
    pub fn connections(&self) -> usize {
        self.per_connection.len()
    }

    /// REQs sent, refused or not.
    pub fn req_starts(&self) -> impl Iterator<Item = &QueryStart> {
        self.starts.iter().filter(|s| s.kind == StartKind::Req)
    }

    /// NEG-OPENs sent, refused or not.
    pub fn neg_opens(&self) -> usize {
        self.starts
            .iter()
            .filter(|s| s.kind == StartKind::NegOpen)
            .count()
    }

    /// Refusals of one kind.
    pub fn refusals_of(&self, kind: RefusalKind) -> u64 {
        self.refusals.get(&kind).copied().unwrap_or(0)
    }

    /// Refusals of every kind.
    pub fn total_refusals(&self) -> u64 {
        self.refusals.values().sum()
    }

    /// Most REQ subscriptions open at once on any one connection.
    pub fn peak_open_subscriptions(&self) -> usize {
        self.per_connection
            .iter()
            .map(|c| c.peak_subscriptions)
            .max()
            .unwrap_or(0)
    }

    /// EVENT messages sent to all clients.
    pub fn events_sent(&self) -> u64 {
        self.per_connection.iter().map(|c| c.events_sent).sum()
    }

    /// Bytes of the text frames clients sent, over every connection.
    pub fn bytes_received(&self) -> u64 {
        self.per_connection.iter().map(|c| c.bytes_received).sum()
    }

    /// Bytes of the text frames sent to clients, over every connection.
    pub fn bytes_sent(&self) -> u64 {
        self.per_connection.iter().map(|c| c.bytes_sent).sum()
    }

    /// EVENT messages that repeated an event already sent on the same connection, over every
    /// connection.
    pub fn duplicate_events(&self) -> u64 {
        self.per_connection.iter().map(|c| c.duplicate_events).sum()
    }

    /// The most starts (REQ and NEG-OPEN, refused or not) any one connection made within a
    /// span of `window`, both ends included. `most_starts_within(Duration::ZERO)` counts
    /// starts at the same instant; a pacer spacing starts one second apart keeps
    /// `most_starts_within(Duration::from_millis(999))` at 1.
    pub fn most_starts_within(&self, window: Duration) -> usize {
        self.most_starts_within_by(window, |_| true)
    }

    /// [`StrictStats::most_starts_within`] over the starts `include` accepts, for example
    /// only the background ones, told apart by their subscription IDs.
    pub fn most_starts_within_by(
        &self,
        window: Duration,
        include: impl Fn(&QueryStart) -> bool,
    ) -> usize {
        let mut most = 0;
        for connection in 0..self.per_connection.len() {
            let mut times: Vec<Instant> = self
                .starts
                .iter()
                .filter(|s| s.connection == connection && include(s))
                .map(|s| s.at)
                .collect();
            times.sort_unstable();
            let mut first = 0;
            for (last, at) in times.iter().enumerate() {
                while at.duration_since(times[first]) > window {
                    first += 1;
                }
                most = most.max(last + 1 - first);
            }
        }
        most
    }
}

/// The shared, lockable counters a relay's connections write to.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    stats: Mutex<StrictStats>,
    /// Event IDs sent, per connection.
    sent_ids: Mutex<Vec<std::collections::HashSet<String>>>,
}

impl Recorder {
    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> StrictStats {
        self.lock().clone()
    }

    /// Registers a new connection; returns its index.
    pub(crate) fn open_connection(&self) -> usize {
        self.open_connection_as(false)
    }

    /// Registers a new connection, opened for live subscriptions only or not; returns its
    /// index.
    pub(crate) fn open_connection_as(&self, live_only: bool) -> usize {
        let mut stats = self.lock();
        stats.per_connection.push(ConnectionStats {
            live_only,
            ..ConnectionStats::default()
        });
        stats.per_connection.len() - 1
    }

    /// Records one client text message and what the gate made of it.
    pub(crate) fn client_message(
        &self,
        connection: usize,
        text: &str,
        start: Option<(StartKind, String, Vec<nostr::Filter>)>,
        at: Instant,
        refused: Option<RefusalKind>,
        open: (usize, usize),
    ) {
        let mut stats = self.lock();
        if let Some((kind, subscription_id, filters)) = start {
            stats.starts.push(QueryStart {
                connection,
                kind,
                subscription_id,
                filters,
                at,
                refused,
            });
        }
        if let Some(kind) = refused {
            *stats.refusals.entry(kind).or_insert(0) += 1;
        }
        if let Some(c) = stats.per_connection.get_mut(connection) {
            c.client_messages += 1;
            c.bytes_received += text.len() as u64;
            *c.received_by_verb.entry(frame_verb(text)).or_insert(0) += text.len() as u64;
            c.peak_subscriptions = c.peak_subscriptions.max(open.0);
            c.peak_negentropy = c.peak_negentropy.max(open.1);
        }
    }

    /// Records one EVENT, of event `id` if it could be read, sent to a client.
    pub(crate) fn event_sent(&self, connection: usize, id: Option<String>) {
        let repeated = id.is_some_and(|id| {
            let mut sent = self.sent_ids.lock().unwrap_or_else(PoisonError::into_inner);
            if sent.len() <= connection {
                sent.resize_with(connection + 1, Default::default);
            }
            !sent[connection].insert(id)
        });
        if let Some(c) = self.lock().per_connection.get_mut(connection) {
            c.events_sent += 1;
            if repeated {
                c.duplicate_events += 1;
            }
        }
    }

    /// Records one text frame sent to a client.
    pub(crate) fn text_sent(&self, connection: usize, text: &str) {
        if let Some(c) = self.lock().per_connection.get_mut(connection) {
            c.bytes_sent += text.len() as u64;
            *c.sent_by_verb.entry(frame_verb(text)).or_insert(0) += text.len() as u64;
        }
    }

    /// Records that the proxy dropped a connection after its message budget.
    pub(crate) fn dropped(&self, connection: usize) {
        if let Some(c) = self.lock().per_connection.get_mut(connection) {
            c.dropped = true;
        }
    }

    fn lock(&self) -> MutexGuard<'_, StrictStats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
