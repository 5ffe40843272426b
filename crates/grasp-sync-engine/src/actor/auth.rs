//! NIP-42 on a session: `auth-required:` refusals routed by the session's `SessionAuth`, and
//! what the AUTH's outcome does to the work parked for it.
//!
//! The transport answers challenges (when it holds a key); the actor only decides what happens
//! to refused work. Parked work was released when it was refused (its permits freed; repository
//! coverage's batch abandoned or its live group retired), so sending it again after AUTH goes
//! through the ledger and the pacing gates like any new work: nothing is replayed behind the
//! ledger's back. Three kinds are parked ([`ParkedWork`]): repository coverage refused by REQ,
//! the coverage of a NIP-77 round (derived again and reconciled by NIP-77, never turned into a
//! REQ the relay would refuse the same way), and one REQ of a participant-discovery batch
//! (sent again in its batch; a failed AUTH costs that relay's discovery of that kind only).

use grasp_sync_health::{RefusalAction, RefusalScope, classify};
use grasp_sync_model::{BatchId, RelayUrl};
use nostr::{Filter, SubscriptionId};

use super::Actor;
use super::history::FilterCeiling;
pub(super) use crate::machine::refusals::ParkedWork;
use crate::machine::session_auth::AuthVerdict;
use crate::machine::timers::RelayTimer;

/// The text a failed or unanswered AUTH is refused with (it classifies as `auth-required`).
const AUTH_FAILED: &str = "auth-required: authentication failed";

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
        self.count_refusal(relay, &classify(text), text);
        let work = ParkedWork::Round(filter.clone());
        let verdict = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
            .map(|s| {
                if sent_before_auth {
                    s.auth.handle_refusal_sent_before(now, work)
                } else {
                    s.auth.handle_refusal(now, work)
                }
            });
        match verdict {
            Some(AuthVerdict::Park | AuthVerdict::Resend) => {
                // The batch's other rounds would be refused the same way before the AUTH; it
                // is derived again after it (at once when the AUTH already succeeded).
                tracing::info!(%relay, "a negentropy round needs NIP-42 authentication; its coverage is reconciled again once the relay accepts ours");
                self.fail_batch(relay, batch, text);
            }
            Some(AuthVerdict::Refuse) | None => {
                self.refuse_round(relay, &filter, text);
                self.hold_refused_round(relay, batch, subscription_id);
            }
        }
    }

    /// The relay sent a challenge the session answers.
    pub(super) fn handle_auth_challenge(&mut self, relay: &RelayUrl) {
        if let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
        {
            session.auth.handle_challenge();
        }
    }

    /// The relay accepted the session's AUTH: the parked work is sent again now, once —
    /// discovery requests in their batches, coverage derived again.
    pub(super) fn handle_authenticated(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(session) = runtime.machine.session.as_mut() else {
            return;
        };
        let parked = session.auth.handle_authenticated();
        tracing::info!(%relay, parked = parked.len(), "authenticated to the relay (NIP-42)");
        let mut derive_again = false;
        for work in parked {
            match work {
                ParkedWork::Discovery {
                    batch,
                    subscription_id,
                    filters,
                } => self.resend_discovery(relay, batch, &subscription_id, filters),
                ParkedWork::Coverage(_) | ParkedWork::Round(_) => derive_again = true,
            }
        }
        if derive_again {
            if let Some(runtime) = self.runtimes.get_mut(relay) {
                runtime.machine.timers.set(RelayTimer::CoverageRetry, now);
            }
            self.repair_live(relay);
        }
        self.drive_queue(relay);
    }

    /// The session's AUTH failed: the parked work is refused by policy.
    pub(super) fn handle_auth_failed(&mut self, relay: &RelayUrl) {
        let parked = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
            .map(|s| s.auth.handle_failed())
            .unwrap_or_default();
        tracing::info!(%relay, parked = parked.len(), "NIP-42 authentication failed");
        self.refuse_parked(relay, parked);
    }

    /// Past the parked work's deadline without an outcome: refused by policy.
    pub(super) fn handle_auth_timeout(&mut self, relay: &RelayUrl, now: std::time::Instant) {
        let parked = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
            .map(|s| s.auth.handle_timeout(now))
            .unwrap_or_default();
        if !parked.is_empty() {
            tracing::info!(%relay, parked = parked.len(), "no NIP-42 authentication in time");
            self.refuse_parked(relay, parked);
        }
    }

    /// A parked discovery request is sent again in its batch, if the batch is still pending.
    fn resend_discovery(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        subscription_id: &SubscriptionId,
        filters: Vec<Filter>,
    ) {
        let _ = self.pending.resolve_subscription(relay, subscription_id);
        let pending = self
            .pending
            .batches(relay)
            .iter()
            .any(|b| b.batch_id == batch);
        if pending && !self.queue_req_groups(relay, batch, filters, FilterCeiling::Learned) {
            self.fail_batch(relay, batch, "a discovery request could not be sent again");
        }
    }

    /// Refuses each parked piece of work by policy: coverage and rounds pause only what was
    /// refused, a discovery batch fails into its relay's discovery pause of that kind. After
    /// refused coverage, the rest of the relay's coverage is derived again.
    fn refuse_parked(&mut self, relay: &RelayUrl, parked: Vec<ParkedWork>) {
        if parked.is_empty() {
            return;
        }
        let now = self.now();
        let refusal = classify(AUTH_FAILED);
        let mut coverage = false;
        for work in parked {
            coverage |= !matches!(work, ParkedWork::Discovery { .. });
            match work {
                ParkedWork::Coverage(filters) => {
                    let scope = RefusalScope::Coverage {
                        filters: u32::try_from(filters.len()).unwrap_or(u32::MAX),
                    };
                    let action = self
                        .runtimes
                        .get_mut(relay)
                        .map(|r| r.machine.health.handle_refusal(now, &refusal, scope));
                    if let Some(RefusalAction::CoveragePaused { until }) = action {
                        self.pause_refused_coverage(relay, &filters, until, AUTH_FAILED);
                    }
                }
                ParkedWork::Round(filter) => self.refuse_round(relay, &filter, AUTH_FAILED),
                ParkedWork::Discovery { batch, .. } => {
                    if let (Some(scope), Some(runtime)) = (
                        self.outbox.refusal_scope(relay, batch),
                        self.runtimes.get_mut(relay),
                    ) {
                        let _ = runtime.machine.health.handle_refusal(now, &refusal, scope);
                    }
                    self.fail_batch(relay, batch, AUTH_FAILED);
                }
            }
        }
        if !coverage {
            return; // a relay's discovery keeps its own deadlines
        }
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.timers.set(RelayTimer::CoverageRetry, now);
        }
        self.repair_live(relay);
    }

    /// A policy refusal of one NIP-77 round's filter: only that filter is paused. Rounds queued
    /// for other batches go on by NIP-77 (a REQ for them could be refused the same way).
    fn refuse_round(&mut self, relay: &RelayUrl, filter: &Filter, text: &str) {
        let now = self.now();
        let refusal = classify(text);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let scope = RefusalScope::Coverage { filters: 1 };
        if let RefusalAction::CoveragePaused { until } =
            runtime.machine.health.handle_refusal(now, &refusal, scope)
        {
            runtime
                .machine
                .refused
                .handle_refusal(std::slice::from_ref(filter), until);
            tracing::info!(%relay, reason = %text, "a negentropy round's coverage is paused for the policy pause; the rest goes on");
        }
    }
}
