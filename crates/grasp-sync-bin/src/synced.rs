//! [`SyncedEvents`]: what the daemon does with the events sync newly saved. It counts them on
//! `grasp_sync_events_synced_total` (the engine defines the counter and leaves adding to its
//! hook), and in embedded mode pushes each to the embedded relay's matching open
//! subscriptions, as if a client had published it: sync writes straight into the store, which
//! the relay does not watch. With a [`GitFollower`], each burst's state events, stored or held
//! in purgatory, also go to the git fetcher and the operator's hook.

use async_trait::async_trait;
use grasp_sync_engine::{SyncMetrics, SyncedEventHook};
use nostr::Event;
use nostr_relay_builder::LocalRelay;
use opentelemetry::metrics::Meter;

use crate::follow::GitFollower;

/// The engine's synced-event hook in the daemon.
#[derive(Debug, Clone)]
pub struct SyncedEvents {
    metrics: SyncMetrics,
    live: Option<LocalRelay>,
    follower: Option<GitFollower>,
}

impl SyncedEvents {
    /// Counts on `meter` (the same instruments the engine records on) and, with `live`, pushes
    /// each event to that relay's subscribers.
    pub fn new(meter: &Meter, live: Option<LocalRelay>) -> Self {
        Self {
            metrics: SyncMetrics::new(meter),
            live,
            follower: None,
        }
    }

    /// Also hands each burst's state events to `follower`.
    pub fn with_follower(mut self, follower: Option<GitFollower>) -> Self {
        self.follower = follower;
        self
    }
}

#[async_trait]
impl SyncedEventHook for SyncedEvents {
    async fn burst_synced(&self, saved: Vec<Event>, deferred: Vec<Event>) {
        if let Some(follower) = &self.follower {
            follower.handle_burst(saved.iter().chain(deferred.iter()));
        }
        if !saved.is_empty() {
            self.events_synced(saved).await;
        }
    }

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
