//! `grasp-sync demo`: the real daemon in embedded mode on a temporary directory, fed by a
//! small local network of relays seeded with generated NIP-34 data, with a progress line while
//! it syncs (on a terminal) and a summary that checks the store holds exactly the expected events.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{AddressPolicy, EngineStatus};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{NetworkSpec, TestNetwork, TestRelayConfig};
use nostr::EventId;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::cli::DemoArgs;
use crate::config::{Settings, parse_duration};
use crate::daemon::Daemon;
use crate::progress::{ProgressLine, SyncProgress};

/// How often the store is checked and progress shown.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// The demo's knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    /// Seed of the generated network.
    pub seed: u64,
    /// Repository announcements.
    pub repos: usize,
    /// Relays.
    pub relays: usize,
    /// Fail if not converged by then.
    pub timeout: Duration,
    /// Show a progress line (for an output that is a terminal).
    pub progress: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            seed: 7,
            repos: 6,
            relays: 3,
            timeout: Duration::from_secs(120),
            progress: false,
        }
    }
}

impl TryFrom<&DemoArgs> for DemoOptions {
    type Error = anyhow::Error;

    fn try_from(args: &DemoArgs) -> anyhow::Result<Self> {
        anyhow::ensure!(args.relays >= 1, "--relays must be at least 1");
        let timeout = parse_duration(&args.timeout)
            .map_err(|reason| anyhow::anyhow!("--timeout: {reason}"))?;
        Ok(DemoOptions {
            seed: args.seed,
            repos: args.repos,
            relays: args.relays,
            timeout,
            progress: false,
        })
    }
}

/// What the demo found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoSummary {
    /// Events a correct sync stores.
    pub expected: usize,
    /// Of those, stored.
    pub expected_present: usize,
    /// Events on the network a correct sync does not store.
    pub excluded: usize,
    /// Of those, stored (must be 0).
    pub excluded_present: usize,
    /// Time from the daemon's start to the end of the wait.
    pub elapsed: Duration,
    /// The engine's last status.
    pub status: EngineStatus,
}

impl DemoSummary {
    /// Whether the store holds exactly the expected events.
    pub fn passed(&self) -> bool {
        self.expected_present == self.expected && self.excluded_present == 0
    }
}

/// Runs the demo, writing progress and the summary to `out`.
pub async fn run_demo(
    options: &DemoOptions,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<DemoSummary> {
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .context("binding the service relay")?;
    let service = format!("ws://{}", listener.local_addr().context("service address")?);

    let spec = NetworkSpec {
        relays: options.relays,
        repos: options.repos,
        relays_per_repo: options.relays.min(2),
        ..NetworkSpec::small(options.seed, service.clone())
    };
    // The relays advertise the filters per REQ they take, as the rust-nostr relay builder's
    // NIP-11 document does (20).
    let relay = TestRelayConfig {
        max_filters: Some(20),
        ..TestRelayConfig::default()
    };
    let mut network = TestNetwork::start(&spec, &[relay])
        .await
        .context("starting the local relay network")?;
    let urls = network.urls();
    writeln!(
        out,
        "grasp-sync demo: {} relays, {} repositories, {} events on the network ({} expected in the store)",
        urls.len(),
        spec.repos,
        network.generated.event_count(),
        network.expected().len()
    )?;
    for (i, url) in urls.iter().enumerate() {
        let role = if i == 0 { " (bootstrap)" } else { "" };
        writeln!(out, "  network relay {url}{role}")?;
    }
    writeln!(
        out,
        "  service relay {service} (embedded, data in a temporary directory)"
    )?;

    let settings = Settings {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        data_dir: dir.path().to_path_buf(),
        service_url: Some(RelayUrl::parse(&service).context("service url")?),
        own_relay: None,
        bootstrap_relays: vec![RelayUrl::parse(&urls[0]).context("bootstrap url")?],
        address_policy: AddressPolicy::allow_all(),
        batch_window: Duration::from_secs(1),
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
        first_sync_by_req: grasp_sync_engine::EngineConfig::default().first_sync_by_req,
        live_first_page: grasp_sync_engine::EngineConfig::default().live_first_page,
        max_rejected_ids: grasp_sync_engine::store::DEFAULT_COLD_CAPACITY,
        relay: crate::RelayLimits::default(),
        git: crate::config::GitSettings::default(),
        auth_key: None,
        participants: grasp_sync_engine::OutboxConfig::default(),
    };
    let started = Instant::now();
    let daemon = Daemon::start_on(&settings, listener).await?;
    writeln!(
        out,
        "  status page http://{0}/, metrics http://{0}/metrics, status http://{0}/status",
        daemon.metrics_addr()
    )?;

    let expected = network.expected().clone();
    let excluded = network.generated.excluded.clone();
    let deadline = started + options.timeout;
    let mut expected_present;
    let mut line = ProgressLine::new(options.progress);
    loop {
        expected_present = count_held(&daemon, &expected).await?;
        let status = daemon.status().await.unwrap_or_default();
        let progress = SyncProgress::of(
            &status,
            expected_present as u64,
            Some(expected.len() as u64),
            started.elapsed(),
        );
        line.show(out, &progress)?;
        if expected_present == expected.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(PROGRESS_INTERVAL).await;
    }
    line.finish(out)?;
    let elapsed = started.elapsed();
    let excluded_present = count_held(&daemon, &excluded).await?;
    let status = daemon.status().await.unwrap_or_default();
    let summary = DemoSummary {
        expected: expected.len(),
        expected_present,
        excluded: excluded.len(),
        excluded_present,
        elapsed,
        status,
    };
    daemon.shutdown().await;
    network.stop().await.context("stopping the network")?;
    write_summary(out, &summary)?;
    Ok(summary)
}

async fn count_held(daemon: &Daemon, ids: &BTreeSet<EventId>) -> anyhow::Result<usize> {
    let mut held = 0;
    for id in ids {
        if daemon.holds(id).await? {
            held += 1;
        }
    }
    Ok(held)
}

fn write_summary(out: &mut (dyn Write + Send), summary: &DemoSummary) -> std::io::Result<()> {
    let verdict = if summary.passed() { "PASS" } else { "FAIL" };
    writeln!(
        out,
        "summary: {verdict} after {:.1}s",
        summary.elapsed.as_secs_f64()
    )?;
    writeln!(
        out,
        "  expected events stored: {}/{}",
        summary.expected_present, summary.expected
    )?;
    writeln!(
        out,
        "  excluded events stored: {}/{} (must be 0)",
        summary.excluded_present, summary.excluded
    )?;
    writeln!(
        out,
        "  relays tracked: {}, REQs sent: {}, refusals: {}",
        summary.status.relays.len(),
        summary.status.total_req_starts(),
        summary.status.total_refusals()
    )?;
    out.flush()
}
