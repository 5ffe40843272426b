//! A relay's refusals as inputs of its machine: a CLOSED ([`RelayMachine::handle_closed`]), a
//! NOTICE ([`RelayMachine::handle_notice`]) and a NEG-ERR for the query rate
//! ([`RelayMachine::handle_rate_refusal`]).
//!
//! Each refusal is classified and counted in the relay's statistics. Then, following the
//! routing of [`super::closed_route`]:
//! - a refusal of a subscription already retired pauses nothing, and may still lower the
//!   filter ceiling;
//! - `auth-required:` is parked for the session's AUTH when it may still succeed (the page is
//!   released or the live group retired, without a pause);
//! - `too many subscriptions` teaches a smaller subscription budget when the held count shows
//!   one;
//! - anything else is judged by health, and what it teaches goes to the learned limits, the
//!   reactive gate's cooldown and the refused coverage.
//!
//! What the refusal then asks of work outside this machine (a batch failed, coverage derived
//! again, a discovery asked again, queued work readmitted) is returned as data. The driver
//! logs it, counts it in the metrics and performs it.

use std::time::Instant;

use grasp_sync_health::{
    PauseKind, Refusal, RefusalAction, RefusalCategory, RefusalScope, classify,
};
use grasp_sync_ledger::{FilterCountOutcome, ReleaseReason};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::closed_route::{self, Answered, Consequence, NoticeAnswers, Remedy};
use crate::machine::relay::RelayMachine;
use crate::machine::session_auth::AuthVerdict;
use crate::machine::session_start::budget_taught_by_refusal;
use crate::machine::transmit::Outbound;
use crate::machine::unanswered::NoticeTarget;

#[cfg(test)]
mod tests;

/// Work a relay refused with `auth-required:`, parked until the session's AUTH succeeds.
#[derive(Debug, Clone, PartialEq)]
pub enum ParkedWork {
    /// Repository coverage refused by REQ (a historic batch, now abandoned, or a live group,
    /// now retired): derived again after AUTH; paused by policy if the AUTH fails.
    Coverage(Vec<Filter>),
    /// The filter of a refused NIP-77 round, whose batch was abandoned: derived again after
    /// AUTH and reconciled by NIP-77; if the AUTH fails only this filter is paused.
    Round(Filter),
    /// One REQ of a participant-discovery batch (an identity query or a mailbox probe). The
    /// batch stays pending with the REQ outstanding, so no other discovery starts on the relay
    /// meanwhile; after AUTH the REQ is sent again in that batch; if the AUTH fails the batch
    /// fails into the relay's discovery pause of its kind.
    Discovery {
        /// The discovery batch.
        batch: BatchId,
        /// The refused subscription, still outstanding in the batch.
        subscription_id: SubscriptionId,
        /// What it asked for.
        filters: Vec<Filter>,
    },
}

/// What a CLOSED (or a NOTICE standing in for one) did to the relay's machine.
#[derive(Debug)]
pub struct ClosedAnswer {
    /// The refusal, classified.
    pub refusal: Refusal,
    /// It concerned work the session held and was counted in the relay's statistics (the
    /// driver counts it in the metrics).
    pub counted: bool,
    /// What became of the refused work.
    pub outcome: ClosedOutcome,
}

/// What became of the work a CLOSED refused.
#[derive(Debug)]
pub enum ClosedOutcome {
    /// The relay has no session: nothing.
    NoSession,
    /// An answer to a subscription already retired: it refused nothing held. `stale` when it
    /// was a refusal (a message, counted among stale refusals); `ceiling` when its filter count
    /// lowered the filters-per-REQ ceiling.
    Retired {
        /// It carried a message.
        stale: bool,
        /// The lowered ceiling.
        ceiling: Option<usize>,
    },
    /// Parked for the session's AUTH, without a pause.
    Parked(AuthParked),
    /// The relay holds fewer subscriptions than believed: the driver starts the coverage over
    /// under the learned budget, without a pause.
    BudgetLearned(BudgetLearned),
    /// Health judged the refusal.
    Judged(Judged),
}

