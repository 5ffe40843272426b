//! Benchmark `derive_and_diff`: `derive_relay_targets` followed by `compute_actions` at the
//! gitnostr scale (869 repositories, 3,632 root events, 60 relays, half of every relay's
//! target confirmed, an eighth pending) and at 100 times the repositories and root events.
//!
//! Group `index_update`: one self-feed batch (4 new repositories with 2 root events each and
//! 8 root events of existing repositories) at 10 and 100 times the gitnostr scale, with every
//! author under its host cap (`under_caps`) and with the default cap every author of the
//! fixture exceeds (`host_cap`): `full_*` derives the bounded targets and the root set of the
//! whole index again; `incremental_*` feeds `RelayTargets` the batch's update and then the same
//! update back to the index without the batch, so one iteration is two delta updates.

use std::collections::{BTreeSet, HashSet};
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion};
use grasp_sync_model::{
    IndexUpdate, PendingItems, PendingSyncIndex, RelaySyncIndex, RelayTargets, RelayUrl,
    RepoAnnouncement, RepoCoordinate, RepoSyncIndex, RootEvent, RootKind, SyncMethod,
    TrackingBounds, compute_actions, derive_bounded_relay_targets, derive_relay_targets,
};
use nostr::{EventId, PublicKey, Timestamp};

const REPOS: usize = 869;
const ROOT_EVENTS: usize = 3_632;
const RELAYS: usize = 60;

/// The indices the diff reads, built once per scale.
struct Fixture {
    repos: RepoSyncIndex,
    pending: PendingSyncIndex,
    confirmed: RelaySyncIndex,
    own: RelayUrl,
}

fn relay(n: usize) -> RelayUrl {
    RelayUrl::parse(&format!("wss://relay-{n}.example")).expect("bench relay parses")
}

