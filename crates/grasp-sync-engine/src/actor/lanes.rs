//! The driver of a relay's extra live connections (lever 4): the sans-IO
//! [`LiveLanes`](crate::machine::lanes::LiveLanes) decides what they hold and when one opens or
//! closes; this module dials them, spawns and ends their sessions, performs what the machine
//! queued for each, and routes what they say back to it. See `machine/lanes.rs` for the rules.

use grasp_sync_filters::TieredFilter;
use grasp_sync_model::RelayUrl;

use super::Actor;
use super::runtime::RelayRuntime;
use crate::machine::lane_refusals::{LaneRefusal, LaneRefusalOutcome};
use crate::machine::lanes::{ClosedLane, Dialled, LaneSession, LaneStep};
use crate::session::{SessionEvent, SessionHandle, SessionKey, spawn_session};
use crate::transport::{RelayConnection, WireBytes};

/// The sessions of a relay's open extra connections, which the machine names by key.
#[derive(Default)]
pub(super) struct LaneHandles(Vec<SessionHandle>);

impl LaneHandles {
    /// Text-frame bytes moved by the open extra connections.
    pub(super) fn wire_bytes(&self) -> WireBytes {
        self.0
            .iter()
            .map(SessionHandle::wire_bytes)
            .fold(WireBytes::default(), |a, b| a + b)
    }

    fn get(&self, key: &SessionKey) -> Option<&SessionHandle> {
        self.0.iter().find(|h| h.key == *key)
    }
}

impl RelayRuntime {
    /// Hands every open extra connection what was queued for it.
    pub(super) fn perform_lane_transmits(&mut self) {
        for (key, transmit) in self.machine.lanes.transmits_mut() {
            if let Some(handle) = self.lane_handles.get(key) {
                handle.perform(transmit);
            }
        }
    }

    /// Performs what a closed extra connection still had queued and ends its session,
    /// keeping what it moved in the relay's byte count; returns the coverage it hands back.
    fn finish_lane(&mut self, mut closed: ClosedLane) -> Vec<nostr::Filter> {
        if let Some(at) = self.lane_handles.0.iter().position(|h| h.key == closed.key) {
            let handle = self.lane_handles.0.swap_remove(at);
            handle.perform(&mut closed.transmit);
            self.ended_sessions_bytes += handle.wire_bytes();
        }
        closed.coverage
    }
}

