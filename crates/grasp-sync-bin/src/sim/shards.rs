//! `grasp-sync sim --shards N`: the generated network synced by N external-mode daemons, shards
//! `0/N` to `N-1/N`, into one own relay (a plain test relay that keeps what it is sent, as a
//! general-purpose relay does). Each daemon reads the whole self feed from that relay and dials
//! only its shard's relays; the run converges when the own relay holds the expected set. The
//! report has the usual per-relay table and totals, and per shard: the relays it owns and
//! tracks, its REQ and NEG starts and refusals (counted by its relays), the live subscriptions
//! it held, what it saved, and until when it had historic work.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::EngineStatus;
use grasp_sync_model::{RelayUrl, Shard};
use grasp_sync_testkit::{TestNetwork, TestRelay, TestRelayConfig};
use nostr::EventId;
use serde::Serialize;
use tokio::time::Instant;

use super::measure::{self, Mark, RelayCounts, counts_since};
use super::missing::describe_missing;
use super::{
    PACING, PROGRESS_INTERVAL, RelayFloor, SAMPLE_INTERVAL, SimOptions, SimReport, TargetSet,
    daemon_settings, engine_entry, relay_rows, report, shape, target_sets, totals, write_report,
};
use crate::daemon::Daemon;
use crate::progress::{ProgressLine, SyncProgress};

/// The shards of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShardsReport {
    /// How many shards ran.
    pub count: u16,
    /// One row per shard, in shard order.
    pub shards: Vec<ShardRow>,
}

/// What one shard did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ShardRow {
    /// `INDEX/COUNT`.
    pub shard: String,
    /// Source relays rendezvous hashing gives this shard.
    pub relays_owned: usize,
    /// Relays its engine tracked at the end.
    pub relays_tracked: usize,
    /// Relays its engine left to other shards at the end.
    pub other_shards: usize,
    /// REQs its relays received.
    pub req_starts: usize,
    /// NEG-OPENs its relays received.
    pub neg_opens: usize,
    /// Refusals its relays sent.
    pub refusals: u64,
    /// The most live subscriptions it held, summed over its relays (sampled).
    pub peak_live_subscriptions: usize,
    /// Events it wrote that the own relay accepted (a `duplicate:` answer included: an event
    /// two shards fetched counts in both).
    pub events_saved: u64,
    /// Events it fetched that its own index already held (from another of its relays, or
    /// read from the own relay).
    pub events_duplicate: u64,
    /// The last sample at which it had historic work (batches, queued starts or NIP-77
    /// rounds), from the start of the run.
    pub busy_until_ms: u64,
    /// Relay-side WebSocket connections its relays accepted, and of those opened by the
    /// engine's sessions: equal when no other shard connected.
    pub connections: usize,
    /// Sessions its engine reports on its relays.
    pub sessions: u64,
}