/// What an `auth-required:` CLOSED parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthParked {
    /// A participant-discovery REQ, its page released: its batch stays pending, to send it
    /// again after the AUTH.
    Discovery,
    /// A history page of `batch`, released: the driver fails the batch, whose coverage is
    /// derived again after the AUTH.
    Page {
        /// The page's batch.
        batch: BatchId,
    },
    /// A live group, retired: the driver retires the auxiliary coverage too when it was
    /// auxiliary.
    Live {
        /// The group was descendant coverage.
        auxiliary: bool,
    },
}

/// A subscription budget a refusal taught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLearned {
    /// The learned budget.
    pub learned: usize,
    /// The budget the ledger held before.
    pub previous: usize,
}

/// Health's judgement of a CLOSED, and what it asks of the driver.
#[derive(Debug)]
pub struct Judged {
    /// What the refusal taught the learned limits.
    pub learned: LimitsLearned,
    /// A refused discovery batch to ask again at once (rule 4 of [`super::closed_route`]).
    pub retry_discovery: Option<BatchId>,
    /// Coverage the refusal paused by policy. The driver sends queued NIP-77 rounds to REQs
    /// and readmits queued history, so neither sends it as it was.
    pub refused_coverage: Option<CoverageRefused>,
    /// What becomes of the refused work.
    pub consequence: Consequence,
    /// The filters of the refused subscription.
    pub refused_filters: Vec<Filter>,
}

/// What a policy refusal did to the refused coverage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageRefused {
    /// One filter, paused until the policy pause ends.
    Paused,
    /// Several filters, now suspects that later work sends one per REQ.
    Suspects {
        /// How many.
        filters: usize,
    },
}

/// What a refusal taught the relay's learned limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitsLearned {
    /// The filters-per-REQ ceiling, lowered.
    pub ceiling: Option<usize>,
    /// The retained-subscription byte cap, learned.
    pub byte_cap: Option<usize>,
}

/// What a NOTICE did to the relay's machine.
#[derive(Debug)]
pub enum NoticeAnswer {
    /// Not a refusal the engine knows.
    Unknown,
    /// A refusal of REQ `subscription_id`, not answered before, handled as its CLOSED. A CLOSE
    /// was queued for one the connection still holds, so the relay frees the slot if it held it
    /// (a NIP-01 CLOSE has no answer, so one for a REQ the relay did refuse costs one message).
    Closed {
        /// The REQ the NOTICE answers.
        subscription_id: SubscriptionId,
        /// What its CLOSED did.
        answer: ClosedAnswer,
    },
    /// A refusal of the relay's that answers no REQ: counted in the relay's statistics.
    Relay {
        /// The refusal, classified.
        refusal: Refusal,
        /// What it did.
        outcome: NoticeOutcome,
    },
}

/// What a NOTICE that answers no REQ did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeOutcome {
    /// `auth-required:` while no REQ of ours waits for an answer: nothing was refused. A relay
    /// that sends this beside a CLOSED names the request there; one that sends it on its own
    /// (an AUTH timeout, before closing) ends the connection itself.
    AuthRequiredAlone,
    /// A smaller subscription budget: the driver starts the coverage over under it.
    BudgetLearned(BudgetLearned),
    /// Health judged it; what it taught the learned limits.
    Judged(LimitsLearned),
}

