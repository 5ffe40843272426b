//! `--reconcile`: what reconciling an already complete store costs. Once the daemon converged
//! and stopped, a second daemon starts over the same data directory; with a store that holds
//! everything, every relay's history goes by NIP-77 (one round over `{}` against the relay's
//! kept holdings where the first daemon kept them, else named rounds, plus the restart's new
//! live REQs). The relays count its bytes and the events they send
//! until it has confirmed, on every relay the first daemon had synced, at least the coverage
//! the first daemon confirmed there. The first daemon runs on past convergence until it has
//! settled (nothing left to start or confirm), so both sides cover the same work.
//!
//! Two full REQ syncs of the same coverage are compared with it: the first sync of the same
//! daemon over the empty store (`first_sync_by_req`, the default, fetches coverage the store
//! holds nothing of by REQ+EOSE; NIP-77 only where the store already holds some of it, and for
//! the probe of each relay's NIP-77 support), and the naive client's, where the baseline ran.
//! The target is checked against the cheaper of the two.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use grasp_sync_engine::{EngineStatus, RelayStatus};
use grasp_sync_testkit::TestNetwork;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::measure::{Mark, RelayCounts, counts_since};
use super::{SAMPLE_INTERVAL, engine_entry};
use crate::config::Settings;
use crate::daemon::Daemon;

/// What reconciling the complete store cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReconcileReport {
    /// Whether the second daemon confirmed the first one's coverage on every relay in time.
    pub settled: bool,
    /// From its start until it settled (or gave up).
    pub wall_ms: u64,
    /// Bytes the daemon sent the relays (text frames, relay-side count).
    pub bytes_sent: u64,
    /// Bytes the relays sent the daemon.
    pub bytes_received: u64,
    /// Of the bytes sent, by message verb.
    pub sent_by_verb: BTreeMap<String, u64>,
    /// Of the bytes received, by message verb.
    pub received_by_verb: BTreeMap<String, u64>,
    /// EVENT messages the relays sent: events downloaded again.
    pub events_downloaded: u64,
    /// Events the store newly saved (0 over a complete store).
    pub events_saved: u64,
    /// REQs and NEG-OPENs the relays received.
    pub req_starts: usize,
    /// NEG-OPENs of those.
    pub neg_opens: usize,
    /// Bytes of the daemon's first sync over the empty store, both ways, until it settled
    /// (convergence, then its last batches).
    pub full_sync_bytes: u64,
    /// Whether the first sync settled before it was stopped.
    pub full_sync_settled: bool,
    /// Bytes of the naive client's full sync, both ways, if it ran.
    pub naive_bytes: Option<u64>,
}

