//! Property test of `RelayTargets`: after any sequence of index updates — new repositories and
//! root events, relay sets replaced, purgatory entries added and removed, repositories promoted,
//! updates merged into batches, and every tracking bound hit — the incremental targets, report
//! and root set equal the full derivation of the same index; and fed the index as it was some
//! batches earlier with the updates since, they go back to that index's derivation. Every
//! relay whose targets an update changed is in what the update returns.

use std::collections::{BTreeSet, HashSet};

use grasp_sync_model::{
    ExpiryStatus, IndexUpdate, PurgatoryEntry, RelayTargets, RelayUrl, RepoSyncIndex, RootEvent,
    RootKind, Shard, TrackingBounds, derive_bounded_relay_targets,
};
use nostr::{EventId, PublicKey, Timestamp};
use proptest::prelude::*;

use crate::support::{announcement, coord, id};

/// Relays sharing hosts (paths, ports and schemes of one host), and the own relay's endpoint
/// under two paths.
const RELAYS: [&str; 10] = [
    "wss://a.example",
    "wss://a.example/x",
    "wss://a.example:4443",
    "ws://a.example",
    "wss://b.example",
    "wss://b.example/y",
    "wss://c.example",
    "wss://d.example",
    "wss://own.example",
    "wss://own.example/other",
];
const REPOS: usize = 8;
const ROOTS: u8 = 16;

fn pool(n: usize) -> RelayUrl {
    RelayUrl::parse(RELAYS[n]).expect("pool relay parses")
}

/// One change to the index.
#[derive(Debug, Clone)]
enum Change {
    /// An accepted announcement (`Full`); `created_at` has few values so many are stale.
    Announce {
        repo: usize,
        relays: Vec<usize>,
        created_at: u64,
        id: u8,
    },
    /// A root event of one or more repositories (waiting if none is in the index).
    Root { id: u8, repos: Vec<usize> },
    /// A purgatory snapshot: (repository, relays, created_at, expired).
    Purgatory(Vec<(usize, Vec<usize>, u64, bool)>),
}

fn change() -> impl Strategy<Value = Change> {
    let relays = || prop::collection::vec(0..RELAYS.len(), 0..5);
    prop_oneof![
        4 => (0..REPOS, relays(), 0..4u64, any::<u8>()).prop_map(|(repo, relays, created_at, id)| {
            Change::Announce { repo, relays, created_at, id }
        }),
        4 => (0..ROOTS, prop::collection::vec(0..REPOS, 1..3))
            .prop_map(|(id, repos)| Change::Root { id, repos }),
        2 => prop::collection::vec((0..REPOS, relays(), 0..4u64, any::<bool>()), 0..4)
            .prop_map(Change::Purgatory),
    ]
}

fn bounds() -> impl Strategy<Value = TrackingBounds> {
    (
        0..6usize,
        0..4usize,
        prop_oneof![
            Just((0u16, 1u16)),
            (0..2u16, Just(2u16)),
            (0..3u16, Just(3u16))
        ],
    )
        .prop_map(
            |(max_relays, max_hosts_per_author, (index, count))| TrackingBounds {
                max_relays,
                max_hosts_per_author,
                shard: Shard::new(index, count).expect("valid shard"),
            },
        )
}

fn apply(index: &mut RepoSyncIndex, change: &Change) -> IndexUpdate {
    match change {
        Change::Announce {
            repo,
            relays,
            created_at,
            id,
        } => index.handle_announcement(&announcement(
            coord(*repo),
            relays.iter().map(|n| pool(*n)).collect(),
            *created_at,
            *id,
        )),
        Change::Root { id: byte, repos } => index.handle_root_event(&RootEvent {
            id: id(*byte),
            kind: RootKind::Patch,
            author: PublicKey::from_byte_array([9; 32]),
            created_at: Timestamp::from_secs(1),
            repos: repos.iter().map(|repo| coord(*repo)).collect(),
            dropped_repos: 0,
        }),
        Change::Purgatory(entries) => {
            let snapshot: Vec<PurgatoryEntry> = entries
                .iter()
                .map(|(repo, relays, created_at, expired)| PurgatoryEntry {
                    announcement: announcement(
                        coord(*repo),
                        relays.iter().map(|n| pool(*n)).collect(),
                        *created_at,
                        *repo as u8,
                    ),
                    status: if *expired {
                        ExpiryStatus::Expired
                    } else {
                        ExpiryStatus::Active
                    },
                })
                .collect();
            index.reconcile_purgatory(&snapshot)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn incremental_targets_equal_the_full_derivation_after_every_batch(
        bounds in bounds(),
        own in prop::option::of(prop_oneof![Just(8usize), Just(9), Just(0)]),
        keep_mask in any::<u16>(),
        waiting_cap in prop_oneof![Just(usize::MAX), 0..4usize],
        batches in prop::collection::vec(prop::collection::vec(change(), 1..4), 1..12),
        rewind_at in any::<prop::sample::Index>(),
    ) {
        let own = own.map(pool);
        let keep: BTreeSet<RelayUrl> = (0..RELAYS.len())
            .filter(|n| keep_mask & (1 << n) != 0)
            .map(pool)
            .collect();
        let mut index = RepoSyncIndex::default().with_max_waiting_roots(waiting_cap);
        let mut targets = RelayTargets::new(own.clone(), bounds, keep.clone());
        // The index before one batch, and every update since: fed back to the targets, they
        // must go back too (repositories and root events removed, levels lowered).
        let rewind_at = rewind_at.index(batches.len());
        let mut earlier = index.clone();
        let mut since = IndexUpdate::default();
        for (n, batch) in batches.iter().enumerate() {
            if n == rewind_at {
                earlier = index.clone();
            }
            // A batch is several changes merged into one update, as the engine's batch window does.
            let mut update = IndexUpdate::default();
            for change in batch {
                update.merge(apply(&mut index, change));
            }
            let before = targets.targets().clone();
            let changed = targets.handle_index_update(&index, &update);
            // Every relay whose targets changed is reported, named by the update or not.
            let after = targets.targets();
            for relay in before.keys().chain(after.keys()) {
                if before.get(relay) != after.get(relay) {
                    prop_assert!(changed.contains(relay), "{relay} changed unreported after batch {n}");
                }
            }
            if n >= rewind_at {
                since.merge(update);
            }

            check(&targets, &index, own.as_ref(), bounds, &keep, &format!("after batch {n}"))?;
        }
        let fresh = RelayTargets::from_index(&index, own.clone(), bounds, keep.clone());
        prop_assert_eq!(fresh.targets(), targets.targets(), "built from the final index");

        targets.handle_index_update(&earlier, &since);
        check(&targets, &earlier, own.as_ref(), bounds, &keep, &format!("rewound to before batch {rewind_at}"))?;
    }
}

/// The incremental state equals the full derivation of `index`: targets, report and root set.
fn check(
    targets: &RelayTargets,
    index: &RepoSyncIndex,
    own: Option<&RelayUrl>,
    bounds: TrackingBounds,
    keep: &BTreeSet<RelayUrl>,
    when: &str,
) -> Result<(), TestCaseError> {
    let (derived, report) = derive_bounded_relay_targets(index, own, bounds, keep);
    prop_assert_eq!(targets.targets(), &derived, "targets {}", when);
    prop_assert_eq!(targets.report(), report, "report {}", when);
    let roots: HashSet<EventId> = index
        .iter()
        .flat_map(|(_, needs)| needs.root_events.iter().copied())
        .collect();
    prop_assert_eq!(targets.root_ids(), &roots, "root ids {}", when);
    Ok(())
}
