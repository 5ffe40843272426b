//! `grasp-sync sim`: the demo's generator at any size against relays with mixed strict limit
//! profiles, measured until convergence, beside a naive nostr-sdk baseline and the store's raw
//! ingest rate on the same generated network, with the design's targets checked.

mod floor;
mod idle;
mod live_probe;
mod measure;
mod missing;
mod naive;
mod outbox;
mod raw;
mod reconcile;
mod report;
mod shards;
mod spec;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{AddressPolicy, EngineStatus, LmdbStore, RelayStatus, StoreConfig};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{GeneratedNetwork, NetworkSpec, RootCount, TestNetwork};
use nostr::EventId;
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::cli::SimArgs;
use crate::config::{Settings, parse_duration};
use crate::daemon::Daemon;
use crate::progress::{ProgressLine, SyncProgress};

pub use floor::{FamilyFloor, REQ_PAYLOAD_BUDGET, RelayFloor, TargetSet, target_sets};
pub use idle::IdleDaemon;
pub use live_probe::LiveProbe;
pub use measure::{Memory, RelayCounts, parse_memory};
pub use naive::{ITEMS_PER_FILTER, NaiveOutcome};
pub use outbox::OutboxReport;
pub use raw::RawIngest;
pub use reconcile::ReconcileReport;
pub use report::write_report;
pub use shards::{ShardRow, ShardsReport, write_shards};
pub use spec::{Preset, Profiles};

use measure::{Mark, counts_since};

/// How often the store and the engine are sampled while syncing.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(500);
/// How often the progress line is rewritten (on a terminal).
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// Background starts are paced at one per second per connection.
const PACING: Duration = Duration::from_secs(1);

/// The sim's knobs. Size fields left `None` take the preset's value.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// Network size before overrides.
    pub preset: Preset,
    /// Seed of the generated network.
    pub seed: u64,
    /// Relays (R).
    pub relays: Option<usize>,
    /// Repository announcements (N).
    pub repos: Option<usize>,
    /// Root events in total (M).
    pub roots: Option<usize>,
    /// Replies per root (K).
    pub replies_per_root: Option<usize>,
    /// Second-generation descendants per reply.
    pub descendants_per_reply: Option<usize>,
    /// Comments per repository.
    pub comments_per_repo: Option<usize>,
    /// Relays each repository lists.
    pub relays_per_repo: Option<usize>,
    /// Share of events on all of their repository's relays.
    pub share_on_several_relays: Option<f64>,
    /// Share of announcements not listing the service.
    pub share_not_listing_service: Option<f64>,
    /// Outbox relays (none unless this or another outbox field is set).
    pub outbox_relays: Option<usize>,
    /// Share of contributors with a relay list naming outbox relays.
    pub outbox_authors: Option<f64>,
    /// Share of those contributors' roots, replies and comments only on outbox relays.
    pub outbox_share: Option<f64>,
    /// Relay limit profiles.
    pub profiles: Profiles,
    /// The daemon's interval between two probes of one participant mailbox relay.
    pub mailbox_probe_interval: Duration,
    /// The daemon's self-feed batch window.
    pub batch_window: Duration,
    /// Give up waiting for convergence after this.
    pub timeout: Duration,
    /// Fetch coverage the daemon's store holds nothing of by REQ+EOSE, not NIP-77.
    pub first_sync_by_req: bool,
    /// A first sync's new live groups carry their batch's first historic page.
    pub live_first_page: bool,
    /// Run the naive baseline.
    pub baseline: bool,
    /// Measure the raw ingest rate.
    pub raw_ingest: bool,
    /// Measure an idle daemon process for this long after it settles (needs `exe`).
    pub idle: Option<Duration>,
    /// The idle daemon starts over an empty data directory and does the first sync itself,
    /// instead of restarting over the synced store.
    pub idle_from_empty: bool,
    /// The `grasp-sync` executable, for the idle daemon.
    pub exe: Option<PathBuf>,
    /// Show a progress line while the daemon syncs (for an output that is a terminal).
    pub progress: bool,
    /// Run this many external-mode daemons, one per shard, over one own relay instead of
    /// one embedded daemon (without the baseline, the raw ingest and the idle daemon).
    pub shards: Option<u16>,
    /// Once the daemon converged, measure reconciliations of the complete store: the daily
    /// one on the connections that are up, then a restart over it.
    pub reconcile: bool,
    /// Once the first sync settled, probe live coverage with fresh events for this many
    /// tracked repositories ([`LiveProbe`]).
    pub live_probe: Option<usize>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            preset: Preset::Small,
            seed: 7,
            relays: None,
            repos: None,
            roots: None,
            replies_per_root: None,
            descendants_per_reply: None,
            comments_per_repo: None,
            relays_per_repo: None,
            share_on_several_relays: None,
            share_not_listing_service: None,
            outbox_relays: None,
            outbox_authors: None,
            outbox_share: None,
            mailbox_probe_interval: grasp_sync_engine::OutboxConfig::default()
                .mailbox_probe_interval,
            profiles: Profiles::Mixed,
            batch_window: grasp_sync_engine::EngineConfig::default().batch_window,
            timeout: Duration::from_secs(600),
            first_sync_by_req: grasp_sync_engine::EngineConfig::default().first_sync_by_req,
            live_first_page: grasp_sync_engine::EngineConfig::default().live_first_page,
            baseline: true,
            raw_ingest: true,
            idle: None,
            idle_from_empty: false,
            exe: None,
            progress: false,
            shards: None,
            reconcile: false,
            live_probe: None,
        }
    }
}

