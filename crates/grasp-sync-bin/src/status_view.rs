//! What an operator is shown, drawn from one [`EngineStatus`]: the [`Summary`] and one
//! [`RelayRow`] per relay, sorted by a [`SortKey`]. The status page and `grasp-sync status`
//! both render this, so the browser and the terminal show the same figures.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};

use crate::history::relay_lag;

/// The figures at the top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Repositories in the sync index.
    pub(crate) repos: usize,
    /// Root events in the sync index.
    pub(crate) root_events: usize,
    /// Relays tracked.
    pub(crate) relays: usize,
    /// Events newly saved by sync, over every relay.
    pub(crate) events_stored: u64,
    /// Relays in their historic sync now.
    pub(crate) syncing: usize,
    /// Relays connected with their historic sync done.
    pub(crate) connected: usize,
    /// Relays under a rate, policy or request pause, or with paused filters.
    pub(crate) paused: usize,
    /// Relays marked dead.
    pub(crate) dead: usize,
    /// Time since the daemon started, where known.
    pub(crate) uptime: Option<Duration>,
    /// Participants of the tracked repositories.
    pub(crate) participants: usize,
    /// Participants whose NIP-65 relay list is known.
    pub(crate) relay_lists: usize,
    /// Relays probed as participants' mailboxes.
    pub(crate) mailbox_relays: usize,
}

/// One relay's line of the table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RelayRow {
    /// Normalised URL.
    pub(crate) url: String,
    /// Connection lifecycle name.
    pub(crate) state: String,
    /// Health state name.
    pub(crate) health: String,
    /// A bootstrap relay.
    pub(crate) bootstrap: bool,
    /// Subscriptions held now (live and transient).
    pub(crate) used: usize,
    /// The session's subscription budget B (0 when disconnected).
    pub(crate) budget: usize,
    /// Live subscriptions held now.
    pub(crate) live: usize,
    /// Transient subscriptions held now.
    pub(crate) transient: usize,
    /// REQ starts over the daemon's life.
    pub(crate) starts: u64,
    /// REQ starts per minute over the recent window, where the history has one.
    pub(crate) starts_per_minute: Option<f64>,
    /// Refusals by category (only categories seen).
    pub(crate) refusals: BTreeMap<String, u64>,
    /// What was learned of the relay's limits and paging.
    pub(crate) learned: Vec<String>,
    /// Events delivered by the relay.
    pub(crate) received: u64,
    /// Of those, newly saved.
    pub(crate) synced: u64,
    /// Of those, refused by the store.
    pub(crate) rejected: u64,
    /// Bytes of the messages sent to the relay (WebSocket text frames).
    pub(crate) bytes_sent: u64,
    /// Bytes of the messages received from the relay (WebSocket text frames).
    pub(crate) bytes_received: u64,
    /// Historic batches in flight plus starts waiting.
    pub(crate) lag: u64,
    /// The last error or refusal text.
    pub(crate) last_error: Option<String>,
}

/// A column the table can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// Relay URL.
    Relay,
    /// Connection state.
    State,
    /// Health.
    Health,
    /// Budget use (used ÷ B).
    Budget,
    /// Starts per minute (total starts without a history).
    Starts,
    /// Total refusals.
    Refusals,
    /// Events received.
    Received,
    /// Events synced.
    Synced,
    /// Events rejected.
    Rejected,
    /// Bytes sent and received.
    Bytes,
    /// Lag.
    Lag,
}

impl SortKey {
    /// Every key, in table order.
    pub(crate) const ALL: [SortKey; 11] = [
        SortKey::Relay,
        SortKey::State,
        SortKey::Health,
        SortKey::Budget,
        SortKey::Starts,
        SortKey::Refusals,
        SortKey::Received,
        SortKey::Synced,
        SortKey::Rejected,
        SortKey::Bytes,
        SortKey::Lag,
    ];

    /// The key's name in a `?sort=` query.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SortKey::Relay => "relay",
            SortKey::State => "state",
            SortKey::Health => "health",
            SortKey::Budget => "budget",
            SortKey::Starts => "starts",
            SortKey::Refusals => "refusals",
            SortKey::Received => "received",
            SortKey::Synced => "synced",
            SortKey::Rejected => "rejected",
            SortKey::Bytes => "bytes",
            SortKey::Lag => "lag",
        }
    }

    /// The key named `name`, if any.
    pub(crate) fn parse(name: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|key| key.name() == name)
    }
}

/// A sort order: a key and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sort {
    /// The column.
    pub(crate) key: SortKey,
    /// Largest first.
    pub(crate) descending: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Sort {
            key: SortKey::Relay,
            descending: false,
        }
    }
}