impl ReconcileReport {
    /// Bytes of the reconciliation, both ways.
    pub fn bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_received
    }

    /// The reconciliation's bytes over the first sync's.
    pub fn ratio(&self) -> Option<f64> {
        share(self.bytes(), self.full_sync_bytes)
    }

    /// The reconciliation's bytes over the naive client's.
    pub fn naive_ratio(&self) -> Option<f64> {
        share(self.bytes(), self.naive_bytes?)
    }

    /// The reconciliation's bytes over the cheaper of the two full syncs measured (the first
    /// sync, and the naive client's where it ran): the comparison the target is checked by.
    pub fn worst_ratio(&self) -> Option<f64> {
        match (self.ratio(), self.naive_ratio()) {
            (Some(own), Some(naive)) => Some(own.max(naive)),
            (own, naive) => own.or(naive),
        }
    }

    /// Writes `label: settled after N s` (or `NOT settled`), the line the run prints as soon
    /// as the reconciliation ends.
    pub(super) fn write_outcome(
        &self,
        label: &str,
        out: &mut (dyn Write + Send),
    ) -> std::io::Result<()> {
        writeln!(
            out,
            "{label}: {} after {:.1}s",
            if self.settled {
                "settled"
            } else {
                "NOT settled"
            },
            self.wall_ms as f64 / 1000.0
        )?;
        out.flush()
    }

    /// Writes the figures under `label` (which reconciliation they are).
    pub fn write(&self, label: &str, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
        let percent =
            |ratio: Option<f64>| ratio.map_or("-".to_owned(), |r| format!("{:.2} %", r * 100.0));
        writeln!(
            out,
            "{label}: {} after {:.1}s; {} bytes ({} sent, {} received), {} events downloaded again, {} saved, {} REQ and {} NEG-OPEN",
            if self.settled {
                "settled"
            } else {
                "NOT settled"
            },
            self.wall_ms as f64 / 1000.0,
            self.bytes(),
            self.bytes_sent,
            self.bytes_received,
            self.events_downloaded,
            self.events_saved,
            self.req_starts - self.neg_opens,
            self.neg_opens,
        )?;
        writeln!(
            out,
            "  against the first sync's {} bytes{}: {}; against the naive client's {}: {}",
            self.full_sync_bytes,
            if self.full_sync_settled {
                ""
            } else {
                " (NOT settled)"
            },
            percent(self.ratio()),
            self.naive_bytes.map_or("-".to_owned(), |b| b.to_string()),
            percent(self.naive_ratio()),
        )?;
        let verbs = |counts: &BTreeMap<String, u64>| {
            counts
                .iter()
                .map(|(verb, bytes)| format!("{verb} {bytes}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(out, "  sent by verb: {}", verbs(&self.sent_by_verb))?;
        writeln!(out, "  received by verb: {}", verbs(&self.received_by_verb))
    }
}

/// Starts a daemon with `settings` over the store the first daemon left, and waits (at most
/// `timeout`) until it confirmed `first`'s coverage on every relay `first` had synced;
/// `full_sync_bytes` is what the first sync moved, both ways, until it settled.
pub(super) async fn run_reconcile(
    settings: &Settings,
    network: &TestNetwork,
    first: &EngineStatus,
    full_sync_bytes: u64,
    timeout: Duration,
) -> anyhow::Result<ReconcileReport> {
    let marks = mark(network);
    let listener = TcpListener::bind(settings.listen)
        .await
        .context("binding the reconciling daemon's relay")?;
    let started = Instant::now();
    let daemon = Daemon::start_on(settings, listener).await?;
    let (settled, status) = wait_covered(&daemon, first, 0, started + timeout).await;
    let measured = Measured {
        settled,
        started,
        events_saved: events_saved(&status),
        full_sync_bytes,
    };
    let report = measured.report(network, &marks);
    daemon.shutdown().await;
    Ok(report)
}

/// Asks `daemon`, settled after its first sync (`first` its status then), for the daily
/// reconciliation now, on the connections that are up, and waits (at most `timeout`) until
/// every relay `first` had synced ran it and confirmed `first`'s coverage again.
pub(super) async fn run_daily(
    daemon: &Daemon,
    network: &TestNetwork,
    first: &EngineStatus,
    full_sync_bytes: u64,
    timeout: Duration,
) -> anyhow::Result<ReconcileReport> {
    let marks = mark(network);
    let before = daemon.status().await.unwrap_or_else(|| first.clone());
    let started = Instant::now();
    daemon
        .reconcile_now()
        .await
        .context("the daemon's engine stopped before the daily reconciliation")?;
    let daily = before
        .relays
        .values()
        .map(|r| r.daily_reconciliations)
        .max()
        .unwrap_or(0)
        + 1;
    let (settled, status) = wait_covered(daemon, first, daily, started + timeout).await;
    let measured = Measured {
        settled,
        started,
        events_saved: events_saved(&status).saturating_sub(events_saved(&before)),
        full_sync_bytes,
    };
    Ok(measured.report(network, &marks))
}

/// What a reconciliation's run saw besides the relays' counters.
struct Measured {
    settled: bool,
    started: Instant,
    events_saved: u64,
    full_sync_bytes: u64,
}

impl Measured {
    /// The report: the relays' counters since `marks`, the wall time until now, and these.
    fn report(self, network: &TestNetwork, marks: &[Mark]) -> ReconcileReport {
        let wall_ms = super::naive::millis(self.started.elapsed());
        ReconcileReport {
            settled: self.settled,
            wall_ms,
            events_saved: self.events_saved,
            full_sync_bytes: self.full_sync_bytes,
            ..report_since(network, marks)
        }
    }
}

/// Every relay's counters now.
fn mark(network: &TestNetwork) -> Vec<Mark> {
    network
        .relays
        .iter()
        .map(|r| Mark::of(&r.strict_stats()))
        .collect()
}

/// What the relays counted since `marks`, seen from the daemon's side.
fn report_since(network: &TestNetwork, marks: &[Mark]) -> ReconcileReport {
    let mut report = ReconcileReport::default();
    for (relay, mark) in network.relays.iter().zip(marks) {
        let counts: RelayCounts = counts_since(&relay.strict_stats(), mark);
        report.bytes_sent += counts.bytes_received;
        report.bytes_received += counts.bytes_sent;
        report.events_downloaded += counts.events_sent;
        report.req_starts += counts.starts();
        report.neg_opens += counts.neg_opens;
        for (verb, bytes) in &counts.received_by_verb {
            *report.sent_by_verb.entry(verb.clone()).or_insert(0) += bytes;
        }
        for (verb, bytes) in &counts.sent_by_verb {
            *report.received_by_verb.entry(verb.clone()).or_insert(0) += bytes;
        }
    }
    report
}

fn events_saved(status: &EngineStatus) -> u64 {
    status.relays.values().map(|r| r.events_saved).sum()
}

/// Polls `daemon` until [`covers`] holds with at least `daily` daily reconciliations on each
/// relay `first` had synced, or until `deadline`; whether it did, and the status then.
async fn wait_covered(
    daemon: &Daemon,
    first: &EngineStatus,
    daily: u64,
    deadline: Instant,
) -> (bool, EngineStatus) {
    let mut status = EngineStatus::default();
    loop {
        status = daemon.status().await.unwrap_or(status);
        if covers(&status, first, daily) {
            return (true, status);
        }
        if Instant::now() >= deadline {
            return (false, status);
        }
        tokio::time::sleep(SAMPLE_INTERVAL).await;
    }
}

/// Waits until `daemon` has nothing left to start or confirm on any relay it is connected
/// to, or until `deadline`; returns whether it settled, and its status then.
pub(super) async fn wait_settled(daemon: &Daemon, deadline: Instant) -> (bool, EngineStatus) {
    let mut status = EngineStatus::default();
    loop {
        status = daemon.status().await.unwrap_or(status);
        let mut connected = status
            .relays
            .values()
            .filter(|r| !matches!(r.connection.as_str(), "disconnected" | "connecting"))
            .peekable();
        let any = connected.peek().is_some();
        if any && connected.all(settled) {
            return (true, status);
        }
        if Instant::now() >= deadline {
            return (false, status);
        }
        tokio::time::sleep(SAMPLE_INTERVAL).await;
    }
}

/// Whether `now` has confirmed, on every relay `first` had synced (settled with a confirmed
/// repository), at least the repositories and root events `first` confirmed there, with
/// nothing left to start or confirm, after at least `daily` daily reconciliations there.
fn covers(now: &EngineStatus, first: &EngineStatus, daily: u64) -> bool {
    let mut synced = first
        .relays
        .iter()
        .filter(|(_, relay)| settled(relay) && relay.confirmed_repos > 0)
        .peekable();
    synced.peek().is_some()
        && synced.all(|(url, before)| {
            engine_entry(now, url).is_some_and(|(_, relay)| {
                settled(relay)
                    && relay.daily_reconciliations >= daily
                    && relay.confirmed_repos >= before.confirmed_repos
                    && relay.confirmed_root_events >= before.confirmed_root_events
            })
        })
}

/// Connected with its historic sync over and nothing queued.
fn settled(relay: &RelayStatus) -> bool {
    relay.connection.starts_with("connected")
        && relay.pending_batches == 0
        && relay.queued_starts == 0
}

fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[cfg(test)]
mod tests;
