//! Deterministic test data: event IDs, public keys, repositories and coordinates at any scale.

#![allow(dead_code)]

use grasp_sync_filters::{FilterGroup, TieredFilter};
use grasp_sync_model::RepoCoordinate;
use nostr::nips::nip01::Coordinate;
use nostr::{EventId, Kind, PublicKey};
use rand::seq::SliceRandom;
use rand::{Rng as _, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The seeded generator the simulation uses too: the same seed always yields the same data.
pub(crate) struct Rng(ChaCha8Rng);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub(crate) fn bytes(&mut self) -> [u8; 32] {
        self.0.random()
    }

    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        items.shuffle(&mut self.0);
    }
}

pub(crate) fn event_ids(rng: &mut Rng, n: usize) -> Vec<EventId> {
    (0..n)
        .map(|_| EventId::from_byte_array(rng.bytes()))
        .collect()
}

pub(crate) fn public_key(rng: &mut Rng) -> PublicKey {
    loop {
        if let Ok(key) = PublicKey::from_slice(&rng.bytes()) {
            return key;
        }
    }
}

/// A repository identifier of 3 to 40 characters, like real ones.
pub(crate) fn identifier(rng: &mut Rng, n: usize) -> String {
    let len = 3 + (rng.next() % 38) as usize;
    let mut id = format!("r{n}-");
    while id.len() < len {
        id.push((b'a' + (rng.next() % 26) as u8) as char);
    }
    id
}

pub(crate) fn repos(rng: &mut Rng, n: usize) -> Vec<RepoCoordinate> {
    (0..n)
        .map(|i| {
            let owner = public_key(rng);
            RepoCoordinate::new(owner, identifier(rng, i)).expect("valid identifier")
        })
        .collect()
}

pub(crate) fn addressable(rng: &mut Rng, n: usize) -> Vec<Coordinate> {
    (0..n)
        .map(|i| {
            Coordinate::new(Kind::from(30_618u16), public_key(rng)).identifier(identifier(rng, i))
        })
        .collect()
}

/// Values of every filter, per tag key (`#e`, `#A`, ...), with the number of filters holding each.
pub(crate) fn value_counts(
    filters: &[TieredFilter],
) -> std::collections::BTreeMap<(String, String), usize> {
    let mut counts = std::collections::BTreeMap::new();
    for f in filters {
        for (tag, values) in &f.filter.generic_tags {
            for value in values {
                *counts
                    .entry((format!("#{tag}"), value.clone()))
                    .or_insert(0) += 1;
            }
        }
    }
    counts
}

pub(crate) fn all_filters(groups: &[FilterGroup]) -> Vec<TieredFilter> {
    groups
        .iter()
        .flat_map(|g| g.filters.iter().cloned())
        .collect()
}

/// Figures of one packing: filters, REQs, payload and packing efficiency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Packing {
    pub(crate) filters: usize,
    pub(crate) reqs: usize,
    pub(crate) payload_bytes: usize,
    /// Payload bytes ÷ (REQs × the REQ budget).
    pub(crate) efficiency: f64,
    /// The fewest REQs the payload could fit at the REQ budget.
    pub(crate) byte_floor: usize,
}

pub(crate) fn packing(groups: &[FilterGroup], max_req_bytes: usize) -> Packing {
    let payload_bytes: usize = groups.iter().map(|g| g.payload_bytes).sum();
    let reqs = groups.len();
    Packing {
        filters: groups.iter().map(|g| g.filters.len()).sum(),
        reqs,
        payload_bytes,
        efficiency: payload_bytes as f64 / (reqs.max(1) * max_req_bytes) as f64,
        byte_floor: payload_bytes.div_ceil(max_req_bytes),
    }
}

/// The gitnostr-sized set: 869 repositories and 3,632 root events.
pub(crate) fn gitnostr_set() -> (Vec<RepoCoordinate>, Vec<EventId>) {
    let mut rng = Rng::new(869);
    (repos(&mut rng, 869), event_ids(&mut rng, 3_632))
}

/// The large set: 100,000 event IDs and 20,000 coordinates.
pub(crate) fn large_set() -> (Vec<RepoCoordinate>, Vec<EventId>) {
    let mut rng = Rng::new(100_000);
    (repos(&mut rng, 20_000), event_ids(&mut rng, 100_000))
}