/// Runs the sim with `count` shards (see the module documentation).
pub(super) async fn run_sharded(
    options: &SimOptions,
    count: u16,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<SimReport> {
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let own = TestRelay::start(TestRelayConfig::default())
        .await
        .context("starting the own relay")?;
    let service = own.url();
    let service_url = RelayUrl::parse(&service).context("service url")?;
    let spec = options.spec(&service);
    anyhow::ensure!(spec.relays >= 1, "--relays must be at least 1");
    anyhow::ensure!(
        spec.outbox.relays == 0,
        "--shards does not run with participants' outbox relays (--outbox-*)"
    );
    let configs = options.profiles.for_relays(spec.relays);
    let setup_started = Instant::now();
    let mut network = TestNetwork::start(&spec, &configs)
        .await
        .context("starting the local relay network")?;
    let urls = network.urls();
    let relay_urls: Vec<RelayUrl> = urls
        .iter()
        .map(|url| RelayUrl::parse(url).context("relay url"))
        .collect::<anyhow::Result<_>>()?;
    let owners: Vec<u16> = relay_urls
        .iter()
        .map(|url| Shard::owner_of(url, count))
        .collect();
    let shape = shape(&spec, &network.generated);
    writeln!(
        out,
        "grasp-sync sim ({:?}, seed {}, {:?} profiles, {count} shards over one own relay): {} relays, {} repositories ({} accepted), {} roots, {} events ({} placements), {} expected; network ready in {:.1}s",
        options.preset,
        options.seed,
        options.profiles,
        shape.relays,
        shape.repos,
        shape.accepted_repos,
        shape.roots,
        shape.events,
        shape.placements,
        shape.expected,
        setup_started.elapsed().as_secs_f64()
    )?;
    out.flush()?;
    let floors: Vec<RelayFloor> = target_sets(&network.generated)
        .iter()
        .map(TargetSet::floor)
        .collect();
    let marks: Vec<Mark> = network
        .relays
        .iter()
        .map(|r| Mark::of(&r.strict_stats()))
        .collect();

    let started = Instant::now();
    let mut daemons = Vec::with_capacity(usize::from(count));
    for index in 0..count {
        let mut settings = daemon_settings(
            dir.path().join(format!("shard-{index}")),
            &service_url,
            relay_urls[0].clone(),
            options,
        );
        settings.own_relay = Some(service_url.clone());
        settings.tracking.shard = Shard::new(index, count)?;
        daemons.push(
            Daemon::start(&settings)
                .await
                .with_context(|| format!("starting shard {index}/{count}"))?,
        );
    }
    let expected = network.expected().clone();
    let mut remaining: BTreeSet<EventId> = expected.clone();
    let mut peak_live: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); daemons.len()];
    let mut busy_until = vec![Duration::ZERO; daemons.len()];
    let mut last_progress = Instant::now();
    let mut line = ProgressLine::new(options.progress);
    let deadline = started + options.timeout;
    loop {
        let held = own.event_ids().await.context("reading the own relay")?;
        remaining.retain(|id| !held.contains(id));
        let mut statuses = Vec::with_capacity(daemons.len());
        for (shard, daemon) in daemons.iter().enumerate() {
            let status = daemon.status().await.unwrap_or_default();
            for (url, relay) in &status.relays {
                let peak = peak_live[shard].entry(url.clone()).or_default();
                *peak = (*peak).max(relay.live_subscriptions + relay.extra_live_subscriptions);
            }
            let busy = status
                .relays
                .values()
                .any(|r| r.pending_batches > 0 || r.queued_starts > 0 || r.negentropy_rounds > 0);
            if busy {
                busy_until[shard] = started.elapsed();
            }
            statuses.push(status);
        }
        if remaining.is_empty() || Instant::now() >= deadline {
            break;
        }
        if last_progress.elapsed() >= PROGRESS_INTERVAL {
            last_progress = Instant::now();
            let progress = SyncProgress::of(
                &merged(&statuses),
                (expected.len() - remaining.len()) as u64,
                Some(expected.len() as u64),
                started.elapsed(),
            );
            line.show(out, &progress)?;
        }
        tokio::time::sleep(SAMPLE_INTERVAL).await;
    }
    line.finish(out)?;
    let elapsed = started.elapsed();
    let counts: Vec<RelayCounts> = network
        .relays
        .iter()
        .zip(&marks)
        .map(|(r, m)| counts_since(&r.strict_stats(), m))
        .collect();
    let mut statuses = Vec::with_capacity(daemons.len());
    for daemon in &daemons {
        statuses.push(daemon.status().await.unwrap_or_default());
    }
    let held = own.event_ids().await.context("reading the own relay")?;
    let excluded_present = network
        .generated
        .excluded
        .iter()
        .filter(|id| held.contains(id))
        .count();
    for daemon in daemons {
        daemon.shutdown().await;
    }
    let totals = totals(
        &counts,
        expected.len() - remaining.len(),
        excluded_present,
        expected.len(),
        elapsed,
    );
    writeln!(
        out,
        "{count} shards: {} after {:.1}s ({}/{} expected, {} excluded held)",
        if totals.exact {
            "converged"
        } else {
            "NOT converged"
        },
        elapsed.as_secs_f64(),
        totals.expected_present,
        expected.len(),
        excluded_present
    )?;

    let rows: Vec<ShardRow> = (0..count)
        .map(|index| {
            let shard = usize::from(index);
            shard_row(
                Shard::new(index, count).unwrap_or_default(),
                &statuses[shard],
                &urls,
                &owners,
                &counts,
                &peak_live[shard],
                busy_until[shard],
            )
        })
        .collect();
    network.stop().await.context("stopping the network")?;
    drop(dir);

    let status = merged(&statuses);
    let peak_live_merged: BTreeMap<String, usize> = peak_live.into_iter().flatten().collect();
    let relays = relay_rows(&network, &floors, counts, None, &status, &peak_live_merged);
    let pacing_bound_ms = relays
        .iter()
        .map(|r| r.background_starts as u64 * u64::try_from(PACING.as_millis()).unwrap_or(1000))
        .max()
        .unwrap_or(0);
    let mut report = SimReport {
        preset: options.preset,
        seed: options.seed,
        profiles: options.profiles,
        network: shape,
        own: totals,
        engine_status: status,
        pacing_bound_ms,
        relays,
        naive: None,
        naive_client: None,
        raw: None,
        reconcile: None,
        first_daily: None,
        daily: None,
        process_memory: measure::own_memory(),
        idle: None,
        live_probe: None,
        targets: Vec::new(),
        outbox: None,
        shards: Some(ShardsReport {
            count,
            shards: rows,
        }),
    };
    report.targets = report::targets(&report);
    write_report(out, &report)?;
    if let Some(shards) = &report.shards {
        write_shards(out, shards)?;
    }
    for line in describe_missing(&network.generated, &remaining, &owners) {
        writeln!(out, "{line}")?;
    }
    Ok(report)
}

