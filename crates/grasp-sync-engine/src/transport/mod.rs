//! The boundary to remote relays: dial a session, send REQ/CLOSE, receive what the relay says.
//!
//! A [`RelaySession`] is one WebSocket connection. Nothing survives it: no subscription is
//! replayed and no reconnect happens behind the engine's back; the engine owns retry, backoff and
//! resubscription. Inbound messages arrive, in order, on the session's bounded channel. A
//! session also runs NIP-77 dry-run diffs ([`RelaySession::negentropy_diff`]) and counts the
//! bytes it moves ([`RelaySession::wire_bytes`]).

mod guarded;
mod negentropy;
mod nip11;
mod sdk;
#[cfg(test)]
mod tests;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_model::RelayUrl;
use nostr::{Event, EventId, Filter, SubscriptionId, Timestamp};
use tokio::sync::mpsc;

pub use self::guarded::{GuardedWebSocket, connect_checked};
pub use self::negentropy::{
    MAX_MISSING_IDS, NEGENTROPY_DEADLINE, NEGENTROPY_PROBE_DEADLINE, NegentropyDiff,
    NegentropyError, RoundLimits, classify_refusal,
};
pub use self::nip11::{NipListing, RelayInfo, fetch_relay_info};
pub use self::sdk::SdkConnector;
pub use self::wire::WireBytes;
use crate::error::TransportError;

/// One message from a relay, or the end of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayInbound {
    /// An event delivered for a subscription (signature already verified by the transport).
    Event {
        /// The subscription it was delivered for.
        subscription_id: SubscriptionId,
        /// The event.
        event: Box<Event>,
    },
    /// End of stored events for a subscription.
    Eose(SubscriptionId),
    /// The relay closed a subscription, with its reason.
    Closed {
        /// The subscription.
        subscription_id: SubscriptionId,
        /// The relay's text, verbatim.
        message: String,
    },
    /// A NOTICE.
    Notice(String),
    /// An OK answer to a published event.
    Ok {
        /// The event answered.
        event_id: EventId,
        /// Whether it was accepted.
        accepted: bool,
        /// The relay's text, verbatim.
        message: String,
    },
    /// The relay sent a NIP-42 challenge and the transport is answering it (reported only by a
    /// session that [`authenticates`](RelaySession::authenticates)).
    AuthChallenge,
    /// The relay accepted the session's AUTH (its `OK` was true).
    Authenticated,
    /// The session's AUTH failed: the relay answered `OK` false, did not answer in time, or
    /// the event could not be signed.
    AuthFailed,
    /// Messages were lost between the transport and the engine: the session can no longer be
    /// trusted to report every EOSE and must be torn down.
    Lagged(u64),
    /// The connection ended. Nothing follows.
    Disconnected,
}

/// A connected session and the channel its inbound messages arrive on.
pub struct RelayConnection {
    /// Handle for sending.
    pub session: Arc<dyn RelaySession>,
    /// Inbound messages, in the order the relay sent them; ends after [`RelayInbound::Disconnected`].
    pub inbound: mpsc::Receiver<RelayInbound>,
}

impl std::fmt::Debug for RelayConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayConnection")
            .field("url", self.session.url())
            .finish()
    }
}

/// Dials relays and reads their NIP-11 documents.
#[async_trait]
pub trait RelayConnector: Send + Sync + 'static {
    /// Opens a new session; fails if the handshake does not finish within `timeout`.
    async fn connect(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayConnection, TransportError>;

    /// Opens an extra connection that carries live subscriptions only: every REQ it sends asks
    /// for `limit: 0`, so it receives what is published while it is open and never a stored
    /// history. By default the same as [`RelayConnector::connect`]; a connector may give such a
    /// connection smaller buffers.
    async fn connect_live_only(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        self.connect(url, timeout).await
    }

    /// Fetches and reads the relay's NIP-11 document within `timeout`.
    async fn fetch_info(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayInfo, TransportError>;
}

/// One live connection to a relay.
#[async_trait]
pub trait RelaySession: Send + Sync + 'static {
    /// The relay.
    fn url(&self) -> &RelayUrl;

    /// Whether the connection is still up.
    fn is_connected(&self) -> bool;

    /// Whether this session answers NIP-42 challenges (it holds a key). Such a session reports
    /// each challenge and its outcome inbound ([`RelayInbound::AuthChallenge`],
    /// [`RelayInbound::Authenticated`], [`RelayInbound::AuthFailed`]).
    fn authenticates(&self) -> bool {
        false
    }

    /// Text-frame bytes this connection has sent and received so far (every client and relay
    /// message, NIP-42 and NIP-77 included; not the NIP-11 fetch). A transport that does not
    /// count reports zero.
    fn wire_bytes(&self) -> WireBytes {
        WireBytes::default()
    }

    /// Sends `["REQ", id, filters...]`. Returns once the message is handed to the connection.
    async fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
    ) -> Result<(), TransportError>;

    /// Sends `["CLOSE", id]`. Returns once the message is handed to the connection.
    async fn close(&self, id: SubscriptionId) -> Result<(), TransportError>;

    /// Publishes an event (used when the own relay is external). The OK arrives inbound.
    async fn publish(&self, event: &Event) -> Result<(), TransportError>;

    /// Runs one NIP-77 reconciliation of `filter` against `have` (the IDs we hold or do not
    /// want, with their `created_at`) as a dry run: it returns the IDs the relay holds that
    /// `have` lacks, and never fetches or publishes an event. The whole round, however
    /// talkative the relay, ends by `limits.deadline`, and with
    /// [`NegentropyError::NoAnswer`] when the relay has not answered the NEG-OPEN within
    /// `limits.first_answer` ([`RoundLimits::NORMAL`] and [`RoundLimits::PROBE`] are the
    /// usual limits). Rounds on one session may run concurrently. A round that ends early
    /// after the relay answered tells the relay to free it (NEG-CLOSE), and one that may have
    /// missed an answer fails rather than return a partial diff.
    async fn negentropy_diff(
        &self,
        filter: Filter,
        have: Vec<(EventId, Timestamp)>,
        limits: RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError>;

    /// Ends the session. Inbound ends with [`RelayInbound::Disconnected`].
    async fn disconnect(&self);
}
