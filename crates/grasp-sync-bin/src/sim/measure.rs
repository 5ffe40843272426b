//! What the sim reads off the relays and the process: per-relay counters from the strict
//! proxy (the ground truth for starts, refusals, open subscriptions and bytes) split by phase, and
//! memory figures from `/proc/<pid>/status`.

use std::collections::BTreeMap;

use grasp_sync_testkit::{ConnectionStats, RefusalKind, StartKind, StrictStats};
use serde::Serialize;

/// What one relay counted over one phase of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RelayCounts {
    /// REQs received, refused or not.
    pub req_starts: usize,
    /// NEG-OPENs received, refused or not.
    pub neg_opens: usize,
    /// Refusals sent, by kind.
    pub refusals: BTreeMap<String, u64>,
    /// Most REQ subscriptions open at once on one connection.
    pub peak_open_subscriptions: usize,
    /// EVENT messages sent.
    pub events_sent: u64,
    /// WebSocket connections.
    pub connections: usize,
    /// Bytes of the text frames the client sent the relay.
    pub bytes_received: u64,
    /// Bytes of the text frames the relay sent the client.
    pub bytes_sent: u64,
    /// `bytes_received` by message verb (`REQ`, `NEG-OPEN`, ...).
    pub received_by_verb: BTreeMap<String, u64>,
    /// `bytes_sent` by message verb (`EVENT`, `EOSE`, `NEG-MSG`, ...).
    pub sent_by_verb: BTreeMap<String, u64>,
}

impl RelayCounts {
    /// REQ and NEG-OPEN starts.
    pub fn starts(&self) -> usize {
        self.req_starts + self.neg_opens
    }

    /// Refusals of every kind.
    pub fn total_refusals(&self) -> u64 {
        self.refusals.values().sum()
    }

    /// Bytes moved both ways.
    pub fn bytes(&self) -> u64 {
        self.bytes_received + self.bytes_sent
    }
}

/// Where a phase began in a relay's counters.
pub(super) struct Mark {
    starts: usize,
    /// The connections open or closed by then, with what each had counted.
    earlier: Vec<ConnectionStats>,
    refusals: BTreeMap<RefusalKind, u64>,
}

impl Mark {
    /// The counters' current end.
    pub(super) fn of(stats: &StrictStats) -> Self {
        Self {
            starts: stats.starts.len(),
            earlier: stats.per_connection.clone(),
            refusals: stats.refusals.clone(),
        }
    }
}

/// What `stats` counted since `mark`: on the connections made since, and on those already open
/// then (a phase on connections that stay up, such as a daily reconciliation).
pub(super) fn counts_since(stats: &StrictStats, mark: &Mark) -> RelayCounts {
    let starts = stats.starts.get(mark.starts..).unwrap_or_default();
    let new = stats
        .per_connection
        .get(mark.earlier.len()..)
        .unwrap_or_default();
    let moved: Vec<ConnectionStats> = stats
        .per_connection
        .iter()
        .enumerate()
        .map(|(i, now)| match mark.earlier.get(i) {
            Some(before) => growth(before, now),
            None => now.clone(),
        })
        .collect();
    let refusals = stats
        .refusals
        .iter()
        .filter_map(|(kind, &count)| {
            let before = mark.refusals.get(kind).copied().unwrap_or(0);
            (count > before).then(|| (refusal_name(*kind).to_owned(), count - before))
        })
        .collect();
    RelayCounts {
        req_starts: starts.iter().filter(|s| s.kind == StartKind::Req).count(),
        neg_opens: starts
            .iter()
            .filter(|s| s.kind == StartKind::NegOpen)
            .count(),
        refusals,
        peak_open_subscriptions: new.iter().map(|c| c.peak_subscriptions).max().unwrap_or(0),
        events_sent: moved.iter().map(|c| c.events_sent).sum(),
        connections: new.len(),
        bytes_received: moved.iter().map(|c| c.bytes_received).sum(),
        bytes_sent: moved.iter().map(|c| c.bytes_sent).sum(),
        received_by_verb: by_verb(moved.iter().map(|c| &c.received_by_verb)),
        sent_by_verb: by_verb(moved.iter().map(|c| &c.sent_by_verb)),
    }
}

/// What one connection counted between `before` and `now` (the events and bytes; the peaks
/// are `now`'s).
fn growth(before: &ConnectionStats, now: &ConnectionStats) -> ConnectionStats {
    let verbs = |before: &BTreeMap<&'static str, u64>, now: &BTreeMap<&'static str, u64>| {
        now.iter()
            .map(|(verb, bytes)| {
                let earlier = before.get(verb).copied().unwrap_or(0);
                (*verb, bytes.saturating_sub(earlier))
            })
            .filter(|(_, bytes)| *bytes > 0)
            .collect()
    };
    ConnectionStats {
        client_messages: now.client_messages.saturating_sub(before.client_messages),
        bytes_received: now.bytes_received.saturating_sub(before.bytes_received),
        bytes_sent: now.bytes_sent.saturating_sub(before.bytes_sent),
        received_by_verb: verbs(&before.received_by_verb, &now.received_by_verb),
        sent_by_verb: verbs(&before.sent_by_verb, &now.sent_by_verb),
        events_sent: now.events_sent.saturating_sub(before.events_sent),
        duplicate_events: now.duplicate_events.saturating_sub(before.duplicate_events),
        ..now.clone()
    }
}

/// Byte counts by verb, summed over connections.
fn by_verb<'a>(
    counts: impl Iterator<Item = &'a BTreeMap<&'static str, u64>>,
) -> BTreeMap<String, u64> {
    let mut sum = BTreeMap::new();
    for count in counts {
        for (verb, bytes) in count {
            *sum.entry((*verb).to_owned()).or_insert(0) += bytes;
        }
    }
    sum
}

/// A refusal kind's name in reports.
pub(super) fn refusal_name(kind: RefusalKind) -> &'static str {
    match kind {
        RefusalKind::TooManySubscriptions => "too_many_subscriptions",
        RefusalKind::TooManyFilters => "too_many_filters",
        RefusalKind::RetainedBytesExceeded => "retained_bytes_exceeded",
        RefusalKind::TooManyQueries => "too_many_queries",
        RefusalKind::TooManyConcurrentNeg => "too_many_concurrent_neg",
        RefusalKind::NegentropyDisabled => "negentropy_disabled",
        RefusalKind::Policy => "policy",
        RefusalKind::AuthRequired => "auth_required",
    }
}

/// Memory figures of one process, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// Resident set now (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident set (`VmHWM`).
    pub hwm_kib: u64,
    /// Anonymous resident memory (`RssAnon`): the heap, without mapped files such as LMDB.
    pub anon_kib: u64,
    /// Resident pages of mapped files (`RssFile`): the executable and the store's LMDB pages
    /// the process has read, which the kernel may drop under memory pressure.
    pub file_kib: u64,
}

/// Parses the memory lines of a `/proc/<pid>/status` text; absent lines read as 0.
pub fn parse_memory(status: &str) -> Memory {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS"),
        hwm_kib: field("VmHWM"),
        anon_kib: field("RssAnon"),
        file_kib: field("RssFile"),
    }
}

/// This process's memory; zeros where `/proc` is unavailable.
pub(super) fn own_memory() -> Memory {
    read_memory("self")
}

/// Memory of process `pid` (or `self`); zeros where `/proc` is unavailable.
pub(super) fn read_memory(pid: &str) -> Memory {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|text| parse_memory(&text))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
