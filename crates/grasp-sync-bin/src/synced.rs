//! [`SyncedEvents`]: what the daemon does with the events sync newly saved. It counts them on
//! `grasp_sync_events_synced_total` (the engine defines the counter and leaves adding to its
//! hook), and in embedded mode pushes each to the embedded relay's matching open
//! subscriptions, as if a client had published it: sync writes straight into the store, which
//! the relay does not watch.

use async_trait::async_trait;
use grasp_sync_engine::{SyncMetrics, SyncedEventHook};
use nostr::Event;
use nostr_relay_builder::LocalRelay;
use opentelemetry::metrics::Meter;

/// The engine's synced-event hook in the daemon.
#[derive(Debug, Clone)]
pub struct SyncedEvents {
    metrics: SyncMetrics,
    live: Option<LocalRelay>,
}

impl SyncedEvents {
    /// Counts on `meter` (the same instruments the engine records on) and, with `live`, pushes
    /// each event to that relay's subscribers.
    pub fn new(meter: &Meter, live: Option<LocalRelay>) -> Self {
        Self {
            metrics: SyncMetrics::new(meter),
            live,
        }
    }
}

#[async_trait]
impl SyncedEventHook for SyncedEvents {
    async fn events_synced(&self, events: Vec<Event>) {
        self.metrics.record_synced(events.len() as u64);
        if let Some(relay) = &self.live {
            for event in events {
                // The relay matches each event against its open subscriptions; false only
                // once it has shut down.
                if !relay.notify_event(event) {
                    break;
                }
            }
        }
    }
}
