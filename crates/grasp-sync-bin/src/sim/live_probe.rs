//! The live probe (`--live-probe N`): once the first sync settled, fresh events tagging a
//! sample of N tracked repositories and one root of each, in every tag family the core live
//! coverage holds, are published to one of the repository's relays, and the sim waits
//! [`PROBE_WAIT`] for them in the daemon's store.
//!
//! An event arrives that fast only through a live subscription: the paced catch-up runs every
//! five minutes and history is not fetched again. So the share that arrives is the share of
//! tracked items with live coverage. The probe's events stay on the relays, so the steps after
//! it (the naive baseline, the reconciliation, the idle daemon) see a network with them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use anyhow::Context;
use grasp_sync_testkit::TestNetwork;
use grasp_sync_testkit::nip34::{RepoTag, ThreadTag, reply, repo_comment};
use nostr::{Event, EventId, Keys, Timestamp};
use serde::Serialize;
use tokio::time::Instant;

use crate::daemon::Daemon;

/// How long the probe waits for its events: far below the catch-up interval.
pub(super) const PROBE_WAIT: Duration = Duration::from_secs(20);

/// What the live probe found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveProbe {
    /// Events published.
    pub sent: usize,
    /// Of those, held by the daemon's store within the probe's wait (20 s).
    pub arrived: usize,
    /// Sent and arrived per tag family (`a`, `A`, `q` on repositories; `e`, `E`, `q` on roots).
    pub by_tag: BTreeMap<String, (usize, usize)>,
    /// Whether the first sync had settled before the probe started.
    pub settled: bool,
}

impl LiveProbe {
    /// Whether every probe event arrived.
    pub fn complete(&self) -> bool {
        self.sent > 0 && self.arrived == self.sent
    }
}

/// Publishes the probe events for `repos` sampled repositories and waits for them.
pub(super) async fn run(
    network: &TestNetwork,
    daemon: &Daemon,
    repos: usize,
    settled: bool,
) -> anyhow::Result<LiveProbe> {
    let generated = &network.generated;
    let roots: HashMap<EventId, &Event> = generated
        .relay_events
        .iter()
        .flatten()
        .map(|e| (e.id, e))
        .collect();
    let accepted: Vec<_> = generated
        .repos
        .iter()
        .filter(|r| r.accepted() && !r.relay_indices.is_empty())
        .collect();
    let step = (accepted.len() / repos.max(1)).max(1);
    let author = Keys::generate();
    let now = Timestamp::now();
    let mut probes: Vec<(&'static str, Event, usize)> = Vec::new();
    for (n, repo) in accepted.iter().step_by(step).take(repos).enumerate() {
        let relay = repo.relay_indices[n % repo.relay_indices.len()];
        for (label, how) in [
            ("a", RepoTag::LowerA),
            ("A", RepoTag::UpperA),
            ("q repo", RepoTag::Q),
        ] {
            let event = repo_comment(&author, &repo.repo, how, "live probe", now)?;
            probes.push((label, event, relay));
        }
        let Some(root) = repo.roots.first().and_then(|id| roots.get(id)) else {
            continue;
        };
        for (label, how) in [
            ("e", ThreadTag::LowerE),
            ("E", ThreadTag::UpperE),
            ("q root", ThreadTag::Q),
        ] {
            let event = reply(&author, root, how, "live probe", now)?;
            probes.push((label, event, relay));
        }
    }
    for (_, event, relay) in &probes {
        network.relays[*relay]
            .publish(event.clone())
            .await
            .context("publishing a live probe event")?;
    }
    let mut waiting: BTreeSet<EventId> = probes.iter().map(|(_, e, _)| e.id).collect();
    let deadline = Instant::now() + PROBE_WAIT;
    loop {
        let mut found = Vec::new();
        for id in &waiting {
            if daemon.holds(id).await? {
                found.push(*id);
            }
        }
        for id in found {
            waiting.remove(&id);
        }
        if waiting.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut by_tag: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (label, event, _) in &probes {
        let entry = by_tag.entry((*label).to_owned()).or_default();
        entry.0 += 1;
        if !waiting.contains(&event.id) {
            entry.1 += 1;
        }
    }
    Ok(LiveProbe {
        sent: probes.len(),
        arrived: probes.len() - waiting.len(),
        by_tag,
        settled,
    })
}
