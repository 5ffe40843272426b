//! The range every duration and count key accepts. A value outside its range is refused when the
//! configuration is loaded, naming the key, so nothing the daemon runs later meets a value no
//! operator meant: a deadline `now + batch_window` that overflows `Instant`, a backoff the
//! health rules refuse, a buffer sized by a typo. `docs/configuration.md` lists the same ranges.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::time::Duration;

use super::duration::{format_duration, parse_duration};
use crate::error::ConfigError;

const MILLISECOND: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
/// 64 MiB: tungstenite's own default message cap, far above any Nostr event.
const MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// `batch_window`: 1 ms to 1 h.
pub const BATCH_WINDOW: RangeInclusive<Duration> = MILLISECOND..=HOUR;
/// `backoff_base`: 1 ms to 1 day.
pub const BACKOFF_BASE: RangeInclusive<Duration> = MILLISECOND..=DAY;
/// `backoff_cap`: 1 ms to 7 days, and not shorter than `backoff_base`.
pub const BACKOFF_CAP: RangeInclusive<Duration> = MILLISECOND..=Duration::from_secs(7 * 24 * 3600);
/// `max_future_created_at`: 0 to 365 days.
pub const MAX_FUTURE_CREATED_AT: RangeInclusive<Duration> =
    Duration::ZERO..=Duration::from_secs(365 * 24 * 3600);
/// `max_tracked_relays`: 1 to 100,000.
pub const MAX_TRACKED_RELAYS: RangeInclusive<usize> = 1..=100_000;
/// `max_relay_hosts_per_author`: 1 to 1,000.
pub const MAX_RELAY_HOSTS_PER_AUTHOR: RangeInclusive<usize> = 1..=1_000;
/// `max_waiting_roots`: 1 to 10,000,000.
pub const MAX_WAITING_ROOTS: RangeInclusive<usize> = 1..=10_000_000;
/// `max_recovery_ids_per_relay`: 1 to 1,000,000.
pub const MAX_RECOVERY_IDS_PER_RELAY: RangeInclusive<usize> = 1..=1_000_000;
/// `learned_limits_max_age`: 1 minute to 365 days.
pub const LEARNED_LIMITS_MAX_AGE: RangeInclusive<Duration> =
    Duration::from_secs(60)..=Duration::from_secs(365 * 24 * 3600);
/// `max_rejected_ids`: 1,000 to 5,000,000 (each takes a few hundred bytes of memory).
pub const MAX_REJECTED_IDS: RangeInclusive<usize> = 1_000..=5_000_000;
/// `max_purgatory_announcements`: 1 to 1,000,000.
pub const MAX_PURGATORY_ANNOUNCEMENTS: RangeInclusive<usize> = 1..=1_000_000;
/// `git_fetch_timeout`: 1 s to 1 day.
pub const GIT_FETCH_TIMEOUT: RangeInclusive<Duration> = SECOND..=DAY;
/// `purgatory_interval`: 100 ms to 1 h.
pub const PURGATORY_INTERVAL: RangeInclusive<Duration> = Duration::from_millis(100)..=HOUR;
/// `git_fetch_concurrency`: 1 to 64.
pub const GIT_FETCH_CONCURRENCY: RangeInclusive<usize> = 1..=64;
/// `max_participants`: 1 to 1,000,000.
pub const MAX_PARTICIPANTS: RangeInclusive<usize> = 1..=1_000_000;
/// `max_relays_per_participant`: 1 to 64.
pub const MAX_RELAYS_PER_PARTICIPANT: RangeInclusive<usize> = 1..=64;
/// `mailbox_probe_items`: 1 to 10,000.
pub const MAILBOX_PROBE_ITEMS: RangeInclusive<usize> = 1..=10_000;
/// `mailbox_probe_interval`: 1 s to 1 day.
pub const MAILBOX_PROBE_INTERVAL: RangeInclusive<Duration> = SECOND..=DAY;
/// The `COUNT` of `shard = "INDEX/COUNT"`: 1 to 64.
pub const SHARD_COUNT: RangeInclusive<u16> = 1..=grasp_sync_model::MAX_SHARDS;
/// `relay.header_read_timeout` and `relay.idle_timeout`: 1 s to 1 day.
pub const RELAY_TIMEOUT: RangeInclusive<Duration> = SECOND..=DAY;

