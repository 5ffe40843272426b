//! The actor's status snapshot and periodic metrics.

use std::collections::BTreeMap;
use std::time::Instant;

use grasp_sync_ledger::PermitClass;
use grasp_sync_model::ConnectionStatus;

use super::Actor;
use crate::negentropy::Nip77State;
use crate::status::{EngineStatus, RelayNip77Status, RelayStatus};

impl Actor {
    /// A snapshot of every relay.
    pub(super) fn status(&self) -> EngineStatus {
        let now = self.now();
        let mut relays = BTreeMap::new();
        for (url, runtime) in &self.runtimes {
            let state = self.relays.get(url);
            let totals = self.ingestor.totals(url);
            let mut ledger_use = BTreeMap::new();
            let mut budget = 0;
            if let (Some(ledger), Some(_)) = (
                runtime.machine.ledger.as_ref(),
                runtime.machine.session.as_ref(),
            ) {
                budget = ledger.budget().slots();
                let counts = ledger.counts();
                for class in PermitClass::ALL {
                    let held = counts.get(class);
                    if held > 0 {
                        ledger_use.insert(class.as_str().to_owned(), held);
                    }
                }
            }
            let health = runtime.machine.health.snapshot(now);
            let wire = runtime.wire_bytes();
            relays.insert(
                url.to_string(),
                RelayStatus {
                    connection: connection_name(
                        state.map_or(ConnectionStatus::Disconnected, |s| s.connection_status),
                    )
                    .to_owned(),
                    health: format!("{:?}", health.state).to_lowercase(),
                    consecutive_failures: health.consecutive_failures,
                    bootstrap: runtime.machine.health.is_bootstrap(),
                    subscription_budget: budget,
                    live_subscriptions: runtime
                        .machine
                        .session
                        .as_ref()
                        .map_or(0, |s| s.live.len()),
                    auxiliary_subscriptions: runtime
                        .machine
                        .session
                        .as_ref()
                        .map_or(0, |s| s.live.len() - s.core_live()),
                    extra_connections: runtime.machine.lanes.connected(),
                    extra_live_subscriptions: runtime.machine.lanes.live_groups(),
                    transient_subscriptions: runtime
                        .machine
                        .session
                        .as_ref()
                        .map_or(0, |s| s.transients.len()),
                    negentropy_rounds: runtime
                        .machine
                        .session
                        .as_ref()
                        .map_or(0, |s| s.neg_in_flight.len()),
                    queued_starts: runtime.machine.session.as_ref().map_or(0, |s| {
                        s.queue.len() + s.neg_queue.len() + s.live_queue.len()
                    }),
                    peak_subscriptions: runtime.machine.stats.peak_subscriptions,
                    ledger: ledger_use,
                    pending_batches: self.pending.batches(url).len(),
                    confirmed_repos: state.map_or(0, |s| s.repos.len()),
                    confirmed_root_events: state.map_or(0, |s| s.root_events.len()),
                    req_starts_live: runtime.machine.stats.req_starts_live,
                    req_starts_historic: runtime.machine.stats.req_starts_historic,
                    events_received: runtime.machine.stats.events_received,
                    bytes_sent: wire.sent,
                    bytes_received: wire.received,
                    events_saved: totals.saved,
                    events_duplicate: totals.duplicate,
                    events_rejected: totals.rejected,
                    events_unsaved: totals.failed,
                    history_unsaved: runtime.machine.stats.history_unsaved,
                    refusals: runtime
                        .machine
                        .stats
                        .refusals
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), *v))
                        .collect(),
                    stale_refusals: runtime.machine.stats.stale_refusals,
                    connections: runtime.machine.stats.connections,
                    quick_reconnects: runtime.machine.stats.quick_reconnects,
                    long_reconnects: runtime.machine.stats.long_reconnects,
                    daily_reconciliations: runtime.machine.stats.daily_reconciliations,
                    consolidations: runtime.machine.stats.consolidations,
                    paused_filters: runtime.machine.refused.paused_filters(),
                    auth: runtime
                        .machine
                        .session
                        .as_ref()
                        .map(|s| s.auth.state().label().to_owned())
                        .unwrap_or_default(),
                    catch_up_filters: runtime.machine.catch_up.len(),
                    catch_ups: runtime.machine.stats.catch_ups,
                    history_truncated: runtime.machine.stats.history_truncated,
                    quirks: runtime
                        .machine
                        .stats
                        .quirks
                        .iter()
                        .map(|q| (*q).to_owned())
                        .collect(),
                    last_error: runtime.machine.stats.last_error.clone(),
                },
            );
        }
        let negentropy = self.negentropy_status();
        EngineStatus {
            negentropy,
            address_refusals: self.address_refusals.counts(),
            tracking: crate::status::TrackingStatus {
                max_tracked_relays: self.config.tracking.max_relays,
                max_relay_hosts_per_author: self.config.tracking.max_hosts_per_author,
                relays_over_cap: self.tracking_report.relays_over_cap,
                author_relays_dropped: self.tracking_report.author_relays_dropped,
                shard: self.config.tracking.shard.to_string(),
                other_shards: self.tracking_report.relays_other_shards,
                max_waiting_roots: self.repos.max_waiting_roots(),
                waiting_roots: self.repos.waiting_roots_len(),
                waiting_roots_dropped: self.repos.waiting_roots_dropped(),
                max_recovery_ids_per_relay: self.config.recovery.max_pending_per_relay,
            },
            participants: self.participant_status(),
            rejected_index: self.ingestor.store().rejected_usage(),
            purgatory: self.purgatory.status(),
            repos_tracked: self.repos.len(),
            root_events_tracked: self.repos.iter().map(|(_, n)| n.root_events.len()).sum(),
            relays,
        }
    }

    /// Records the periodic gauges.
    pub(super) fn record_metrics(&mut self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let now = self.now();
        let mut connected = 0;
        let mut dead = 0;
        let mut per_class: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut readings = std::collections::BTreeMap::new();
        for (url, runtime) in &self.runtimes {
            let status = self
                .relays
                .get(url)
                .map_or(ConnectionStatus::Disconnected, |s| s.connection_status);
            if status.is_connected() {
                connected += 1;
            }
            let health = runtime.machine.health.snapshot(now);
            if health.state == grasp_sync_health::HealthState::Dead {
                dead += 1;
            }
            readings.insert(
                url.to_string(),
                crate::metrics::RelayReading {
                    connected: u64::from(status.metric_value()),
                    status: u64::from(health.status),
                    failures: u64::from(health.consecutive_failures),
                    connections: u64::from(runtime.machine.session.is_some())
                        + runtime.machine.lanes.connected() as u64,
                    live_subscriptions: (runtime
                        .machine
                        .session
                        .as_ref()
                        .map_or(0, |s| s.live.len())
                        + runtime.machine.lanes.live_groups())
                        as u64,
                    wire: runtime.wire_bytes(),
                },
            );
            if let (Some(ledger), Some(_)) = (
                runtime.machine.ledger.as_ref(),
                runtime.machine.session.as_ref(),
            ) {
                let counts = ledger.counts();
                for class in PermitClass::ALL {
                    *per_class.entry(class.as_str()).or_default() += counts.get(class) as u64;
                }
            }
        }
        metrics.record_relays(readings);
        for (class, held) in per_class {
            metrics.record_ledger_class(class, held);
        }
        let pending: usize = self
            .runtimes
            .keys()
            .map(|r| self.pending.batches(r).len())
            .sum();
        metrics.record_negentropy(&self.negentropy_status());
        metrics.record_participants(&self.participant_status());
        metrics.record_totals(self.runtimes.len() as u64, connected, dead, pending as u64);
        metrics.record_untracked(
            self.tracking_report.relays_over_cap as u64,
            self.tracking_report.author_relays_dropped as u64,
        );
        metrics.record_other_shards(self.tracking_report.relays_other_shards as u64);
        metrics.record_waiting_roots(
            self.repos.waiting_roots_len() as u64,
            self.repos.waiting_roots_dropped(),
        );
        if let Some(usage) = self.ingestor.store().rejected_usage() {
            let evicted = metrics.record_rejected_index(&usage);
            if evicted > 0 {
                tracing::warn!(
                    evicted,
                    max_rejected_ids = usage.cold_capacity,
                    "the rejected-events index is full and forgot its oldest rejections; sync may fetch them again"
                );
            }
        }
    }
}

