//! The naive baseline: the pre-ledger behaviour the design replaced, built from nostr-sdk's
//! relay pool. For the same repositories it opens one subscription per 100-item filter, all at
//! once and without pacing, pages through results by `until`, retries what failed in rounds,
//! and ingests into a separate store with the same acceptance policy.
//!
//! A client that ignores politeness reads every relay it knows: it is told the network's
//! outbox relays (as it is told the roots) and asks each of them for every accepted
//! repository, as if every announcement listed it, so it ends with the outbox-only events
//! too and its final set stays comparable with the complete one.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{EventStore, LmdbStore};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{GeneratedNetwork, GeneratedRepo};
use nostr::{Event, EventId, Filter, Kind, SingleLetterTag};
use nostr_sdk::pool::relay::ReqExitPolicy;
use nostr_sdk::pool::{Relay, RelayOptions, RelayPool};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Items per filter, as the pre-ledger client chunked them.
pub const ITEMS_PER_FILTER: usize = 100;
/// A page at least this full may have more behind it (the smallest default page is 100).
const PAGE_FULL: usize = 90;
/// How long one fetch may take before it counts as failed (a refusal by NOTICE never ends).
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Retry rounds per stage before giving up.
const MAX_ROUNDS: u32 = 40;
/// Root event kinds: patches, pull requests, issues.
const ROOT_KINDS: [u16; 3] = [
    grasp_sync_model::PATCH_KIND,
    grasp_sync_model::PULL_REQUEST_KIND,
    grasp_sync_model::ISSUE_KIND,
];

/// What the baseline did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NaiveOutcome {
    /// From connecting to the last stage's end.
    pub wall_ms: u64,
    /// REQs the client sent, pages and retries included.
    pub reqs_sent: u64,
    /// Fetches that failed (refused, closed or timed out) and were retried.
    pub failed_fetches: u64,
    /// Events delivered, copies included.
    pub events_received: u64,
    /// Filters still failing after the last round.
    pub abandoned_filters: u64,
}

/// One filter to fetch completely from one relay.
#[derive(Debug, Clone)]
struct Job {
    relay: usize,
    filter: Filter,
}

/// Shared counters of a run.
#[derive(Debug, Default)]
struct Counters {
    reqs: AtomicU64,
    failed: AtomicU64,
    received: AtomicU64,
}

/// Runs the baseline against the network's relays (by index in `urls`), ingesting into
/// `store`.
pub(super) async fn run_naive(
    network: &GeneratedNetwork,
    urls: &[String],
    store: &LmdbStore,
) -> anyhow::Result<NaiveOutcome> {
    let started = Instant::now();
    let pool = RelayPool::default();
    let mut relays = Vec::with_capacity(urls.len());
    for url in urls {
        let sdk_url = nostr::RelayUrl::parse(url).context("relay url")?;
        pool.add_relay(sdk_url.clone(), RelayOptions::new().reconnect(false))
            .await
            .context("adding a relay")?;
        let relay = pool.relay(&sdk_url).await.context("relay handle")?;
        relay
            .try_connect(Duration::from_secs(10))
            .await
            .with_context(|| format!("connecting to {url}"))?;
        relays.push((relay, RelayUrl::parse(url).context("relay url")?));
    }
    let relays = Arc::new(relays);
    let counters = Arc::new(Counters::default());
    let mut abandoned = 0;

    // Stage 1: announcements.
    let jobs = (0..urls.len())
        .map(|relay| Job {
            relay,
            filter: Filter::new().kind(Kind::from(grasp_sync_model::REPO_ANNOUNCEMENT_KIND)),
        })
        .collect();
    abandoned += stage(&relays, store, &counters, jobs).await?.1;

    // Stage 2: state and repository references, per relay for the repositories listing it
    // (every accepted repository on an outbox relay).
    let accepted: Vec<_> = network.repos.iter().filter(|r| r.accepted()).collect();
    let outbox = &network.outbox.relay_indices;
    let reads = |repo: &GeneratedRepo, relay: usize| {
        repo.relay_indices.contains(&relay) || outbox.contains(&relay)
    };
    let mut jobs = Vec::new();
    for relay in 0..urls.len() {
        let mine: Vec<_> = accepted.iter().filter(|r| reads(r, relay)).collect();
        let identifiers: Vec<String> = mine.iter().map(|r| r.repo.identifier.clone()).collect();
        let coordinates: Vec<String> = mine.iter().map(|r| r.repo.coordinate()).collect();
        let state = Filter::new().kind(Kind::from(grasp_sync_model::REPO_STATE_KIND));
        jobs.extend(chunked(relay, &state, 'd', false, &identifiers));
        for (letter, upper) in [('a', false), ('a', true), ('q', false)] {
            jobs.extend(chunked(relay, &Filter::new(), letter, upper, &coordinates));
        }
    }
    abandoned += stage(&relays, store, &counters, jobs).await?.1;

    // Stage 3: references to roots.
    let mut root_relays: HashMap<String, Vec<usize>> = HashMap::new();
    let mut jobs = Vec::new();
    for relay in 0..urls.len() {
        let roots: Vec<String> = accepted
            .iter()
            .filter(|r| reads(r, relay))
            .flat_map(|r| r.roots.iter().map(EventId::to_hex))
            .collect();
        for root in &roots {
            root_relays.entry(root.clone()).or_default().push(relay);
        }
        for (letter, upper) in [('e', false), ('e', true), ('q', false)] {
            jobs.extend(chunked(relay, &Filter::new(), letter, upper, &roots));
        }
    }
    let (members, lost) = stage(&relays, store, &counters, jobs).await?;
    abandoned += lost;

    // Stage 4: references to the direct thread members found, on their repository's relays.
    let mut per_relay: Vec<BTreeSet<String>> = vec![BTreeSet::new(); urls.len()];
    for event in &members {
        if ROOT_KINDS.contains(&event.kind.as_u16()) {
            continue;
        }
        let targets = event
            .tags
            .iter()
            .filter_map(|tag| tag.as_slice().get(1))
            .find_map(|value| root_relays.get(value.as_str()));
        for &relay in targets.into_iter().flatten() {
            per_relay[relay].insert(event.id.to_hex());
        }
    }
    let mut jobs = Vec::new();
    for (relay, ids) in per_relay.iter().enumerate() {
        let ids: Vec<String> = ids.iter().cloned().collect();
        for (letter, upper) in [('e', false), ('e', true), ('q', false)] {
            jobs.extend(chunked(relay, &Filter::new(), letter, upper, &ids));
        }
    }
    abandoned += stage(&relays, store, &counters, jobs).await?.1;

    pool.shutdown().await;
    Ok(NaiveOutcome {
        wall_ms: millis(started.elapsed()),
        reqs_sent: counters.reqs.load(Ordering::Relaxed),
        failed_fetches: counters.failed.load(Ordering::Relaxed),
        events_received: counters.received.load(Ordering::Relaxed),
        abandoned_filters: abandoned,
    })
}