impl TryFrom<&SimArgs> for SimOptions {
    type Error = anyhow::Error;

    fn try_from(args: &SimArgs) -> anyhow::Result<Self> {
        let duration = |flag: &str, value: &str| {
            parse_duration(value).map_err(|reason| anyhow::anyhow!("--{flag}: {reason}"))
        };
        for (flag, share) in [
            ("share-on-several-relays", args.share_on_several_relays),
            ("share-not-listing-service", args.share_not_listing_service),
            ("outbox-authors", args.outbox_authors),
            ("outbox-share", args.outbox_share),
        ] {
            if let Some(share) = share {
                anyhow::ensure!(
                    (0.0..=1.0).contains(&share),
                    "--{flag} must be within 0 and 1"
                );
            }
        }
        anyhow::ensure!(args.relays != Some(0), "--relays must be at least 1");
        anyhow::ensure!(
            args.relays_per_repo != Some(0),
            "--relays-per-repo must be at least 1"
        );
        anyhow::ensure!(
            args.outbox_relays != Some(0),
            "--outbox-relays must be at least 1"
        );
        if let Some(shards) = args.shards {
            anyhow::ensure!(
                (1..=grasp_sync_model::MAX_SHARDS).contains(&shards),
                "--shards must be from 1 to {}",
                grasp_sync_model::MAX_SHARDS
            );
        }
        Ok(SimOptions {
            preset: args.preset,
            seed: args.seed,
            relays: args.relays,
            repos: args.repos,
            roots: args.roots,
            replies_per_root: args.replies_per_root,
            descendants_per_reply: args.descendants_per_reply,
            comments_per_repo: args.comments_per_repo,
            relays_per_repo: args.relays_per_repo,
            share_on_several_relays: args.share_on_several_relays,
            share_not_listing_service: args.share_not_listing_service,
            outbox_relays: args.outbox_relays,
            outbox_authors: args.outbox_authors,
            outbox_share: args.outbox_share,
            mailbox_probe_interval: match &args.mailbox_probe_interval {
                Some(text) => duration("mailbox-probe-interval", text)?,
                None => grasp_sync_engine::OutboxConfig::default().mailbox_probe_interval,
            },
            profiles: args.profiles,
            batch_window: duration("batch-window", &args.batch_window)?,
            timeout: duration("timeout", &args.timeout)?,
            first_sync_by_req: args.first_sync_by_req,
            live_first_page: args.live_first_page,
            baseline: !args.no_baseline,
            raw_ingest: !args.no_raw_ingest,
            idle: args
                .idle_rss
                .as_deref()
                .map(|value| duration("idle-rss", value))
                .transpose()?,
            idle_from_empty: args.idle_from_empty,
            exe: None,
            progress: false,
            shards: args.shards,
            reconcile: args.reconcile,
            live_probe: args.live_probe,
        })
    }
}

