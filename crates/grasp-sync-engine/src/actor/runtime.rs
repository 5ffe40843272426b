//! Per-relay state owned by the actor: the relay's machine ([`RelayMachine`]: health, learned
//! limits, the ledger, the session's state, NIP-77 support and everything else the rules read)
//! beside what only the driver holds, the connection handles and what they moved.

use grasp_sync_health::RelayHealth;

use crate::machine::neg_rounds::NegRound;
use crate::machine::relay::RelayMachine;
pub(super) use crate::machine::session::{LiveDriven, SessionState};
use crate::session::SessionHandle;

/// The machine of one relay as the actor drives it: what it queues for NIP-77 and parks for
/// the AUTH are the actor's.
pub(super) type Machine = RelayMachine<NegRound, super::auth::ParkedWork>;

/// Everything the actor knows about one relay.
pub(super) struct RelayRuntime {
    /// The relay's state and rules.
    pub(super) machine: Machine,
    /// The handle of the connection the machine's session runs on.
    pub(super) connection: Option<SessionHandle>,
    /// Text-frame bytes moved by this relay's sessions that have ended.
    pub(super) ended_sessions_bytes: crate::transport::WireBytes,
    /// The sessions of the extra connections.
    pub(super) lane_handles: super::lanes::LaneHandles,
}

impl Drop for RelayRuntime {
    /// What the session decided last is still performed: a CLOSE or a disconnect queued in the
    /// step that drops the relay.
    fn drop(&mut self) {
        self.perform_transmits();
    }
}

impl RelayRuntime {
    pub(super) fn new(health: RelayHealth) -> Self {
        Self {
            machine: RelayMachine::new(health),
            connection: None,
            ended_sessions_bytes: crate::transport::WireBytes::default(),
            lane_handles: super::lanes::LaneHandles::default(),
        }
    }

    /// Starts the session `state` on the connection `handle`.
    pub(super) fn start_session(&mut self, handle: SessionHandle, state: Session) {
        self.end_session(None);
        self.connection = Some(handle);
        self.machine.handle_session_started(state);
    }

    /// Hands the session's connection what the machine queued for it, in the order decided.
    pub(super) fn perform_transmits(&mut self) {
        if let Some(handle) = &self.connection {
            while let Some(message) = self.machine.poll_transmit() {
                handle.send(message);
            }
        }
    }

    /// Ends the current session: what it decided last is performed, and what it moved is kept
    /// in the relay's byte count. With `ended`, the machine also learns why and when it ended;
    /// without, only the session's state is dropped.
    pub(super) fn end_session(&mut self, ended: Option<(std::time::Instant, &str)>) {
        self.perform_transmits();
        match ended {
            Some((now, reason)) => {
                self.machine.handle_session_ended(now, reason);
            }
            None => self.machine.session = None,
        }
        if let Some(handle) = self.connection.take() {
            self.ended_sessions_bytes += handle.wire_bytes();
        }
    }

    /// The current connection's handle if it carries the session `key`.
    pub(super) fn connection_of(
        &self,
        key: &crate::machine::transmit::SessionKey,
    ) -> Option<&SessionHandle> {
        self.connection.as_ref().filter(|h| h.key == *key)
    }

    /// Text-frame bytes moved with this relay since it was first tracked: its ended sessions
    /// and the current one. Monotonic.
    pub(super) fn wire_bytes(&self) -> crate::transport::WireBytes {
        let current = self
            .connection
            .as_ref()
            .map(|h| h.wire_bytes())
            .unwrap_or_default();
        self.ended_sessions_bytes + current + self.lane_handles.wire_bytes()
    }
}

/// The session's state as the actor drives it.
pub(super) type Session = SessionState<NegRound, super::auth::ParkedWork>;

/// Logs what a session's live queue did, and counts its starts in `metrics` (the relay's
/// statistics counted them already).
pub(super) fn log_live_driven(
    relay: &grasp_sync_model::RelayUrl,
    driven: LiveDriven,
    metrics: Option<&crate::metrics::SyncMetrics>,
) {
    if let Some(reason) = driven.rejected {
        tracing::warn!(%relay, ?reason, "live start rejected");
    } else if driven.waiting {
        tracing::debug!(%relay, "live start waits for the reactive gate");
    }
    if driven.sent > 0 {
        tracing::debug!(%relay, sent = driven.sent, "live REQs start");
    }
    if let Some(metrics) = metrics {
        for _ in 0..driven.sent {
            metrics.record_req("live");
        }
    }
}
