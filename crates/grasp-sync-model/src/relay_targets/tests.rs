//! `RelayTargets` against the full derivation, one rule at a time: every step is checked
//! against `derive_bounded_relay_targets` of the same index.

use std::collections::{BTreeSet, HashSet};

use nostr::{EventId, PublicKey, Timestamp};

use super::*;
use crate::nip34::{RootEvent, RootKind};
use crate::repo_index::{ExpiryStatus, PurgatoryEntry};
use crate::shard::Shard;
use crate::test_support::{announcement, coord, id, relay};
use crate::tracking::derive_bounded_relay_targets;

/// An index and its incremental targets, checked after every change.
struct Harness {
    index: RepoSyncIndex,
    targets: RelayTargets,
    own: Option<RelayUrl>,
    bounds: TrackingBounds,
    keep: BTreeSet<RelayUrl>,
}

impl Harness {
    fn new(own: Option<&str>, bounds: TrackingBounds, keep: &[&str]) -> Self {
        let own = own.map(relay);
        let keep: BTreeSet<RelayUrl> = keep.iter().map(|url| relay(url)).collect();
        Harness {
            index: RepoSyncIndex::default(),
            targets: RelayTargets::new(own.clone(), bounds, keep.clone()),
            own,
            bounds,
            keep,
        }
    }

    /// Applies one change to the index, feeds its update, and checks.
    fn step(&mut self, change: impl FnOnce(&mut RepoSyncIndex) -> IndexUpdate) {
        let update = change(&mut self.index);
        self.targets.handle_index_update(&self.index, &update);
        self.check();
    }

    /// The incremental state equals the full derivation, and a fresh build equals both.
    fn check(&self) {
        let (derived, report) =
            derive_bounded_relay_targets(&self.index, self.own.as_ref(), self.bounds, &self.keep);
        assert_eq!(self.targets.targets(), &derived, "targets");
        assert_eq!(self.targets.report(), report, "report");
        let roots: HashSet<EventId> = self
            .index
            .iter()
            .flat_map(|(_, needs)| needs.root_events.iter().copied())
            .collect();
        assert_eq!(self.targets.root_ids(), &roots, "root ids");
        let fresh = RelayTargets::from_index(
            &self.index,
            self.own.clone(),
            self.bounds,
            self.keep.clone(),
        );
        assert_eq!(fresh.targets(), &derived, "built from the index");
    }

    fn announce(&mut self, owner: u8, name: &str, relays: &[&str], created_at: u64) {
        let announcement = announcement(&coord(owner, name), relays, created_at, owner);
        self.step(|index| index.handle_announcement(&announcement));
    }

    fn root(&mut self, byte: u8, repos: &[(u8, &str)]) {
        let root = RootEvent {
            id: id(byte),
            kind: RootKind::Patch,
            author: PublicKey::from_byte_array([200; 32]),
            created_at: Timestamp::from_secs(1),
            repos: repos
                .iter()
                .map(|(owner, name)| coord(*owner, name))
                .collect(),
            dropped_repos: 0,
        };
        self.step(|index| index.handle_root_event(&root));
    }

    fn purgatory(&mut self, entries: &[(u8, &str, &[&str])]) {
        let snapshot: Vec<PurgatoryEntry> = entries
            .iter()
            .map(|(owner, name, relays)| PurgatoryEntry {
                announcement: announcement(&coord(*owner, name), relays, 5, *owner),
                status: ExpiryStatus::Active,
            })
            .collect();
        self.step(|index| index.reconcile_purgatory(&snapshot));
    }

    fn target(&self, url: &str) -> Option<&RelaySyncNeeds> {
        self.targets.get(&relay(url))
    }
}

fn bounds(max_relays: usize, max_hosts_per_author: usize) -> TrackingBounds {
    TrackingBounds {
        max_relays,
        max_hosts_per_author,
        shard: Shard::WHOLE,
    }
}

#[test]
fn new_repositories_and_roots_join_their_relays_but_not_the_own_relay() {
    let mut h = Harness::new(Some("wss://own.example"), bounds(10, 4), &[]);
    h.announce(1, "a", &["wss://a.example", "wss://own.example/path"], 10);
    h.announce(2, "b", &["wss://a.example", "wss://b.example"], 10);
    h.root(7, &[(1, "a"), (2, "b")]);
    assert!(h.target("wss://own.example/path").is_none());
    let a = h.target("wss://a.example").expect("a is a target");
    assert_eq!(a.repos.len(), 2);
    assert_eq!(a.root_events, BTreeSet::from([id(7)]));
    assert!(
        h.target("wss://b.example")
            .is_some_and(|b| b.root_events.contains(&id(7)))
    );
}

