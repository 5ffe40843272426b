//! [`RelayTargets`]: the bounded relay targets and the root-event set of a [`RepoSyncIndex`],
//! kept up to date by the delta of each [`IndexUpdate`] instead of derived again from the whole
//! index.
//!
//! It remembers what each repository contributed at the last update (its relays, its level and
//! its root events) and which hosts each author's cap admitted. An update re-evaluates only the
//! repositories it names in [`IndexUpdate::changed_repos`]:
//! - a repository leaves the relays it no longer reaches (with its root events), joins the
//!   relays it now reaches, and on the relays it stays on changes its level and adds or drops
//!   the root events that changed;
//! - a root event stays on a relay, and in [`RelayTargets::root_ids`], while any repository
//!   still gives it (they are reference-counted);
//! - an author's admitted hosts (see [`TrackingBounds::max_hosts_per_author`]) are derived
//!   again, from that author's repositories only, when one of them was added, removed or
//!   changed its relays; if they changed, the author's repositories that name a host admitted
//!   before or now, but not both, are re-evaluated;
//! - a relay's shard is decided once, when the relay first gets a repository;
//! - the relay cap ranks the relays again (not the repositories) whenever this shard's relays
//!   exceed it, moving relays between the targets and those ranked out.
//!
//! So an update costs in proportion to what it changed, plus one pass over the repositories of
//! each author whose relays changed and one sort of this shard's relays while they exceed the
//! cap, and the result is always exactly what
//! [`derive_bounded_relay_targets`](crate::derive_bounded_relay_targets) gives for the same index.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use nostr::{EventId, PublicKey};

use crate::compact_set::CompactSet;
use crate::coordinate::{RepoCoordinate, announced_by};
use crate::diff::RelaySyncNeeds;
use crate::pack::Pack;
use crate::relay_url::RelayUrl;
use crate::repo_index::{IndexUpdate, RepoSyncIndex, RepoSyncNeeds, SyncLevel};
use crate::tracking::{TrackingBounds, TrackingReport};

mod admission;
mod extra_refs;
mod relay_needs;

use self::admission::{admitted_hosts, admitted_relays};
use self::extra_refs::ExtraRefs;
use self::relay_needs::RelayNeeds;

/// The per-relay targets of a [`RepoSyncIndex`] within [`TrackingBounds`], and every root event
/// the index holds, updated by the delta of each index update (see the module documentation).
///
/// Feed it every [`IndexUpdate`] the index returns, after applying it to the index (several may
/// be merged into one first); it then holds exactly what
/// [`derive_bounded_relay_targets`](crate::derive_bounded_relay_targets) derives from that index.
///
/// ```
/// use std::collections::BTreeSet;
///
/// use grasp_sync_model::{
///     RelayTargets, RelayUrl, RepoAnnouncement, RepoCoordinate, RepoSyncIndex, RootEvent,
///     RootKind, SyncLevel, TrackingBounds, derive_bounded_relay_targets,
/// };
/// use nostr::{EventId, PublicKey, Timestamp};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let own = RelayUrl::parse("wss://our.relay")?;
/// let remote = RelayUrl::parse("wss://relay.example")?;
/// let repo = RepoCoordinate::new(PublicKey::from_byte_array([1; 32]), "grasp-sync")?;
/// let mut index = RepoSyncIndex::default();
/// let mut targets = RelayTargets::new(Some(own.clone()), TrackingBounds::default(), BTreeSet::new());
///
/// // A new repository on our relay and a remote one: only the remote relay is a target.
/// let update = index.handle_announcement(&RepoAnnouncement {
///     coordinate: repo.clone(),
///     relays: vec![own.clone(), remote.clone()],
///     clone_urls: Vec::new(),
///     maintainers: Vec::new(),
///     created_at: Timestamp::from_secs(1_700_000_000),
///     id: EventId::from_byte_array([2; 32]),
///     dropped_relays: 0,
///     dropped_other: 0,
/// });
/// targets.handle_index_update(&index, &update);
/// assert_eq!(targets.get(&remote).map(|needs| needs.repos[&repo]), Some(SyncLevel::Full));
/// assert!(targets.get(&own).is_none());
///
/// // A patch adds its root event to the repository's relays and to the root set.
/// let patch = EventId::from_byte_array([3; 32]);
/// let update = index.handle_root_event(&RootEvent {
///     id: patch,
///     kind: RootKind::Patch,
///     author: PublicKey::from_byte_array([4; 32]),
///     created_at: Timestamp::from_secs(1_700_000_100),
///     repos: vec![repo],
///     dropped_repos: 0,
/// });
/// targets.handle_index_update(&index, &update);
/// assert!(targets.get(&remote).is_some_and(|needs| needs.root_events.contains(&patch)));
/// assert!(targets.root_ids().contains(&patch));
///
/// // Always the same as deriving the whole index again.
/// let (derived, report) =
///     derive_bounded_relay_targets(&index, Some(&own), TrackingBounds::default(), &BTreeSet::new());
/// assert_eq!(targets.targets(), &derived);
/// assert_eq!(targets.report(), report);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RelayTargets {
    own_relay: Option<RelayUrl>,
    bounds: TrackingBounds,
    /// Relays the relay cap never ranks out (bootstrap relays).
    keep: BTreeSet<RelayUrl>,
    relays: RelayNeeds,
    /// Every root event of the index.
    root_ids: HashSet<EventId>,
    /// Root events more than one repository of the index holds.
    shared_root_ids: ExtraRefs,
    /// What each repository of the index contributed at the last update.
    contributions: BTreeMap<RepoCoordinate, Contribution>,
    /// Each author's admitted hosts; authors with none are absent.
    author_hosts: BTreeMap<PublicKey, CompactSet<String>>,
    /// (repository, relay) pairs left out by their author's host cap.
    author_relays_dropped: usize,
}

