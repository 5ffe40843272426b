//! [`RelayLimits`]: every bound the embedded relay enforces on its clients, with defaults
//! fit for a public relay, and the NIP-11 `limitation` object that advertises them.

use std::time::Duration;

use grasp_sync_engine::front::FrontLimits;
use grasp_sync_engine::store::DEFAULT_MAX_FUTURE_CREATED_AT;
use serde_json::{Value, json};

/// The embedded relay's limits. Each is a configuration key under `[relay]`
/// (`docs/configuration.md`); `docs/security.md` says what a client gets past each one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayLimits {
    /// Open connections in total.
    pub max_connections: usize,
    /// Open connections from one IP address (0: no cap; behind a reverse proxy every
    /// client has the proxy's address).
    pub max_connections_per_ip: usize,
    /// Time a connection has to send a complete HTTP request head.
    pub header_read_timeout: Duration,
    /// A WebSocket that sends nothing (not even a pong) for this long is closed. Pings go
    /// out at a third of it.
    pub idle_timeout: Duration,
    /// Largest WebSocket message, in bytes (NIP-11 `max_message_length`).
    pub max_message_length: usize,
    /// Longest event `content`, in characters (NIP-11 `max_content_length`).
    pub max_content_length: usize,
    /// Most tags on an event (NIP-11 `max_event_tags`).
    pub max_event_tags: usize,
    /// Open subscriptions per connection (NIP-11 `max_subscriptions`).
    pub max_subscriptions: usize,
    /// Filters in one REQ (advertised as `max_filters`, a field some
    /// relays use; NIP-11 has no standard one).
    pub max_filters: usize,
    /// Longest subscription ID (NIP-11 `max_subid_length`).
    pub max_subid_length: usize,
    /// A filter's `limit` is clamped to this (NIP-11 `max_limit`).
    pub max_limit: usize,
    /// The `limit` of a filter that has none and no `ids` (NIP-11 `default_limit`).
    pub default_limit: usize,
    /// Open NIP-77 sessions per connection.
    pub max_negentropy_sessions: usize,
    /// Largest NIP-77 message the relay sends, in bytes of the binary frame.
    pub negentropy_frame_size: usize,
    /// Most stored events one NIP-77 session reconciles; a larger filter gets
    /// `NEG-ERR blocked: too many query results`.
    pub max_negentropy_items: usize,
    /// REQ, COUNT and NEG-OPEN messages per second per connection, sustained.
    pub queries_per_second: u32,
    /// How many REQ, COUNT and NEG-OPEN messages a connection may send at once.
    pub query_burst: u32,
    /// Events a connection may publish per minute.
    pub events_per_minute: u32,
    /// Store reads (REQ, COUNT, NEG-OPEN) running at once, on blocking threads.
    pub concurrent_reads: usize,
    /// How far ahead of the clock an event's `created_at` may be (NIP-11
    /// `created_at_upper_limit`); the store enforces it.
    pub max_future_created_at: Duration,
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            max_connections: 1_024,
            max_connections_per_ip: 64,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_message_length: 131_072,
            max_content_length: 65_536,
            max_event_tags: 2_000,
            max_subscriptions: 100,
            max_filters: 20,
            max_subid_length: 64,
            max_limit: 500,
            default_limit: 500,
            max_negentropy_sessions: 10,
            negentropy_frame_size: 60_000,
            max_negentropy_items: 100_000,
            queries_per_second: 10,
            query_burst: 50,
            events_per_minute: 600,
            concurrent_reads: 2,
            max_future_created_at: DEFAULT_MAX_FUTURE_CREATED_AT,
        }
    }
}

impl RelayLimits {
    /// The bounds the HTTP front enforces.
    pub fn front(&self) -> FrontLimits {
        FrontLimits {
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            header_read_timeout: self.header_read_timeout,
            shutdown_grace: Duration::from_secs(5),
        }
    }

    /// The NIP-11 `limitation` object: every limit above that a client can plan by.
    pub fn limitation(&self) -> Value {
        json!({
            "max_message_length": self.max_message_length,
            "max_subscriptions": self.max_subscriptions,
            "max_filters": self.max_filters,
            "max_limit": self.max_limit,
            "default_limit": self.default_limit,
            "max_subid_length": self.max_subid_length,
            "max_event_tags": self.max_event_tags,
            "max_content_length": self.max_content_length,
            "created_at_upper_limit": self.max_future_created_at.as_secs(),
            "auth_required": false,
            "payment_required": false,
            "restricted_writes": true,
        })
    }
}