impl SimOptions {
    /// The network spec: the preset with the overrides applied.
    pub fn spec(&self, service_url: &str) -> NetworkSpec {
        let mut spec = self.preset.spec(self.seed, service_url);
        if let Some(relays) = self.relays {
            spec.relays = relays;
            spec.relays_per_repo = spec.relays_per_repo.min(relays);
        }
        if let Some(repos) = self.repos {
            spec.repos = repos;
        }
        if let Some(roots) = self.roots {
            spec.roots = RootCount::Total(roots);
        }
        let set = |field: &mut usize, value: Option<usize>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        set(&mut spec.replies_per_root, self.replies_per_root);
        set(&mut spec.descendants_per_reply, self.descendants_per_reply);
        set(&mut spec.comments_per_repo, self.comments_per_repo);
        set(&mut spec.relays_per_repo, self.relays_per_repo);
        if let Some(share) = self.share_on_several_relays {
            spec.share_on_several_relays = share;
        }
        if let Some(share) = self.share_not_listing_service {
            spec.share_not_listing_service = share;
        }
        spec.outbox =
            outbox::outbox_spec(self.outbox_relays, self.outbox_authors, self.outbox_share);
        spec
    }
}

/// The network a run used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkShape {
    /// Relays.
    pub relays: usize,
    /// Repositories.
    pub repos: usize,
    /// Of those, accepted by the service.
    pub accepted_repos: usize,
    /// Root events.
    pub roots: usize,
    /// Distinct events on the network.
    pub events: usize,
    /// Events seeded, copies counted.
    pub placements: usize,
    /// Events a correct sync stores.
    pub expected: usize,
    /// Events a correct sync does not store.
    pub excluded: usize,
}

/// What the engine itself reported for one relay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineCounts {
    /// Live REQs sent.
    pub req_starts_live: u64,
    /// Historic, pagination and fetch REQs sent.
    pub req_starts_historic: u64,
    /// Refusals by category.
    pub refusals: BTreeMap<String, u64>,
    /// Most live subscriptions seen held at once over every connection (sampled).
    pub peak_live_subscriptions: usize,
    /// Extra live connections open at the end (lever 4).
    pub extra_connections: usize,
    /// Filters no live subscription held at the end, left to the paced catch-up.
    pub catch_up_filters: usize,
    /// Most subscriptions held at once (the engine's own peak).
    pub peak_subscriptions: usize,
    /// Events delivered.
    pub events_received: u64,
    /// Bytes the engine counted sent to the relay (text frames).
    pub bytes_sent: u64,
    /// Bytes the engine counted received from the relay (text frames).
    pub bytes_received: u64,
}

/// One relay of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelayRow {
    /// Its URL.
    pub url: String,
    /// Its limit profile.
    pub profile: String,
    /// Whether it is an outbox relay (no announcement lists it).
    pub outbox: bool,
    /// The byte floor of its live coverage.
    pub floor: RelayFloor,
    /// What the relay counted while the daemon synced.
    pub own: RelayCounts,
    /// What the engine reported.
    pub engine: EngineCounts,
    /// Background (non-live) starts: relay-side starts minus the engine's live REQs.
    pub background_starts: usize,
    /// What the relay counted during the naive baseline.
    pub naive: Option<RelayCounts>,
}