impl RelayTargets {
    /// Targets of an empty index, leaving out `own_relay` (under any path), within `bounds`,
    /// never ranking out the relays in `keep`.
    pub fn new(
        own_relay: Option<RelayUrl>,
        bounds: TrackingBounds,
        keep: BTreeSet<RelayUrl>,
    ) -> Self {
        RelayTargets {
            own_relay,
            bounds,
            keep,
            relays: RelayNeeds::default(),
            root_ids: HashSet::new(),
            shared_root_ids: ExtraRefs::default(),
            contributions: BTreeMap::new(),
            author_hosts: BTreeMap::new(),
            author_relays_dropped: 0,
        }
    }

    /// Targets of `index` as it is now (as [`RelayTargets::new`], then every repository
    /// added).
    pub fn from_index(
        index: &RepoSyncIndex,
        own_relay: Option<RelayUrl>,
        bounds: TrackingBounds,
        keep: BTreeSet<RelayUrl>,
    ) -> Self {
        let mut targets = RelayTargets::new(own_relay, bounds, keep);
        targets.handle_changed_repos(index, index.iter().map(|(coordinate, _)| coordinate));
        targets.relays.take_changed();
        targets
    }

    /// Brings the targets up to date with `index`, which `update` (or several merged ones) was
    /// the last change of: only the repositories it names are looked at again.
    ///
    /// Returns every relay whose targets changed, among them relays the update does not name
    /// ([`IndexUpdate::dirty_relays`]): a relay the relay cap ranks in or out as others grow,
    /// and a relay an author's host cap admits or drops. Each needs its diff again.
    pub fn handle_index_update(
        &mut self,
        index: &RepoSyncIndex,
        update: &IndexUpdate,
    ) -> BTreeSet<RelayUrl> {
        self.handle_changed_repos(index, &update.changed_repos);
        self.relays.take_changed()
    }

    /// Rebuilds the targets' B-trees with full nodes (see [`Pack`]): each relay's repositories
    /// and root events, and what each repository contributed. The targets do not change. A
    /// relay's targets shared with its confirmed state are packed as a copy, which the
    /// confirmed state may share again ([`RelayState::share_with`](crate::RelayState::share_with)).
    pub fn pack(&mut self) {
        for needs in self.relays.targets.values_mut() {
            needs.pack();
        }
        for needs in self.relays.over_cap.values_mut() {
            needs.pack();
        }
        self.contributions.pack();
        self.author_hosts.pack();
    }

    /// The targets: per relay, the repositories (with their level) and root events to sync.
    pub fn targets(&self) -> &BTreeMap<RelayUrl, RelaySyncNeeds> {
        &self.relays.targets
    }

    /// One relay's targets, if it is a target.
    pub fn get(&self, relay: &RelayUrl) -> Option<&RelaySyncNeeds> {
        self.relays.targets.get(relay)
    }

