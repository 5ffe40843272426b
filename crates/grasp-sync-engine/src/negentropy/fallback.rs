//! [`NegentropyFallbacks`]: when NIP-77 falls back to REQ+EOSE, for which reason, whether the
//! relay was already warned about, and whether NIP-77 is off for the relay's current session;
//! plus the counts the metrics report.
//!
//! A relay is warned about once, on its first fallback, whatever the reason. Any query-rate
//! refusal (from a negentropy round or from any REQ) turns NIP-77 off for the rest of the
//! relay's connection session, because a round's NEG-MSG continuations answer the relay at
//! once and the engine does not pace them; so does a relay saying it does not speak NIP-77. A new session
//! turns it back on.

use std::collections::BTreeSet;

use grasp_sync_model::RelayUrl;

use super::recovery::MissingEventRecovery;
pub use crate::machine::nip77::FallbackReason;

/// Counts for the metrics, cumulative since the engine started (pending IDs: current).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NegentropyCounts {
    /// Negentropy rounds started.
    pub rounds_started: u64,
    /// Negentropy rounds that produced a diff.
    pub rounds_completed: u64,
    /// Fallbacks to REQ+EOSE, indexed like [`FallbackReason::ALL`].
    pub fallbacks: [u64; 5],
    /// IDs currently awaiting missing-event recovery, over all relays.
    pub recovery_pending_ids: u64,
    /// IDs recovered (by an attempt or otherwise) since the engine started.
    pub recovered_ids: u64,
    /// IDs dropped by recovery expiry since the engine started.
    pub expired_ids: u64,
}

impl NegentropyCounts {
    /// Fallbacks for one reason.
    pub fn fallbacks_for(&self, reason: FallbackReason) -> u64 {
        self.fallbacks[reason.index()]
    }
}

/// Fallback bookkeeping for every relay.
#[derive(Debug, Clone, Default)]
pub struct NegentropyFallbacks {
    warned: BTreeSet<RelayUrl>,
    disabled: BTreeSet<RelayUrl>,
    rounds_started: u64,
    rounds_completed: u64,
    fallbacks: [u64; 5],
}

impl NegentropyFallbacks {
    /// No relay warned about, NIP-77 enabled everywhere.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a new negentropy round may start on the relay's current session.
    pub fn nip77_enabled(&self, relay: &RelayUrl) -> bool {
        !self.disabled.contains(relay)
    }

    /// A negentropy round started.
    pub fn handle_round_started(&mut self) {
        self.rounds_started += 1;
    }

    /// A negentropy round produced a diff.
    pub fn handle_round_completed(&mut self) {
        self.rounds_completed += 1;
    }

    /// A round at `relay` fell back to REQ+EOSE for `reason`. Returns whether to log the
    /// warning: only for the relay's first fallback.
    pub fn handle_fallback(&mut self, relay: &RelayUrl, reason: FallbackReason) -> bool {
        self.fallbacks[reason.index()] += 1;
        if reason.disables_session() {
            self.disabled.insert(relay.clone());
        }
        self.warned.insert(relay.clone())
    }

    /// The relay refused some query (a REQ, not necessarily a negentropy round) because of its
    /// query rate: NIP-77 is off for the rest of the session.
    pub fn handle_query_rate_refusal(&mut self, relay: &RelayUrl) {
        self.disabled.insert(relay.clone());
    }

    /// The relay has a new connection session: NIP-77 is on again. Warnings stay given.
    pub fn handle_session_started(&mut self, relay: &RelayUrl) {
        self.disabled.remove(relay);
    }

    /// The counts for the metrics, with recovery's from `recovery`.
    pub fn counts(&self, recovery: &MissingEventRecovery) -> NegentropyCounts {
        NegentropyCounts {
            rounds_started: self.rounds_started,
            rounds_completed: self.rounds_completed,
            fallbacks: self.fallbacks,
            recovery_pending_ids: u64::try_from(recovery.total_pending()).unwrap_or(u64::MAX),
            recovered_ids: recovery.recovered_total(),
            expired_ids: recovery.expired_total(),
        }
    }
}

#[cfg(test)]
mod tests;
