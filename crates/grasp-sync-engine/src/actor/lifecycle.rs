//! Connection lifecycle: dialing under health backoff, session setup with the NIP-11 budget and
//! NIP-77 listing, fresh start, disconnect handling, retirement of unreferenced relays, and
//! per-relay deadlines.

use std::time::Instant;

use grasp_sync_filters::{PageHints, RelayPageSession, Window, announcement_filter};
use grasp_sync_model::{ConnectionStatus, PendingItems, RelaySyncNeeds, RelayUrl};
use nostr::Timestamp;
use rand::Rng;

use super::Actor;
use super::runtime::SessionState;
use crate::dial::DialReport;
use crate::error::TransportError;
use crate::machine::relay::{Advertised, LiveRepair, Tick};
use crate::machine::session_start::{
    SessionStart, daily_deadline, reconnect_since, session_budget,
};
use crate::machine::timers::RelayTimer;
use crate::negentropy::RoundStart;
use crate::session::{Outbound, SessionKey, spawn_session};
use crate::transport::{NipListing, RelayConnection, RelayInfo};

impl Actor {
    /// The health-and-metrics tick: retire, dial, probe, report.
    pub(super) fn health_tick(&mut self) {
        let now = self.now();
        let relays: Vec<RelayUrl> = self.runtimes.keys().cloned().collect();
        for relay in relays {
            if !self.wants_connection(&relay) {
                self.retire(&relay);
                continue;
            }
            // A relay wanted only for participant discovery is dialled when its work is due.
            let repo_work = self.wants_repo_connection(&relay);
            let dial_wanted = repo_work || self.outbox_dial_due(&relay, now);
            if !repo_work && self.observe_discovery_session_idle(&relay, now) {
                self.close_idle_discovery_session(&relay);
                continue;
            }
            let Some(runtime) = self.runtimes.get_mut(&relay) else {
                continue;
            };
            if runtime.machine.handle_tick(now) == Tick::MayDial && dial_wanted {
                self.queue_session_dial(&relay);
            }
        }
        self.keep_learned();
        self.pack_at_rest();
        self.record_metrics();
    }

    /// A relay just tracked for repository work is dialled in this step if its health allows,
    /// not at the next health tick: discovery does not wait up to a tick for each relay it
    /// finds. The dial workers still space the handshakes.
    pub(super) fn dial_tracked_relay(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let may_dial = self.wants_repo_connection(relay)
            && self
                .runtimes
                .get_mut(relay)
                .is_some_and(|r| r.machine.handle_tick(now) == Tick::MayDial);
        if may_dial {
            self.queue_session_dial(relay);
        }
    }

