//! [`StatusHistory`]: a bounded in-memory record of the engine's counters over time, sampled
//! from its [`EngineStatus`] every [`SAMPLE_INTERVAL`], for the status page's plots: the last
//! hour at that interval and the last day at [`DAY_INTERVAL`]. Nothing is kept on disk; a
//! restart starts an empty history.
//!
//! Per relay, a sample keeps the REQ starts so far and the relay's lag: historic batches in
//! flight plus starts waiting for a slot or a gate, the historic work it still owes. An hour
//! sample keeps at most [`MAX_SAMPLED_RELAYS`] relays and a day sample [`MAX_DAY_RELAYS`],
//! those with the most lag, so the history stays small whatever `max_tracked_relays` is.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::endpoints::{EngineSlot, engine_status};

/// How often the engine is sampled.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
/// Samples kept at [`SAMPLE_INTERVAL`]: one hour.
pub(crate) const HOUR_SAMPLES: usize = 360;
/// How often a sample is also kept for the day view.
pub(crate) const DAY_INTERVAL: Duration = Duration::from_secs(300);
/// Samples kept at [`DAY_INTERVAL`]: one day.
pub(crate) const DAY_SAMPLES: usize = 288;
/// Relays one hour sample keeps: those with the most lag, then the most starts.
pub(crate) const MAX_SAMPLED_RELAYS: usize = 1024;
/// Relays one day sample keeps: the ones with the most lag (the day plots only draw lag per
/// relay).
pub(crate) const MAX_DAY_RELAYS: usize = 8;

/// The engine's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Time since the daemon started.
    pub(crate) at: Duration,
    /// Events newly saved by sync so far, over every relay.
    pub(crate) events_stored: u64,
    /// REQ starts so far, over every relay.
    pub(crate) starts: u64,
    /// Refusals so far, over every relay.
    pub(crate) refusals: u64,
    /// Per relay, by normalised URL.
    pub(crate) relays: BTreeMap<Arc<str>, RelaySample>,
}

/// One relay's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RelaySample {
    /// REQ starts so far.
    pub(crate) starts: u64,
    /// Historic batches in flight plus starts waiting.
    pub(crate) lag: u64,
}

impl Sample {
    /// The counters of `status`, taken `at` after the start.
    pub(crate) fn of(status: &EngineStatus, at: Duration) -> Sample {
        Sample::sharing(status, at, None)
    }

    /// Like [`Sample::of`], with each relay URL shared with `previous` where it has it, so the
    /// history holds each URL once rather than once per sample.
    fn sharing(status: &EngineStatus, at: Duration, previous: Option<&Sample>) -> Sample {
        let url_of = |url: &str| {
            previous
                .and_then(|p| p.relays.get_key_value(url))
                .map_or_else(|| Arc::from(url), |(shared, _)| Arc::clone(shared))
        };
        let mut relays = status
            .relays
            .iter()
            .map(|(url, relay)| (url_of(url), relay_sample(relay)))
            .collect();
        keep_most_lag(&mut relays, MAX_SAMPLED_RELAYS);
        Sample {
            at,
            events_stored: status.relays.values().map(|r| r.events_saved).sum(),
            starts: status.total_req_starts(),
            refusals: status.total_refusals(),
            relays,
        }
    }
}

/// A relay's lag as the history counts it.
pub(crate) fn relay_lag(relay: &RelayStatus) -> u64 {
    (relay.pending_batches + relay.queued_starts) as u64
}

/// Keeps the `cap` relays with the most lag, then the most starts, then the first URLs.
fn keep_most_lag(relays: &mut BTreeMap<Arc<str>, RelaySample>, cap: usize) {
    if relays.len() <= cap {
        return;
    }
    let mut ranked: Vec<(Arc<str>, RelaySample)> = std::mem::take(relays).into_iter().collect();
    ranked.sort_by(|a, b| {
        (b.1.lag, b.1.starts)
            .cmp(&(a.1.lag, a.1.starts))
            .then_with(|| a.0.cmp(&b.0))
    });
    ranked.truncate(cap);
    *relays = ranked.into_iter().collect();
}

fn relay_sample(relay: &RelayStatus) -> RelaySample {
    RelaySample {
        starts: relay.req_starts_live + relay.req_starts_historic,
        lag: relay_lag(relay),
    }
}

/// The last hour and the last day of samples, each bounded.
#[derive(Debug, Default)]
pub(crate) struct StatusHistory {
    hour: VecDeque<Sample>,
    day: VecDeque<Sample>,
}

impl StatusHistory {
    /// Records `sample`: always in the hour, and in the day once [`DAY_INTERVAL`] passed since
    /// the day's last one (the first sample starts both).
    pub(crate) fn handle_sample(&mut self, sample: Sample) {
        let due = self
            .day
            .back()
            .is_none_or(|last| sample.at >= last.at + DAY_INTERVAL);
        if due {
            let mut day = sample.clone();
            keep_most_lag(&mut day.relays, MAX_DAY_RELAYS);
            push_bounded(&mut self.day, day, DAY_SAMPLES);
        }
        push_bounded(&mut self.hour, sample, HOUR_SAMPLES);
    }

    /// The hour's samples, oldest first.
    pub(crate) fn hour(&self) -> impl Iterator<Item = &Sample> {
        self.hour.iter()
    }

    /// The day's samples, oldest first.
    pub(crate) fn day(&self) -> impl Iterator<Item = &Sample> {
        self.day.iter()
    }
}

fn push_bounded(ring: &mut VecDeque<Sample>, sample: Sample, cap: usize) {
    if ring.len() == cap {
        ring.pop_front();
    }
    ring.push_back(sample);
}

/// The history shared by the sampler and the endpoints, with the daemon's start.
#[derive(Debug, Clone)]
pub(crate) struct SharedHistory {
    history: Arc<Mutex<StatusHistory>>,
    started: Instant,
}

impl SharedHistory {
    /// An empty history of a daemon starting now.
    pub(crate) fn new() -> SharedHistory {
        SharedHistory {
            history: Arc::default(),
            started: Instant::now(),
        }
    }

    /// Time since the daemon started.
    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Records `status` as a sample taken now.
    pub(crate) fn handle_status(&self, status: &EngineStatus) {
        let at = self.uptime();
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let sample = Sample::sharing(status, at, history.hour.back());
        history.handle_sample(sample);
    }

    /// Runs `read` on the history; no await may happen inside.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&StatusHistory) -> T) -> T {
        read(&self.history.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Samples the engine in `slot` now and then every [`SAMPLE_INTERVAL`], until aborted
    /// (an empty slot is skipped).
    pub(crate) fn spawn_sampler(&self, slot: EngineSlot) -> JoinHandle<()> {
        let history = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let status = engine_status(&slot).await;
                if let Some(status) = status {
                    history.handle_status(&status);
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
