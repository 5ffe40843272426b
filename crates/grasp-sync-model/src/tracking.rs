//! [`TrackingBounds`]: how much remote data can make the service track. Anyone can publish an
//! announcement that lists the service, and through it name relays; these bounds keep the
//! relays tracked in proportion to the service, not to what strangers publish.
//!
//! [`derive_bounded_relay_targets`] applies three rules to the targets
//! [`derive_relay_targets`](crate::derive_relay_targets) would give:
//! 1. **Hosts per author.** The relays of one author's repositories (all their announcements
//!    together) reach at most `max_hosts_per_author` distinct hosts: the first ones in
//!    coordinate order, then in relay URL order. A relay on another host gets
//!    none of that author's repositories. So one author cannot spread the service over
//!    thousands of hosts, and 32 paths or ports on one host count as one.
//! 2. **Other shards.** With a [`Shard`] of several, a relay another shard owns is no target of
//!    this one: it is counted in [`TrackingReport::relays_other_shards`]. The host rule above is
//!    applied to the whole index first, so every shard admits the same (repository, relay)
//!    pairs and the shards together track what one daemon would.
//! 3. **Relays in total.** At most `max_relays` relays are targets, those that serve the most
//!    repositories first (then the most root events, then URL order); the relays in `keep`
//!    (bootstrap relays) are always kept and count towards the cap. The cap is per shard: it
//!    ranks only this shard's relays.
//!
//! The result is deterministic: the same index gives the same targets.
//! [`RelayTargets`](crate::RelayTargets) keeps the same result up to date by the delta of each
//! index update instead of deriving it from the whole index.

use std::collections::{BTreeMap, BTreeSet};

use nostr::PublicKey;

use crate::diff::{RelaySyncNeeds, derive_relay_targets_where};
use crate::relay_url::RelayUrl;
use crate::repo_index::RepoSyncIndex;
use crate::shard::Shard;

/// Caps on what announcements make the service track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackingBounds {
    /// Relays tracked at most, bootstrap relays included.
    pub max_relays: usize,
    /// Distinct relay hosts one author's repositories may name.
    pub max_hosts_per_author: usize,
    /// The part of the relays this daemon syncs ([`Shard::WHOLE`]: all of them).
    pub shard: Shard,
}

impl Default for TrackingBounds {
    /// 256 relays; 16 hosts per author; every relay (one shard).
    fn default() -> Self {
        TrackingBounds {
            max_relays: 256,
            max_hosts_per_author: 16,
            shard: Shard::WHOLE,
        }
    }
}

/// What the bounds left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackingReport {
    /// Relays that would be targets but for the total cap.
    pub relays_over_cap: usize,
    /// (repository, relay) pairs left out because the relay's host is beyond its author's
    /// host cap.
    pub author_relays_dropped: usize,
    /// Relays that would be targets but belong to another shard.
    pub relays_other_shards: usize,
}

impl TrackingReport {
    /// Whether the size bounds left anything out (another shard's relays are not left out:
    /// that shard syncs them).
    pub fn leaves_out_any(&self) -> bool {
        self.relays_over_cap > 0 || self.author_relays_dropped > 0
    }
}

/// The relay targets of `index` within `bounds` (see the module documentation).
pub fn derive_bounded_relay_targets(
    index: &RepoSyncIndex,
    own_relay: Option<&RelayUrl>,
    bounds: TrackingBounds,
    keep: &BTreeSet<RelayUrl>,
) -> (BTreeMap<RelayUrl, RelaySyncNeeds>, TrackingReport) {
    let mut report = TrackingReport::default();
    // Each author's admitted hosts, in the order their repositories name them.
    let mut hosts: BTreeMap<PublicKey, BTreeSet<String>> = BTreeMap::new();
    for (coordinate, needs) in index.iter() {
        let admitted = hosts.entry(*coordinate.owner()).or_default();
        for relay in &needs.relays {
            if admitted.len() < bounds.max_hosts_per_author {
                admitted.insert(relay.host().to_owned());
            }
        }
    }
    let mut targets = derive_relay_targets_where(index, own_relay, |coordinate, relay| {
        let admitted = hosts
            .get(coordinate.owner())
            .is_some_and(|hosts| hosts.contains(relay.host()));
        if !admitted {
            report.author_relays_dropped += 1;
        }
        admitted
    });
    if !bounds.shard.is_whole() {
        let before = targets.len();
        targets.retain(|relay, _| bounds.shard.owns(relay));
        report.relays_other_shards = before - targets.len();
    }
    if targets.len() > bounds.max_relays {
        let mut ranked: Vec<(&RelayUrl, &RelaySyncNeeds)> = targets
            .iter()
            .filter(|(relay, _)| !keep.contains(*relay))
            .collect();
        ranked.sort_by(|(a_url, a), (b_url, b)| {
            b.repos
                .len()
                .cmp(&a.repos.len())
                .then(b.root_events.len().cmp(&a.root_events.len()))
                .then(a_url.cmp(b_url))
        });
        let kept_always = targets.keys().filter(|relay| keep.contains(*relay)).count();
        let room = bounds.max_relays.saturating_sub(kept_always);
        let dropped: Vec<RelayUrl> = ranked
            .iter()
            .skip(room)
            .map(|(relay, _)| (*relay).clone())
            .collect();
        report.relays_over_cap = dropped.len();
        for relay in dropped {
            targets.remove(&relay);
        }
    }
    (targets, report)
}

#[cfg(test)]
mod tests;