/// One side's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SideTotals {
    /// Whether the store holds exactly the expected set.
    pub exact: bool,
    /// Expected events held.
    pub expected_present: usize,
    /// Excluded events held (must be 0).
    pub excluded_present: usize,
    /// Time until convergence, or until the end of the wait.
    pub wall_ms: u64,
    /// REQ starts (relay-side).
    pub req_starts: usize,
    /// NEG-OPEN starts (relay-side).
    pub neg_opens: usize,
    /// Refusals (relay-side), by kind.
    pub refusals: BTreeMap<String, u64>,
    /// Expected events stored per second of wall time.
    pub events_per_sec: f64,
    /// Bytes of the text frames the client sent the relays (relay-side count).
    pub bytes_sent: u64,
    /// Bytes of the text frames the relays sent the client.
    pub bytes_received: u64,
}

impl SideTotals {
    /// Bytes moved both ways.
    pub fn bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_received
    }

    /// REQ and NEG starts.
    pub fn starts(&self) -> usize {
        self.req_starts + self.neg_opens
    }

    /// Refusals of every kind.
    pub fn total_refusals(&self) -> u64 {
        self.refusals.values().sum()
    }
}

/// One target of the design, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCheck {
    /// What is checked.
    pub name: String,
    /// The target.
    pub target: String,
    /// The figure measured.
    pub actual: String,
    /// `Some(met)`, or `None` when the run did not measure it.
    pub met: Option<bool>,
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// The size preset.
    pub preset: Preset,
    /// The seed.
    pub seed: u64,
    /// The relay profiles.
    pub profiles: Profiles,
    /// The network.
    pub network: NetworkShape,
    /// The daemon's sync.
    pub own: SideTotals,
    /// The daemon's engine status at the end.
    pub engine_status: EngineStatus,
    /// Pacing bound: the most background starts on one relay × 1 s.
    pub pacing_bound_ms: u64,
    /// Per relay.
    pub relays: Vec<RelayRow>,
    /// The naive baseline, if it ran.
    pub naive: Option<SideTotals>,
    /// The naive client's own counters.
    pub naive_client: Option<NaiveOutcome>,
    /// Participants with outbox relays and whether their events arrived, if the network
    /// has outbox relays.
    pub outbox: Option<OutboxReport>,
    /// Raw ingest into a fresh store, if measured.
    pub raw: Option<RawIngest>,
    /// A reconciliation of the complete store by a restart, if measured (`--reconcile`).
    pub reconcile: Option<ReconcileReport>,
    /// The first daily reconciliation of the complete store on the connections that are up,
    /// which learns each relay's holdings, if measured (`--reconcile`).
    pub first_daily: Option<ReconcileReport>,
    /// The daily reconciliation after that one, over the relays' holdings, if measured
    /// (`--reconcile`): what every later day costs.
    pub daily: Option<ReconcileReport>,
    /// Memory of the sim process (relays, daemon and baseline together).
    pub process_memory: Memory,
    /// The idle daemon process, if measured.
    pub idle: Option<IdleDaemon>,
    /// The live probe, with `--live-probe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_probe: Option<LiveProbe>,
    /// The design's targets.
    pub targets: Vec<TargetCheck>,
    /// Per shard, when the run had several daemons (`--shards`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardsReport>,
}

impl SimReport {
    /// Whether the daemon converged to exactly the expected set.
    pub fn converged(&self) -> bool {
        self.own.exact
    }
}

