//! Per-relay state owned by the actor: health, learned limits and, while connected, the session
//! with its ledger, pacing gates, live groups, transient subscriptions and queued starts.

use std::collections::{BTreeMap, VecDeque};

use grasp_sync_filters::{CoverageTier, FilterGroup, GroupedPagination, RelayPageSession};
use grasp_sync_health::RelayHealth;
use grasp_sync_ledger::{
    BackgroundGate, GateRejection, HeldGroup, LearnedLimits, Permit, PermitClass, ReactiveGate,
    StartDecision, StartKind, SubscriptionLedger,
};
use grasp_sync_model::BatchId;
use nostr::SubscriptionId;
use std::time::Instant;

use crate::machine::timers::{RelayTimer, SessionTimer, Timers};
use crate::machine::transmit::{Outbound, Transmits};
use crate::session::SessionHandle;

/// Everything the actor knows about one relay.
pub(super) struct RelayRuntime {
    pub(super) health: RelayHealth,
    pub(super) learned: LearnedLimits,
    /// The ledger outlives sessions: each connection starts a new generation.
    pub(super) ledger: Option<SubscriptionLedger>,
    /// The attempt in flight, if a dial was queued.
    pub(super) dialing: Option<u64>,
    pub(super) session: Option<Session>,
    pub(super) stats: RelayStats,
    /// The relay's named timers (completion check, coverage retry, daily reconciliation).
    pub(super) timers: Timers<RelayTimer>,
    /// The Layer 1 announcements batch of the current session.
    pub(super) announcements_batch: Option<BatchId>,
    /// A subscription budget the relay taught us by refusing (it did not advertise one, or
    /// advertised too much); kept across sessions.
    pub(super) learned_slots: Option<usize>,
    /// Which direct members this relay covers, and its descendant fallback state.
    pub(super) descendants: super::descendants::DescendantCoverage,
    /// The negentropy side of pending batches reconciled by NIP-77.
    pub(super) neg_batches: BTreeMap<BatchId, crate::machine::neg_batch::NegBatch>,
    /// Whether the relay speaks NIP-77: this session's knowledge and a verdict kept across
    /// sessions.
    pub(super) nip77: crate::negentropy::Nip77Support,
    /// Coverage this relay refused by policy, paused on its own; kept across sessions.
    pub(super) refused: crate::machine::refused::RefusedCoverage,
    /// The queued consolidation check of the core live groups.
    pub(super) consolidation: crate::machine::consolidation::Consolidation,
    /// Coverage left out of the live set by the learned byte cap, and its paced catch-up.
    pub(super) catch_up: super::catch_up::CatchUp,
    /// What the relay delivered during its first sync, across its sessions until then.
    pub(super) delivered: crate::machine::delivered::DeliveredIds,
    /// Recovery probes of refused coverage in flight, by batch.
    pub(super) probe_batches: BTreeMap<BatchId, nostr::Filter>,
    /// Pending batches with a truncated filter: never confirmed, abandoned once drained.
    /// Bounded by the pending batches.
    pub(super) truncated_batches: std::collections::BTreeSet<BatchId>,
    /// Truncated batches so far, for the retry backoff (a relay that truncates once is likely
    /// to again: each retry waits twice as long, up to six hours).
    pub(super) truncations: u32,
    /// Pending batches with events the store failed to save, with (some of) their IDs: never
    /// confirmed, abandoned once drained. Bounded by the pending batches.
    pub(super) unsaved_batches: BTreeMap<BatchId, std::collections::BTreeSet<nostr::EventId>>,
    /// Batches in a row abandoned for failed saves, for their retry backoff; reset by a
    /// confirmed batch.
    pub(super) unsaved_streak: u32,
    /// Text-frame bytes moved by this relay's sessions that have ended.
    pub(super) ended_sessions_bytes: crate::transport::WireBytes,
    /// Extra connections holding the essential live coverage the session's budget cannot.
    pub(super) lanes: crate::machine::lanes::LiveLanes,
    /// The sessions of those extra connections.
    pub(super) lane_handles: super::lanes::LaneHandles,
}