impl Actor {
    /// Core live coverage the session cannot hold: offered to the extra connections, with
    /// whatever waits for them already. Coverage that only waits again (a plan re-derived
    /// after a query-rate cooldown held the last offer back) is offered too: nothing else would
    /// place it.
    pub(super) fn place_on_lanes(&mut self, relay: &RelayUrl, overflow: Vec<TieredFilter>) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        runtime.machine.lanes.handle_overflow(overflow);
        self.fill_lanes(relay);
    }

    /// The session's live set was rebuilt from scratch and `overflow` is what it cannot hold:
    /// the open extra connections drop what they held and take `overflow` anew.
    pub(super) fn repack_lanes(&mut self, relay: &RelayUrl, overflow: Vec<TieredFilter>) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.lanes.handle_repack(now);
        }
        self.place_on_lanes(relay, overflow);
    }

    /// Offers the waiting coverage to the open extra connections, then performs what the
    /// machine decides for the rest: dial one more, wait for the one dialling, or hand it to
    /// the catch-up.
    fn fill_lanes(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if !runtime.machine.lanes.has_waiting() {
            return;
        }
        let Some(session) = runtime.machine.session.as_mut() else {
            return;
        };
        // During a query-rate cooldown no connection starts anything: live planning is
        // re-derived when it ends, and offers the coverage again.
        if session.defer_for_cooldown(now) {
            return;
        }
        let learned = runtime.machine.learned.clone();
        let counter = &mut self.next_subscription;
        let fill = runtime.machine.lanes.fill(now, &learned, || {
            super::new_subscription_id(counter, "live")
        });
        for error in &fill.refused {
            tracing::warn!(%relay, %error, "an extra connection's ledger refused its live groups");
        }
        runtime.machine.stats.req_starts_live += fill.opened as u64;
        if let Some(metrics) = &self.metrics {
            for _ in 0..fill.opened {
                metrics.record_req("live");
            }
        }
        self.next_lane_step(relay);
    }

    /// Performs the machine's decision on coverage no open extra connection took.
    fn next_lane_step(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let may_dial = runtime.machine.health.sync_paused_until(now).is_none();
        match runtime.machine.lanes.next_step(may_dial) {
            LaneStep::Wait => {}
            LaneStep::CatchUp(filters) => self.hand_to_catch_up(relay, filters),
            LaneStep::Dial => {
                self.next_attempt += 1;
                let attempt = self.next_attempt;
                let (connection, waiting) = runtime.machine.handle_lane_dial_queued(attempt);
                tracing::info!(%relay, connection, waiting,
                    "live coverage does not fit one connection; opening another");
            }
        }
    }

    /// An extra connection's dial finished.
    pub(super) fn handle_lane_dialled(
        &mut self,
        relay: &RelayUrl,
        attempt: u64,
        result: Result<RelayConnection, String>,
    ) {
        let now = self.now();
        self.next_generation += 1;
        let key = SessionKey {
            relay: relay.clone(),
            generation: self.next_generation,
        };
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            if let Ok(connection) = result {
                connection.session_drop();
            }
            return;
        };
        let budget = runtime.machine.ledger.as_ref().map(|l| l.budget());
        let (connection, reason) = match (result, budget, runtime.machine.session.is_some()) {
            (Ok(connection), Some(budget), true) if connection.session.is_connected() => {
                (Some((connection, budget)), String::new())
            }
            (Ok(connection), _, _) => {
                connection.session_drop();
                (
                    None,
                    "disconnected during setup or the session ended".to_owned(),
                )
            }
            (Err(reason), _, _) => (None, reason),
        };
        let opened = connection.as_ref().map(|(connection, budget)| LaneSession {
            key: key.clone(),
            budget: *budget,
            answers_auth: connection.session.authenticates(),
        });
        match runtime.machine.lanes.handle_dialled(now, attempt, opened) {
            Dialled::Opened { connection: number } => {
                let Some((connection, _)) = connection else {
                    return;
                };
                runtime.lane_handles.0.push(spawn_session(
                    key,
                    connection.session,
                    connection.inbound,
                    self.ingestor.clone(),
                    self.session_tx.clone(),
                ));
                tracing::info!(%relay, connection = number, "extra live connection open");
                self.fill_lanes(relay);
            }
            Dialled::Failed => {
                tracing::info!(%relay, %reason, "an extra live connection could not open");
                self.next_lane_step(relay);
            }
            Dialled::Unknown => {
                if let Some((connection, _)) = connection {
                    connection.session_drop();
                }
            }
        }
    }

    /// A message on an extra connection.
    pub(super) fn handle_lane_event(&mut self, key: &SessionKey, event: SessionEvent) {
        let relay = &key.relay;
        match event {
            SessionEvent::Event { event, .. } => {
                if event.kind == nostr::Kind::RelayList {
                    self.handle_relay_list_event(&event);
                }
                self.note_direct_member(&event);
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.stats.events_received += 1;
                }
            }
            SessionEvent::Unsaved { id, error, .. } => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.stats.unsaved_events += 1;
                }
                tracing::debug!(%relay, %id, %error, "a live event was not saved");
            }
            SessionEvent::Eose(subscription) => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.lanes.handle_eose(key, &subscription);
                }
            }
            SessionEvent::CloseSent(_) => {}
            SessionEvent::AuthChallenge => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.machine.lanes.handle_auth_challenge(key);
                }
            }
            SessionEvent::Authenticated => self.handle_lane_authenticated(key),
            SessionEvent::Closed {
                subscription_id,
                message,
            } => {
                let now = self.now();
                let refused = self.runtimes.get_mut(relay).and_then(|r| {
                    r.machine
                        .handle_lane_closed(now, key, &subscription_id, &message)
                });
                if let Some(refused) = refused {
                    self.perform_lane_refusal(
                        key,
                        refused,
                        &message,
                        "a live subscription was closed",
                    );
                }
            }
            SessionEvent::Notice(text) => {
                let now = self.now();
                let refused = self
                    .runtimes
                    .get_mut(relay)
                    .and_then(|r| r.machine.handle_lane_notice(now, key, &text));
                if let Some(refused) = refused {
                    self.perform_lane_refusal(key, refused, &text, "the relay refused on it");
                }
            }
            SessionEvent::SendFailed { .. } => self.close_lane(key, "a request could not be sent"),
            SessionEvent::AuthFailed => self.close_lane(key, "its AUTH failed"),
            SessionEvent::Ended { reason } => self.close_lane(key, &reason),
        }
    }

    /// Reports a refusal the relay's machine counted on extra connection `key`
    /// ([`RelayMachine::handle_lane_closed`](crate::machine::relay::RelayMachine)) and performs
    /// what it decided; a connection it closes is closed for `close_reason`.
    fn perform_lane_refusal(
        &mut self,
        key: &SessionKey,
        refused: LaneRefusal,
        message: &str,
        close_reason: &str,
    ) {
        let relay = &key.relay;
        if refused.counted {
            self.report_refusal(relay, &refused.refusal, message);
        }
        match refused.outcome {
            LaneRefusalOutcome::Parked => {
                tracing::info!(%relay, "a live subscription of an extra connection needs NIP-42 authentication; it is sent again once the relay accepts ours");
            }
            LaneRefusalOutcome::Unmatched => {
                tracing::debug!(%relay, "an authentication NOTICE on an extra connection answers no live subscription it still waits on");
            }
            LaneRefusalOutcome::GroupGone => {}
            LaneRefusalOutcome::GroupPaused { refused, group } => {
                // The connection keeps its other groups; what the pause does not hold (the
                // suspects of a refused group of several filters) is offered again.
                self.after_coverage_refused(relay, refused, message);
                let rest = self.without_refused(relay, group);
                self.place_on_lanes(relay, rest);
            }
            LaneRefusalOutcome::GroupToCatchUp { catch_up } => {
                self.hand_to_catch_up(relay, catch_up);
                self.close_lane(key, close_reason);
            }
            LaneRefusalOutcome::Close => self.close_lane(key, close_reason),
        }
    }

    /// The relay accepted an extra connection's `AUTH`: its parked live groups are sent again.
    fn handle_lane_authenticated(&mut self, key: &SessionKey) {
        let relay = &key.relay;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let resent = runtime.machine.lanes.handle_authenticated(key);
        tracing::info!(%relay, resent, "an extra connection authenticated to the relay (NIP-42)");
        runtime.machine.stats.req_starts_live += resent as u64;
        if let Some(metrics) = &self.metrics {
            for _ in 0..resent {
                metrics.record_req("live");
            }
        }
    }

    /// Extra connections whose parked live groups waited for an `AUTH` outcome too long are
    /// closed as refused.
    pub(super) fn handle_lane_auth_timeouts(&mut self, relay: &RelayUrl, now: std::time::Instant) {
        let expired = self
            .runtimes
            .get_mut(relay)
            .map(|r| r.machine.lanes.poll_auth_expired(now))
            .unwrap_or_default();
        for key in expired {
            self.close_lane(&key, "no NIP-42 authentication in time");
        }
    }

    /// Closes one extra connection and opens no other this session; its coverage goes to the
    /// catch-up.
    fn close_lane(&mut self, key: &SessionKey, reason: &str) {
        let relay = &key.relay;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(closed) = runtime.machine.lanes.close(key) else {
            return;
        };
        let filters = runtime.finish_lane(closed);
        tracing::info!(%relay, %reason, filters = filters.len(),
            "an extra live connection closed; its coverage moves to the paced catch-up");
        self.hand_to_catch_up(relay, filters);
        self.next_lane_step(relay);
    }

    /// Closes every extra connection and forgets their coverage (the session ended, restarts
    /// its coverage, or holds all of it now).
    pub(super) fn close_lanes(&mut self, relay: &RelayUrl) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        for closed in runtime.machine.lanes.close_all() {
            runtime.finish_lane(closed);
        }
    }
}
