//! Per-relay state owned by the actor: health, learned limits, the ledger and, while connected,
//! the session: the connection's handle beside the machine's [`SessionState`] (pacing gates,
//! live groups, transient subscriptions and queued starts).

use std::collections::BTreeMap;
use std::time::Instant;

use grasp_sync_health::RelayHealth;
use grasp_sync_ledger::{LearnedLimits, SubscriptionLedger};
use grasp_sync_model::BatchId;

pub(super) use crate::machine::session::{
    LiveGroup, QueuedStart, SessionState, Transient, UNSENT, held_groups,
};
use crate::machine::timers::{RelayTimer, Timers};
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
    pub(super) descendants: crate::machine::descendant_coverage::DescendantCoverage,
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
    pub(super) catch_up: crate::machine::catch_up::CatchUp,
    /// What the relay delivered during its first sync, across its sessions until then.
    pub(super) delivered: crate::machine::delivered::DeliveredIds,
    /// Pending batches that must not be confirmed (truncated, or with failed saves), and
    /// their retry backoffs.
    pub(super) incomplete: crate::machine::incomplete_batches::IncompleteBatches,
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

/// One connected session of a relay: the connection's handle, which the actor drives, and the
/// session's state ([`SessionState`], the machine's), which ends with it.
pub(super) struct Session {
    pub(super) handle: SessionHandle,
    pub(super) state: SessionState<super::negentropy::NegRound, super::auth::ParkedWork>,
}

impl Drop for Session {
    /// What the session decided last is still performed: a CLOSE or the disconnect queued in
    /// the step that drops it.
    fn drop(&mut self) {
        self.handle.perform(&mut self.state.transmit);
    }
}

impl Session {
    /// Sends queued live REQs while the reactive gate allows, counting them.
    pub(super) fn drive_live(
        &mut self,
        now: Instant,
        relay: &grasp_sync_model::RelayUrl,
        stats: &mut RelayStats,
        metrics: Option<&crate::metrics::SyncMetrics>,
    ) {
        let driven = self.state.drive_live(now);
        if let Some(reason) = driven.rejected {
            tracing::warn!(%relay, ?reason, "live start rejected");
        } else if driven.waiting {
            tracing::debug!(%relay, "live start waits for the reactive gate");
        }
        if driven.sent > 0 {
            tracing::debug!(%relay, sent = driven.sent, "live REQs start");
        }
        stats.req_starts_live += driven.sent as u64;
        if let Some(metrics) = metrics {
            for _ in 0..driven.sent {
                metrics.record_req("live");
            }
        }
    }
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
            descendants: Default::default(),
            neg_batches: BTreeMap::new(),
            nip77: crate::negentropy::Nip77Support::new(),
            refused: crate::machine::refused::RefusedCoverage::default(),
            consolidation: Default::default(),
            catch_up: crate::machine::catch_up::CatchUp::default(),
            delivered: Default::default(),
            incomplete: Default::default(),
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
        self.session
            .as_ref()
            .map_or(0, |s| s.state.held_subscriptions())
    }

    /// Updates the peak of held subscriptions.
    pub(super) fn note_peak(&mut self) {
        let held = self.held_subscriptions();
        if held > self.stats.peak_subscriptions {
            self.stats.peak_subscriptions = held;
        }
    }
}
