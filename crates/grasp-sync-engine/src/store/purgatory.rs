//! `Purgatory`: announcements that list this service but whose git data is not yet present,
//! and the events that depend on them, held outside the database. Pure: every method takes
//! `now`; the store core holds it behind a lock and asks a [`GitDataProbe`] whether a
//! repository's git data arrived.
//!
//! Rules:
//! - an entry is *active* for [`PurgatoryConfig::soft_ttl`] after it was last revived (held, a
//!   newer announcement, a state or root event for it), then *soft-expired* (still synced, still
//!   revivable) until [`PurgatoryConfig::revival_window`] after that revival, then *expired*
//!   and dropped with what it held;
//! - at most [`PurgatoryConfig::max_announcements`] entries and
//!   [`PurgatoryConfig::max_held_per_repo`] dependent events per entry; past either, the event
//!   is refused (not remembered, so a later sync offers it again);
//! - a state event (30618) depends on an entry with its `d` identifier whose owner or
//!   maintainer signed it; a root event (1617, 1618, 1621) on every entry it tags by `a`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use grasp_sync_model::{
    ExpiryStatus, PurgatoryEntry, RepoAnnouncement, RepoCoordinate, RepoState, RootEvent,
};
use nostr::{Event, EventId, Timestamp};

use grasp_sync_model::REPO_STATE_KIND as STATE_KIND;

/// Whether a repository's git data is present, so its announcement may leave purgatory.
pub trait GitDataProbe: Send + Sync + 'static {
    /// Whether the git data of the repository at `coordinate` is present.
    fn is_present(&self, coordinate: &RepoCoordinate) -> bool;
}

/// Bounds and lifetimes of the purgatory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgatoryConfig {
    /// Most announcements held at once.
    pub max_announcements: usize,
    /// Most dependent events held per announcement.
    pub max_held_per_repo: usize,
    /// How long after its last revival an entry is active.
    pub soft_ttl: Duration,
    /// How long after its last revival an entry may still be revived (and is synced); past
    /// it the entry expires.
    pub revival_window: Duration,
}

/// [`PurgatoryConfig::max_announcements`]'s default.
pub const DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS: usize = 10_000;
/// [`PurgatoryConfig::max_held_per_repo`]'s default.
pub const DEFAULT_MAX_HELD_PER_REPO: usize = 256;
/// [`PurgatoryConfig::soft_ttl`]'s default: 30 minutes.
pub const DEFAULT_PURGATORY_SOFT_TTL: Duration = Duration::from_secs(30 * 60);
/// [`PurgatoryConfig::revival_window`]'s default: 24 hours.
pub const PURGATORY_REVIVAL_WINDOW: Duration = Duration::from_secs(24 * 3600);

impl Default for PurgatoryConfig {
    fn default() -> Self {
        Self {
            max_announcements: DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS,
            max_held_per_repo: DEFAULT_MAX_HELD_PER_REPO,
            soft_ttl: DEFAULT_PURGATORY_SOFT_TTL,
            revival_window: PURGATORY_REVIVAL_WINDOW,
        }
    }
}

/// What the purgatory holds and has done, for `/status` and the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PurgatoryStats {
    /// Announcements held now.
    pub announcements: usize,
    /// Of those, past their soft expiry.
    pub soft_expired: usize,
    /// Dependent events held now.
    pub held_events: usize,
    /// The cap on announcements held.
    pub max_announcements: usize,
    /// Announcements promoted since start.
    pub promoted: u64,
    /// Announcements expired since start.
    pub expired: u64,
    /// Events refused because a cap was reached, since start.
    pub refused_full: u64,
}

/// What holding an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Newly held.
    Held,
    /// Already held (the same event).
    AlreadyHeld,
    /// An older version of an announcement held in a newer one.
    Older,
    /// A cap was reached: not held.
    Full,
    /// The announcement it depends on is no longer held.
    Gone,
}

