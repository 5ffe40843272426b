//! The two core algorithms: `derive_relay_targets` inverts the repository index into what each
//! relay should serve, and `compute_actions` is the three-way diff target − pending − confirmed
//! that decides which new items to subscribe to. It is the only place that decides that.

use std::collections::{BTreeMap, BTreeSet, btree_map, btree_set};
use std::iter::Peekable;

use nostr::EventId;

use crate::coordinate::RepoCoordinate;
use crate::pack::Pack;
use crate::pending::PendingSyncIndex;
use crate::relay_index::RelaySyncIndex;
use crate::relay_url::RelayUrl;
use crate::repo_index::{RepoSyncIndex, SyncLevel};
use crate::shared::Shared;

/// A set of sync items for one relay: repositories with the level wanted, and root events.
///
/// Used for targets, for pending batch items ([`crate::PendingItems`]) and for the new items of
/// an [`AddFilters`] action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelaySyncNeeds {
    /// Repositories and the level to sync each at.
    pub repos: Shared<BTreeMap<RepoCoordinate, SyncLevel>>,
    /// Root events whose threads to sync.
    pub root_events: Shared<BTreeSet<EventId>>,
}

impl Pack for RelaySyncNeeds {
    fn pack(&mut self) {
        self.repos.pack();
        self.root_events.pack();
    }
}

impl RelaySyncNeeds {
    /// Whether there is nothing to sync.
    pub fn is_empty(&self) -> bool {
        self.repos.is_empty() && self.root_events.is_empty()
    }

    /// Adds a repository; if it is already present the stronger level wins.
    pub fn add_repo(&mut self, coordinate: RepoCoordinate, level: SyncLevel) {
        let wanted = self.repos.entry(coordinate).or_insert(level);
        *wanted = (*wanted).max(level);
    }

    /// Adds everything in `other`, keeping the stronger level per repository.
    pub fn extend(&mut self, other: &RelaySyncNeeds) {
        for (coordinate, level) in &other.repos {
            self.add_repo(coordinate.clone(), *level);
        }
        self.root_events.extend(other.root_events.iter().copied());
    }

    /// Whether the repository is present at `level` or stronger.
    pub fn covers_repo(&self, coordinate: &RepoCoordinate, level: SyncLevel) -> bool {
        self.repos
            .get(coordinate)
            .is_some_and(|have| *have >= level)
    }

    /// Repositories at [`SyncLevel::Full`].
    pub fn full_repos(&self) -> impl Iterator<Item = &RepoCoordinate> {
        self.repos_at(SyncLevel::Full)
    }

    /// Repositories at [`SyncLevel::StateOnly`].
    pub fn state_only_repos(&self) -> impl Iterator<Item = &RepoCoordinate> {
        self.repos_at(SyncLevel::StateOnly)
    }

    fn repos_at(&self, level: SyncLevel) -> impl Iterator<Item = &RepoCoordinate> {
        self.repos
            .iter()
            .filter(move |(_, have)| **have == level)
            .map(|(coordinate, _)| coordinate)
    }
}

/// New items to subscribe to on one relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddFilters {
    /// The relay.
    pub relay: RelayUrl,
    /// Items neither pending nor confirmed there.
    pub needs: RelaySyncNeeds,
}

/// One relay's repositories (in coordinate order) and root events (unsorted) while deriving.
type Gathered = (Vec<(RepoCoordinate, SyncLevel)>, Vec<EventId>);

/// Inverts repository → relays into relay → needs.
///
/// A `Full` repository contributes itself and its root events to each of its relays; a
/// `StateOnly` repository contributes only itself. The own relay, if given, is left out, under
/// any path ([`RelayUrl::same_endpoint`]).
pub fn derive_relay_targets(
    index: &RepoSyncIndex,
    own_relay: Option<&RelayUrl>,
) -> BTreeMap<RelayUrl, RelaySyncNeeds> {
    derive_relay_targets_where(index, own_relay, |_, _| true)
}

