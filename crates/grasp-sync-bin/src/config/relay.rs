//! The `[relay]` keys: the embedded relay's limits. One struct is both the TOML table and the
//! `--relay-*` flags (each with its `GRASP_SYNC_RELAY_*` variable), so the three cannot drift.

use clap::Args;
use serde::Deserialize;

use super::bounds::{self, count_in, duration_in};
use crate::error::ConfigError;
use crate::relay::RelayLimits;

/// The `[relay]` table, every key optional; defaults are [`RelayLimits::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Args)]
#[serde(deny_unknown_fields)]
pub struct RawRelayLimits {
    /// Open connections in total [default: 1024].
    #[arg(
        long = "relay-max-connections",
        env = "GRASP_SYNC_RELAY_MAX_CONNECTIONS",
        value_name = "N"
    )]
    pub max_connections: Option<usize>,
    /// Open connections from one IP address, 0 for no cap [default: 64].
    #[arg(
        long = "relay-max-connections-per-ip",
        env = "GRASP_SYNC_RELAY_MAX_CONNECTIONS_PER_IP",
        value_name = "N"
    )]
    pub max_connections_per_ip: Option<usize>,
    /// Time to send a complete HTTP request head [default: 10s].
    #[arg(
        long = "relay-header-read-timeout",
        env = "GRASP_SYNC_RELAY_HEADER_READ_TIMEOUT",
        value_name = "DURATION"
    )]
    pub header_read_timeout: Option<String>,
    /// A WebSocket silent this long is closed [default: 5m].
    #[arg(
        long = "relay-idle-timeout",
        env = "GRASP_SYNC_RELAY_IDLE_TIMEOUT",
        value_name = "DURATION"
    )]
    pub idle_timeout: Option<String>,
    /// Largest WebSocket message in bytes [default: 131072].
    #[arg(
        long = "relay-max-message-length",
        env = "GRASP_SYNC_RELAY_MAX_MESSAGE_LENGTH",
        value_name = "BYTES"
    )]
    pub max_message_length: Option<usize>,
    /// Longest event content in characters [default: 65536].
    #[arg(
        long = "relay-max-content-length",
        env = "GRASP_SYNC_RELAY_MAX_CONTENT_LENGTH",
        value_name = "N"
    )]
    pub max_content_length: Option<usize>,
    /// Most tags on an event [default: 2000].
    #[arg(
        long = "relay-max-event-tags",
        env = "GRASP_SYNC_RELAY_MAX_EVENT_TAGS",
        value_name = "N"
    )]
    pub max_event_tags: Option<usize>,
    /// Open subscriptions per connection [default: 100].
    #[arg(
        long = "relay-max-subscriptions",
        env = "GRASP_SYNC_RELAY_MAX_SUBSCRIPTIONS",
        value_name = "N"
    )]
    pub max_subscriptions: Option<usize>,
    /// Filters per REQ [default: 20].
    #[arg(
        long = "relay-max-filters",
        env = "GRASP_SYNC_RELAY_MAX_FILTERS",
        value_name = "N"
    )]
    pub max_filters: Option<usize>,
    /// Longest subscription ID [default: 64].
    #[arg(
        long = "relay-max-subid-length",
        env = "GRASP_SYNC_RELAY_MAX_SUBID_LENGTH",
        value_name = "N"
    )]
    pub max_subid_length: Option<usize>,
    /// Clamp on a filter's limit [default: 500].
    #[arg(
        long = "relay-max-limit",
        env = "GRASP_SYNC_RELAY_MAX_LIMIT",
        value_name = "N"
    )]
    pub max_limit: Option<usize>,
    /// Limit of a filter that sets none [default: 500].
    #[arg(
        long = "relay-default-limit",
        env = "GRASP_SYNC_RELAY_DEFAULT_LIMIT",
        value_name = "N"
    )]
    pub default_limit: Option<usize>,
    /// Open NIP-77 sessions per connection [default: 10].
    #[arg(
        long = "relay-max-negentropy-sessions",
        env = "GRASP_SYNC_RELAY_MAX_NEGENTROPY_SESSIONS",
        value_name = "N"
    )]
    pub max_negentropy_sessions: Option<usize>,
    /// Largest NIP-77 frame sent, in bytes [default: 60000].
    #[arg(
        long = "relay-negentropy-frame-size",
        env = "GRASP_SYNC_RELAY_NEGENTROPY_FRAME_SIZE",
        value_name = "BYTES"
    )]
    pub negentropy_frame_size: Option<usize>,
    /// Most events one NIP-77 session reconciles [default: 100000].
    #[arg(
        long = "relay-max-negentropy-items",
        env = "GRASP_SYNC_RELAY_MAX_NEGENTROPY_ITEMS",
        value_name = "N"
    )]
    pub max_negentropy_items: Option<usize>,
    /// REQ, COUNT and NEG-OPEN per second per connection [default: 10].
    #[arg(
        long = "relay-queries-per-second",
        env = "GRASP_SYNC_RELAY_QUERIES_PER_SECOND",
        value_name = "N"
    )]
    pub queries_per_second: Option<u32>,
    /// REQ, COUNT and NEG-OPEN a connection may send at once [default: 50].
    #[arg(
        long = "relay-query-burst",
        env = "GRASP_SYNC_RELAY_QUERY_BURST",
        value_name = "N"
    )]
    pub query_burst: Option<u32>,
    /// Events a connection may publish per minute [default: 600].
    #[arg(
        long = "relay-events-per-minute",
        env = "GRASP_SYNC_RELAY_EVENTS_PER_MINUTE",
        value_name = "N"
    )]
    pub events_per_minute: Option<u32>,
    /// Store reads running at once, off the async workers [default: 2].
    #[arg(
        long = "relay-concurrent-reads",
        env = "GRASP_SYNC_RELAY_CONCURRENT_READS",
        value_name = "N"
    )]
    pub concurrent_reads: Option<usize>,
}

