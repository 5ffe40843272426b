//! Extra live connections (lever 4): when the core live coverage of a relay does not fit one
//! connection's subscription budget, up to three more connections to the same relay hold the
//! rest, each with its own ledger of the same budget.
//!
//! - **Live only.** An extra connection carries nothing but live (`limit: 0`) groups. History,
//!   pagination, NIP-77 and catch-up stay on the relay's session, so the background pacing the
//!   relay sees is the session's alone, as with one connection.
//! - **Core coverage only.** The tiers that cover tracked repositories and roots (essential,
//!   uppercase root references, compatibility references) overflow onto extra connections;
//!   descendant coverage that does not fit keeps its paced fallback.
//! - **Deterministic assignment.** Overflow is offered to the extra connections in order, each
//!   taking the longest prefix of it (tier, then filter order) its budget holds
//!   ([`plan_live_fitting`]); a new connection is dialled only when those open are full, so the
//!   relay gets the fewest connections the coverage needs, one handshake at a time.
//! - **Polite failure.** A refusal, an AUTH failure or a disconnect on an extra connection closes
//!   it and opens no other until the session reconnects; its coverage, and whatever no
//!   connection holds, goes to the session's paced catch-up. A consolidation that fits the
//!   whole live set on the session closes every extra connection (the scale-in).
//! - **Lifetime.** Extra connections belong to the session: they close when it ends or restarts
//!   its coverage.

use std::collections::BTreeMap;

use grasp_sync_filters::{CoverageTier, PackLimits, TieredFilter};
use grasp_sync_health::{RefusalCategory, classify};
use grasp_sync_ledger::{LiveBudget, ReleaseReason, SubscriptionLedger, plan_live_fitting};
use grasp_sync_model::RelayUrl;
use nostr::SubscriptionId;

use super::Actor;
use super::runtime::{LiveGroup, held_groups};
use crate::machine::transmit::Transmits;
use crate::session::{Outbound, SessionEvent, SessionHandle, SessionKey, spawn_session};
use crate::transport::RelayConnection;

/// Connections per relay at most: the session and three extra live connections. chorus, the
/// tightest relay known, allows five per address.
pub const MAX_CONNECTIONS_PER_RELAY: usize = 4;

/// Whether coverage of `tier` may overflow onto extra connections: the core tiers, which
/// cover tracked repositories and roots. Descendant coverage has its own paced fallback.
pub(super) fn lane_tier(tier: CoverageTier) -> bool {
    matches!(
        tier,
        CoverageTier::Essential | CoverageTier::RootUppercase | CoverageTier::CoreCompat
    )
}

/// One relay's extra live connections and the coverage waiting for one.
#[derive(Default)]
pub(super) struct LiveLanes {
    /// In assignment order; at most [`MAX_CONNECTIONS_PER_RELAY`] − 1.
    lanes: Vec<Lane>,
    /// Core live coverage no connection holds yet, waiting for a lane to connect.
    unplaced: Vec<TieredFilter>,
    /// An extra connection failed or was refused: none is opened again until the session
    /// reconnects.
    stopped: bool,
}

/// One extra connection.
struct Lane {
    /// The dial attempt in flight.
    dialing: Option<u64>,
    session: Option<LaneSession>,
}

/// A connected extra connection and the live groups it holds.
struct LaneSession {
    handle: SessionHandle,
    ledger: SubscriptionLedger,
    live: BTreeMap<SubscriptionId, LiveGroup>,
    /// Its REQs, CLOSEs and disconnect not yet handed to the connection.
    transmit: Transmits,
}

impl Drop for LaneSession {
    /// What was decided last for this connection is still performed.
    fn drop(&mut self) {
        self.handle.perform(&mut self.transmit);
    }
}

impl LiveLanes {
    /// Extra connections open now.
    pub(super) fn connected(&self) -> usize {
        self.lanes.iter().filter(|l| l.session.is_some()).count()
    }