/// `relay.max_connections`.
pub const MAX_CONNECTIONS: RangeInclusive<usize> = 1..=1_000_000;
/// `relay.max_connections_per_ip` (0: no cap).
pub const MAX_CONNECTIONS_PER_IP: RangeInclusive<usize> = 0..=1_000_000;
/// `relay.max_message_length`, in bytes.
pub const MAX_MESSAGE_LENGTH: RangeInclusive<usize> = 1..=MESSAGE_BYTES;
/// `relay.max_content_length`, in characters.
pub const MAX_CONTENT_LENGTH: RangeInclusive<usize> = 1..=MESSAGE_BYTES;
/// `relay.max_event_tags`.
pub const MAX_EVENT_TAGS: RangeInclusive<usize> = 1..=100_000;
/// `relay.max_subscriptions`.
pub const MAX_SUBSCRIPTIONS: RangeInclusive<usize> = 1..=10_000;
/// `relay.max_filters`.
pub const MAX_FILTERS: RangeInclusive<usize> = 1..=1_000;
/// `relay.max_subid_length`.
pub const MAX_SUBID_LENGTH: RangeInclusive<usize> = 1..=1_024;
/// `relay.max_limit`.
pub const MAX_LIMIT: RangeInclusive<usize> = 1..=100_000;
/// `relay.default_limit`, and not above `relay.max_limit`.
pub const DEFAULT_LIMIT: RangeInclusive<usize> = 1..=100_000;
/// `relay.max_negentropy_sessions`.
pub const MAX_NEGENTROPY_SESSIONS: RangeInclusive<usize> = 1..=1_000;
/// `relay.negentropy_frame_size`, in bytes, when not 0 (no limit).
pub const NEGENTROPY_FRAME_SIZE: RangeInclusive<usize> = 4_096..=MESSAGE_BYTES;
/// `relay.max_negentropy_items`.
pub const MAX_NEGENTROPY_ITEMS: RangeInclusive<usize> = 1..=10_000_000;
/// `relay.queries_per_second`.
pub const QUERIES_PER_SECOND: RangeInclusive<u32> = 1..=10_000;
/// `relay.query_burst`.
pub const QUERY_BURST: RangeInclusive<u32> = 1..=100_000;
/// `relay.events_per_minute`.
pub const EVENTS_PER_MINUTE: RangeInclusive<u32> = 1..=1_000_000;
/// `relay.concurrent_reads`: at most tokio's default pool of blocking threads (512).
pub const CONCURRENT_READS: RangeInclusive<usize> = 1..=512;

/// Parses a duration key and checks it lies in `range`.
pub fn duration_in(
    key: &'static str,
    value: Option<&str>,
    range: RangeInclusive<Duration>,
) -> Result<Option<Duration>, ConfigError> {
    let Some(text) = value else {
        return Ok(None);
    };
    let duration = parse_duration(text).map_err(|reason| ConfigError::invalid(key, reason))?;
    if !range.contains(&duration) {
        return Err(ConfigError::invalid(
            key,
            format!(
                "`{}` is out of range: must be from {} to {}",
                text.trim(),
                format_duration(*range.start()),
                format_duration(*range.end())
            ),
        ));
    }
    Ok(Some(duration))
}

/// Checks a count key lies in `range`.
pub fn count_in<T: PartialOrd + Display + Copy>(
    key: &'static str,
    value: Option<T>,
    range: RangeInclusive<T>,
) -> Result<Option<T>, ConfigError> {
    match value {
        Some(value) if !range.contains(&value) => Err(ConfigError::invalid(
            key,
            format!(
                "{value} is out of range: must be from {} to {}",
                range.start(),
                range.end()
            ),
        )),
        other => Ok(other),
    }
}