/// One filter per `ITEMS_PER_FILTER` values of one tag.
fn chunked(relay: usize, base: &Filter, letter: char, upper: bool, values: &[String]) -> Vec<Job> {
    let letter = if upper {
        letter.to_ascii_uppercase()
    } else {
        letter
    };
    let Ok(tag) = SingleLetterTag::from_char(letter) else {
        return Vec::new();
    };
    values
        .chunks(ITEMS_PER_FILTER)
        .map(|chunk| Job {
            relay,
            filter: base.clone().custom_tags(tag, chunk.iter().cloned()),
        })
        .collect()
}

/// Runs every job at once, then the failed ones again, round after round; returns the
/// events fetched and how many jobs were given up.
async fn stage(
    relays: &Arc<Vec<(Relay, RelayUrl)>>,
    store: &LmdbStore,
    counters: &Arc<Counters>,
    mut jobs: Vec<Job>,
) -> anyhow::Result<(Vec<Event>, u64)> {
    let mut fetched = Vec::new();
    let mut round = 0;
    while !jobs.is_empty() && round < MAX_ROUNDS {
        round += 1;
        let mut running = JoinSet::new();
        for job in jobs.drain(..) {
            let relays = Arc::clone(relays);
            let counters = Arc::clone(counters);
            let store = store.clone();
            running.spawn(async move {
                let result = fetch_all(&relays, &store, &counters, &job).await;
                (job, result)
            });
        }
        while let Some(done) = running.join_next().await {
            let (job, result) = done.context("a fetch task failed")?;
            match result {
                Ok(events) => fetched.extend(events),
                Err(()) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    jobs.push(job);
                }
            }
        }
    }
    Ok((fetched, jobs.len() as u64))
}

/// Pages through one filter; `Err` when a page failed.
async fn fetch_all(
    relays: &[(Relay, RelayUrl)],
    store: &LmdbStore,
    counters: &Counters,
    job: &Job,
) -> Result<Vec<Event>, ()> {
    let Some((relay, url)) = relays.get(job.relay) else {
        return Err(());
    };
    let mut all: Vec<Event> = Vec::new();
    let mut seen: BTreeSet<EventId> = BTreeSet::new();
    let mut filter = job.filter.clone();
    loop {
        counters.reqs.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let page = relay
            .fetch_events(filter.clone(), FETCH_TIMEOUT, ReqExitPolicy::ExitOnEOSE)
            .await
            .map_err(|_| ())?;
        if started.elapsed() >= FETCH_TIMEOUT {
            return Err(());
        }
        let page: Vec<Event> = page.into_iter().collect();
        counters
            .received
            .fetch_add(page.len() as u64, Ordering::Relaxed);
        let oldest = page.iter().map(|e| e.created_at).min();
        let fresh: Vec<Event> = page.into_iter().filter(|e| seen.insert(e.id)).collect();
        let more = fresh.len() >= PAGE_FULL;
        ingest(store, url, &fresh).await;
        all.extend(fresh);
        match oldest {
            Some(oldest) if more => filter = filter.until(oldest),
            _ => return Ok(all),
        }
    }
}

/// Offers events to the store concurrently.
async fn ingest(store: &LmdbStore, url: &RelayUrl, events: &[Event]) {
    let mut writes = JoinSet::new();
    for event in events {
        let store = store.clone();
        let url = url.clone();
        let event = event.clone();
        writes.spawn(async move { store.ingest(event, &url).await });
    }
    // A failed write shows up as a missing event in the final comparison.
    while writes.join_next().await.is_some() {}
}

/// Milliseconds, saturating.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