    /// Live groups held on the extra connections.
    pub(super) fn live_groups(&self) -> usize {
        self.lanes
            .iter()
            .filter_map(|l| l.session.as_ref())
            .map(|s| s.live.len())
            .sum()
    }

    /// Text-frame bytes moved by the open extra connections.
    pub(super) fn wire_bytes(&self) -> crate::transport::WireBytes {
        self.lanes
            .iter()
            .filter_map(|l| l.session.as_ref())
            .map(|s| s.handle.wire_bytes())
            .fold(crate::transport::WireBytes::default(), |a, b| a + b)
    }

    /// Hands every open extra connection what was queued for it.
    pub(super) fn perform_transmits(&mut self) {
        for session in self.lanes.iter_mut().filter_map(|l| l.session.as_mut()) {
            session.handle.perform(&mut session.transmit);
        }
    }

    /// Whether `key` is one of the extra connections' sessions.
    pub(super) fn owns_session(&self, key: &SessionKey) -> bool {
        self.position_of_session(key).is_some()
    }

    /// Whether `attempt` is an extra connection's dial.
    pub(super) fn owns_attempt(&self, attempt: u64) -> bool {
        self.lanes.iter().any(|l| l.dialing == Some(attempt))
    }

    fn position_of_session(&self, key: &SessionKey) -> Option<usize> {
        self.lanes
            .iter()
            .position(|l| l.session.as_ref().is_some_and(|s| s.handle.key == *key))
    }

    /// Every filter held live on the extra connections.
    fn held_filters(&self) -> std::collections::BTreeSet<&nostr::Filter> {
        self.lanes
            .iter()
            .filter_map(|l| l.session.as_ref())
            .flat_map(|s| s.live.values())
            .flat_map(|g| g.group.filters.iter().map(|f| &f.filter))
            .collect()
    }
}