impl<Round> RelayMachine<Round, ParkedWork> {
    /// A CLOSED of `subscription_id` with `message` at `now` (or a send failure standing in
    /// for one). `sent_filters` is the number of filters the REQ was sent with, when the relay
    /// had not answered it before. `discovery_scope` gives the refusal scope of a batch that is
    /// an identity query or a mailbox probe.
    pub fn handle_closed(
        &mut self,
        now: Instant,
        subscription_id: &SubscriptionId,
        message: &str,
        sent_filters: Option<usize>,
        discovery_scope: impl FnOnce(BatchId) -> Option<RefusalScope>,
    ) -> ClosedAnswer {
        let refusal = classify(message);
        let answer = |refusal, counted, outcome| ClosedAnswer {
            refusal,
            counted,
            outcome,
        };
        let Some(session) = self.session.as_mut() else {
            return answer(refusal, false, ClosedOutcome::NoSession);
        };
        let answered = match (
            session.transients.get(subscription_id),
            session.live.get(subscription_id),
        ) {
            (Some(t), _) => Answered::Transient {
                batch: t.batch,
                filters: t.pagination.current_filters().len(),
                watchdog_closing: t.watchdog_closing,
            },
            (None, Some(g)) => Answered::Live {
                filters: g.group.len(),
                auxiliary: g.is_auxiliary(),
            },
            (None, None) => Answered::Retired,
        };
        // An identity query or mailbox probe refused pauses only that discovery.
        let discovery = answered.batch().and_then(discovery_scope);
        let scope = answered.scope(discovery);
        let sent = session.sent_order(subscription_id);
        if scope == RefusalScope::Retired {
            // The work it refused is gone, so it pauses nothing. A refusal of its filter count
            // still teaches the relay's ceiling, or the same count would be sent again.
            let stale = !message.is_empty();
            if stale {
                self.stats.stale_refusals += 1;
            }
            let ceiling = closed_route::retired_teaches_ceiling(
                refusal.category,
                sent_filters,
                self.learned.filter_ceiling(),
            )
            .and_then(|filters| {
                match self.learned.handle_filter_count_refusal(now, Some(filters)) {
                    FilterCountOutcome::Regroup { ceiling } => Some(ceiling),
                    _ => None,
                }
            });
            return answer(refusal, false, ClosedOutcome::Retired { stale, ceiling });
        }
        let refused_filters = session
            .transients
            .get(subscription_id)
            .map(|t| t.pagination.current_filters())
            .or_else(|| {
                session
                    .live
                    .get(subscription_id)
                    .map(|g| g.group.to_filters())
            })
            .unwrap_or_default();
        self.count_refusal(&refusal, message);
        let remedied = match closed_route::remedy_first(refusal.category) {
            Some(Remedy::ParkForAuth) => self
                .park_for_auth(
                    now,
                    subscription_id,
                    refused_filters.clone(),
                    discovery.is_some(),
                )
                .map(ClosedOutcome::Parked),
            Some(Remedy::LearnBudget) => self
                .learn_subscription_budget(sent)
                .map(ClosedOutcome::BudgetLearned),
            None => None,
        };
        if let Some(outcome) = remedied {
            return answer(refusal, true, outcome);
        }
        let action = self.health.handle_refusal(now, &refusal, scope);
        let learned_before = self.learned.clone();
        let learned = self.learn_limits(now, &refusal, action);
        let retry_discovery = match (answered.batch(), scope) {
            (Some(batch), RefusalScope::Identity | RefusalScope::Mailbox)
                if closed_route::discovery_retries_now(
                    self.learned != learned_before,
                    refusal.category,
                ) =>
            {
                Some(batch)
            }
            _ => None,
        };
        let refused_coverage = match action {
            RefusalAction::CoveragePaused { until } => {
                if self.refused.handle_refusal(&refused_filters, until) {
                    Some(CoverageRefused::Paused)
                } else {
                    Some(CoverageRefused::Suspects {
                        filters: refused_filters.len(),
                    })
                }
            }
            _ => None,
        };
        let judged = Judged {
            learned,
            retry_discovery,
            refused_coverage,
            consequence: closed_route::consequence(answered, Some(&action)),
            refused_filters,
        };
        answer(refusal, true, ClosedOutcome::Judged(judged))
    }

