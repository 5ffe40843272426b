//! What the sim reads off the relays and the process: per-relay counters from the strict
//! proxy (the ground truth for starts, refusals, open subscriptions and bytes) split by phase, and
//! memory figures from `/proc/<pid>/status`.

use std::collections::BTreeMap;

use grasp_sync_testkit::{RefusalKind, StartKind, StrictStats};
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Mark {
    starts: usize,
    connections: usize,
    refusals: BTreeMap<RefusalKind, u64>,
}

impl Mark {
    /// The counters' current end.
    pub(super) fn of(stats: &StrictStats) -> Self {
        Self {
            starts: stats.starts.len(),
            connections: stats.per_connection.len(),
            refusals: stats.refusals.clone(),
        }
    }
}

/// What `stats` counted since `mark`.
pub(super) fn counts_since(stats: &StrictStats, mark: &Mark) -> RelayCounts {
    let starts = stats.starts.get(mark.starts..).unwrap_or_default();
    let connections = stats
        .per_connection
        .get(mark.connections..)
        .unwrap_or_default();
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
        peak_open_subscriptions: connections
            .iter()
            .map(|c| c.peak_subscriptions)
            .max()
            .unwrap_or(0),
        events_sent: connections.iter().map(|c| c.events_sent).sum(),
        connections: connections.len(),
        bytes_received: connections.iter().map(|c| c.bytes_received).sum(),
        bytes_sent: connections.iter().map(|c| c.bytes_sent).sum(),
        received_by_verb: by_verb(connections.iter().map(|c| &c.received_by_verb)),
        sent_by_verb: by_verb(connections.iter().map(|c| &c.sent_by_verb)),
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