    /// Numbers a dial of `relay`'s session and queues it for the dial workers.
    fn queue_session_dial(&mut self, relay: &RelayUrl) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        self.next_attempt += 1;
        runtime.machine.handle_dial_queued(self.next_attempt);
        self.relays.register(relay).mark_connecting();
    }

    /// Refused coverage whose policy pause ended: fetched once by history, one filter per REQ;
    /// completing makes it live again, a second refusal pauses it again.
    fn probe_refused_coverage(&mut self, relay: &RelayUrl, probes: Vec<nostr::Filter>) {
        tracing::info!(%relay, filters = probes.len(), "probing coverage refused by policy");
        // One filter per REQ, so a refusal names exactly the filter it refuses.
        for filter in probes {
            let opened = self.open_probe_batch(relay, filter.clone());
            let now = self.now();
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                match opened {
                    Some(batch) => runtime.machine.refused.handle_probe_opened(batch, filter),
                    None => runtime.machine.refused.handle_probe_unopened(&filter, now),
                }
            }
        }
        self.drive_queue(relay);
    }

    /// Drops the relay's pending batches and everything that waited on one of them: the
    /// catch-up and descendant fallback queries and the recovery probes in flight.
    pub(super) fn forget_pending(&mut self, relay: &RelayUrl) {
        self.pending.clear_relay(relay);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.catch_up.handle_pending_cleared();
            runtime
                .machine
                .descendants
                .handle_pending_cleared(&self.members);
            runtime.machine.incomplete.handle_pending_cleared();
            runtime.machine.refused.handle_probes_lost();
        }
        self.forget_outbox_batches(relay);
    }

    /// A relay nobody references any more: close it and forget it (bootstrap relays never).
    fn retire(&mut self, relay: &RelayUrl) {
        let Some(runtime) = self.runtimes.get(relay) else {
            return;
        };
        if !runtime.machine.health.may_retire() {
            return;
        }
        self.close_lanes(relay);
        if let Some(mut runtime) = self.runtimes.remove(relay) {
            if let Some(session) = runtime.machine.session.as_mut() {
                session.transmit.push(Outbound::Disconnect);
            }
            runtime.end_session(None);
            // Rounds decided and never performed give their history slots back.
            for _ in 0..runtime.machine.abandon_jobs() {
                self.history_slots.release();
            }
        }
        self.forget_pending(relay);
        self.relays.remove(relay);
        self.recovery.handle_retired(relay);
        tracing::info!(%relay, "retired relay: no repository lists it any more");
    }

    pub(super) fn handle_dial_report(&mut self, report: DialReport) {
        let now = self.now();
        match report {
            DialReport::Started { relay, attempt } => {
                if let Some(runtime) = self.runtimes.get_mut(&relay) {
                    runtime.machine.handle_dial_started(attempt, now);
                }
            }
            DialReport::Finished {
                relay,
                attempt,
                result,
            } => {
                if self
                    .runtimes
                    .get(&relay)
                    .is_some_and(|r| r.machine.lanes.owns_attempt(attempt))
                {
                    let result = result
                        .map(|(connection, _)| connection)
                        .map_err(|e| e.to_string());
                    self.handle_lane_dialled(&relay, attempt, result);
                    return;
                }
                let current = self
                    .runtimes
                    .get_mut(&relay)
                    .is_some_and(|r| r.machine.handle_dial_finished(attempt));
                if !current {
                    if let Ok((connection, _)) = result {
                        connection.session_drop();
                    }
                    return;
                }
                match result {
                    Ok((connection, info)) if connection.session.is_connected() => {
                        self.handle_connected(&relay, connection, info);
                    }
                    Ok((connection, _)) => {
                        connection.session_drop();
                        self.handle_connect_failed(&relay, "disconnected during setup".to_owned());
                    }
                    Err(error) => {
                        if let TransportError::Refused { reason, .. } = &error
                            && self.address_refusals.record("dial", reason, &relay)
                            && let Some(metrics) = &self.metrics
                        {
                            metrics.record_address_refusal("dial", reason);
                        }
                        self.handle_connect_failed(&relay, error.to_string());
                    }
                }
            }
        }
    }

    fn handle_connect_failed(&mut self, relay: &RelayUrl, reason: String) {
        let now = self.now();
        let unix = self.clock.unix_now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.handle_connect_failed(now, reason.clone());
            if let Some(metrics) = &self.metrics {
                metrics.record_attempt(false);
            }
        }
        self.relays.register(relay).mark_disconnected(unix);
        tracing::info!(%relay, %reason, "connection attempt failed");
    }

    fn handle_connected(
        &mut self,
        relay: &RelayUrl,
        connection: RelayConnection,
        info: Option<RelayInfo>,
    ) {
        let now = self.now();
        self.next_generation += 1;
        let key = SessionKey {
            relay: relay.clone(),
            generation: self.next_generation,
        };
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            connection.session_drop();
            return;
        };
        let advertised = Advertised {
            max_subscriptions: info.as_ref().and_then(|i| i.max_subscriptions),
            max_filters: info
                .as_ref()
                .and_then(|i| i.max_filters)
                .and_then(|n| usize::try_from(n).ok()),
            nip77: info.as_ref().map_or(NipListing::Unknown, |i| i.nip77),
        };
        let budget = runtime.machine.handle_connected(now, advertised);
        if let RoundStart::Off(reason) = runtime.machine.nip77.poll_round() {
            tracing::info!(%relay, reason = reason.label(),
                "NIP-77 not used this session; history by REQ+EOSE");
        }
        let hints = PageHints {
            max_limit: info
                .as_ref()
                .and_then(|i| i.max_limit)
                .and_then(|l| usize::try_from(l).ok()),
            default_limit: info
                .as_ref()
                .and_then(|i| i.default_limit)
                .and_then(|l| usize::try_from(l).ok()),
        };
        let handle = spawn_session(
            key,
            connection.session,
            connection.inbound,
            self.ingestor.clone(),
            self.session_tx.clone(),
        );
        let answers_auth = handle.session().authenticates();
        let state = SessionState::new(
            handle.key.clone(),
            now,
            RelayPageSession::new(hints),
            answers_auth,
        );
        runtime.start_session(handle, state);
        if let Some(metrics) = &self.metrics {
            metrics.record_attempt(true);
        }
        tracing::info!(%relay, budget = budget.slots(), "connected");
        self.reset_descendant_mode(relay);
        self.reset_catch_up(relay);
        self.close_lanes(relay);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.consolidation.handle_session_started();
        }
        self.fallbacks.handle_session_started(relay);
        self.recovery.handle_connected(relay);
        self.start_learning_holdings(relay);
        self.arm_daily(relay);
        let start = SessionStart::for_relay(self.relays.get(relay), self.clock.unix_now());
        match start {
            SessionStart::First => self.start_fresh_session(relay),
            SessionStart::Quick { since } => self.quick_reconnect(relay, since),
            SessionStart::Long => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.stats.long_reconnects += 1;
                }
                if let Some(metrics) = &self.metrics {
                    metrics.record_reconnect("long");
                }
                self.start_fresh_session(relay);
            }
        }
    }

    /// A session that starts without confirmed state: over the relay's kept holdings where
    /// they apply (`holdings.rs`), else the fresh start by named coverage.
    fn start_fresh_session(&mut self, relay: &RelayUrl) {
        if !self.start_over_holdings(relay) {
            self.fresh_start(relay);
        }
    }

    /// Starts the session's coverage over under a new budget without reconnecting: every
    /// subscription is closed, the ledger starts a new generation, and coverage is re-derived as
    /// after a quick reconnect (confirmed state kept).
    pub(super) fn restart_coverage(&mut self, relay: &RelayUrl) {
        let now = self.now();
        self.abandon_transients(relay);
        self.close_lanes(relay);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let (Some(session), Some(ledger)) = (
            runtime.machine.session.as_mut(),
            runtime.machine.ledger.as_mut(),
        ) else {
            return;
        };
        session.live_queue.clear();
        for (id, group) in std::mem::take(&mut session.live) {
            if group.was_sent() {
                session.transmit.push(Outbound::Close(id));
            }
        }
        let advertised = ledger.budget().slots();
        let budget = session_budget(
            Some(u32::try_from(advertised).unwrap_or(u32::MAX)),
            runtime.machine.learned_slots,
        )
        .with_learned(&runtime.machine.learned);
        ledger.handle_reconnect(now, budget);
        tracing::info!(%relay, budget = budget.slots(), "re-deriving coverage under a learned budget");
        // The members' descendant batches and live groups went with the rest: cover them anew.
        self.reset_descendant_mode(relay);
        let since = self
            .relays
            .get(relay)
            .and_then(|s| s.last_connected)
            .map_or(Timestamp::from_secs(0), reconnect_since);
        self.quick_reconnect(relay, since);
    }

    /// Quick reconnect: keep confirmed state; Layer 1 live and historic from `since`; confirmed
    /// items that the index still wants are made live again and fetched from `since`; then the
    /// diff adds whatever is new.
    pub(super) fn quick_reconnect(&mut self, relay: &RelayUrl, since: Timestamp) {
        if !self.wants_repo_connection(relay) {
            self.start_outbox_session(relay);
            return;
        }
        let unix = self.clock.unix_now();
        self.forget_pending(relay);
        let state = self.relays.register(relay);
        let announcements_synced = state.announcements_synced;
        state.mark_syncing(unix);
        let mut confirmed = RelaySyncNeeds {
            repos: state.repos.clone(),
            root_events: state.root_events.clone(),
        };
        // Current items only: what the index no longer wants is neither re-synced nor kept.
        let target = self.targets.get(relay).cloned().unwrap_or_default();
        confirmed
            .repos
            .retain(|coordinate, _| target.repos.contains_key(coordinate));
        confirmed
            .root_events
            .retain(|id| target.root_events.contains(id));
        // The confirmed state keeps the same items: it holds their copy.
        let state = self.relays.register(relay);
        state.repos = confirmed.repos.clone();
        state.root_events = confirmed.root_events.clone();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.stats.quick_reconnects += 1;
        }
        tracing::info!(%relay, since = since.as_secs(), "quick reconnect");

        let _ = self.open_live(relay, vec![announcement_filter(Window::Live)]);
        let l1_since = announcements_synced.then_some(since);
        let filters = vec![announcement_filter(Window::since(l1_since)).filter];
        let batch = self.open_historic_batch(relay, PendingItems::default(), filters);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.announcements_batch = batch;
        }
        self.sync_items(relay, confirmed, Some(since), true);
        self.recompute(relay);
        self.drive_queue(relay);
        self.check_idle(relay);
    }

    /// Arms the daily reconciliation 23–25 h from now, at a seeded random offset.
    fn arm_daily(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let at = daily_deadline(now, |spread| self.rng.random_range(0..spread));
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime
                .machine
                .timers
                .set(RelayTimer::DailyReconciliation, at);
        }
    }

    /// The daily reconciliation, asked for now on every relay with a session (each one's timer
    /// is armed again 23–25 h from now); how many relays it started on.
    pub(super) fn reconcile_now(&mut self) -> usize {
        let connected: Vec<RelayUrl> = self
            .runtimes
            .iter()
            .filter(|(_, r)| r.machine.session.is_some())
            .map(|(url, _)| url.clone())
            .collect();
        for relay in &connected {
            self.daily_reconciliation(relay);
        }
        connected.len()
    }

    /// The daily timer fired: a fresh start on the live connection, without the reconnect metric.
    /// The live coverage the connection holds is not sent again: the planner opens only what
    /// the held groups lack (a plan refused or rolled back, an index update that waited).
    fn daily_reconciliation(&mut self, relay: &RelayUrl) {
        let connected = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.session.is_some());
        self.arm_daily(relay);
        if !connected {
            return;
        }
        tracing::info!(%relay, "daily reconciliation");
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.stats.daily_reconciliations += 1;
            runtime.machine.nip77.handle_daily_reconciliation();
        }
        // From now on the daily runs keep the holdings: what was learned since the last
        // completion is named by the next round over `{}`, and the store holds it.
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.learning = None;
        }
        if self.start_holdings_round(relay) {
            return;
        }
        self.fresh_start(relay);
    }

    /// Fresh start: forget pending and confirmed state, open Layer 1 live and historic, then
    /// derive everything else through the three-way diff.
    pub(super) fn fresh_start(&mut self, relay: &RelayUrl) {
        if !self.wants_repo_connection(relay) {
            self.start_outbox_session(relay);
            return;
        }
        self.reset_for_fresh_start(relay);
        let _ = self.open_live(relay, vec![announcement_filter(Window::Live)]);
        let filters = vec![announcement_filter(Window::since(None)).filter];
        let batch = self.open_reconciled_batch(relay, PendingItems::default(), filters);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.announcements_batch = batch;
        }
        self.recompute(relay);
        self.drive_queue(relay);
        self.check_idle(relay);
    }

    /// What every fresh start does first: the relay's transient subscriptions and pending
    /// batches are dropped, its confirmed state cleared, and it is syncing again.
    pub(super) fn reset_for_fresh_start(&mut self, relay: &RelayUrl) {
        let unix = self.clock.unix_now();
        self.abandon_transients(relay);
        self.forget_pending(relay);
        let state = self.relays.register(relay);
        state.clear_sync_state();
        state.announcements_synced = false;
        state.mark_syncing(unix);
        self.recovery.handle_historic_sync_restarted(relay);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.over_holdings = None;
        }
    }

    /// The session ended: keep the relay, clear what died with the connection.
    pub(super) fn handle_session_ended(&mut self, key: &SessionKey, reason: &str) {
        let now = self.now();
        let unix = self.clock.unix_now();
        let relay = &key.relay;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if runtime.machine.session_of(key).is_none() {
            return;
        }
        self.close_lanes(relay);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        runtime.end_session(Some((now, reason)));
        self.recovery.handle_disconnected(relay);
        self.forget_pending(relay);
        self.relays.register(relay).mark_disconnected(unix);
        tracing::info!(%relay, %reason, "disconnected");
    }

    /// Per-relay deadlines: watchdog, gate waits, the completion double check, retries, the
    /// daily reconciliation.
    pub(super) fn handle_relay_timeouts(&mut self, relay: &RelayUrl, now: Instant) {
        // Level-triggered too: a queue emptied by a failure or a fallback lets its waiting
        // index update run after the input that emptied it.
        self.recompute_if_queue_drained(relay);
        self.handle_watchdog(relay, now);
        self.handle_auth_timeout(relay, now);
        self.handle_lane_auth_timeouts(relay, now);
        let probes = self
            .runtimes
            .get_mut(relay)
            .filter(|r| r.machine.session.is_some())
            .map(|r| r.machine.refused.poll_probes(now))
            .unwrap_or_default();
        if !probes.is_empty() {
            self.probe_refused_coverage(relay, probes);
        }
        if self.runtimes.get(relay).is_some_and(|r| {
            r.machine
                .timers
                .is_due(RelayTimer::DailyReconciliation, now)
        }) {
            self.daily_reconciliation(relay);
        }
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if runtime.machine.take_coverage_retry(now) {
            self.retry_coverage(relay);
        }
        let live_repair = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.take_live_repair(now));
        match live_repair {
            Some(LiveRepair::Rebuild) => self.rebuild_live(relay),
            Some(LiveRepair::Repair) => self.repair_live(relay),
            None => {}
        }
        let drive = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.wants_drive(now));
        if drive {
            self.drive_queue(relay);
        }
        let due = self
            .runtimes
            .get_mut(relay)
            .is_some_and(|r| r.machine.timers.take_due(RelayTimer::CompletionCheck, now));
        if due && !self.pending.has_pending(relay) {
            let unix = self.clock.unix_now();
            let state = self.relays.register(relay);
            let before = state.connection_status;
            state.complete_historic_sync(unix);
            // Caught up: what was confirmed and the targets are mostly one copy from here on.
            if let Some(target) = self.targets.targets().get(relay) {
                state.share_with(target);
            }
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                runtime.machine.delivered.retire();
            }
            self.keep_learned_holdings(relay);
            let status = self.relays.register(relay).connection_status;
            if status == before {
                // Said at info level when the relay's status last changed.
                tracing::debug!(%relay, ?status, "historic sync idle again");
            } else if status == ConnectionStatus::ConnectedHistoricSyncFailures {
                tracing::warn!(%relay, "historic sync finished with failures; live sync active");
            } else {
                tracing::info!(%relay, "historic sync complete");
            }
        }
    }

    /// Schedules the six-second double check once a relay has no pending batch.
    pub(super) fn check_idle(&mut self, relay: &RelayUrl) {
        if self.pending.has_pending(relay) {
            return;
        }
        self.run_queued_consolidation(relay);
        let at = self.now() + self.config.completion_recheck;
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && runtime.machine.session.is_some()
        {
            runtime
                .machine
                .timers
                .set_unless_armed(RelayTimer::CompletionCheck, at);
        }
    }
}

impl RelayConnection {
    /// Ends a session the actor will not use.
    pub(crate) fn session_drop(self) {
        let session = self.session;
        tokio::spawn(async move { session.disconnect().await });
    }
}
