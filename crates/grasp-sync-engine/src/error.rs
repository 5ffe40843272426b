//! Errors of the engine's boundaries: the transport to remote relays and the own store.

use thiserror::Error;

/// A failure talking to a remote relay.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The relay URL could not be used (not ws/wss, not parsable by the client library).
    #[error("unusable relay url: {0}")]
    BadUrl(String),
    /// The handshake did not finish before the deadline.
    #[error("connection timed out")]
    Timeout,
    /// The connection could not be established or was refused.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The session is no longer connected; nothing was sent.
    #[error("not connected")]
    NotConnected,
    /// A message could not be handed to the connection.
    #[error("send failed: {0}")]
    Send(String),
    /// The NIP-11 document could not be fetched or read.
    #[error("relay information unavailable: {0}")]
    Info(String),
    /// Every address the host resolves to is refused by the address policy; nothing was
    /// dialled.
    #[error("address refused ({reason}): {host} is {address}")]
    Refused {
        /// The URL's host.
        host: String,
        /// The first refused address.
        address: std::net::IpAddr,
        /// Why ([`AddressRefusal::label`](crate::AddressRefusal::label)).
        reason: &'static str,
    },
}

/// A failure of the own store (not a rejection: rejections are an outcome, not an error).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend failed.
    #[error("store backend failed: {0}")]
    Backend(String),
    /// The store has been shut down.
    #[error("store is closed")]
    Closed,
    /// The store is full: a save failed with less room left in its LMDB map than a write
    /// batch may need. Nothing more is saved until it is reopened with a larger map.
    #[error(
        "store is full: {used} of its {map_size}-byte LMDB map in use; raise lmdb_map_size and restart"
    )]
    Full {
        /// The configured map size in bytes.
        map_size: usize,
        /// The bytes of the map in use when the save failed.
        used: u64,
    },
}

impl StoreError {
    /// A bounded label for metrics: `backend`, `closed` or `full`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            StoreError::Backend(_) => "backend",
            StoreError::Closed => "closed",
            StoreError::Full { .. } => "full",
        }
    }
}

/// Why an event was not taken as a participant's relay list.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RelayListError {
    /// The event is not a NIP-65 relay list (kind 10002).
    #[error("kind {0} is not a relay list")]
    WrongKind(u16),
    /// The author takes part in none of the tracked repositories.
    #[error("the author is not a participant")]
    NotAParticipant,
}
