//! [`RelayNeeds`]: the relay side of [`RelayTargets`](super::RelayTargets) — each relay's
//! repositories and root events, split into the targets, this shard's relays the relay cap
//! ranks out, and other shards' relays — and the moves that keep it equal to the full
//! derivation: a repository joins, stays on or leaves a relay; the cap ranks the relays again.

use std::collections::{BTreeMap, BTreeSet};

use nostr::EventId;

use super::extra_refs::ExtraRefs;
use crate::coordinate::RepoCoordinate;
use crate::diff::RelaySyncNeeds;
use crate::relay_url::RelayUrl;
use crate::repo_index::SyncLevel;
use crate::shard::Shard;

/// Every relay some repository reaches, by where the bounds put it.
#[derive(Debug, Clone, Default)]
pub(super) struct RelayNeeds {
    /// This shard's relays within the relay cap.
    pub(super) targets: BTreeMap<RelayUrl, RelaySyncNeeds>,
    /// This shard's relays the relay cap ranks out, with the needs they would have.
    pub(super) over_cap: BTreeMap<RelayUrl, RelaySyncNeeds>,
    /// Relays another shard owns, with how many repositories reach each.
    pub(super) other_shards: BTreeMap<RelayUrl, usize>,
    /// Root events more than one repository gives a relay of `targets` or `over_cap`.
    shared_roots: BTreeMap<RelayUrl, ExtraRefs>,
    /// This shard's relays whose needs, or whose place within the cap, changed since the
    /// last [`RelayNeeds::take_changed`].
    changed: BTreeSet<RelayUrl>,
}