/// Writes the per-shard table.
pub fn write_shards(out: &mut (dyn Write + Send), report: &ShardsReport) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8} {:>9}",
        "shard",
        "relays",
        "tracked",
        "REQ",
        "NEG",
        "refused",
        "peak live",
        "saved",
        "dupl.",
        "busy (s)"
    )?;
    for row in &report.shards {
        writeln!(
            out,
            "{:<7} {:>6} {:>7} {:>6} {:>6} {:>8} {:>9} {:>8} {:>8} {:>9.1}",
            row.shard,
            row.relays_owned,
            row.relays_tracked,
            row.req_starts,
            row.neg_opens,
            row.refusals,
            row.peak_live_subscriptions,
            row.events_saved,
            row.events_duplicate,
            row.busy_until_ms as f64 / 1000.0
        )?;
        if row.connections as u64 != row.sessions {
            writeln!(
                out,
                "  shard {}: its relays accepted {} connections, its engine opened {}",
                row.shard, row.connections, row.sessions
            )?;
        }
    }
    writeln!(
        out,
        "(relays: owned by the shard; tracked: by its engine at the end; peak live: most live subscriptions it held, summed over its relays; saved: events it wrote that the own relay accepted, a `duplicate:` answer included, so an event two shards fetched counts in both; dupl.: events it fetched that its own index already held; busy: last moment it had historic work)"
    )?;
    out.flush()
}

fn shard_row(
    shard: Shard,
    status: &EngineStatus,
    urls: &[String],
    owners: &[u16],
    counts: &[RelayCounts],
    peak_live: &BTreeMap<String, usize>,
    busy_until: Duration,
) -> ShardRow {
    let mut row = ShardRow {
        shard: shard.to_string(),
        relays_tracked: status.relays.len(),
        other_shards: status.tracking.other_shards,
        peak_live_subscriptions: peak_live.values().sum(),
        busy_until_ms: super::naive::millis(busy_until),
        ..ShardRow::default()
    };
    for ((url, owner), relay) in urls.iter().zip(owners).zip(counts) {
        if *owner != shard.index() {
            continue;
        }
        row.relays_owned += 1;
        row.req_starts += relay.req_starts;
        row.neg_opens += relay.neg_opens;
        row.refusals += relay.total_refusals();
        row.connections += relay.connections;
        if let Some((_, engine)) = engine_entry(status, url) {
            row.sessions += engine.connections;
        }
    }
    for relay in status.relays.values() {
        row.events_saved += relay.events_saved;
        row.events_duplicate += relay.events_duplicate;
    }
    row
}

/// One status over every shard: the relays of all (each is in one shard's status), the largest
/// index sizes, and the first shard's other figures.
fn merged(statuses: &[EngineStatus]) -> EngineStatus {
    let mut all = statuses.first().cloned().unwrap_or_default();
    for status in statuses.iter().skip(1) {
        all.repos_tracked = all.repos_tracked.max(status.repos_tracked);
        all.root_events_tracked = all.root_events_tracked.max(status.root_events_tracked);
        all.relays
            .extend(status.relays.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    all
}