/// Runs the sim, writing progress and the report to `out`.
pub async fn run_sim(
    options: &SimOptions,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<SimReport> {
    if let Some(count) = options.shards {
        return shards::run_sharded(options, count, out).await;
    }
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .context("binding the service relay")?;
    let service = format!("ws://{}", listener.local_addr().context("service address")?);
    let service_url = RelayUrl::parse(&service).context("service url")?;
    let spec = options.spec(&service);
    anyhow::ensure!(spec.relays >= 1, "--relays must be at least 1");
    let configs = options.profiles.for_relays(spec.relay_count());
    let setup_started = Instant::now();
    let mut network = TestNetwork::start(&spec, &configs)
        .await
        .context("starting the local relay network")?;
    let urls = network.urls();
    let shape = shape(&spec, &network.generated);
    writeln!(
        out,
        "grasp-sync sim ({:?}, seed {}, {:?} profiles): {} relays, {} repositories ({} accepted), {} roots, {} events ({} placements), {} expected; network ready in {:.1}s",
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
    let mut outbox = OutboxReport::of(&network.generated, network.expected());
    if let Some(outbox) = &outbox {
        outbox.write_network(out)?;
    }
    out.flush()?;
    let floors: Vec<RelayFloor> = target_sets(&network.generated)
        .iter()
        .map(TargetSet::floor)
        .collect();

    // The daemon's sync.
    let marks: Vec<Mark> = network
        .relays
        .iter()
        .map(|r| Mark::of(&r.strict_stats()))
        .collect();
    let bootstrap = RelayUrl::parse(&urls[0]).context("bootstrap url")?;
    let settings = daemon_settings(dir.path().join("daemon"), &service_url, bootstrap, options);
    let started = Instant::now();
    let daemon = Daemon::start_on(&settings, listener).await?;
    let expected = network.expected().clone();
    let mut remaining: BTreeSet<EventId> = expected.clone();
    let mut peak_live: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_progress = Instant::now();
    let mut line = ProgressLine::new(options.progress);
    let deadline = started + options.timeout;
    loop {
        let mut found = Vec::new();
        for id in &remaining {
            if daemon.holds(id).await? {
                found.push(*id);
            }
        }
        for id in found {
            remaining.remove(&id);
        }
        let status = daemon.status().await.unwrap_or_default();
        for (url, relay) in &status.relays {
            let peak = peak_live.entry(url.clone()).or_default();
            *peak = (*peak).max(relay.live_subscriptions + relay.extra_live_subscriptions);
        }
        if remaining.is_empty() || Instant::now() >= deadline {
            break;
        }
        if last_progress.elapsed() >= PROGRESS_INTERVAL {
            last_progress = Instant::now();
            let progress = SyncProgress::of(
                &status,
                (expected.len() - remaining.len()) as u64,
                Some(expected.len() as u64),
                started.elapsed(),
            );
            line.show(out, &progress)?;
        }
        tokio::time::sleep(SAMPLE_INTERVAL).await;
    }
    line.finish(out)?;
    let own_elapsed = started.elapsed();
    outbox = OutboxReport::of(&network.generated, &remaining);
    let own_counts: Vec<RelayCounts> = network
        .relays
        .iter()
        .zip(&marks)
        .map(|(r, m)| counts_since(&r.strict_stats(), m))
        .collect();
    let status = daemon.status().await.unwrap_or_default();
    if let Some(outbox) = outbox.as_mut() {
        outbox.discovery = Some(status.participants.clone());
    }
    let mut excluded_present = 0;
    for id in &network.generated.excluded {
        if daemon.holds(id).await? {
            excluded_present += 1;
        }
    }
    // With `--reconcile`, the first sync runs on until it settled: what it moved by then is
    // the full sync the reconciliation is compared with.
    let full_sync = if options.reconcile {
        let (settled, first) = reconcile::wait_settled(&daemon, deadline).await;
        let bytes: u64 = network
            .relays
            .iter()
            .zip(&marks)
            .map(|(r, m)| counts_since(&r.strict_stats(), m).bytes())
            .sum();
        Some((settled, first, bytes))
    } else {
        None
    };
    // Then the daily reconciliation, asked for now, on the connections that are up: the
    // first learns each relay's holdings, the second is what every later day costs.
    let (mut first_daily, mut daily) = match &full_sync {
        Some((settled, first, bytes)) => {
            let mut learning =
                reconcile::run_daily(&daemon, &network, first, *bytes, options.timeout).await?;
            learning.full_sync_settled = *settled;
            learning.write_outcome("first daily reconciliation", out)?;
            let mut report =
                reconcile::run_daily(&daemon, &network, first, *bytes, options.timeout).await?;
            report.full_sync_settled = *settled;
            report.write_outcome("daily reconciliation", out)?;
            (Some(learning), Some(report))
        }
        None => (None, None),
    };
    let live_probe = match options.live_probe {
        Some(repos) => {
            let settled = match &full_sync {
                Some((settled, _, _)) => *settled,
                None => reconcile::wait_settled(&daemon, deadline).await.0,
            };
            let probe = live_probe::run(&network, &daemon, repos, settled).await?;
            writeln!(
                out,
                "live probe: {} of {} fresh events arrived within {} s{}",
                probe.arrived,
                probe.sent,
                live_probe::PROBE_WAIT.as_secs(),
                if settled {
                    ""
                } else {
                    " (first sync not settled)"
                }
            )?;
            Some(probe)
        }
        None => None,
    };
    daemon.shutdown().await;
    let own = totals(
        &own_counts,
        expected.len() - remaining.len(),
        excluded_present,
        expected.len(),
        own_elapsed,
    );
    writeln!(
        out,
        "daemon: {} after {:.1}s ({}/{} expected, {} excluded held)",
        if own.exact {
            "converged"
        } else {
            "NOT converged"
        },
        own_elapsed.as_secs_f64(),
        own.expected_present,
        expected.len(),
        excluded_present
    )?;
    out.flush()?;

    // A reconciliation of the complete store: the daemon again, over the same store.
    let mut reconcile = if let Some((settled, first, bytes)) = &full_sync {
        let mut report =
            reconcile::run_reconcile(&settings, &network, first, *bytes, options.timeout).await?;
        report.full_sync_settled = *settled;
        report.write_outcome("reconciliation", out)?;
        Some(report)
    } else {
        None
    };

    // The naive baseline on the same network.
    let domain = service_url.host().to_owned();
    let (naive, naive_client, naive_counts) = if options.baseline {
        let marks: Vec<Mark> = network
            .relays
            .iter()
            .map(|r| Mark::of(&r.strict_stats()))
            .collect();
        let path = dir.path().join("naive");
        std::fs::create_dir_all(&path).context("creating the baseline store directory")?;
        let store = LmdbStore::open(&path, StoreConfig::new(service_url.clone(), domain.clone()))
            .await
            .context("opening the baseline store")?;
        let outcome = naive::run_naive(&network.generated, &urls, &store).await?;
        let counts: Vec<RelayCounts> = network
            .relays
            .iter()
            .zip(&marks)
            .map(|(r, m)| counts_since(&r.strict_stats(), m))
            .collect();
        let (present, excluded) = held(&store, &network.generated).await?;
        if let Some(outbox) = &mut outbox {
            outbox.count_naive(&network.generated, &store).await?;
        }
        let totals = totals(
            &counts,
            present,
            excluded,
            expected.len(),
            Duration::from_millis(outcome.wall_ms),
        );
        writeln!(
            out,
            "naive baseline: {} after {:.1}s ({}/{} expected, {} excluded held, {} REQs)",
            if totals.exact {
                "complete"
            } else {
                "INCOMPLETE"
            },
            outcome.wall_ms as f64 / 1000.0,
            present,
            expected.len(),
            excluded,
            totals.req_starts
        )?;
        out.flush()?;
        (Some(totals), Some(outcome), Some(counts))
    } else {
        (None, None, None)
    };
    if let Some(naive) = &naive {
        for report in [&mut reconcile, &mut first_daily, &mut daily]
            .into_iter()
            .flatten()
        {
            report.naive_bytes = Some(naive.bytes());
        }
    }

    // The store's raw ingest rate.
    let raw = if options.raw_ingest {
        let path = dir.path().join("raw");
        std::fs::create_dir_all(&path).context("creating the raw-ingest store directory")?;
        let store = LmdbStore::open(&path, StoreConfig::new(service_url.clone(), domain))
            .await
            .context("opening the raw-ingest store")?;
        let source = RelayUrl::parse(&urls[0]).context("source url")?;
        let raw = raw::raw_ingest(&network.generated, &store, &source).await?;
        writeln!(
            out,
            "raw ingest: {} events in {:.2}s ({:.0}/s)",
            raw.events,
            raw.wall_ms as f64 / 1000.0,
            raw.events_per_sec
        )?;
        Some(raw)
    } else {
        None
    };

    // An idle daemon process on the synced store.
    let idle = match (&options.idle, &options.exe) {
        (Some(idle), Some(exe)) if idle::is_grasp_sync(exe) => {
            let (data_dir, expected) = if options.idle_from_empty {
                (
                    dir.path().join("idle"),
                    Some(network.expected().len() as u64),
                )
            } else {
                (settings.data_dir.clone(), None)
            };
            let setup = idle::IdleSetup {
                exe: exe.clone(),
                data_dir,
                expected,
                service_url: service.clone(),
                bootstrap: urls[0].clone(),
                batch_window: format!("{}ms", options.batch_window.as_millis()),
                // A restart reconciles every relay, paced as the first sync was: it gets the
                // same wait.
                settle_limit: options.timeout,
                idle: *idle,
            };
            let measured = idle::measure_idle(&setup).await?;
            writeln!(
                out,
                "idle daemon ({}): {} repositories tracked, {} events synced, settled {} in {:.1}s, RSS {} MiB ({} MiB anonymous, {} MiB of mapped files)",
                if measured.from_empty {
                    "its own first sync"
                } else {
                    "restarted over the synced store"
                },
                measured.repos_tracked,
                measured.events_synced,
                if measured.settled { "yes" } else { "NO" },
                measured.settled_ms as f64 / 1000.0,
                measured.memory.rss_kib / 1024,
                measured.memory.anon_kib / 1024,
                measured.memory.file_kib / 1024
            )?;
            Some(measured)
        }
        _ => None,
    };
    network.stop().await.context("stopping the network")?;
    drop(dir);

    let relays = relay_rows(
        &network,
        &floors,
        own_counts,
        naive_counts,
        &status,
        &peak_live,
    );
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
        own,
        engine_status: status,
        pacing_bound_ms,
        relays,
        naive,
        naive_client,
        outbox,
        raw,
        reconcile,
        first_daily,
        daily,
        process_memory: measure::own_memory(),
        idle,
        live_probe,
        targets: Vec::new(),
        shards: None,
    };
    report.targets = report::targets(&report);
    write_report(out, &report)?;
    let owners = vec![0; network.relays.len()];
    for line in missing::describe_missing(&network.generated, &remaining, &owners) {
        writeln!(out, "{line}")?;
    }
    Ok(report)
}

/// The settings of a sim daemon syncing into `service_url`'s store (embedded mode; set
/// `own_relay` for external mode).
fn daemon_settings(
    data_dir: PathBuf,
    service_url: &RelayUrl,
    bootstrap: RelayUrl,
    options: &SimOptions,
) -> Settings {
    Settings {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        data_dir,
        service_url: Some(service_url.clone()),
        own_relay: None,
        bootstrap_relays: vec![bootstrap],
        address_policy: AddressPolicy::allow_all(),
        batch_window: options.batch_window,
        backoff_base: Duration::from_secs(1),
        backoff_cap: Duration::from_secs(10),
        metrics_listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        max_future_created_at: grasp_sync_engine::store::DEFAULT_MAX_FUTURE_CREATED_AT,
        lmdb_map_size: None,
        tracking: grasp_sync_model::TrackingBounds::default(),
        max_waiting_roots: grasp_sync_model::DEFAULT_MAX_WAITING_ROOTS,
        max_recovery_ids_per_relay: grasp_sync_engine::RecoveryConfig::default()
            .max_pending_per_relay,
        learned_limits_max_age: grasp_sync_engine::config::DEFAULT_LEARNED_LIMITS_MAX_AGE,
        first_sync_by_req: options.first_sync_by_req,
        live_first_page: options.live_first_page,
        max_rejected_ids: grasp_sync_engine::store::DEFAULT_COLD_CAPACITY,
        relay: crate::RelayLimits::default(),
        git: crate::config::GitSettings::default(),
        auth_key: None,
        participants: grasp_sync_engine::OutboxConfig {
            mailbox_probe_interval: options.mailbox_probe_interval,
            ..grasp_sync_engine::OutboxConfig::default()
        },
    }
}

fn shape(spec: &NetworkSpec, generated: &GeneratedNetwork) -> NetworkShape {
    NetworkShape {
        relays: spec.relays,
        repos: generated.repos.len(),
        accepted_repos: generated.repos.iter().filter(|r| r.accepted()).count(),
        roots: generated.repos.iter().map(|r| r.roots.len()).sum(),
        events: generated.event_count(),
        placements: generated.placement_count(),
        expected: generated.expected.len(),
        excluded: generated.excluded.len(),
    }
}

fn totals(
    counts: &[RelayCounts],
    expected_present: usize,
    excluded_present: usize,
    expected: usize,
    elapsed: Duration,
) -> SideTotals {
    let mut refusals: BTreeMap<String, u64> = BTreeMap::new();
    for relay in counts {
        for (kind, count) in &relay.refusals {
            *refusals.entry(kind.clone()).or_default() += count;
        }
    }
    SideTotals {
        exact: expected_present == expected && excluded_present == 0,
        expected_present,
        excluded_present,
        wall_ms: naive::millis(elapsed),
        req_starts: counts.iter().map(|c| c.req_starts).sum(),
        neg_opens: counts.iter().map(|c| c.neg_opens).sum(),
        refusals,
        events_per_sec: raw::rate(expected_present, elapsed),
        bytes_sent: counts.iter().map(|c| c.bytes_received).sum(),
        bytes_received: counts.iter().map(|c| c.bytes_sent).sum(),
    }
}

/// Expected and excluded events a store holds.
async fn held(store: &LmdbStore, network: &GeneratedNetwork) -> anyhow::Result<(usize, usize)> {
    let database = store.database();
    let count = |ids: &BTreeSet<EventId>| {
        let database = database.clone();
        let ids = ids.clone();
        async move {
            let mut held = 0;
            for id in &ids {
                if database.check_id(id).await? == DatabaseEventStatus::Saved {
                    held += 1;
                }
            }
            anyhow::Ok(held)
        }
    };
    let expected = count(&network.expected).await?;
    let excluded = count(&network.excluded).await?;
    Ok((expected, excluded))
}

/// The engine's status entry for a relay URL.
fn engine_entry<'a>(status: &'a EngineStatus, url: &str) -> Option<(&'a String, &'a RelayStatus)> {
    let want = url.trim_end_matches('/');
    status
        .relays
        .iter()
        .find(|(key, _)| key.trim_end_matches('/') == want)
}