    /// The relays that are targets, in URL order.
    pub fn relays(&self) -> impl Iterator<Item = &RelayUrl> {
        self.relays.targets.keys()
    }

    /// Every root event of the index, whatever its repositories' level and relays.
    pub fn root_ids(&self) -> &HashSet<EventId> {
        &self.root_ids
    }

    /// What the bounds leave out now.
    pub fn report(&self) -> TrackingReport {
        TrackingReport {
            relays_over_cap: self.relays.over_cap.len(),
            author_relays_dropped: self.author_relays_dropped,
            relays_other_shards: self.relays.other_shards.len(),
        }
    }

    /// Re-evaluates `changed` (and an author's repositories on hosts its cap admits no longer or
    /// newly), then applies the relay cap.
    fn handle_changed_repos<'a>(
        &mut self,
        index: &RepoSyncIndex,
        changed: impl IntoIterator<Item = &'a RepoCoordinate>,
    ) {
        let mut reevaluate: BTreeSet<RepoCoordinate> = BTreeSet::new();
        let mut authors: BTreeSet<PublicKey> = BTreeSet::new();
        for coordinate in changed {
            let before = self.contributions.get(coordinate).map(|held| &*held.relays);
            let now = index.get(coordinate).map(|needs| &needs.relays);
            let same = match (before, now) {
                (Some(before), Some(now)) => before.iter().eq(now),
                (before, now) => before.is_none() && now.is_none(),
            };
            if !same {
                authors.insert(*coordinate.owner());
            }
            reevaluate.insert(coordinate.clone());
        }
        // The hosts each author had before this update, for authors whose hosts changed.
        let mut hosts_before: BTreeMap<PublicKey, CompactSet<String>> = BTreeMap::new();
        for author in authors {
            let hosts = admitted_hosts(index.repos_of(&author), self.bounds.max_hosts_per_author);
            let held = self.author_hosts.get(&author);
            if held.map_or(hosts.is_empty(), |held| *held == hosts) {
                continue;
            }
            // The author's other repositories (new ones are in `changed`) that name a host
            // admitted before or now but not both: the others keep their pairs.
            let no_hosts = CompactSet::new();
            let held = held.unwrap_or(&no_hosts);
            let moved: BTreeSet<&str> = held
                .iter()
                .filter(|host| !hosts.contains(host.as_str()))
                .chain(hosts.iter().filter(|host| !held.contains(host.as_str())))
                .map(String::as_str)
                .collect();
            reevaluate.extend(
                announced_by(&self.contributions, &author)
                    .filter(|(_, had)| had.relays.iter().any(|r| moved.contains(r.host())))
                    .map(|(coordinate, _)| coordinate.clone()),
            );
            let previous = if hosts.is_empty() {
                self.author_hosts.remove(&author)
            } else {
                self.author_hosts.insert(author, hosts)
            };
            hosts_before.insert(author, previous.unwrap_or_default());
        }
        for coordinate in &reevaluate {
            self.reevaluate(index, coordinate, hosts_before.get(coordinate.owner()));
        }
        self.relays
            .apply_relay_cap(self.bounds.max_relays, &self.keep);
    }

    /// Replaces what `coordinate` contributed (admitted with `hosts_before`, or the current
    /// hosts when its author's did not change) with what it contributes now.
    fn reevaluate(
        &mut self,
        index: &RepoSyncIndex,
        coordinate: &RepoCoordinate,
        hosts_before: Option<&CompactSet<String>>,
    ) {
        let old = self.contributions.remove(coordinate);
        let new = index.get(coordinate);
        let hosts_now = self.author_hosts.get(coordinate.owner());
        let hosts_before = hosts_before.or(hosts_now);
        let own = self.own_relay.as_ref();
        let (old_admitted, old_dropped) = old.as_ref().map_or((Vec::new(), 0), |held| {
            admitted_relays(&*held.relays, own, hosts_before)
        });
        let (new_admitted, new_dropped) = new.map_or((Vec::new(), 0), |needs| {
            admitted_relays(&needs.relays, own, hosts_now)
        });
        self.author_relays_dropped =
            (self.author_relays_dropped + new_dropped).saturating_sub(old_dropped);

        let no_roots = CompactSet::new();
        let old_roots: &[EventId] = old.as_ref().map_or(&[], |held| &held.root_events);
        let new_roots = new.map_or(&no_roots, |needs| &needs.root_events);
        let added: Vec<EventId> = new_roots
            .iter()
            .filter(|id| old_roots.binary_search(id).is_err())
            .copied()
            .collect();
        let removed: Vec<EventId> = old_roots
            .iter()
            .filter(|id| !new_roots.contains(id))
            .copied()
            .collect();
        for id in &added {
            let inserted = self.root_ids.insert(*id);
            self.shared_root_ids.handle_added(*id, inserted);
        }
        for id in &removed {
            if self.shared_root_ids.handle_released(id) {
                self.root_ids.remove(id);
            }
        }

        // Only `Full` repositories give their root events to their relays.
        let old_full = old
            .as_ref()
            .is_some_and(|held| held.level == SyncLevel::Full);
        let new_level = new.map(|needs| needs.sync_level);
        let new_full = new_level == Some(SyncLevel::Full);
        // On the relays it stays on: the roots that changed, or all of them if the level did.
        let all_new: Vec<EventId>;
        let none: &[EventId] = &[];
        let (stay_add, stay_release): (&[EventId], &[EventId]) = match (old_full, new_full) {
            (true, true) => (added.as_slice(), removed.as_slice()),
            (false, true) => {
                all_new = new_roots.iter().copied().collect();
                (all_new.as_slice(), none)
            }
            (true, false) => (none, old_roots),
            (false, false) => (none, none),
        };
        let shard = self.bounds.shard;
        for step in merge_sorted(&old_admitted, &new_admitted) {
            match (step, new_level) {
                (Step::Left(relay), _) => {
                    let roots = old_full.then_some(old_roots).into_iter().flatten();
                    self.relays.leave(relay, coordinate, roots);
                }
                (Step::Joined(relay), Some(level)) => {
                    let roots = new_full.then_some(new_roots).into_iter().flatten();
                    self.relays.join(relay, coordinate, level, roots, shard);
                }
                (Step::Stayed(relay), Some(level)) => {
                    self.relays
                        .stay(relay, coordinate, level, stay_add, stay_release);
                }
                // Without the repository it reaches no relay: only `Left` steps occur.
                (Step::Joined(_) | Step::Stayed(_), None) => {}
            }
        }

        if let Some(needs) = new {
            self.contributions
                .insert(coordinate.clone(), Contribution::of(needs));
        }
    }
}

