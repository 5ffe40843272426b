//! `RepoSyncIndex`: what we want to sync, per repository — its relays, its root events and its
//! [`SyncLevel`] — and the rules that update it from announcements, root events and purgatory
//! snapshots.
//!
//! Rules:
//! - a newer announcement (NIP-01 order, see [`EventVersion`]) replaces the repository's relay
//!   set; an older one is ignored; both the old and the new relays are dirty;
//! - an announcement seen by the self-subscriber makes the entry [`SyncLevel::Full`]; a
//!   [`SyncLevel::StateOnly`] entry is promoted, never the other way round;
//! - root events add work without changing relay ownership; a root event for a repository not
//!   yet in the index is remembered and takes effect when the repository arrives; at most
//!   [`DEFAULT_MAX_WAITING_ROOTS`] (or the index's own cap) are remembered, and the ones past it are dropped (and counted), as
//!   they come from remote data;
//! - purgatory reconciliation replaces the set of `StateOnly` entries from a snapshot: active and
//!   soft-expired announcements are kept (relay sets replaced), expired or absent ones removed;
//!   `Full` entries are never downgraded or pruned;
//! - every announcement's relay list is capped by [`AnnouncementLimits::max_relays`].

use std::collections::{BTreeMap, BTreeSet};

use nostr::{EventId, PublicKey};

use crate::compact_set::CompactSet;
use crate::coordinate::RepoCoordinate;
use crate::nip34::{AnnouncementLimits, EventVersion, RepoAnnouncement, RootEvent};
use crate::pack::Pack;
use crate::relay_url::RelayUrl;

/// Which filters are built for a repository. `Full` is the stronger level, so an upgrade is `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum SyncLevel {
    /// Only state events (kind 30618): purgatory announcements without git data yet.
    StateOnly,
    /// Everything: state, events tagging the repository and events tagging its root events.
    #[default]
    Full,
}

/// What we want to sync for one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSyncNeeds {
    /// Relays listed in the repository's current announcement.
    pub relays: CompactSet<RelayUrl>,
    /// Root events (1617, 1618, 1621) referencing the repository.
    pub root_events: CompactSet<EventId>,
    /// Which filters to build.
    pub sync_level: SyncLevel,
    /// The announcement version the relay set came from.
    pub announcement: EventVersion,
}

/// Whether a purgatory announcement is still wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpiryStatus {
    /// Waiting for git data.
    Active,
    /// Past its soft expiry but inside the revival window: still synced.
    SoftExpired,
    /// Fully expired: no longer synced.
    Expired,
}

/// One announcement in a purgatory snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgatoryEntry {
    /// The announcement held in purgatory.
    pub announcement: RepoAnnouncement,
    /// Its expiry status at snapshot time.
    pub status: ExpiryStatus,
}

/// What one update changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexUpdate {
    /// Relays whose derived needs may have changed: old relay sets ∪ new relay sets of changed
    /// repositories, and the relays of repositories that gained root events.
    pub dirty_relays: BTreeSet<RelayUrl>,
    /// Repositories added, changed or removed.
    pub changed_repos: BTreeSet<RepoCoordinate>,
    /// Relays dropped by the per-announcement cap (plus those the parser already dropped).
    pub dropped_relays: usize,
    /// Announcements ignored because the index holds a newer version.
    pub stale_announcements: usize,
}

impl IndexUpdate {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.dirty_relays.is_empty() && self.changed_repos.is_empty()
    }

    /// Folds another update into this one.
    pub fn merge(&mut self, other: IndexUpdate) {
        self.dirty_relays.extend(other.dirty_relays);
        self.changed_repos.extend(other.changed_repos);
        self.dropped_relays += other.dropped_relays;
        self.stale_announcements += other.stale_announcements;
    }
}

/// Root events remembered for repositories not in the index, at most, unless
/// [`RepoSyncIndex::with_max_waiting_roots`] sets another cap.
pub const DEFAULT_MAX_WAITING_ROOTS: usize = 100_000;

/// The source of truth for what to sync: repository → needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSyncIndex {
    repos: BTreeMap<RepoCoordinate, RepoSyncNeeds>,
    /// Root events for repositories not (or no longer) in the index.
    waiting_roots: BTreeMap<RepoCoordinate, BTreeSet<EventId>>,
    /// Entries of `waiting_roots`, summed.
    waiting_count: usize,
    /// Waiting root events dropped because `max_waiting` were remembered.
    waiting_dropped: u64,
    /// Waiting root events remembered at most.
    max_waiting: usize,
    limits: AnnouncementLimits,
}

