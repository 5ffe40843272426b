//! Benchmark `derive_and_diff`: `derive_relay_targets` followed by `compute_actions` at the
//! gitnostr scale (869 repositories, 3,632 root events, 60 relays, half of every relay's
//! target confirmed, an eighth pending) and at 100 times the repositories and root events.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion};
use grasp_sync_model::{
    PendingItems, PendingSyncIndex, RelaySyncIndex, RelayUrl, RepoAnnouncement, RepoCoordinate,
    RepoSyncIndex, RootEvent, RootKind, SyncMethod, compute_actions, derive_relay_targets,
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

/// Every repository lists relay 0 (the bootstrap) and two more picked by a fixed scramble.
fn fixture(scale: usize) -> Fixture {
    let relays: Vec<RelayUrl> = (0..RELAYS).map(relay).collect();
    let owners: Vec<PublicKey> = (0..=255u8)
        .map(|b| PublicKey::from_byte_array([b; 32]))
        .collect();
    let mut repos = RepoSyncIndex::default();
    let mut coordinates = Vec::with_capacity(REPOS * scale);
    for n in 0..REPOS * scale {
        let coordinate = RepoCoordinate::new(owners[n % owners.len()], format!("repo-{n}"))
            .expect("valid identifier");
        let mut listed = vec![
            relays[0].clone(),
            relays[1 + n * 7 % (RELAYS - 1)].clone(),
            relays[1 + n * 13 % (RELAYS - 1)].clone(),
        ];
        listed.sort();
        listed.dedup();
        repos.handle_announcement(&RepoAnnouncement {
            coordinate: coordinate.clone(),
            relays: listed,
            clone_urls: Vec::new(),
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
            id: event_id(usize::MAX - n),
            dropped_relays: 0,
            dropped_other: 0,
        });
        coordinates.push(coordinate);
    }
    for n in 0..ROOT_EVENTS * scale {
        let coordinate = &coordinates[n * 31 % coordinates.len()];
        repos.handle_root_event(&RootEvent {
            id: event_id(n),
            kind: RootKind::Patch,
            author: *coordinate.owner(),
            created_at: Timestamp::from_secs(1_700_000_000),
            repos: vec![coordinate.clone()],
            dropped_repos: 0,
        });
    }

    let own = relays[RELAYS - 1].clone();
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

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    derive_and_diff(&mut criterion);
    criterion.final_summary();
}