impl Summary {
    /// The summary of `status`.
    pub(crate) fn of(status: &EngineStatus, uptime: Option<Duration>) -> Summary {
        let count =
            |pick: fn(&RelayStatus) -> bool| status.relays.values().filter(|r| pick(r)).count();
        Summary {
            repos: status.repos_tracked,
            root_events: status.root_events_tracked,
            relays: status.relays.len(),
            events_stored: status.relays.values().map(|r| r.events_saved).sum(),
            syncing: count(|r| r.connection == "syncing"),
            connected: count(|r| r.connection.starts_with("connected")),
            paused: count(is_paused),
            dead: count(|r| r.health == "dead"),
            uptime,
            participants: status.participants.participants,
            relay_lists: status.participants.relay_lists,
            mailbox_relays: status.participants.mailbox_relays,
        }
    }
}

/// Whether a relay is paused: a rate, policy or request pause, or filters paused by policy.
pub(crate) fn is_paused(relay: &RelayStatus) -> bool {
    relay.health == "ratelimited" || relay.paused_filters > 0
}

/// The rows of `status`, sorted; `starts_per_minute` gives each relay's recent rate where
/// known.
pub(crate) fn rows(
    status: &EngineStatus,
    starts_per_minute: impl Fn(&str, &RelayStatus) -> Option<f64>,
    sort: Sort,
) -> Vec<RelayRow> {
    let mut rows: Vec<RelayRow> = status
        .relays
        .iter()
        .map(|(url, relay)| RelayRow::of(url, relay, starts_per_minute(url, relay)))
        .collect();
    rows.sort_by(|a, b| {
        let order = compare(a, b, sort.key).then_with(|| a.url.cmp(&b.url));
        if sort.descending {
            order.reverse()
        } else {
            order
        }
    });
    rows
}

impl RelayRow {
    fn of(url: &str, relay: &RelayStatus, starts_per_minute: Option<f64>) -> RelayRow {
        let mut learned = Vec::new();
        if relay.subscription_budget > 0 {
            learned.push(format!("B={}", relay.subscription_budget));
        }
        if relay.paused_filters > 0 {
            learned.push(format!("{} filters paused", relay.paused_filters));
        }
        if relay.catch_up_filters > 0 {
            learned.push(format!("{} by catch-up", relay.catch_up_filters));
        }
        if relay.extra_connections > 0 {
            learned.push(format!(
                "{} extra connections ({} live)",
                relay.extra_connections, relay.extra_live_subscriptions
            ));
        }
        learned.extend(relay.quirks.iter().cloned());
        RelayRow {
            url: url.to_owned(),
            state: relay.connection.clone(),
            health: relay.health.clone(),
            bootstrap: relay.bootstrap,
            used: relay.live_subscriptions + relay.transient_subscriptions,
            budget: relay.subscription_budget,
            live: relay.live_subscriptions,
            transient: relay.transient_subscriptions,
            starts: relay.req_starts_live + relay.req_starts_historic,
            starts_per_minute,
            refusals: relay
                .refusals
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(category, n)| (category.clone(), *n))
                .collect(),
            learned,
            received: relay.events_received,
            synced: relay.events_saved,
            rejected: relay.events_rejected,
            bytes_sent: relay.bytes_sent,
            bytes_received: relay.bytes_received,
            lag: relay_lag(relay),
            last_error: relay.last_error.clone(),
        }
    }

    /// Total refusals.
    pub(crate) fn refusal_total(&self) -> u64 {
        self.refusals.values().sum()
    }

    /// Bytes sent and received together.
    pub(crate) fn bytes_total(&self) -> u64 {
        self.bytes_sent.saturating_add(self.bytes_received)
    }

    /// Budget use as a share of B (0 when B is 0).
    pub(crate) fn budget_share(&self) -> f64 {
        if self.budget == 0 {
            0.0
        } else {
            self.used as f64 / self.budget as f64
        }
    }
}

fn compare(a: &RelayRow, b: &RelayRow, key: SortKey) -> Ordering {
    let float = |x: f64, y: f64| x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    match key {
        SortKey::Relay => a.url.cmp(&b.url),
        SortKey::State => a.state.cmp(&b.state),
        SortKey::Health => a.health.cmp(&b.health),
        SortKey::Budget => float(a.budget_share(), b.budget_share()),
        SortKey::Starts => match (a.starts_per_minute, b.starts_per_minute) {
            (Some(x), Some(y)) => float(x, y),
            _ => a.starts.cmp(&b.starts),
        },
        SortKey::Refusals => a.refusal_total().cmp(&b.refusal_total()),
        SortKey::Received => a.received.cmp(&b.received),
        SortKey::Synced => a.synced.cmp(&b.synced),
        SortKey::Rejected => a.rejected.cmp(&b.rejected),
        SortKey::Bytes => a.bytes_total().cmp(&b.bytes_total()),
        SortKey::Lag => a.lag.cmp(&b.lag),
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `12.0 MiB`, `3.2 GiB`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `1h 2m 3s`, `4m 5s`, `6s`, or with days.
pub(crate) fn format_uptime(uptime: Duration) -> String {
    let secs = uptime.as_secs();
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests;
