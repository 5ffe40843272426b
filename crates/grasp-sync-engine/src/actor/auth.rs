//! NIP-42 on a session: `auth-required:` refusals routed by the session's `SessionAuth`, and
//! what the AUTH's outcome does to the coverage parked for it.
//!
//! The transport answers challenges (when it holds a key); the actor only decides what happens
//! to refused work. Parked work was released when it was refused (its permits freed, its batch
//! abandoned, its live group retired), so sending it again after AUTH goes through the ledger
//! and the pacing gates like any new work: nothing is replayed behind the ledger's back.

use grasp_sync_health::{RefusalAction, RefusalScope, classify};
use grasp_sync_ledger::ReleaseReason;
use grasp_sync_model::RelayUrl;
use nostr::{Filter, SubscriptionId};

use super::Actor;
use crate::session_auth::AuthVerdict;

/// The text a failed or unanswered AUTH is refused with (it classifies as `auth-required`).
const AUTH_FAILED: &str = "auth-required: authentication failed";

impl Actor {
    /// An `auth-required:` CLOSED of owned coverage: parks it while the session's AUTH may
    /// still succeed (releasing the work without a pause) and returns true; false when it is
    /// a policy refusal for the caller to handle.
    pub(super) fn park_for_auth(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        filters: Vec<Filter>,
        message: &str,
    ) -> bool {
        let now = self.now();
        let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
        else {
            return false;
        };
        if session.auth.handle_refusal(now, filters) == AuthVerdict::Refuse {
            return false;
        }
        let batch = session.transients.get(subscription_id).map(|t| t.batch);
        let auxiliary = session
            .live
            .get(subscription_id)
            .is_some_and(|g| g.is_auxiliary());
        tracing::info!(%relay, "a request needs NIP-42 authentication; it is sent again once the relay accepts ours");
        if let Some(batch) = batch {
            self.release_transient(relay, subscription_id, ReleaseReason::Closed);
            self.fail_batch(relay, batch, message);
        } else {
            self.retire_live_group(relay, subscription_id);
            if auxiliary {
                self.retire_auxiliary(relay);
            }
        }
        true
    }

    /// The relay sent a challenge the session answers.
    pub(super) fn handle_auth_challenge(&mut self, relay: &RelayUrl) {
        if let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
        {
            session.auth.handle_challenge();
        }
    }

    /// The relay accepted the session's AUTH: the parked coverage is derived and sent again
    /// now, once.
    pub(super) fn handle_authenticated(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(session) = runtime.session.as_mut() else {
            return;
        };
        let parked = session.auth.handle_authenticated();
        tracing::info!(%relay, parked = parked.len(), "authenticated to the relay (NIP-42)");
        if parked.is_empty() {
            return;
        }
        runtime.retry_at = Some(now);
        self.repair_live(relay);
    }

    /// The session's AUTH failed: the parked coverage is refused by policy.
    pub(super) fn handle_auth_failed(&mut self, relay: &RelayUrl) {
        let parked = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
            .map(|s| s.auth.handle_failed())
            .unwrap_or_default();
        tracing::info!(%relay, parked = parked.len(), "NIP-42 authentication failed");
        self.refuse_parked(relay, parked);
    }

    /// Past the parked coverage's deadline without an outcome: refused by policy.
    pub(super) fn handle_auth_timeout(&mut self, relay: &RelayUrl, now: std::time::Instant) {
        let parked = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.session.as_mut())
            .map(|s| s.auth.handle_timeout(now))
            .unwrap_or_default();
        if !parked.is_empty() {
            tracing::info!(%relay, parked = parked.len(), "no NIP-42 authentication in time");
            self.refuse_parked(relay, parked);
        }
    }

    /// Pauses each parked request's coverage as a policy refusal, then lets the rest of the
    /// relay's coverage be derived again.
    fn refuse_parked(&mut self, relay: &RelayUrl, parked: Vec<Vec<Filter>>) {
        if parked.is_empty() {
            return;
        }
        let now = self.now();
        let refusal = classify(AUTH_FAILED);
        for filters in parked {
            let scope = RefusalScope::Coverage {
                filters: u32::try_from(filters.len()).unwrap_or(u32::MAX),
            };
            let action = self
                .runtimes
                .get_mut(relay)
                .map(|r| r.health.handle_refusal(now, &refusal, scope));
            if let Some(RefusalAction::CoveragePaused { until }) = action {
                self.pause_refused_coverage(relay, &filters, until, AUTH_FAILED);
            }
        }
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.retry_at = Some(now);
        }
        self.repair_live(relay);
    }
}