    /// A NOTICE with `text` at `now`. A NOTICE names no subscription: one that refuses a REQ
    /// answers a REQ not answered yet ([`closed_route::notice_answers`] says which) and is
    /// handled as that REQ's CLOSED, which frees its slot. An `auth-required:` NOTICE so
    /// becomes that REQ's `auth-required:` CLOSED: parked for the session's AUTH with a key,
    /// its coverage paused by policy without one; never a pause of the whole relay. One that
    /// answers a REQ closed since refuses nothing held. `discovery_scope` is as for
    /// [`Self::handle_closed`].
    pub fn handle_notice(
        &mut self,
        now: Instant,
        text: &str,
        discovery_scope: impl FnOnce(BatchId) -> Option<RefusalScope>,
    ) -> NoticeAnswer {
        let refusal = classify(text);
        if refusal.category == RefusalCategory::Unknown {
            return NoticeAnswer::Unknown;
        }
        if let Some(answers) = closed_route::notice_answers(refusal.category) {
            let target = self.session.as_mut().and_then(|s| match answers {
                NoticeAnswers::Widest => s.take_widest_unanswered().map(NoticeTarget::Held),
                NoticeAnswers::Newest => s.take_newest_unanswered().map(NoticeTarget::Held),
                NoticeAnswers::Oldest => s.take_oldest_unanswered(),
            });
            let (subscription_id, sent_filters) = match target {
                Some(NoticeTarget::Held(subscription_id)) => {
                    // It may have refused an earlier REQ (one a restart of coverage closed,
                    // say) while the relay holds this one, which may never answer (no EOSE
                    // for `limit: 0` on some relays): CLOSE it.
                    if let Some(session) = self.session.as_mut() {
                        session
                            .transmit
                            .push(Outbound::Close(subscription_id.clone()));
                    }
                    (Some(subscription_id), None)
                }
                Some(NoticeTarget::Retired(subscription_id, filters)) => {
                    (Some(subscription_id), Some(filters))
                }
                None => (None, None),
            };
            if let Some(subscription_id) = subscription_id {
                let answer =
                    self.handle_closed(now, &subscription_id, text, sent_filters, discovery_scope);
                return NoticeAnswer::Closed {
                    subscription_id,
                    answer,
                };
            }
        }
        self.count_refusal(&refusal, text);
        let outcome = if refusal.category == RefusalCategory::AuthRequired {
            NoticeOutcome::AuthRequiredAlone
        } else if let Some(budget) = (refusal.category == RefusalCategory::TooManySubscriptions)
            .then(|| self.learn_subscription_budget(None))
            .flatten()
        {
            NoticeOutcome::BudgetLearned(budget)
        } else {
            let action = self
                .health
                .handle_refusal(now, &refusal, RefusalScope::Notice);
            NoticeOutcome::Judged(self.learn_limits(now, &refusal, action))
        };
        NoticeAnswer::Relay { refusal, outcome }
    }

    /// An `auth-required:` refusal of `subscription_id` (with `filters`; `discovery` when its
    /// batch is a participant discovery): parked while the session's AUTH may still succeed,
    /// the page released or the live group retired. `None` when it is a policy refusal.
    fn park_for_auth(
        &mut self,
        now: Instant,
        subscription_id: &SubscriptionId,
        filters: Vec<Filter>,
        discovery: bool,
    ) -> Option<AuthParked> {
        let session = self.session.as_mut()?;
        let batch = session.transients.get(subscription_id).map(|t| t.batch);
        let discovery_batch = batch.filter(|_| discovery);
        let work = match discovery_batch {
            Some(batch) => ParkedWork::Discovery {
                batch,
                subscription_id: subscription_id.clone(),
                filters,
            },
            None => ParkedWork::Coverage(filters),
        };
        if session.auth.handle_refusal(now, work) != AuthVerdict::Park {
            return None;
        }
        let auxiliary = session
            .live
            .get(subscription_id)
            .is_some_and(|g| g.is_auxiliary());
        let parked = match (discovery_batch, batch) {
            (Some(_), _) => AuthParked::Discovery,
            (None, Some(batch)) => AuthParked::Page { batch },
            (None, None) => AuthParked::Live { auxiliary },
        };
        if let Some(ledger) = self.ledger.as_mut() {
            if batch.is_some() {
                session.release_page(ledger, subscription_id, ReleaseReason::Closed, now);
            } else {
                session.retire_live(ledger, subscription_id, now);
            }
        }
        Some(parked)
    }
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// A query-rate refusal of a NIP-77 round (its NEG-ERR) with `text` at `now`: counted, a
    /// rate-limit pause, and the reactive gate's cooldown, as for a refused REQ.
    pub fn handle_rate_refusal(&mut self, now: Instant, text: &str) -> (Refusal, LimitsLearned) {
        let refusal = classify(text);
        self.count_refusal(&refusal, text);
        let action =
            self.health
                .handle_refusal(now, &refusal, RefusalScope::Request { filters: 1 });
        let learned = self.learn_limits(now, &refusal, action);
        (refusal, learned)
    }