impl RelayNeeds {
    /// `coordinate` now reaches `relay` at `level`, with `roots` (empty unless `Full`).
    pub(super) fn join<'a>(
        &mut self,
        relay: &RelayUrl,
        coordinate: &RepoCoordinate,
        level: SyncLevel,
        roots: impl IntoIterator<Item = &'a EventId>,
        shard: Shard,
    ) {
        if let Some(repos) = self.other_shards.get_mut(relay) {
            *repos += 1;
            return;
        }
        let known = self.targets.contains_key(relay) || self.over_cap.contains_key(relay);
        if !known {
            if !shard.owns(relay) {
                self.other_shards.insert(relay.clone(), 1);
                return;
            }
            // A new relay starts as a target; the relay cap may rank it out afterwards.
            self.targets
                .insert(relay.clone(), RelaySyncNeeds::default());
        }
        let Some(needs) = needs_mut(&mut self.targets, &mut self.over_cap, relay) else {
            return;
        };
        self.changed.insert(relay.clone());
        needs.repos.insert(coordinate.clone(), level);
        for id in roots {
            add_root(needs, &mut self.shared_roots, relay, *id);
        }
    }

    /// `coordinate` stays on `relay`, now at `level`, gaining `add` and losing `release`.
    pub(super) fn stay(
        &mut self,
        relay: &RelayUrl,
        coordinate: &RepoCoordinate,
        level: SyncLevel,
        add: &[EventId],
        release: &[EventId],
    ) {
        let Some(needs) = needs_mut(&mut self.targets, &mut self.over_cap, relay) else {
            return; // another shard's relay: only the count of repositories is kept
        };
        if needs.repos.get(coordinate) != Some(&level) || !add.is_empty() || !release.is_empty() {
            self.changed.insert(relay.clone());
        }
        if let Some(held) = needs.repos.get_mut(coordinate) {
            *held = level;
        }
        for id in release {
            release_root(needs, &mut self.shared_roots, relay, id);
        }
        for id in add {
            add_root(needs, &mut self.shared_roots, relay, *id);
        }
    }

    /// `coordinate` no longer reaches `relay`, taking `roots` (what it gave) with it; a relay
    /// no repository reaches is forgotten.
    pub(super) fn leave<'a>(
        &mut self,
        relay: &RelayUrl,
        coordinate: &RepoCoordinate,
        roots: impl IntoIterator<Item = &'a EventId>,
    ) {
        if let Some(repos) = self.other_shards.get_mut(relay) {
            *repos -= 1;
            if *repos == 0 {
                self.other_shards.remove(relay);
            }
            return;
        }
        let Some(needs) = needs_mut(&mut self.targets, &mut self.over_cap, relay) else {
            return;
        };
        self.changed.insert(relay.clone());
        needs.repos.remove(coordinate);
        for id in roots {
            release_root(needs, &mut self.shared_roots, relay, id);
        }
        if needs.repos.is_empty() {
            debug_assert!(
                needs.root_events.is_empty(),
                "root events outlive their repositories"
            );
            self.targets.remove(relay);
            self.over_cap.remove(relay);
            self.shared_roots.remove(relay);
        }
    }

    /// Keeps at most `max_relays` targets: the relays in `keep` always, then those that serve
    /// the most repositories, then the most root events, then in URL order. Relays are only
    /// ranked while this shard's relays exceed the cap (or did at the last update).
    pub(super) fn apply_relay_cap(&mut self, max_relays: usize, keep: &BTreeSet<RelayUrl>) {
        if self.over_cap.is_empty() && self.targets.len() <= max_relays {
            return;
        }
        let kept_always = keep
            .iter()
            .filter(|relay| self.targets.contains_key(*relay))
            .count();
        let room = max_relays.saturating_sub(kept_always);
        // (relay, needs, whether it is a target now); relays in `keep` are never ranked out.
        let mut ranked: Vec<(&RelayUrl, &RelaySyncNeeds, bool)> = self
            .targets
            .iter()
            .filter(|(relay, _)| !keep.contains(*relay))
            .map(|(relay, needs)| (relay, needs, true))
            .chain(
                self.over_cap
                    .iter()
                    .map(|(relay, needs)| (relay, needs, false)),
            )
            .collect();
        ranked.sort_by(|(a_url, a, _), (b_url, b, _)| {
            b.repos
                .len()
                .cmp(&a.repos.len())
                .then(b.root_events.len().cmp(&a.root_events.len()))
                .then(a_url.cmp(b_url))
        });
        let (within, beyond) = ranked.split_at(room.min(ranked.len()));
        let promoted: Vec<RelayUrl> = within
            .iter()
            .filter(|(_, _, target)| !target)
            .map(|(relay, _, _)| (*relay).clone())
            .collect();
        let demoted: Vec<RelayUrl> = beyond
            .iter()
            .filter(|(_, _, target)| *target)
            .map(|(relay, _, _)| (*relay).clone())
            .collect();
        for relay in promoted {
            if let Some(needs) = self.over_cap.remove(&relay) {
                self.changed.insert(relay.clone());
                self.targets.insert(relay, needs);
            }
        }
        for relay in demoted {
            if let Some(needs) = self.targets.remove(&relay) {
                self.changed.insert(relay.clone());
                self.over_cap.insert(relay, needs);
            }
        }
    }

    /// The relays changed since the last call (see [`RelayNeeds::changed`]), and forgets them.
    pub(super) fn take_changed(&mut self) -> BTreeSet<RelayUrl> {
        std::mem::take(&mut self.changed)
    }
}

/// The needs of one of this shard's relays, a target or ranked out.
fn needs_mut<'a>(
    targets: &'a mut BTreeMap<RelayUrl, RelaySyncNeeds>,
    over_cap: &'a mut BTreeMap<RelayUrl, RelaySyncNeeds>,
    relay: &RelayUrl,
) -> Option<&'a mut RelaySyncNeeds> {
    match targets.get_mut(relay) {
        Some(needs) => Some(needs),
        None => over_cap.get_mut(relay),
    }
}

/// One more repository gives `relay` the root event `id`.
fn add_root(
    needs: &mut RelaySyncNeeds,
    shared: &mut BTreeMap<RelayUrl, ExtraRefs>,
    relay: &RelayUrl,
    id: EventId,
) {
    if !needs.root_events.insert(id) {
        shared
            .entry(relay.clone())
            .or_default()
            .handle_added(id, false);
    }
}

/// One repository fewer gives `relay` the root event `id`; the last one takes it away.
fn release_root(
    needs: &mut RelaySyncNeeds,
    shared: &mut BTreeMap<RelayUrl, ExtraRefs>,
    relay: &RelayUrl,
    id: &EventId,
) {
    let last = match shared.get_mut(relay) {
        Some(extra) => {
            let last = extra.handle_released(id);
            if extra.is_empty() {
                shared.remove(relay);
            }
            last
        }
        None => true,
    };
    if last {
        needs.root_events.remove(id);
    }
}