/// Counters kept for the status snapshot and the closing figures.
#[derive(Debug, Default, Clone)]
pub(super) struct RelayStats {
    pub(super) req_starts_live: u64,
    pub(super) req_starts_historic: u64,
    pub(super) events_received: u64,
    pub(super) peak_subscriptions: usize,
    pub(super) refusals: BTreeMap<&'static str, u64>,
    pub(super) stale_refusals: u64,
    pub(super) connections: u64,
    pub(super) quick_reconnects: u64,
    pub(super) long_reconnects: u64,
    pub(super) daily_reconciliations: u64,
    pub(super) consolidations: u64,
    pub(super) catch_ups: u64,
    pub(super) history_truncated: u64,
    pub(super) history_unsaved: u64,
    pub(super) unsaved_events: u64,
    /// Paging quirks the last session showed (labels from `RelayQuirks::labels`).
    pub(super) quirks: Vec<&'static str>,
    pub(super) last_error: Option<String>,
}

/// One connected session of a relay.
pub(super) struct Session {
    pub(super) handle: SessionHandle,
    pub(super) background: BackgroundGate,
    pub(super) reactive: ReactiveGate,
    pub(super) pages: RelayPageSession,
    pub(super) live: BTreeMap<SubscriptionId, LiveGroup>,
    pub(super) transients: BTreeMap<SubscriptionId, Transient>,
    pub(super) queue: VecDeque<QueuedStart>,
    /// The session's named timers (gate wait, live repair): they end with the session.
    pub(super) timers: Timers<SessionTimer>,
    /// REQs sent in this session (the next one's send order).
    pub(super) sent: u64,
    /// The latest REQs the relay has not answered yet, oldest first, with the number of
    /// filters each was sent with (at most [`UNANSWERED_KEPT`]).
    pub(super) unanswered: VecDeque<(SubscriptionId, usize)>,
    /// Live groups admitted by the ledger whose REQ waits for the reactive gate (only while
    /// a query-rate episode spaces starts; otherwise they are sent at once).
    pub(super) live_queue: VecDeque<SubscriptionId>,
    /// The deferred live planning is a full rebuild (a consolidation or a learned byte cap).
    pub(super) rebuild_pending: bool,
    /// Negentropy rounds waiting for a permit and the gates.
    pub(super) neg_queue: VecDeque<super::negentropy::NegRound>,
    /// Negentropy rounds running as background jobs, with their batch and permit.
    pub(super) neg_in_flight: BTreeMap<SubscriptionId, (BatchId, Permit)>,
    /// Rounds in flight that started before the session authenticated: their refusal, read
    /// on the round's own channel, may come after the relay accepted the AUTH.
    pub(super) rounds_before_auth: std::collections::BTreeSet<SubscriptionId>,
    /// NIP-42 on this connection and the coverage parked until its AUTH succeeds.
    pub(super) auth: crate::machine::session_auth::SessionAuth<super::auth::ParkedWork>,
    /// An index update changed this relay's targets while background starts were queued: its
    /// diff runs once the queue has drained ([`Session::has_queued_background`]).
    pub(super) index_update_waits: bool,
    /// REQs, CLOSEs and the disconnect decided for this connection and not yet handed to it:
    /// performed once per actor step ([`super::Actor::perform_transmits`]) and when the session
    /// is dropped.
    pub(super) transmit: Transmits,
}

impl Drop for Session {
    /// What the session decided last is still performed: a CLOSE or the disconnect queued in
    /// the step that drops it.
    fn drop(&mut self) {
        self.handle.perform(&mut self.transmit);
    }
}

impl Session {
    /// Whether historic REQs or negentropy rounds wait in this session's queues for the gates
    /// or a slot.
    pub(super) fn has_queued_background(&self) -> bool {
        self.queued_background() > 0
    }

    /// How many historic REQs and negentropy rounds wait in this session's queues.
    pub(super) fn queued_background(&self) -> usize {
        self.queue.len() + self.neg_queue.len()
    }

    /// The send order for the next REQ, `id`'s, sent with `filters` filters; it stays
    /// unanswered until the relay says anything about it.
    pub(super) fn next_sent(&mut self, id: &SubscriptionId, filters: usize) -> u64 {
        self.sent += 1;
        if self.unanswered.len() >= UNANSWERED_KEPT {
            self.unanswered.pop_front();
        }
        self.unanswered.push_back((id.clone(), filters));
        self.sent
    }

    /// The relay answered `id` (an event, EOSE or CLOSED): the number of filters its REQ was
    /// sent with, if this is the first answer to it.
    pub(super) fn handle_answer(&mut self, id: &SubscriptionId) -> Option<usize> {
        let at = self.unanswered.iter().position(|(u, _)| u == id)?;
        self.unanswered.remove(at).map(|(_, filters)| filters)
    }

