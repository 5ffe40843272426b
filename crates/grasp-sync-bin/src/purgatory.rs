//! `Promoter`: moves purgatory announcements whose git data arrived into the store. It runs
//! after every successful fetch and every [`PROMOTE_INTERVAL`] (git data may also arrive by a
//! push to the git server), and records the purgatory's gauges.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::LmdbStore;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Gauge, Meter};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How often the purgatory is checked for git data that arrived without a fetch.
pub const PROMOTE_INTERVAL: Duration = Duration::from_secs(5);

/// The running promoter; stops when dropped.
#[derive(Debug)]
pub struct Promoter {
    task: JoinHandle<()>,
}

impl Promoter {
    /// Starts checking `store`'s purgatory when `fetched` is notified and every
    /// [`PROMOTE_INTERVAL`].
    pub fn start(store: LmdbStore, fetched: Arc<Notify>, meter: &Meter) -> Self {
        let gauges = Gauges::new(meter);
        let task = tokio::spawn(async move {
            loop {
                match store.promote_ready().await {
                    Ok(0) => {}
                    Ok(promoted) => tracing::info!(promoted, "purgatory announcements promoted"),
                    Err(error) => {
                        tracing::warn!(%error, "promoting purgatory announcements failed")
                    }
                }
                if let Some(stats) = store.purgatory_stats() {
                    gauges.record(&stats);
                }
                tokio::select! {
                    () = fetched.notified() => {}
                    () = tokio::time::sleep(PROMOTE_INTERVAL) => {}
                }
            }
        });
        Self { task }
    }
}

impl Drop for Promoter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Gauges {
    announcements: Gauge<u64>,
    held_events: Gauge<u64>,
    outcomes: Gauge<u64>,
}

impl Gauges {
    fn new(meter: &Meter) -> Self {
        Self {
            announcements: meter
                .u64_gauge("grasp_sync_purgatory_announcements")
                .with_description("Announcements held in purgatory, by state")
                .build(),
            held_events: meter
                .u64_gauge("grasp_sync_purgatory_held_events")
                .with_description("Events held in purgatory with their announcement")
                .build(),
            outcomes: meter
                .u64_gauge("grasp_sync_purgatory_outcomes")
                .with_description(
                    "Purgatory announcements promoted, expired or refused since start",
                )
                .build(),
        }
    }

    fn record(&self, stats: &grasp_sync_engine::PurgatoryStats) {
        let soft = stats.soft_expired as u64;
        let total = stats.announcements as u64;
        self.announcements
            .record(total - soft.min(total), &[KeyValue::new("state", "active")]);
        self.announcements
            .record(soft, &[KeyValue::new("state", "soft_expired")]);
        self.held_events.record(stats.held_events as u64, &[]);
        for (outcome, value) in [
            ("promoted", stats.promoted),
            ("expired", stats.expired),
            ("refused_full", stats.refused_full),
        ] {
            self.outcomes
                .record(value, &[KeyValue::new("outcome", outcome)]);
        }
    }
}