fn connection_name(status: ConnectionStatus) -> &'static str {
    match status {
        ConnectionStatus::Disconnected => "disconnected",
        ConnectionStatus::Connecting => "connecting",
        ConnectionStatus::Syncing => "syncing",
        ConnectionStatus::Connected => "connected",
        ConnectionStatus::ConnectedHistoricSyncFailures => "connected_historic_sync_failures",
    }
}

impl Actor {
    /// NIP-77 activity since start.
    fn negentropy_status(&self) -> crate::status::NegentropyStatus {
        let now = self.now();
        let counts = self.fallbacks.counts(&self.recovery);
        crate::status::NegentropyStatus {
            rounds_started: counts.rounds_started,
            rounds_completed: counts.rounds_completed,
            fallbacks: crate::negentropy::FallbackReason::ALL
                .iter()
                .map(|reason| {
                    (
                        reason.metric_label().to_owned(),
                        counts.fallbacks_for(*reason),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
            recovery_pending_ids: counts.recovery_pending_ids,
            recovered_ids: counts.recovered_ids,
            expired_ids: counts.expired_ids,
            relays: self
                .runtimes
                .iter()
                .map(|(url, runtime)| {
                    (
                        url.to_string(),
                        nip77_status(runtime.machine.nip77.state(), now),
                    )
                })
                .collect(),
        }
    }
}

/// One relay's NIP-77 knowledge as the status shows it.
fn nip77_status(state: Nip77State, now: Instant) -> RelayNip77Status {
    let (support, reason, until) = match state {
        Nip77State::Unknown => ("unknown", None, None),
        Nip77State::Probing => ("probing", None, None),
        Nip77State::Supported => ("supported", None, None),
        Nip77State::Unsupported { reason, until } => ("unsupported", Some(reason), until),
    };
    RelayNip77Status {
        support: support.to_owned(),
        reason: reason.map(|r| r.label().to_owned()),
        reprobe_in_secs: until.map(|at| at.saturating_duration_since(now).as_secs()),
    }
}