fn event_id(n: usize) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
    bytes[8..16].copy_from_slice(&(n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    EventId::from_byte_array(bytes)
}

/// The owner of repository `n`.
fn owner(n: usize) -> PublicKey {
    PublicKey::from_byte_array([(n % 256) as u8; 32])
}

/// Repository `n`: it lists relay 0 (the bootstrap) and two more picked by a fixed scramble.
fn announcement(n: usize, name: &str) -> RepoAnnouncement {
    let coordinate = RepoCoordinate::new(owner(n), name).expect("valid identifier");
    let mut listed = vec![
        relay(0),
        relay(1 + n * 7 % (RELAYS - 1)),
        relay(1 + n * 13 % (RELAYS - 1)),
    ];
    listed.sort();
    listed.dedup();
    RepoAnnouncement {
        coordinate,
        relays: listed,
        clone_urls: Vec::new(),
        maintainers: Vec::new(),
        created_at: Timestamp::from_secs(1_700_000_000),
        id: event_id(usize::MAX - n),
        dropped_relays: 0,
        dropped_other: 0,
    }
}

fn root_event(n: usize, coordinate: &RepoCoordinate) -> RootEvent {
    RootEvent {
        id: event_id(n),
        kind: RootKind::Patch,
        author: *coordinate.owner(),
        created_at: Timestamp::from_secs(1_700_000_000),
        repos: vec![coordinate.clone()],
        dropped_repos: 0,
    }
}

/// The repository index at `scale` times the gitnostr size, and its coordinates.
fn index_at(scale: usize) -> (RepoSyncIndex, Vec<RepoCoordinate>) {
    let mut repos = RepoSyncIndex::default();
    let mut coordinates = Vec::with_capacity(REPOS * scale);
    for n in 0..REPOS * scale {
        let announcement = announcement(n, &format!("repo-{n}"));
        repos.handle_announcement(&announcement);
        coordinates.push(announcement.coordinate);
    }
    for n in 0..ROOT_EVENTS * scale {
        repos.handle_root_event(&root_event(n, &coordinates[n * 31 % coordinates.len()]));
    }
    (repos, coordinates)
}

/// The diff's indices at `scale` times the gitnostr size.
fn fixture(scale: usize) -> Fixture {
    let (repos, _) = index_at(scale);
    let own = relay(RELAYS - 1);
    let targets = derive_relay_targets(&repos, Some(&own));
    let mut confirmed = RelaySyncIndex::new();
    let mut pending = PendingSyncIndex::new();
    for (url, target) in &targets {
        let state = confirmed.register(url);
        state.mark_syncing(Timestamp::from_secs(1_700_000_100));
        let mut in_flight = PendingItems::default();
        for (n, (coordinate, level)) in target.repos.iter().enumerate() {
            match n % 8 {
                0 | 2 | 4 | 6 => state.confirm_repo(coordinate.clone(), *level),
                1 => in_flight.add_repo(coordinate.clone(), *level),
                _ => {}
            }
        }
        for (n, id) in target.root_events.iter().enumerate() {
            match n % 8 {
                0 | 2 | 4 | 6 => {
                    state.root_events.insert(*id);
                }
                1 => {
                    in_flight.root_events.insert(*id);
                }
                _ => {}
            }
        }
        pending.open_batch(url, in_flight, SyncMethod::ReqEose);
    }
    Fixture {
        repos,
        pending,
        confirmed,
        own,
    }
}

fn derive_and_diff(c: &mut Criterion) {
    let mut group = c.benchmark_group("derive_and_diff");
    for (name, scale, samples) in [("gitnostr", 1, 50), ("gitnostr_x100", 100, 10)] {
        let fixture = fixture(scale);
        group.sample_size(samples);
        group.bench_with_input(BenchmarkId::from_parameter(name), &fixture, |b, f| {
            b.iter(|| {
                let targets = derive_relay_targets(black_box(&f.repos), Some(&f.own));
                compute_actions(&targets, black_box(&f.pending), black_box(&f.confirmed))
            });
        });
    }
    group.finish();
}

/// An index before and after one self-feed batch, and the batch's update.
struct BatchFixture {
    before: RepoSyncIndex,
    after: RepoSyncIndex,
    update: IndexUpdate,
    own: RelayUrl,
    keep: BTreeSet<RelayUrl>,
}

fn batch_fixture(scale: usize) -> BatchFixture {
    let (before, coordinates) = index_at(scale);
    let mut after = before.clone();
    let mut update = IndexUpdate::default();
    let first_id = ROOT_EVENTS * scale;
    for n in 0..4 {
        let announcement = announcement(n * 61, &format!("new-{n}"));
        update.merge(after.handle_announcement(&announcement));
        for k in 0..2 {
            let root = root_event(first_id + n * 2 + k, &announcement.coordinate);
            update.merge(after.handle_root_event(&root));
        }
    }
    for n in 0..8 {
        let existing = &coordinates[n * 997 % coordinates.len()];
        update.merge(after.handle_root_event(&root_event(first_id + 8 + n, existing)));
    }
    BatchFixture {
        before,
        after,
        update,
        own: relay(RELAYS - 1),
        keep: BTreeSet::from([relay(0)]),
    }
}

fn index_update(c: &mut Criterion) {
    let mut group = c.benchmark_group("index_update");
    // Every author under its host cap (the common case), and the default cap of 16 hosts, which
    // every author of this fixture exceeds, so each new repository (first in its author's
    // coordinate order) moves its author's admitted hosts.
    let under_caps = TrackingBounds {
        max_hosts_per_author: RELAYS,
        ..TrackingBounds::default()
    };
    let variants = [
        ("under_caps", under_caps),
        ("host_cap", TrackingBounds::default()),
    ];
    for (name, scale, samples) in [("gitnostr_x10", 10, 20), ("gitnostr_x100", 100, 10)] {
        let f = batch_fixture(scale);
        group.sample_size(samples);
        for (bounds_name, bounds) in variants {
            group.bench_with_input(
                BenchmarkId::new(format!("full_{bounds_name}"), name),
                &f,
                |b, f| {
                    b.iter(|| {
                        let index = black_box(&f.after);
                        let targets =
                            derive_bounded_relay_targets(index, Some(&f.own), bounds, &f.keep);
                        let roots: HashSet<_> = index
                            .iter()
                            .flat_map(|(_, needs)| needs.root_events.iter().copied())
                            .collect();
                        (targets, roots)
                    });
                },
            );
            let mut targets =
                RelayTargets::from_index(&f.before, Some(f.own.clone()), bounds, f.keep.clone());
            group.bench_function(
                BenchmarkId::new(format!("incremental_{bounds_name}"), name),
                |b| {
                    b.iter(|| {
                        targets.handle_index_update(black_box(&f.after), &f.update);
                        targets.handle_index_update(black_box(&f.before), &f.update);
                    });
                },
            );
            assert_eq!(
                targets.targets(),
                &derive_bounded_relay_targets(&f.before, Some(&f.own), bounds, &f.keep).0,
                "the incremental state came back to the index before the batch"
            );
        }
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    derive_and_diff(&mut criterion);
    index_update(&mut criterion);
    criterion.final_summary();
}