    /// The newest REQ still held that the relay has not answered: the one a NOTICE refusing
    /// a REQ most likely answers (relays answer a connection's messages in order, and a
    /// refusal comes before any result).
    pub(super) fn take_newest_unanswered(&mut self) -> Option<SubscriptionId> {
        while let Some((id, _)) = self.unanswered.pop_back() {
            if self.live.contains_key(&id) || self.transients.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }

    /// The REQ still held that a NOTICE refusing a REQ for its filter count most likely
    /// answers: of those the relay has not answered, the one with the most filters, the newest
    /// among equals. A REQ of one filter is never refused for its count, and a burst of REQs
    /// may be answered in any order (a refusal comes at once, results after a query), so the
    /// newest unanswered REQ is not always the one refused.
    pub(super) fn take_widest_unanswered(&mut self) -> Option<SubscriptionId> {
        let at = self
            .unanswered
            .iter()
            .enumerate()
            .filter(|(_, (id, filters))| {
                *filters > 1 && (self.live.contains_key(id) || self.transients.contains_key(id))
            })
            .max_by_key(|(at, (_, filters))| (*filters, *at))
            .map(|(at, _)| at)?;
        self.unanswered.remove(at).map(|(id, _)| id)
    }

    /// Subscriptions still open that were sent before the one with send order `before`.
    pub(super) fn held_before(&self, before: u64) -> usize {
        self.live.values().filter(|g| g.sent < before).count()
            + self.transients.values().filter(|t| t.sent < before).count()
    }

    /// The send order of an open subscription.
    pub(super) fn sent_order(&self, id: &nostr::SubscriptionId) -> Option<u64> {
        self.live
            .get(id)
            .map(|g| g.sent)
            .or_else(|| self.transients.get(id).map(|t| t.sent))
    }
}

impl Session {
    /// Sends queued live REQs while the reactive gate allows; a gate that asks to wait sets
    /// [`SessionTimer::GateWait`]. Live starts never pass the background gate.
    pub(super) fn drive_live(
        &mut self,
        now: Instant,
        relay: &grasp_sync_model::RelayUrl,
        stats: &mut RelayStats,
        metrics: Option<&crate::metrics::SyncMetrics>,
    ) {
        while let Some(id) = self.live_queue.front().cloned() {
            if !self.live.contains_key(&id) {
                self.live_queue.pop_front(); // retired before it was sent
                continue;
            }
            let wait = match self.reactive.poll_start(now, StartKind::Live) {
                StartDecision::Ready => None,
                StartDecision::NotBefore(at) => Some(at),
                StartDecision::Rejected(GateRejection::Cooldown { until }) => Some(until),
                StartDecision::Rejected(reason) => {
                    tracing::warn!(%relay, ?reason, "live start rejected");
                    break;
                }
            };
            if let Some(at) = wait {
                tracing::debug!(%relay, "live start waits for the reactive gate");
                self.timers.set_earliest(SessionTimer::GateWait, at);
                break;
            }
            self.live_queue.pop_front();
            let Some(filters) = self.live.get(&id).map(|g| g.group.to_filters()) else {
                continue;
            };
            tracing::debug!(%relay, subscription = %id, filters = filters.len(), "live REQ starts");
            let sent = self.next_sent(&id, filters.len());
            if let Some(group) = self.live.get_mut(&id) {
                group.sent = sent;
            }
            self.transmit.push(Outbound::Req {
                subscription_id: id,
                filters,
            });
            stats.req_starts_live += 1;
            if let Some(metrics) = metrics {
                metrics.record_req("live");
            }
        }
    }

    /// Whether a query-rate cooldown is running at `now`; if so live planning is deferred to
    /// its end ([`SessionTimer::LiveRepair`]).
    pub(super) fn defer_for_cooldown(&mut self, now: Instant) -> bool {
        let Some(until) = self.reactive.poll_timeout().filter(|until| *until > now) else {
            return false;
        };
        self.timers.set_earliest(SessionTimer::LiveRepair, until);
        true
    }

