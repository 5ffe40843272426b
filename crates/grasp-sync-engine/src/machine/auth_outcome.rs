//! The session's NIP-42 outcome as inputs of the relay's machine: the relay accepted its AUTH
//! ([`RelayMachine::handle_authenticated`]), refused it or never answered in time
//! ([`RelayMachine::handle_auth_failed`], [`RelayMachine::handle_auth_timeout`]), and an
//! `auth-required:` refusal of a NIP-77 round ([`RelayMachine::handle_round_auth_refusal`]).
//!
//! After an accepted AUTH the parked work is sent again, once: a discovery REQ in its batch,
//! coverage derived again at once. After a failed one each parked piece is refused by policy:
//! coverage and rounds pause only what was refused, a discovery fails into its relay's
//! discovery pause of that kind; after refused coverage, the rest of the relay's coverage is
//! derived again. The machine judges and pauses; the driver sends discovery REQs again, fails
//! batches, readmits queued work and repairs live coverage.

use std::time::Instant;

use grasp_sync_health::{RefusalAction, RefusalScope, classify};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::refusals::{CoverageRefused, ParkedWork};
use crate::machine::relay::RelayMachine;
use crate::machine::session_auth::AuthVerdict;
use crate::machine::timers::RelayTimer;

#[cfg(test)]
mod tests;

/// The text a failed or unanswered AUTH is refused with (it classifies as `auth-required`).
pub const AUTH_FAILED: &str = "auth-required: authentication failed";

/// A parked discovery REQ, to send again in its batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedDiscovery {
    /// The discovery batch.
    pub batch: BatchId,
    /// The refused subscription, still outstanding in the batch.
    pub subscription_id: SubscriptionId,
    /// What it asked for.
    pub filters: Vec<Filter>,
}

/// What an accepted AUTH asks of the driver.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Authenticated {
    /// How many pieces of work were parked.
    pub parked: usize,
    /// Discovery REQs to send again in their batches.
    pub resend: Vec<ParkedDiscovery>,
    /// Coverage or rounds were parked: the coverage retry is armed for now, and the driver
    /// repairs live coverage.
    pub derive_again: bool,
}

/// One parked piece of work, refused by policy after the AUTH failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedParked {
    /// Coverage, paused (or made suspects) when health paused it.
    Coverage(Option<CoverageRefused>),
    /// A NIP-77 round's filter; `paused` when health paused it.
    Round {
        /// The filter is paused.
        paused: bool,
    },
    /// A discovery batch, judged in its discovery scope: the driver fails it.
    Discovery {
        /// The batch.
        batch: BatchId,
    },
}

/// What a failed (or unanswered) AUTH asks of the driver.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuthRefused {
    /// Each parked piece, in the order it was parked.
    pub refused: Vec<RefusedParked>,
    /// Coverage or rounds were refused: the coverage retry is armed for now, and the driver
    /// repairs live coverage.
    pub derive_again: bool,
}

/// What an `auth-required:` refusal of a NIP-77 round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundAuth {
    /// Parked for the AUTH, or the AUTH already succeeded: the driver fails the batch, which
    /// is derived again after the AUTH (at once when it already succeeded).
    DeriveAgain,
    /// A policy refusal of the round's filter (`paused` when health paused it): the batch's
    /// other rounds go on.
    Refused {
        /// The filter is paused.
        paused: bool,
    },
}

