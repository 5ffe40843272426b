//! `ColdRecord`: one cold-index entry as it is persisted, the pending writes the index hands
//! to its persistence, and the conversions between records and the index's entries.

use grasp_sync_model::RelayUrl;
use nostr::{EventId, Timestamp};
use serde::{Deserialize, Serialize};

use super::{ColdEntry, Dependency, MAX_DEPENDENCIES, MAX_SOURCES, RejectedIndex, Release};

/// A cold-index entry in its persisted form (times in unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ColdRecord {
    /// The rejected event.
    pub(crate) id: EventId,
    /// Its kind, so announcements are re-fetched before the states that depend on them.
    pub(crate) kind: u16,
    /// The NIP-01 reason it was rejected with.
    pub(crate) reason: String,
    /// When it was rejected.
    pub(crate) recorded_at: u64,
    /// When the entry is forgotten.
    pub(crate) expires_at: u64,
    /// What it waits for, in [`Dependency::encode`](super::Dependency::encode) form; empty for a
    /// final rejection.
    pub(crate) waits: Vec<String>,
    /// Relays that sent it.
    pub(crate) sources: Vec<String>,
    /// Whether its dependency arrived and it waits to be fetched again.
    pub(crate) released: bool,
}

/// A pending write: the record to store for an ID, or `None` to delete it.
pub(crate) type ColdChange = (EventId, Option<ColdRecord>);

impl RejectedIndex {
    /// Loads persisted cold entries (at open), in the order they expire (a renewed entry is
    /// newer than its rejection). Expired ones are dropped and deleted; released ones are due
    /// for fetching at once.
    pub(crate) fn handle_restored(&mut self, now: Timestamp, mut records: Vec<ColdRecord>) {
        records.sort_by_key(|record| (record.expires_at, record.recorded_at));
        for record in records {
            let expires_at = Timestamp::from_secs(record.expires_at);
            if expires_at <= now {
                self.pending.insert(record.id, None);
                continue;
            }
            self.unlink_cold(&record.id);
            while self.cold.len() >= self.config.cold_capacity.max(1) {
                let Some((oldest, _)) = self.cold.oldest() else {
                    break;
                };
                self.forget(&oldest);
            }
            let waits: Vec<Dependency> = if record.released {
                Vec::new()
            } else {
                record
                    .waits
                    .iter()
                    .filter_map(|text| Dependency::decode(text))
                    .take(MAX_DEPENDENCIES)
                    .collect()
            };
            for dependency in &waits {
                self.waiters
                    .entry(dependency.clone())
                    .or_default()
                    .insert(record.id);
            }
            let release = record.released.then(|| {
                self.due.insert((now, record.id));
                Release {
                    due: Some(now),
                    reports: 0,
                }
            });
            let entry = ColdEntry {
                kind: record.kind,
                reason: record.reason,
                recorded_at: Timestamp::from_secs(record.recorded_at),
                expires_at,
                waits,
                sources: record
                    .sources
                    .iter()
                    .filter_map(|url| RelayUrl::parse(url).ok())
                    .take(MAX_SOURCES)
                    .collect(),
                release,
            };
            self.cold.insert(record.id, entry);
        }
    }
}

/// The persisted form of a cold entry.
pub(super) fn record(id: &EventId, entry: &ColdEntry) -> ColdRecord {
    ColdRecord {
        id: *id,
        kind: entry.kind,
        reason: entry.reason.clone(),
        recorded_at: entry.recorded_at.as_secs(),
        expires_at: entry.expires_at.as_secs(),
        waits: entry.waits.iter().map(Dependency::encode).collect(),
        sources: entry.sources.iter().map(ToString::to_string).collect(),
        released: entry.release.is_some(),
    }
}