    /// Live groups carrying core coverage (not descendants).
    pub(super) fn core_live(&self) -> usize {
        self.live.values().filter(|g| !g.is_auxiliary()).count()
    }
}

/// A persistent live group.
pub(super) struct LiveGroup {
    pub(super) group: FilterGroup,
    pub(super) permit: Permit,
    /// Send order within the session; [`UNSENT`] while its REQ waits in the live queue.
    pub(super) sent: u64,
}

/// How many unanswered REQs a session remembers for matching a refusal NOTICE.
pub(super) const UNANSWERED_KEPT: usize = 64;

/// The send order of a live group whose REQ has not been sent: after every real one.
pub(super) const UNSENT: u64 = u64::MAX;

/// The groups of `live` as the live planner takes them.
pub(super) fn held_groups(live: &BTreeMap<SubscriptionId, LiveGroup>) -> Vec<HeldGroup> {
    live.iter()
        .map(|(id, live)| HeldGroup {
            subscription_id: id.clone(),
            group: live.group.clone(),
        })
        .collect()
}

impl LiveGroup {
    /// Whether its REQ was sent (a CLOSE is due when it is retired).
    pub(super) fn was_sent(&self) -> bool {
        self.sent != UNSENT
    }

    /// Whether the group carries descendant coverage: auxiliary, retired before core coverage
    /// is rebuilt and never part of its rollback.
    pub(super) fn is_auxiliary(&self) -> bool {
        matches!(
            self.group.tier(),
            Some(CoverageTier::DescendantCanonical | CoverageTier::DescendantQuote)
        )
    }
}

/// A transient REQ+EOSE subscription in flight.
pub(super) struct Transient {
    pub(super) batch: BatchId,
    pub(super) permit: Option<Permit>,
    pub(super) pagination: GroupedPagination,
    /// A CLOSE was queued by the watchdog; the permit is released once it was sent.
    pub(super) watchdog_closing: bool,
    /// Send order within the session.
    pub(super) sent: u64,
    /// An exact-ID fetch: never paged; deliveries count for its batch's hydration.
    pub(super) exact: bool,
}

/// A transient REQ waiting for a slot and the pacing gates. Its subscription is already
/// registered in its batch, so the batch cannot confirm before it ran.
pub(super) struct QueuedStart {
    pub(super) subscription_id: SubscriptionId,
    pub(super) batch: BatchId,
    pub(super) class: PermitClass,
    pub(super) kind: StartKind,
    pub(super) pagination: GroupedPagination,
    /// An exact-ID fetch (see [`Transient::exact`]).
    pub(super) exact: bool,
}

impl RelayRuntime {
    pub(super) fn new(health: RelayHealth) -> Self {
        Self {
            health,
            learned: LearnedLimits::new(),
            ledger: None,
            dialing: None,
            session: None,
            stats: RelayStats::default(),
            timers: Timers::default(),
            announcements_batch: None,
            learned_slots: None,
            descendants: super::descendants::DescendantCoverage::default(),
            neg_batches: BTreeMap::new(),
            nip77: crate::negentropy::Nip77Support::new(),
            refused: crate::machine::refused::RefusedCoverage::default(),
            consolidation: Default::default(),
            catch_up: super::catch_up::CatchUp::default(),
            delivered: Default::default(),
            probe_batches: BTreeMap::new(),
            truncated_batches: std::collections::BTreeSet::new(),
            truncations: 0,
            unsaved_batches: BTreeMap::new(),
            unsaved_streak: 0,
            ended_sessions_bytes: crate::transport::WireBytes::default(),
            lanes: crate::machine::lanes::LiveLanes::default(),
            lane_handles: super::lanes::LaneHandles::default(),
        }
    }

    /// Text-frame bytes moved with this relay since it was first tracked: its ended sessions
    /// and the current one. Monotonic.
    pub(super) fn wire_bytes(&self) -> crate::transport::WireBytes {
        let current = self
            .session
            .as_ref()
            .map(|s| s.handle.wire_bytes())
            .unwrap_or_default();
        self.ended_sessions_bytes + current + self.lane_handles.wire_bytes()
    }

    /// Ends the current session, keeping what it moved in the relay's byte count.
    pub(super) fn end_session(&mut self) {
        if let Some(session) = self.session.take() {
            self.ended_sessions_bytes += session.handle.wire_bytes();
        }
    }

    /// Subscriptions held on the wire now (live groups whose REQ still waits do not count).
    pub(super) fn held_subscriptions(&self) -> usize {
        self.session.as_ref().map_or(0, |s| {
            s.live.values().filter(|g| g.was_sent()).count()
                + s.transients.len()
                + s.neg_in_flight.len()
        })
    }

    /// Updates the peak of held subscriptions.
    pub(super) fn note_peak(&mut self) {
        let held = self.held_subscriptions();
        if held > self.stats.peak_subscriptions {
            self.stats.peak_subscriptions = held;
        }
    }
}