impl RawRelayLimits {
    /// These keys with every key that `over` sets replaced by its value.
    pub fn merge(self, over: RawRelayLimits) -> RawRelayLimits {
        RawRelayLimits {
            max_connections: over.max_connections.or(self.max_connections),
            max_connections_per_ip: over.max_connections_per_ip.or(self.max_connections_per_ip),
            header_read_timeout: over.header_read_timeout.or(self.header_read_timeout),
            idle_timeout: over.idle_timeout.or(self.idle_timeout),
            max_message_length: over.max_message_length.or(self.max_message_length),
            max_content_length: over.max_content_length.or(self.max_content_length),
            max_event_tags: over.max_event_tags.or(self.max_event_tags),
            max_subscriptions: over.max_subscriptions.or(self.max_subscriptions),
            max_filters: over.max_filters.or(self.max_filters),
            max_subid_length: over.max_subid_length.or(self.max_subid_length),
            max_limit: over.max_limit.or(self.max_limit),
            default_limit: over.default_limit.or(self.default_limit),
            max_negentropy_sessions: over
                .max_negentropy_sessions
                .or(self.max_negentropy_sessions),
            negentropy_frame_size: over.negentropy_frame_size.or(self.negentropy_frame_size),
            max_negentropy_items: over.max_negentropy_items.or(self.max_negentropy_items),
            queries_per_second: over.queries_per_second.or(self.queries_per_second),
            query_burst: over.query_burst.or(self.query_burst),
            events_per_minute: over.events_per_minute.or(self.events_per_minute),
            concurrent_reads: over.concurrent_reads.or(self.concurrent_reads),
        }
    }