impl<Round> RelayMachine<Round, ParkedWork> {
    /// The relay sent a challenge the session answers.
    pub fn handle_auth_challenge(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.auth.handle_challenge();
        }
    }

    /// The relay accepted the session's AUTH at `now`: the parked work is sent again, once.
    /// `None` without a session.
    pub fn handle_authenticated(&mut self, now: Instant) -> Option<Authenticated> {
        let parked = self.session.as_mut()?.auth.handle_authenticated();
        let mut answer = Authenticated {
            parked: parked.len(),
            ..Authenticated::default()
        };
        for work in parked {
            match work {
                ParkedWork::Discovery {
                    batch,
                    subscription_id,
                    filters,
                } => answer.resend.push(ParkedDiscovery {
                    batch,
                    subscription_id,
                    filters,
                }),
                ParkedWork::Coverage(_) | ParkedWork::Round(_) => answer.derive_again = true,
            }
        }
        if answer.derive_again {
            self.timers.set(RelayTimer::CoverageRetry, now);
        }
        Some(answer)
    }

    /// The session's AUTH failed at `now`: the parked work is refused by policy.
    /// `discovery_scope` gives a discovery batch's refusal scope.
    pub fn handle_auth_failed(
        &mut self,
        now: Instant,
        discovery_scope: impl FnMut(BatchId) -> Option<RefusalScope>,
    ) -> AuthRefused {
        let parked = self
            .session
            .as_mut()
            .map(|s| s.auth.handle_failed())
            .unwrap_or_default();
        self.refuse_parked(now, parked, discovery_scope)
    }

    /// At `now`, past the parked work's deadline without an outcome: refused by policy, as
    /// for a failed AUTH. Nothing before the deadline.
    pub fn handle_auth_timeout(
        &mut self,
        now: Instant,
        discovery_scope: impl FnMut(BatchId) -> Option<RefusalScope>,
    ) -> AuthRefused {
        let parked = self
            .session
            .as_mut()
            .map(|s| s.auth.handle_timeout(now))
            .unwrap_or_default();
        self.refuse_parked(now, parked, discovery_scope)
    }

    /// An `auth-required:` refusal (with `text`) at `now` of a NIP-77 round over `filter`;
    /// `sent_before_auth` when the round started before the session authenticated. Counted
    /// in the relay's statistics.
    pub fn handle_round_auth_refusal(
        &mut self,
        now: Instant,
        filter: &Filter,
        text: &str,
        sent_before_auth: bool,
    ) -> RoundAuth {
        self.count_refusal(&classify(text), text);
        let work = ParkedWork::Round(filter.clone());
        let verdict = self.session.as_mut().map(|s| {
            if sent_before_auth {
                s.auth.handle_refusal_sent_before(now, work)
            } else {
                s.auth.handle_refusal(now, work)
            }
        });
        match verdict {
            Some(AuthVerdict::Park | AuthVerdict::Resend) => RoundAuth::DeriveAgain,
            Some(AuthVerdict::Refuse) | None => RoundAuth::Refused {
                paused: self.refuse_round(now, filter, text),
            },
        }
    }

    /// Refuses each parked piece of work by policy at `now`.
    fn refuse_parked(
        &mut self,
        now: Instant,
        parked: Vec<ParkedWork>,
        mut discovery_scope: impl FnMut(BatchId) -> Option<RefusalScope>,
    ) -> AuthRefused {
        let refusal = classify(AUTH_FAILED);
        let mut answer = AuthRefused::default();
        for work in parked {
            let refused = match work {
                ParkedWork::Coverage(filters) => {
                    let scope = RefusalScope::Coverage {
                        filters: u32::try_from(filters.len()).unwrap_or(u32::MAX),
                    };
                    let refused = match self.health.handle_refusal(now, &refusal, scope) {
                        RefusalAction::CoveragePaused { until } => {
                            Some(if self.refused.handle_refusal(&filters, until) {
                                CoverageRefused::Paused
                            } else {
                                CoverageRefused::Suspects {
                                    filters: filters.len(),
                                }
                            })
                        }
                        _ => None,
                    };
                    RefusedParked::Coverage(refused)
                }
                ParkedWork::Round(filter) => RefusedParked::Round {
                    paused: self.refuse_round(now, &filter, AUTH_FAILED),
                },
                ParkedWork::Discovery { batch, .. } => {
                    if let Some(scope) = discovery_scope(batch) {
                        let _ = self.health.handle_refusal(now, &refusal, scope);
                    }
                    RefusedParked::Discovery { batch }
                }
            };
            answer.derive_again |= !matches!(refused, RefusedParked::Discovery { .. });
            answer.refused.push(refused);
        }
        // A relay's discovery keeps its own deadlines.
        if answer.derive_again {
            self.timers.set(RelayTimer::CoverageRetry, now);
        }
        answer
    }

    /// A policy refusal (with `text`) of one NIP-77 round's `filter` at `now`: only that
    /// filter is paused, when health pauses it. Returns whether it did.
    fn refuse_round(&mut self, now: Instant, filter: &Filter, text: &str) -> bool {
        let scope = RefusalScope::Coverage { filters: 1 };
        match self.health.handle_refusal(now, &classify(text), scope) {
            RefusalAction::CoveragePaused { until } => {
                self.refused
                    .handle_refusal(std::slice::from_ref(filter), until);
                true
            }
            _ => false,
        }
    }
}
