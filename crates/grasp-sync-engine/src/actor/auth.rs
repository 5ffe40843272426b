//! NIP-42 on a session: `auth-required:` refusals routed by the session's `SessionAuth`, and
//! what the AUTH's outcome does to the work parked for it.
//!
//! The transport answers challenges (when it holds a key). What the AUTH's outcome does to the
//! parked work is decided by the relay's machine (`machine/auth_outcome.rs`); the actor sends
//! discovery requests again, fails batches, readmits queued work and repairs live coverage.
//! Parked work was released when it was refused (its permits freed; repository coverage's
//! batch abandoned or its live group retired), so sending it again after AUTH goes
//! through the ledger and the pacing gates like any new work: nothing is replayed behind the
//! ledger's back. Three kinds are parked ([`ParkedWork`]): repository coverage refused by REQ,
//! the coverage of a NIP-77 round (derived again and reconciled by NIP-77, never turned into a
//! REQ the relay would refuse the same way), and one REQ of a participant-discovery batch
//! (sent again in its batch; a failed AUTH costs that relay's discovery of that kind only).

use grasp_sync_health::classify;
use grasp_sync_model::{BatchId, RelayUrl};
use nostr::SubscriptionId;

use super::Actor;
use super::history::FilterCeiling;
use crate::machine::auth_outcome::{
    AUTH_FAILED, AuthRefused, ParkedDiscovery, RefusedParked, RoundAuth,
};
pub(super) use crate::machine::refusals::ParkedWork;

impl Actor {
    /// A NIP-77 round of `batch` refused with `auth-required:` (its NEG-ERR or CLOSED; its
    /// permit is already released): while the session's AUTH may still succeed the batch is
    /// released and derived again after it, by NIP-77; otherwise only the round's filter is
    /// paused by policy, the batch's other rounds go on and the batch then fails. Never a
    /// REQ+EOSE fallback: a REQ for the same coverage would be refused the same way.
    pub(super) fn handle_round_auth_refusal(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        subscription_id: &SubscriptionId,
        text: &str,
        sent_before_auth: bool,
    ) {
        let now = self.now();
        let filter = self
            .pending
            .batches(relay)
            .iter()
            .find(|b| b.batch_id == batch)
            .and_then(|b| b.pagination_state.get(subscription_id))
            .and_then(|p| p.filters.first())
            .map(|f| f.original_filter.clone());
        let Some(filter) = filter else {
            return; // the batch is gone already (abandoned, or the session was replaced)
        };
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let round = runtime
            .machine
            .handle_round_auth_refusal(now, &filter, text, sent_before_auth);
        self.report_refusal(relay, &classify(text), text);
        match round {
            RoundAuth::DeriveAgain => {
                // The batch's other rounds would be refused the same way before the AUTH; it
                // is derived again after it (at once when the AUTH already succeeded).
                tracing::info!(%relay, "a negentropy round needs NIP-42 authentication; its coverage is reconciled again once the relay accepts ours");
                self.fail_batch(relay, batch, text);
            }
            RoundAuth::Refused { paused } => {
                log_round_paused(relay, paused, text);
                self.hold_refused_round(relay, batch, subscription_id);
            }
        }
    }

    /// The relay sent a challenge the session answers.
    pub(super) fn handle_auth_challenge(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.handle_auth_challenge();
        }
    }

    /// The relay accepted the session's AUTH: the parked work is sent again now, once:
    /// discovery requests in their batches, coverage derived again.
    pub(super) fn handle_authenticated(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(authenticated) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.handle_authenticated(now))
        else {
            return;
        };
        tracing::info!(%relay, parked = authenticated.parked, "authenticated to the relay (NIP-42)");
        for discovery in authenticated.resend {
            self.resend_discovery(relay, discovery);
        }
        if authenticated.derive_again {
            self.repair_live(relay);
        }
        self.drive_queue(relay);
    }

    /// The session's AUTH failed: the parked work is refused by policy.
    pub(super) fn handle_auth_failed(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let outbox = &self.outbox;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let refused = runtime
            .machine
            .handle_auth_failed(now, |batch| outbox.refusal_scope(relay, batch));
        tracing::info!(%relay, parked = refused.refused.len(), "NIP-42 authentication failed");
        self.perform_auth_refused(relay, refused);
    }

    /// Past the parked work's deadline without an outcome: refused by policy.
    pub(super) fn handle_auth_timeout(&mut self, relay: &RelayUrl, now: std::time::Instant) {
        let outbox = &self.outbox;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let refused = runtime
            .machine
            .handle_auth_timeout(now, |batch| outbox.refusal_scope(relay, batch));
        if !refused.refused.is_empty() {
            tracing::info!(%relay, parked = refused.refused.len(), "no NIP-42 authentication in time");
            self.perform_auth_refused(relay, refused);
        }
    }

    /// A parked discovery request is sent again in its batch, if the batch is still pending.
    fn resend_discovery(&mut self, relay: &RelayUrl, discovery: ParkedDiscovery) {
        let ParkedDiscovery {
            batch,
            subscription_id,
            filters,
        } = discovery;
        let _ = self.pending.resolve_subscription(relay, &subscription_id);
        let pending = self
            .pending
            .batches(relay)
            .iter()
            .any(|b| b.batch_id == batch);
        if pending && !self.queue_req_groups(relay, batch, filters, FilterCeiling::Learned) {
            self.fail_batch(relay, batch, "a discovery request could not be sent again");
        }
    }

    /// Performs what refusing the parked work by policy asks: queued work readmitted around
    /// paused coverage, discovery batches failed, and, after refused coverage, the rest of the
    /// relay's live coverage repaired.
    fn perform_auth_refused(&mut self, relay: &RelayUrl, refused: AuthRefused) {
        for work in refused.refused {
            match work {
                RefusedParked::Coverage(Some(coverage)) => {
                    self.after_coverage_refused(relay, coverage, AUTH_FAILED);
                }
                RefusedParked::Coverage(None) => {}
                RefusedParked::Round { paused } => log_round_paused(relay, paused, AUTH_FAILED),
                RefusedParked::Discovery { batch } => self.fail_batch(relay, batch, AUTH_FAILED),
            }
        }
        if refused.derive_again {
            self.repair_live(relay);
        }
    }
}

/// Logs a NIP-77 round's coverage paused by a policy refusal.
fn log_round_paused(relay: &RelayUrl, paused: bool, text: &str) {
    if paused {
        tracing::info!(%relay, reason = %text, "a negentropy round's coverage is paused for the policy pause; the rest goes on");
    }
}