fn relay_rows(
    network: &TestNetwork,
    floors: &[RelayFloor],
    own: Vec<RelayCounts>,
    naive: Option<Vec<RelayCounts>>,
    status: &EngineStatus,
    peak_live: &BTreeMap<String, usize>,
) -> Vec<RelayRow> {
    let mut naive = naive.map(Vec::into_iter);
    let outbox = &network.generated.outbox.relay_indices;
    network
        .relays
        .iter()
        .zip(floors)
        .zip(own)
        .enumerate()
        .map(|(i, ((relay, floor), own))| {
            let url = relay.url();
            let engine = engine_entry(status, &url)
                .map(|(key, r)| EngineCounts {
                    req_starts_live: r.req_starts_live,
                    req_starts_historic: r.req_starts_historic,
                    refusals: r.refusals.clone(),
                    peak_live_subscriptions: peak_live.get(key).copied().unwrap_or(0),
                    extra_connections: r.extra_connections,
                    catch_up_filters: r.catch_up_filters,
                    peak_subscriptions: r.peak_subscriptions,
                    events_received: r.events_received,
                    bytes_sent: r.bytes_sent,
                    bytes_received: r.bytes_received,
                })
                .unwrap_or_default();
            let live = usize::try_from(engine.req_starts_live).unwrap_or(usize::MAX);
            RelayRow {
                profile: relay.config().name.clone(),
                outbox: outbox.contains(&i),
                floor: floor.clone(),
                background_starts: own.starts().saturating_sub(live),
                naive: naive.as_mut().and_then(Iterator::next),
                own,
                engine,
                url,
            }
        })
        .collect()
}
