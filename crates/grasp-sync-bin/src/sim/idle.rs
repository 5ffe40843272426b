//! The idle daemon: a separate `grasp-sync run` process against the still-running relays. By
//! default it restarts over the sim's data directory and tracks the run's repositories; with
//! `--idle-from-empty` it starts over an empty one and does the first sync itself, so what
//! the sync left behind (buffers, caches, the allocator's state) counts too. Once it has
//! connected and its historic work is done, its resident memory is what an idle daemon of that
//! size costs.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::measure::{Memory, read_memory};
use super::naive::millis;

/// How often the child's status is polled.
const POLL: Duration = Duration::from_millis(500);

/// What the idle daemon measured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IdleDaemon {
    /// Repositories the daemon tracked.
    pub repos_tracked: usize,
    /// Whether it started over an empty data directory and did the first sync itself.
    pub from_empty: bool,
    /// Events it saved by sync when it was read (its `grasp_sync_events_synced_total`).
    pub events_synced: u64,
    /// Time until every relay was connected without historic work pending (and, from an
    /// empty store, the expected events were saved).
    pub settled_ms: u64,
    /// Whether it settled before the wait ended.
    pub settled: bool,
    /// Its memory after settling plus the idle period.
    pub memory: Memory,
}

/// Where and how the idle daemon runs.
#[derive(Debug, Clone)]
pub(super) struct IdleSetup {
    /// The `grasp-sync` executable.
    pub exe: PathBuf,
    /// Its data directory: the sim's daemon's (whose store holds the run's events), or an
    /// empty one.
    pub data_dir: PathBuf,
    /// Over an empty data directory, the events it must have saved by sync before it counts
    /// as settled; `None` over the synced store.
    pub expected: Option<u64>,
    /// The service URL the network's announcements list.
    pub service_url: String,
    /// The bootstrap relay.
    pub bootstrap: String,
    /// Self-feed batch window flag value.
    pub batch_window: String,
    /// Longest wait for it to settle.
    pub settle_limit: Duration,
    /// How long it idles before memory is read.
    pub idle: Duration,
}

/// Starts the child, waits for it to settle and idle, reads its memory, stops it.
pub(super) async fn measure_idle(setup: &IdleSetup) -> anyhow::Result<IdleDaemon> {
    let metrics = free_port().context("picking a metrics port")?;
    let mut child = spawn(setup, metrics)?;
    let outcome = observe(setup, metrics, &child).await;
    // The child is ours; stop it whatever happened.
    let _ = child.kill().await;
    outcome
}

fn spawn(setup: &IdleSetup, metrics: SocketAddr) -> anyhow::Result<Child> {
    Command::new(&setup.exe)
        .arg("run")
        .args(["--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&setup.data_dir)
        .args(["--service-url", &setup.service_url])
        .args(["--bootstrap-relay", &setup.bootstrap])
        .args(["--allow-private-relays", "true"])
        .args(["--batch-window", &setup.batch_window])
        .args(["--metrics-listen", &metrics.to_string()])
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", setup.exe.display()))
}

async fn observe(
    setup: &IdleSetup,
    metrics: SocketAddr,
    child: &Child,
) -> anyhow::Result<IdleDaemon> {
    let pid = child.id().context("the idle daemon exited at once")?;
    let started = Instant::now();
    let mut repos_tracked = 0;
    let mut settled = false;
    while started.elapsed() < setup.settle_limit {
        tokio::time::sleep(POLL).await;
        let Ok(status) = get(metrics, "/status").await else {
            continue;
        };
        let Ok(status) = serde_json::from_str::<Value>(&status) else {
            continue;
        };
        repos_tracked = status["repos_tracked"].as_u64().unwrap_or(0) as usize;
        settled = is_settled(&status) && saved_enough(setup, metrics).await;
        if settled {
            break;
        }
    }
    let settled_ms = millis(started.elapsed());
    tokio::time::sleep(setup.idle).await;
    Ok(IdleDaemon {
        repos_tracked,
        from_empty: setup.expected.is_some(),
        events_synced: events_synced(metrics).await.unwrap_or(0),
        settled_ms,
        settled,
        memory: read_memory(&pid.to_string()),
    })
}

/// Whether the daemon saved the events `setup` expects (always, over the synced store).
async fn saved_enough(setup: &IdleSetup, metrics: SocketAddr) -> bool {
    match setup.expected {
        None => true,
        Some(expected) => events_synced(metrics)
            .await
            .is_ok_and(|synced| synced >= expected),
    }
}

/// The daemon's `grasp_sync_events_synced_total`.
async fn events_synced(metrics: SocketAddr) -> anyhow::Result<u64> {
    counter_total(
        &get(metrics, "/metrics").await?,
        "grasp_sync_events_synced_total",
    )
}

/// The samples of the counter `name` in a Prometheus text exposition, summed over their label
/// sets (0 if it has none).
fn counter_total(exposition: &str, name: &str) -> anyhow::Result<u64> {
    let mut total = 0;
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        let value = rest
            .rsplit(' ')
            .next()
            .context("a sample without a value")?;
        total += value
            .parse::<f64>()
            .with_context(|| format!("the value of {line:?}"))? as u64;
    }
    Ok(total)
}

/// Whether a `/status` document shows repositories tracked and every relay connected with no
/// historic batch pending.
pub(super) fn is_settled(status: &Value) -> bool {
    let tracked = status["repos_tracked"].as_u64().unwrap_or(0);
    let Some(relays) = status["relays"].as_object() else {
        return false;
    };
    tracked > 0
        && !relays.is_empty()
        && relays.values().all(|r| {
            r["connection"]
                .as_str()
                .is_some_and(|c| c.starts_with("connected"))
                && r["pending_batches"].as_u64() == Some(0)
        })
}

/// The body of `GET path` over a plain HTTP/1.0 connection.
async fn get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .context("no body")?;
    Ok(body.to_owned())
}

/// A port free right now on 127.0.0.1.
fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?.local_addr()
}

/// Whether `path` is this crate's `grasp-sync` executable (tests run another binary).
pub(super) fn is_grasp_sync(path: &Path) -> bool {
    path.file_stem().is_some_and(|stem| stem == "grasp-sync")
}

#[cfg(test)]
mod tests;