/// One held announcement.
#[derive(Debug, Clone)]
struct Entry {
    announcement: RepoAnnouncement,
    event: Event,
    revived_at: Timestamp,
    held: Vec<Event>,
}

/// An entry taken out for promotion.
#[derive(Debug)]
pub(crate) struct Taken(Entry);

impl Taken {
    /// The announcement event.
    pub(crate) fn announcement(&self) -> &Event {
        &self.0.event
    }

    /// The events held with it.
    pub(crate) fn dependents(&self) -> &[Event] {
        &self.0.held
    }
}

/// The purgatory's state.
#[derive(Debug)]
pub(crate) struct Purgatory {
    config: PurgatoryConfig,
    entries: BTreeMap<RepoCoordinate, Entry>,
    ids: HashSet<EventId>,
    promoted: u64,
    expired: u64,
    refused_full: u64,
}

impl Purgatory {
    pub(crate) fn new(config: PurgatoryConfig) -> Self {
        Self {
            config,
            entries: BTreeMap::new(),
            ids: HashSet::new(),
            promoted: 0,
            expired: 0,
            refused_full: 0,
        }
    }

    /// Holds an announcement (a newer version replaces the held one and keeps its dependents).
    pub(crate) fn hold_announcement(
        &mut self,
        now: Timestamp,
        announcement: RepoAnnouncement,
        event: &Event,
    ) -> Hold {
        self.expire(now);
        if self.ids.contains(&event.id) {
            return Hold::AlreadyHeld;
        }
        let full = self.entries.len() >= self.config.max_announcements;
        match self.entries.get_mut(&announcement.coordinate) {
            Some(entry) if entry.announcement.version() >= announcement.version() => Hold::Older,
            Some(entry) => {
                self.ids.remove(&entry.event.id);
                self.ids.insert(event.id);
                entry.announcement = announcement;
                entry.event = event.clone();
                entry.revived_at = now;
                Hold::Held
            }
            None if full => {
                self.refused_full += 1;
                Hold::Full
            }
            None => {
                self.ids.insert(event.id);
                self.entries.insert(
                    announcement.coordinate.clone(),
                    Entry {
                        announcement,
                        event: event.clone(),
                        revived_at: now,
                        held: Vec::new(),
                    },
                );
                Hold::Held
            }
        }
    }

    /// The held announcement `event` depends on, if any (expired entries do not count).
    pub(crate) fn holder_of(&self, now: Timestamp, event: &Event) -> Option<RepoCoordinate> {
        if self.entries.is_empty() {
            return None;
        }
        let live = |coordinate: &RepoCoordinate| {
            self.entries
                .get(coordinate)
                .is_some_and(|entry| self.status(entry, now) != ExpiryStatus::Expired)
        };
        if event.kind.as_u16() == STATE_KIND {
            let state = RepoState::from_event(event).ok()?;
            let identifier = state.coordinate.identifier();
            return self
                .entries
                .iter()
                .filter(|(coordinate, _)| coordinate.identifier() == identifier)
                .find(|(_, entry)| {
                    entry.announcement.coordinate.owner() == &event.pubkey
                        || entry.announcement.maintainers.contains(&event.pubkey)
                })
                .map(|(coordinate, _)| coordinate.clone())
                .filter(live);
        }
        let root = RootEvent::from_event(event).ok()?;
        root.repos.into_iter().find(live)
    }

    /// Holds an event that depends on the entry at `coordinate`, and revives that entry.
    pub(crate) fn hold_dependent(
        &mut self,
        now: Timestamp,
        coordinate: &RepoCoordinate,
        event: &Event,
    ) -> Hold {
        if self.ids.contains(&event.id) {
            return Hold::AlreadyHeld;
        }
        let Some(entry) = self.entries.get_mut(coordinate) else {
            return Hold::Gone;
        };
        if entry.held.len() >= self.config.max_held_per_repo {
            self.refused_full += 1;
            return Hold::Full;
        }
        entry.held.push(event.clone());
        entry.revived_at = now;
        self.ids.insert(event.id);
        Hold::Held
    }