    /// A "too many subscriptions" refusal: the relay holds fewer than we believed. The budget
    /// is how many it held when it refused: the subscriptions still open that were sent before
    /// the refused one (`refused` is its send order; a NOTICE names none, so every other held
    /// one counts). Kept when lower than the ledger's.
    fn learn_subscription_budget(&mut self, refused: Option<u64>) -> Option<BudgetLearned> {
        let previous = self.ledger.as_ref().map_or(0, |l| l.budget().slots());
        let held = match (self.session.as_ref(), refused) {
            (Some(session), Some(order)) => session.held_before(order),
            _ => self.held_subscriptions().saturating_sub(1),
        };
        let learned = budget_taught_by_refusal(previous, held)?;
        self.learned_slots = Some(learned);
        Some(BudgetLearned { learned, previous })
    }

    /// Teaches the relay's limits what health's `action` on `refusal` says: a lower filter
    /// ceiling, a retained-byte cap (transient REQs then serialised so the relay's occupancy
    /// cannot overdraw the one transient REQ the cap reserves), and for a rate limit the
    /// reactive gate's cooldown until health's rate-limit pause ends.
    fn learn_limits(
        &mut self,
        now: Instant,
        refusal: &Refusal,
        action: RefusalAction,
    ) -> LimitsLearned {
        let mut learned = LimitsLearned::default();
        match action {
            RefusalAction::Regroup { submitted_filters } => {
                let submitted = submitted_filters.and_then(|n| usize::try_from(n).ok());
                if let FilterCountOutcome::Regroup { ceiling } =
                    self.learned.handle_filter_count_refusal(now, submitted)
                {
                    learned.ceiling = Some(ceiling);
                }
            }
            RefusalAction::ByteCap { bytes } => {
                if let Some(bytes) = bytes.and_then(|b| usize::try_from(b).ok()) {
                    self.learned.handle_retained_bytes_refusal(now, bytes);
                    learned.byte_cap = Some(bytes);
                    let cap = self.learned.transient_req_cap();
                    if let Some(ledger) = self.ledger.as_mut() {
                        ledger.handle_transient_req_cap(now, cap);
                    }
                }
            }
            _ => {}
        }
        if refusal.category == RefusalCategory::RateLimited {
            // The reactive cooldown ends with health's rate-limit pause, which escalates.
            let until = self
                .health
                .paused_until(PauseKind::RateLimit, now)
                .unwrap_or_else(|| now + self.health.config().rate_limit_cooldown);
            if let Some(session) = self.session.as_mut() {
                session.reactive.handle_query_rate_refusal_until(now, until);
            }
        }
        learned
    }

    /// Counts `refusal` (with its `text`) in the relay's statistics.
    pub fn count_refusal(&mut self, refusal: &Refusal, text: &str) {
        *self
            .stats
            .refusals
            .entry(refusal.category.metric_label())
            .or_default() += 1;
        self.stats.last_error = Some(text.chars().take(200).collect());
    }
}