/// What one repository gave the targets at the last update. Kept for every repository of the
/// index, so its sets are sorted slices: a `BTreeSet` of a few entries costs a whole node.
#[derive(Debug, Clone)]
struct Contribution {
    /// The relays its announcement listed, in URL order.
    relays: Box<[RelayUrl]>,
    level: SyncLevel,
    /// Its root events, in ID order.
    root_events: Box<[EventId]>,
}

impl Contribution {
    fn of(needs: &RepoSyncNeeds) -> Self {
        Contribution {
            relays: needs.relays.iter().cloned().collect(),
            level: needs.sync_level,
            root_events: needs.root_events.iter().copied().collect(),
        }
    }
}

/// One relay of a repository's old or new admitted relays.
enum Step<'a> {
    Left(&'a RelayUrl),
    Joined(&'a RelayUrl),
    Stayed(&'a RelayUrl),
}

/// Walks two sorted relay lists together: in `old` only, in `new` only, in both.
fn merge_sorted<'a>(old: &[&'a RelayUrl], new: &[&'a RelayUrl]) -> Vec<Step<'a>> {
    let mut steps = Vec::with_capacity(old.len().max(new.len()));
    let (mut i, mut j) = (0, 0);
    loop {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) => match a.cmp(b) {
                Ordering::Less => {
                    steps.push(Step::Left(a));
                    i += 1;
                }
                Ordering::Greater => {
                    steps.push(Step::Joined(b));
                    j += 1;
                }
                Ordering::Equal => {
                    steps.push(Step::Stayed(a));
                    i += 1;
                    j += 1;
                }
            },
            (Some(a), None) => {
                steps.push(Step::Left(a));
                i += 1;
            }
            (None, Some(b)) => {
                steps.push(Step::Joined(b));
                j += 1;
            }
            (None, None) => return steps,
        }
    }
}

#[cfg(test)]
mod tests;