impl Default for RepoSyncIndex {
    fn default() -> Self {
        Self {
            repos: BTreeMap::new(),
            waiting_roots: BTreeMap::new(),
            waiting_count: 0,
            waiting_dropped: 0,
            max_waiting: DEFAULT_MAX_WAITING_ROOTS,
            limits: AnnouncementLimits::default(),
        }
    }
}

impl RepoSyncIndex {
    /// An empty index that caps announcements with `limits`.
    pub fn new(limits: AnnouncementLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Rebuilds the index's B-trees with full nodes (see [`Pack`]): the repositories, the large
    /// sets of their root events, and the roots waiting for their repository. The index does
    /// not change.
    pub fn pack(&mut self) {
        self.repos.pack();
        for needs in self.repos.values_mut() {
            needs.root_events.pack();
        }
        self.waiting_roots.pack();
    }

    /// The same index remembering at most `cap` root events that wait for their repository
    /// (the default is [`DEFAULT_MAX_WAITING_ROOTS`]).
    pub fn with_max_waiting_roots(mut self, cap: usize) -> Self {
        self.max_waiting = cap;
        self
    }

    /// Root events remembered at most while they wait for their repository.
    pub fn max_waiting_roots(&self) -> usize {
        self.max_waiting
    }

    /// Root events remembered now while they wait for their repository.
    pub fn waiting_roots_len(&self) -> usize {
        self.waiting_count
    }

    /// Applies an accepted announcement (seen by the self-subscriber) at [`SyncLevel::Full`].
    pub fn handle_announcement(&mut self, announcement: &RepoAnnouncement) -> IndexUpdate {
        self.apply_announcement(announcement, SyncLevel::Full)
    }

    /// Adds a root event to every repository it references.
    pub fn handle_root_event(&mut self, root: &RootEvent) -> IndexUpdate {
        let mut update = IndexUpdate::default();
        for coordinate in &root.repos {
            match self.repos.get_mut(coordinate) {
                Some(needs) => {
                    if needs.root_events.insert(root.id) {
                        update.changed_repos.insert(coordinate.clone());
                        if needs.sync_level == SyncLevel::Full {
                            update.dirty_relays.extend(needs.relays.iter().cloned());
                        }
                    }
                }
                None => self.remember_waiting(coordinate, [root.id]),
            }
        }
        update
    }

    /// Reconciles the [`SyncLevel::StateOnly`] entries with a purgatory snapshot.
    ///
    /// Active and soft-expired announcements are inserted or have their relay set replaced;
    /// `StateOnly` entries that are expired or absent from the snapshot are removed. `Full`
    /// entries are left alone. If the snapshot holds several versions of one repository, the
    /// newest live one counts.
    pub fn reconcile_purgatory(&mut self, snapshot: &[PurgatoryEntry]) -> IndexUpdate {
        let mut live: BTreeMap<&RepoCoordinate, &RepoAnnouncement> = BTreeMap::new();
        for entry in snapshot {
            if entry.status == ExpiryStatus::Expired {
                continue;
            }
            let announcement = &entry.announcement;
            live.entry(&announcement.coordinate)
                .and_modify(|kept| {
                    if announcement.version() > kept.version() {
                        *kept = announcement;
                    }
                })
                .or_insert(announcement);
        }

        let mut update = IndexUpdate::default();
        let gone: Vec<RepoCoordinate> = self
            .repos
            .iter()
            .filter(|(coordinate, needs)| {
                needs.sync_level == SyncLevel::StateOnly && !live.contains_key(coordinate)
            })
            .map(|(coordinate, _)| coordinate.clone())
            .collect();
        for coordinate in gone {
            if let Some(needs) = self.repos.remove(&coordinate) {
                update.dirty_relays.extend(needs.relays);
                if !needs.root_events.is_empty() {
                    self.remember_waiting(&coordinate, needs.root_events);
                }
                update.changed_repos.insert(coordinate);
            }
        }
        for announcement in live.into_values() {
            match self.repos.get_mut(&announcement.coordinate) {
                Some(needs) if needs.sync_level == SyncLevel::Full => {}
                Some(needs) => {
                    let (relays, dropped) = capped_relays(announcement, &self.limits);
                    update.dropped_relays += dropped;
                    needs.announcement = announcement.version();
                    if needs.relays != relays {
                        update.dirty_relays.extend(needs.relays.iter().cloned());
                        update.dirty_relays.extend(relays.iter().cloned());
                        update.changed_repos.insert(announcement.coordinate.clone());
                        needs.relays = relays;
                    }
                }
                None => update.merge(self.apply_announcement(announcement, SyncLevel::StateOnly)),
            }
        }
        update
    }

    /// The needs of one repository.
    pub fn get(&self, coordinate: &RepoCoordinate) -> Option<&RepoSyncNeeds> {
        self.repos.get(coordinate)
    }

    /// Every repository in coordinate order.
    pub fn iter(&self) -> impl Iterator<Item = (&RepoCoordinate, &RepoSyncNeeds)> {
        self.repos.iter()
    }

    /// Every repository `owner` announced, in coordinate order.
    pub fn repos_of(
        &self,
        owner: &PublicKey,
    ) -> impl Iterator<Item = (&RepoCoordinate, &RepoSyncNeeds)> {
        crate::coordinate::announced_by(&self.repos, owner)
    }

    /// Number of repositories.
    pub fn len(&self) -> usize {
        self.repos.len()
    }

    /// Whether the index holds no repository.
    pub fn is_empty(&self) -> bool {
        self.repos.is_empty()
    }

    /// Every relay some repository lists.
    pub fn relays(&self) -> BTreeSet<&RelayUrl> {
        self.repos
            .values()
            .flat_map(|needs| &needs.relays)
            .collect()
    }

    /// Waiting root events dropped so far because [`Self::max_waiting_roots`] were remembered.
    pub fn waiting_roots_dropped(&self) -> u64 {
        self.waiting_dropped
    }

    /// Remembers root events of a repository not in the index, within
    /// [`Self::max_waiting_roots`].
    fn remember_waiting(
        &mut self,
        coordinate: &RepoCoordinate,
        roots: impl IntoIterator<Item = EventId>,
    ) {
        let waiting = self.waiting_roots.entry(coordinate.clone()).or_default();
        for root in roots {
            if self.waiting_count >= self.max_waiting {
                self.waiting_dropped += 1;
            } else if waiting.insert(root) {
                self.waiting_count += 1;
            }
        }
        if waiting.is_empty() {
            self.waiting_roots.remove(coordinate);
        }
    }

    /// Root events remembered for a repository that is not in the index.
    pub fn waiting_root_events(&self, coordinate: &RepoCoordinate) -> Option<&BTreeSet<EventId>> {
        self.waiting_roots.get(coordinate)
    }

    /// The caps applied to announcements.
    pub fn limits(&self) -> &AnnouncementLimits {
        &self.limits
    }

    /// Inserts or updates an entry at `level`; the level only ever rises.
    fn apply_announcement(
        &mut self,
        announcement: &RepoAnnouncement,
        level: SyncLevel,
    ) -> IndexUpdate {
        let mut update = IndexUpdate::default();
        let coordinate = &announcement.coordinate;
        let version = announcement.version();
        match self.repos.get_mut(coordinate) {
            None => {
                let (relays, dropped) = capped_relays(announcement, &self.limits);
                update.dropped_relays += dropped;
                update.dirty_relays.extend(relays.iter().cloned());
                update.changed_repos.insert(coordinate.clone());
                let waiting = self.waiting_roots.remove(coordinate).unwrap_or_default();
                self.waiting_count -= waiting.len();
                let root_events = waiting.into_iter().collect();
                self.repos.insert(
                    coordinate.clone(),
                    RepoSyncNeeds {
                        relays,
                        root_events,
                        sync_level: level,
                        announcement: version,
                    },
                );
            }
            Some(needs) => {
                let upgrade = level > needs.sync_level;
                if version > needs.announcement {
                    let (relays, dropped) = capped_relays(announcement, &self.limits);
                    update.dropped_relays += dropped;
                    update.dirty_relays.extend(needs.relays.iter().cloned());
                    update.dirty_relays.extend(relays.iter().cloned());
                    update.changed_repos.insert(coordinate.clone());
                    needs.relays = relays;
                    needs.announcement = version;
                } else if version < needs.announcement {
                    update.stale_announcements += 1;
                }
                if upgrade {
                    needs.sync_level = level;
                    update.dirty_relays.extend(needs.relays.iter().cloned());
                    update.changed_repos.insert(coordinate.clone());
                }
            }
        }
        update
    }
}

/// The announcement's relays cut to the cap, with the parser's and this cap's drops added up.
fn capped_relays(
    announcement: &RepoAnnouncement,
    limits: &AnnouncementLimits,
) -> (CompactSet<RelayUrl>, usize) {
    let mut relays = CompactSet::new();
    let mut dropped = announcement.dropped_relays;
    for relay in &announcement.relays {
        if relays.contains(relay) {
            continue;
        }
        if relays.len() < limits.max_relays {
            relays.insert(relay.clone());
        } else {
            dropped += 1;
        }
    }
    (relays, dropped)
}

#[cfg(test)]
mod tests;