impl Actor {
    /// Core live coverage the session cannot hold: offered to the extra connections.
    pub(super) fn place_on_lanes(&mut self, relay: &RelayUrl, overflow: Vec<TieredFilter>) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let lanes = &mut runtime.lanes;
        let held = lanes.held_filters();
        let waiting: std::collections::BTreeSet<&nostr::Filter> =
            lanes.unplaced.iter().map(|f| &f.filter).collect();
        let new: Vec<TieredFilter> = overflow
            .into_iter()
            .filter(|f| lane_tier(f.tier))
            .filter(|f| !held.contains(&f.filter) && !waiting.contains(&f.filter))
            .collect();
        if new.is_empty() {
            return;
        }
        lanes.unplaced.extend(new);
        self.fill_lanes(relay);
    }

    /// Offers the waiting coverage to the open extra connections in order, then dials the next
    /// one if some is left and none is dialling; what no connection may hold goes to the
    /// catch-up.
    fn fill_lanes(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get(relay) else {
            return;
        };
        if runtime.session.is_none() || runtime.lanes.unplaced.is_empty() {
            return;
        }
        // During a query-rate cooldown no connection starts anything: live planning is
        // re-derived when it ends, and offers the coverage again.
        if self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
            .is_some_and(|s| s.defer_for_cooldown(now))
        {
            return;
        }
        let Some(runtime) = self.runtimes.get(relay) else {
            return;
        };
        let learned = runtime.learned.clone();
        for index in 0..runtime.lanes.lanes.len() {
            let Some(runtime) = self.runtimes.get(relay) else {
                return;
            };
            let Some(lane) = runtime.lanes.lanes[index].session.as_ref() else {
                continue;
            };
            if runtime.lanes.unplaced.is_empty() {
                break;
            }
            let held = held_groups(&lane.live);
            let budget = LiveBudget::new(&lane.ledger.budget(), &learned, PackLimits::default());
            let waiting = runtime.lanes.unplaced.clone();
            let fitted = plan_live_fitting(&held, waiting, &budget);
            let ids: Vec<SubscriptionId> = fitted
                .plan
                .open
                .iter()
                .map(|_| self.next_subscription_id("live"))
                .collect();
            let Some(runtime) = self.runtimes.get_mut(relay) else {
                return;
            };
            runtime.lanes.unplaced = fitted.rest;
            let Some(lane) = runtime.lanes.lanes[index].session.as_mut() else {
                continue;
            };
            for id in &fitted.plan.close {
                if let Some(held) = lane.live.remove(id) {
                    let _ =
                        lane.ledger
                            .handle_release(now, &held.permit, ReleaseReason::LiveRetired);
                    lane.transmit.push(Outbound::Close(id.clone()));
                }
            }
            if ids.is_empty() {
                // Nothing more fits this connection: the next one is offered the rest.
                continue;
            }
            let generation = lane.ledger.generation();
            match lane.ledger.admit_live(now, generation, ids.clone()) {
                Ok(permits) => {
                    for ((id, group), permit) in ids.into_iter().zip(fitted.plan.open).zip(permits)
                    {
                        let filters = group.to_filters();
                        lane.transmit.push(Outbound::Req {
                            subscription_id: id.clone(),
                            filters,
                        });
                        lane.live.insert(
                            id,
                            LiveGroup {
                                group,
                                permit,
                                sent: 0,
                            },
                        );
                        runtime.stats.req_starts_live += 1;
                        if let Some(metrics) = &self.metrics {
                            metrics.record_req("live");
                        }
                    }
                }
                Err(error) => {
                    // The plan stayed within this ledger's budget; a refusal means it is not
                    // the lane's to hold: hand it back.
                    tracing::warn!(%relay, %error, "an extra connection's ledger refused its live groups");
                    runtime.lanes.unplaced.extend(
                        fitted
                            .plan
                            .open
                            .into_iter()
                            .flat_map(|g| g.filters.into_iter()),
                    );
                }
            }
        }
        self.dial_lane_or_catch_up(relay);
    }

    /// Coverage is left after every open extra connection took its share: dial one more, wait
    /// for the one dialling, or hand it to the catch-up when no more may open.
    fn dial_lane_or_catch_up(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let lanes = &mut runtime.lanes;
        if lanes.unplaced.is_empty() || lanes.lanes.iter().any(|l| l.dialing.is_some()) {
            return;
        }
        let may_dial = !lanes.stopped
            && lanes.lanes.len() < MAX_CONNECTIONS_PER_RELAY - 1
            && runtime.health.sync_paused_until(now).is_none();
        if !may_dial {
            let filters: Vec<nostr::Filter> = std::mem::take(&mut lanes.unplaced)
                .into_iter()
                .map(|f| crate::machine::refused::without_bounds(&f.filter))
                .collect();
            self.hand_to_catch_up(relay, filters);
            return;
        }
        self.next_attempt += 1;
        let attempt = self.next_attempt;
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.lanes.lanes.push(Lane {
                dialing: Some(attempt),
                session: None,
            });
            tracing::info!(%relay, connection = runtime.lanes.lanes.len() + 1,
                waiting = runtime.lanes.unplaced.len(),
                "live coverage does not fit one connection; opening another");
        }
        self.dials.push(relay.clone(), attempt);
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
        let Some(index) = runtime
            .lanes
            .lanes
            .iter()
            .position(|l| l.dialing == Some(attempt))
        else {
            if let Ok(connection) = result {
                connection.session_drop();
            }
            return;
        };
        runtime.lanes.lanes[index].dialing = None;
        let budget = runtime.ledger.as_ref().map(|l| l.budget());
        match (result, budget, runtime.session.is_some()) {
            (Ok(connection), Some(budget), true) if connection.session.is_connected() => {
                let handle = spawn_session(
                    key,
                    connection.session,
                    connection.inbound,
                    self.ingestor.clone(),
                    self.session_tx.clone(),
                );
                runtime.lanes.lanes[index].session = Some(LaneSession {
                    handle,
                    ledger: SubscriptionLedger::new(now, budget),
                    live: BTreeMap::new(),
                    transmit: Transmits::default(),
                });
                tracing::info!(%relay, connection = index + 2, "extra live connection open");
                self.fill_lanes(relay);
            }
            (result, _, _) => {
                let reason = match result {
                    Ok(connection) => {
                        connection.session_drop();
                        "disconnected during setup or the session ended".to_owned()
                    }
                    Err(reason) => reason,
                };
                tracing::info!(%relay, %reason, "an extra live connection could not open");
                runtime.lanes.lanes.remove(index);
                runtime.lanes.stopped = true;
                self.dial_lane_or_catch_up(relay);
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
                    runtime.stats.events_received += 1;
                }
            }
            SessionEvent::Unsaved { id, error, .. } => {
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    runtime.stats.unsaved_events += 1;
                }
                tracing::debug!(%relay, %id, %error, "a live event was not saved");
            }
            SessionEvent::Eose(_)
            | SessionEvent::CloseSent(_)
            | SessionEvent::AuthChallenge
            | SessionEvent::Authenticated => {}
            SessionEvent::Closed {
                subscription_id,
                message,
            } => {
                let held = self
                    .runtimes
                    .get(relay)
                    .and_then(|r| r.lanes.position_of_session(key))
                    .and_then(|i| self.runtimes.get(relay)?.lanes.lanes[i].session.as_ref())
                    .is_some_and(|s| s.live.contains_key(&subscription_id));
                if held {
                    self.count_refusal(relay, &classify(&message), &message);
                    self.close_lane(key, "a live subscription was closed");
                }
            }
            SessionEvent::Notice(text) => {
                let refusal = classify(&text);
                if refusal.category != RefusalCategory::Unknown {
                    self.count_refusal(relay, &refusal, &text);
                    self.close_lane(key, "the relay refused on it");
                }
            }
            SessionEvent::SendFailed { .. } => self.close_lane(key, "a request could not be sent"),
            SessionEvent::AuthFailed => self.close_lane(key, "its AUTH failed"),
            SessionEvent::Ended { reason } => self.close_lane(key, &reason),
        }
    }

    /// Closes one extra connection and opens no other this session; its coverage goes to the
    /// catch-up.
    fn close_lane(&mut self, key: &SessionKey, reason: &str) {
        let relay = &key.relay;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(index) = runtime.lanes.position_of_session(key) else {
            return;
        };
        let lane = runtime.lanes.lanes.remove(index);
        runtime.lanes.stopped = true;
        let mut filters = Vec::new();
        if let Some(mut session) = lane.session {
            filters.extend(
                session
                    .live
                    .values()
                    .flat_map(|g| g.group.filters.iter())
                    .map(|f| crate::machine::refused::without_bounds(&f.filter)),
            );
            runtime.ended_sessions_bytes += session.handle.wire_bytes();
            session.transmit.push(Outbound::Disconnect);
        }
        tracing::info!(%relay, %reason, filters = filters.len(),
            "an extra live connection closed; its coverage moves to the paced catch-up");
        self.hand_to_catch_up(relay, filters);
        self.dial_lane_or_catch_up(relay);
    }

    /// Closes every extra connection and forgets their coverage (the session ended, restarts
    /// its coverage, or holds all of it now).
    pub(super) fn close_lanes(&mut self, relay: &RelayUrl) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let lanes = std::mem::take(&mut runtime.lanes);
        for lane in lanes.lanes {
            if let Some(mut session) = lane.session {
                for id in session.live.keys() {
                    session.transmit.push(Outbound::Close(id.clone()));
                }
                runtime.ended_sessions_bytes += session.handle.wire_bytes();
                session.transmit.push(Outbound::Disconnect);
            }
        }
    }
}