    /// The limits, defaults filled in; every value within its range in [`bounds`], and
    /// `default_limit` not above `max_limit`.
    pub fn resolve(self) -> Result<RelayLimits, ConfigError> {
        let defaults = RelayLimits::default();
        let limits = RelayLimits {
            max_connections: count_in(
                "relay.max_connections",
                self.max_connections,
                bounds::MAX_CONNECTIONS,
            )?
            .unwrap_or(defaults.max_connections),
            max_connections_per_ip: count_in(
                "relay.max_connections_per_ip",
                self.max_connections_per_ip,
                bounds::MAX_CONNECTIONS_PER_IP,
            )?
            .unwrap_or(defaults.max_connections_per_ip),
            header_read_timeout: duration_in(
                "relay.header_read_timeout",
                self.header_read_timeout.as_deref(),
                bounds::RELAY_TIMEOUT,
            )?
            .unwrap_or(defaults.header_read_timeout),
            idle_timeout: duration_in(
                "relay.idle_timeout",
                self.idle_timeout.as_deref(),
                bounds::RELAY_TIMEOUT,
            )?
            .unwrap_or(defaults.idle_timeout),
            max_message_length: count_in(
                "relay.max_message_length",
                self.max_message_length,
                bounds::MAX_MESSAGE_LENGTH,
            )?
            .unwrap_or(defaults.max_message_length),
            max_content_length: count_in(
                "relay.max_content_length",
                self.max_content_length,
                bounds::MAX_CONTENT_LENGTH,
            )?
            .unwrap_or(defaults.max_content_length),
            max_event_tags: count_in(
                "relay.max_event_tags",
                self.max_event_tags,
                bounds::MAX_EVENT_TAGS,
            )?
            .unwrap_or(defaults.max_event_tags),
            max_subscriptions: count_in(
                "relay.max_subscriptions",
                self.max_subscriptions,
                bounds::MAX_SUBSCRIPTIONS,
            )?
            .unwrap_or(defaults.max_subscriptions),
            max_filters: count_in("relay.max_filters", self.max_filters, bounds::MAX_FILTERS)?
                .unwrap_or(defaults.max_filters),
            max_subid_length: count_in(
                "relay.max_subid_length",
                self.max_subid_length,
                bounds::MAX_SUBID_LENGTH,
            )?
            .unwrap_or(defaults.max_subid_length),
            max_limit: count_in("relay.max_limit", self.max_limit, bounds::MAX_LIMIT)?
                .unwrap_or(defaults.max_limit),
            default_limit: count_in(
                "relay.default_limit",
                self.default_limit,
                bounds::DEFAULT_LIMIT,
            )?
            .unwrap_or(defaults.default_limit),
            max_negentropy_sessions: count_in(
                "relay.max_negentropy_sessions",
                self.max_negentropy_sessions,
                bounds::MAX_NEGENTROPY_SESSIONS,
            )?
            .unwrap_or(defaults.max_negentropy_sessions),
            negentropy_frame_size: frame_size(self.negentropy_frame_size)?
                .unwrap_or(defaults.negentropy_frame_size),
            max_negentropy_items: count_in(
                "relay.max_negentropy_items",
                self.max_negentropy_items,
                bounds::MAX_NEGENTROPY_ITEMS,
            )?
            .unwrap_or(defaults.max_negentropy_items),
            queries_per_second: count_in(
                "relay.queries_per_second",
                self.queries_per_second,
                bounds::QUERIES_PER_SECOND,
            )?
            .unwrap_or(defaults.queries_per_second),
            query_burst: count_in("relay.query_burst", self.query_burst, bounds::QUERY_BURST)?
                .unwrap_or(defaults.query_burst),
            events_per_minute: count_in(
                "relay.events_per_minute",
                self.events_per_minute,
                bounds::EVENTS_PER_MINUTE,
            )?
            .unwrap_or(defaults.events_per_minute),
            concurrent_reads: count_in(
                "relay.concurrent_reads",
                self.concurrent_reads,
                bounds::CONCURRENT_READS,
            )?
            .unwrap_or(defaults.concurrent_reads),
            max_future_created_at: defaults.max_future_created_at,
        };
        if limits.default_limit > limits.max_limit {
            return Err(ConfigError::invalid(
                "relay.default_limit",
                format!(
                    "{} is above relay.max_limit ({})",
                    limits.default_limit, limits.max_limit
                ),
            ));
        }
        Ok(limits)
    }
}

/// The NIP-77 frame limit is either off (0) or within [`bounds::NEGENTROPY_FRAME_SIZE`],
/// whose floor is the protocol's minimum.
fn frame_size(value: Option<usize>) -> Result<Option<usize>, ConfigError> {
    let range = bounds::NEGENTROPY_FRAME_SIZE;
    match value {
        Some(size) if size != 0 && !range.contains(&size) => Err(ConfigError::invalid(
            "relay.negentropy_frame_size",
            format!(
                "{size} is out of range: must be 0 (no limit) or from {} to {}",
                range.start(),
                range.end()
            ),
        )),
        other => Ok(other),
    }
}