/// [`derive_relay_targets`], counting a repository on a relay only where `admit` says so.
pub(crate) fn derive_relay_targets_where(
    index: &RepoSyncIndex,
    own_relay: Option<&RelayUrl>,
    mut admit: impl FnMut(&RepoCoordinate, &RelayUrl) -> bool,
) -> BTreeMap<RelayUrl, RelaySyncNeeds> {
    // Gather per relay in vectors, then build each set in one sorted pass: far cheaper than
    // inserting hundreds of thousands of ids one by one.
    let mut gathered: BTreeMap<&RelayUrl, Gathered> = BTreeMap::new();
    for (coordinate, needs) in index.iter() {
        for relay in &needs.relays {
            if own_relay.is_some_and(|own| own.same_endpoint(relay)) || !admit(coordinate, relay) {
                continue;
            }
            let (repos, roots) = gathered.entry(relay).or_default();
            // The index iterates in coordinate order and lists each relay once per repository,
            // so `repos` stays sorted and unique.
            repos.push((coordinate.clone(), needs.sync_level));
            if needs.sync_level == SyncLevel::Full {
                roots.extend(needs.root_events.iter().copied());
            }
        }
    }
    gathered
        .into_iter()
        .map(|(relay, (repos, mut roots))| {
            roots.sort_unstable_by_key(id_sort_key);
            roots.dedup();
            let needs = RelaySyncNeeds {
                repos: repos.into_iter().collect(),
                root_events: roots.into_iter().collect(),
            };
            (relay.clone(), needs)
        })
        .collect()
}

/// The three-way diff: for each connected relay, target − pending − confirmed.
///
/// A repository is new if neither pending nor confirmed holds it at the wanted level or
/// stronger, so a `StateOnly` → `Full` upgrade is new work. Relays that are unknown or not
/// connected are skipped (they get their items when they connect). Relays with nothing new get
/// no action. Actions come in relay order.
pub fn compute_actions(
    targets: &BTreeMap<RelayUrl, RelaySyncNeeds>,
    pending: &PendingSyncIndex,
    confirmed: &RelaySyncIndex,
) -> Vec<AddFilters> {
    let mut actions = Vec::new();
    for (relay, target) in targets {
        let Some(state) = confirmed.get(relay) else {
            continue;
        };
        if !state.connection_status.is_connected() {
            continue;
        }
        let in_flight = pending.pending_items(relay);
        // Targets, confirmed and pending are all sorted: walk them together once.
        let (mut confirmed_repos, mut pending_repos) = (
            state.repos.iter().peekable(),
            in_flight.repos.iter().peekable(),
        );
        let (mut confirmed_roots, mut pending_roots) = (
            state.root_events.iter().peekable(),
            in_flight.root_events.iter().peekable(),
        );
        let needs = RelaySyncNeeds {
            repos: target
                .repos
                .iter()
                .filter(|(coordinate, level)| {
                    let confirmed = seek_level(&mut confirmed_repos, coordinate);
                    let pending = seek_level(&mut pending_repos, coordinate);
                    confirmed.max(pending).is_none_or(|have| have < **level)
                })
                .map(|(coordinate, level)| (coordinate.clone(), *level))
                .collect(),
            root_events: target
                .root_events
                .iter()
                .filter(|id| {
                    let confirmed = seek_key(&mut confirmed_roots, id);
                    let pending = seek_key(&mut pending_roots, id);
                    !confirmed && !pending
                })
                .copied()
                .collect(),
        };
        if !needs.is_empty() {
            actions.push(AddFilters {
                relay: relay.clone(),
                needs,
            });
        }
    }
    actions
}

/// A key ordered exactly like [`EventId`] (its bytes, lexicographically) that compares as two
/// integers instead of a 32-byte memory comparison.
fn id_sort_key(id: &EventId) -> (u128, u128) {
    let bytes = id.as_bytes();
    let mut high = [0u8; 16];
    let mut low = [0u8; 16];
    high.copy_from_slice(&bytes[..16]);
    low.copy_from_slice(&bytes[16..]);
    (u128::from_be_bytes(high), u128::from_be_bytes(low))
}

/// Advances a sorted set iterator to `key`; whether the set holds it. Ask in ascending order.
fn seek_key<K: Ord>(sorted: &mut Peekable<btree_set::Iter<'_, K>>, key: &K) -> bool {
    while sorted.next_if(|have| *have < key).is_some() {}
    sorted.next_if(|have| *have == key).is_some()
}

/// Advances a sorted map iterator to `key`; the level held for it. Ask in ascending order.
fn seek_level<K: Ord>(
    sorted: &mut Peekable<btree_map::Iter<'_, K, SyncLevel>>,
    key: &K,
) -> Option<SyncLevel> {
    while sorted.next_if(|(have, _)| *have < key).is_some() {}
    sorted
        .next_if(|(have, _)| *have == key)
        .map(|(_, level)| *level)
}

#[cfg(test)]
mod tests;
