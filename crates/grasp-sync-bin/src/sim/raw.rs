//! The own store's raw ingest rate: the expected events written straight into a fresh
//! `LmdbStore` with the same policy, parents before children, each generation with every
//! write in flight at once (the store drains its queue into shared transactions).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{EventStore, IngestOutcome, LmdbStore};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::GeneratedNetwork;
use nostr::{Event, EventId};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::naive::millis;

/// What the raw ingest did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RawIngest {
    /// Events offered.
    pub events: usize,
    /// Of those, saved.
    pub saved: usize,
    /// Time for all of them.
    pub wall_ms: u64,
    /// Events offered per second.
    pub events_per_sec: f64,
}

/// Writes the network's expected events into `store`, generation by generation.
pub(super) async fn raw_ingest(
    network: &GeneratedNetwork,
    store: &LmdbStore,
    source: &RelayUrl,
) -> anyhow::Result<RawIngest> {
    let generations = generations(network);
    let events: usize = generations.values().map(Vec::len).sum();
    let started = Instant::now();
    let mut saved = 0;
    for batch in generations.into_values() {
        let mut writes = JoinSet::new();
        for event in batch {
            let store = store.clone();
            let source = source.clone();
            writes.spawn(async move { store.ingest(event, &source).await });
        }
        while let Some(done) = writes.join_next().await {
            if done.context("a write task failed")?? == IngestOutcome::Saved {
                saved += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    Ok(RawIngest {
        events,
        saved,
        wall_ms: millis(elapsed),
        events_per_sec: rate(events, elapsed),
    })
}

/// Events per second.
pub(super) fn rate(events: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        events as f64 / secs
    } else {
        0.0
    }
}

/// The expected events by generation: announcements, state, roots, replies and comments,
/// second-generation descendants.
fn generations(network: &GeneratedNetwork) -> BTreeMap<u8, Vec<Event>> {
    let announcements: BTreeSet<EventId> = network.repos.iter().map(|r| r.announcement).collect();
    let states: BTreeSet<EventId> = network.repos.iter().map(|r| r.state).collect();
    let roots: BTreeSet<EventId> = network
        .repos
        .iter()
        .flat_map(|r| r.roots.iter().copied())
        .collect();
    let mut seen = BTreeSet::new();
    let mut out: BTreeMap<u8, Vec<Event>> = BTreeMap::new();
    for event in network.relay_events.iter().flatten() {
        if !network.expected.contains(&event.id) || !seen.insert(event.id) {
            continue;
        }
        let generation = if announcements.contains(&event.id) {
            0
        } else if states.contains(&event.id) {
            1
        } else if roots.contains(&event.id) {
            2
        } else if network.expected_descendants.contains(&event.id) {
            4
        } else {
            3
        };
        out.entry(generation).or_default().push(event.clone());
    }
    out
}