    /// Drops entries past their revival window; how many.
    pub(crate) fn expire(&mut self, now: Timestamp) -> usize {
        let gone: Vec<RepoCoordinate> = self
            .entries
            .iter()
            .filter(|(_, entry)| self.status(entry, now) == ExpiryStatus::Expired)
            .map(|(coordinate, _)| coordinate.clone())
            .collect();
        for coordinate in &gone {
            if let Some(entry) = self.entries.remove(coordinate) {
                self.forget(&entry);
            }
        }
        self.expired += gone.len() as u64;
        gone.len()
    }

    /// The announcements to sync at `StateOnly` level, with their status, after expiring.
    pub(crate) fn snapshot(&mut self, now: Timestamp) -> Vec<PurgatoryEntry> {
        self.expire(now);
        self.entries
            .values()
            .map(|entry| PurgatoryEntry {
                announcement: entry.announcement.clone(),
                status: self.status(entry, now),
            })
            .collect()
    }

    /// The coordinates held.
    pub(crate) fn coordinates(&self) -> Vec<RepoCoordinate> {
        self.entries.keys().cloned().collect()
    }

    /// Takes an entry out for promotion: its announcement event, then its dependents. It
    /// counts as promoted once [`Purgatory::promoted`] says its announcement was stored; a
    /// failed save gives it back with [`Purgatory::restore`].
    pub(crate) fn take(&mut self, coordinate: &RepoCoordinate) -> Option<Taken> {
        let entry = self.entries.remove(coordinate)?;
        self.forget(&entry);
        Some(Taken(entry))
    }

    /// A taken entry's announcement was stored.
    pub(crate) fn promoted(&mut self) {
        self.promoted += 1;
    }

    /// Holds a taken entry again (its announcement could not be stored), unless a newer
    /// version of it was held meanwhile.
    pub(crate) fn restore(&mut self, taken: Taken) {
        let Taken(entry) = taken;
        let coordinate = entry.announcement.coordinate.clone();
        if self.entries.contains_key(&coordinate) {
            return;
        }
        self.ids.insert(entry.event.id);
        self.ids.extend(entry.held.iter().map(|event| event.id));
        self.entries.insert(coordinate, entry);
    }

    /// Whether the event is held.
    pub(crate) fn contains(&self, id: &EventId) -> bool {
        self.ids.contains(id)
    }

    /// The held announcements with `identifier` that `author` owns or maintains.
    pub(crate) fn announcements_for(
        &self,
        identifier: &str,
        author: &nostr::PublicKey,
    ) -> Vec<RepoAnnouncement> {
        self.entries
            .values()
            .map(|entry| &entry.announcement)
            .filter(|a| a.coordinate.identifier() == identifier)
            .filter(|a| a.coordinate.owner() == author || a.maintainers.contains(author))
            .cloned()
            .collect()
    }

    pub(crate) fn stats(&self, now: Timestamp) -> PurgatoryStats {
        PurgatoryStats {
            announcements: self.entries.len(),
            soft_expired: self
                .entries
                .values()
                .filter(|entry| self.status(entry, now) != ExpiryStatus::Active)
                .count(),
            held_events: self.entries.values().map(|entry| entry.held.len()).sum(),
            max_announcements: self.config.max_announcements,
            promoted: self.promoted,
            expired: self.expired,
            refused_full: self.refused_full,
        }
    }

    fn status(&self, entry: &Entry, now: Timestamp) -> ExpiryStatus {
        let age = Duration::from_secs(now.as_secs().saturating_sub(entry.revived_at.as_secs()));
        if age >= self.config.revival_window {
            ExpiryStatus::Expired
        } else if age >= self.config.soft_ttl {
            ExpiryStatus::SoftExpired
        } else {
            ExpiryStatus::Active
        }
    }

    fn forget(&mut self, entry: &Entry) {
        self.ids.remove(&entry.event.id);
        for event in &entry.held {
            self.ids.remove(&event.id);
        }
    }
}

#[cfg(test)]
mod tests;