#[test]
fn a_root_two_repositories_give_a_relay_stays_until_the_last_leaves() {
    let mut h = Harness::new(None, bounds(10, 4), &[]);
    h.announce(1, "a", &["wss://shared.example"], 10);
    h.announce(2, "b", &["wss://shared.example"], 10);
    h.root(7, &[(1, "a"), (2, "b")]);
    h.announce(1, "a", &["wss://elsewhere.example"], 11);
    assert!(
        h.target("wss://shared.example")
            .is_some_and(|t| t.root_events.contains(&id(7)))
    );
    h.announce(2, "b", &["wss://elsewhere.example"], 11);
    assert!(h.target("wss://shared.example").is_none());
    assert!(
        h.target("wss://elsewhere.example")
            .is_some_and(|t| t.root_events.contains(&id(7)))
    );
}

#[test]
fn a_repository_earlier_in_coordinate_order_takes_its_authors_host_slots() {
    let mut h = Harness::new(None, bounds(10, 2), &[]);
    h.announce(1, "m", &["wss://x.example", "wss://y.example"], 10);
    h.root(7, &[(1, "m")]);
    // "a" orders before "m": its two hosts are the author's two.
    h.announce(1, "a", &["wss://p.example", "wss://q.example"], 10);
    assert!(h.target("wss://x.example").is_none());
    assert!(h.target("wss://p.example").is_some());
    assert_eq!(h.targets.report().author_relays_dropped, 2);
    // Moving "a" onto the same hosts as "m" frees the slots again.
    h.announce(1, "a", &["wss://x.example", "wss://y.example"], 11);
    assert!(
        h.target("wss://x.example")
            .is_some_and(|t| t.root_events.contains(&id(7)))
    );
    assert_eq!(h.targets.report().author_relays_dropped, 0);
}

#[test]
fn the_relay_cap_ranks_relays_in_and_out_as_their_repositories_change() {
    let mut h = Harness::new(None, bounds(2, 8), &["wss://boot.example"]);
    h.announce(1, "a", &["wss://boot.example", "wss://r1.example"], 10);
    h.announce(2, "b", &["wss://r1.example", "wss://r2.example"], 10);
    assert!(h.target("wss://r2.example").is_none(), "r1 serves more");
    assert_eq!(h.targets.report().relays_over_cap, 1);
    h.announce(3, "c", &["wss://r2.example"], 10);
    h.announce(4, "d", &["wss://r2.example"], 10);
    assert!(h.target("wss://r2.example").is_some(), "r2 now serves more");
    assert!(h.target("wss://r1.example").is_none());
    assert!(
        h.target("wss://boot.example").is_some(),
        "kept relays always stay"
    );
    h.announce(3, "c", &["wss://boot.example"], 11);
    h.announce(4, "d", &["wss://boot.example"], 11);
    assert!(h.target("wss://r1.example").is_some());
}

#[test]
fn relays_of_other_shards_are_counted_not_targeted() {
    let shard = Shard::new(0, 2).expect("valid shard");
    let mut h = Harness::new(
        None,
        TrackingBounds {
            shard,
            ..bounds(10, 8)
        },
        &[],
    );
    let urls: Vec<String> = (0..8).map(|n| format!("wss://s{n}.example")).collect();
    let listed: Vec<&str> = urls.iter().map(String::as_str).collect();
    h.announce(1, "a", &listed, 10);
    h.root(7, &[(1, "a")]);
    let others = listed.iter().filter(|url| !shard.owns(&relay(url))).count();
    assert!(others > 0, "some relay belongs to the other shard");
    assert_eq!(h.targets.report().relays_other_shards, others);
    h.announce(1, "a", &listed[..1], 11);
}

#[test]
fn state_only_repositories_give_roots_to_the_root_set_and_to_relays_once_promoted() {
    let mut h = Harness::new(None, bounds(10, 8), &[]);
    h.purgatory(&[
        (1, "a", &["wss://a.example"]),
        (2, "b", &["wss://b.example"]),
    ]);
    h.root(7, &[(1, "a")]);
    h.root(8, &[(2, "b")]);
    assert!(h.targets.root_ids().contains(&id(7)));
    assert!(
        h.target("wss://a.example")
            .is_some_and(|t| t.root_events.is_empty())
    );
    // Promotion by an accepted announcement: the roots reach the relays.
    h.announce(1, "a", &["wss://a.example"], 10);
    assert!(
        h.target("wss://a.example")
            .is_some_and(|t| t.root_events.contains(&id(7)))
    );
    // "b" leaves purgatory: its relay and its root go.
    h.purgatory(&[]);
    assert!(h.target("wss://b.example").is_none());
    assert!(!h.targets.root_ids().contains(&id(8)));
    // The root waits; it comes back with the repository.
    h.announce(2, "b", &["wss://b.example"], 10);
    assert!(
        h.target("wss://b.example")
            .is_some_and(|t| t.root_events.contains(&id(8)))
    );
}
