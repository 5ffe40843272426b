//! Session messages and refusals. A CLOSED, a NOTICE and a NEG-ERR for the query rate are
//! inputs of the relay's machine ([`crate::machine::refusals`]), which classifies and counts
//! them and routes them to health (pauses), the learned limits, the reactive gate and refused
//! coverage. This module hands each message to the machine, then logs, counts in the metrics
//! and performs what the machine returns for the other work: a batch failed, live coverage
//! rebuilt or repaired, a discovery asked again, queued work readmitted.

use grasp_sync_health::Refusal;
use grasp_sync_ledger::ReleaseReason;
use grasp_sync_model::RelayUrl;
use nostr::SubscriptionId;

use super::Actor;
use crate::machine::closed_route::Consequence;
use crate::machine::refusals::{
    AuthParked, BudgetLearned, ClosedAnswer, ClosedOutcome, CoverageRefused, Judged, LimitsLearned,
    NoticeAnswer, NoticeOutcome,
};
use crate::machine::timers::RelayTimer;
use crate::session::{SessionEvent, SessionKey};

impl Actor {
    pub(super) fn handle_session_event(&mut self, key: SessionKey, event: SessionEvent) {
        let relay = key.relay.clone();
        if self
            .runtimes
            .get(&relay)
            .is_some_and(|r| r.machine.lanes.owns_session(&key))
        {
            self.handle_lane_event(&key, event);
            return;
        }
        let current = self
            .runtimes
            .get(&relay)
            .is_some_and(|r| r.machine.session_of(&key).is_some());
        if !current {
            return; // a retired session: nothing it says matters now
        }
        // The filter count of a REQ answered for the first time: a filter-count refusal of a
        // subscription retired meanwhile still teaches the relay's ceiling.
        let first_answer_filters = match (
            event.subscription_id(),
            self.runtimes
                .get_mut(&relay)
                .and_then(|r| r.machine.session.as_mut()),
        ) {
            (Some(id), Some(session)) => session.handle_answer(id),
            _ => None,
        };
        match event {
            SessionEvent::Event {
                subscription_id,
                event,
            } => {
                if event.kind == nostr::Kind::RelayList {
                    self.handle_relay_list_event(&event);
                }
                self.note_direct_member(&event);
                if let Some(runtime) = self.runtimes.get_mut(&relay) {
                    runtime
                        .machine
                        .handle_event(&subscription_id, &event, self.new_store);
                }
            }
            SessionEvent::Unsaved {
                subscription_id,
                id,
                error,
            } => self.handle_unsaved(&relay, &subscription_id, id, &error),
            SessionEvent::Eose(id) => self.handle_eose(&relay, &id),
            SessionEvent::Closed {
                subscription_id,
                message,
            } => {
                self.handle_closed(&relay, &subscription_id, &message, first_answer_filters);
            }
            SessionEvent::Notice(text) => self.handle_notice(&relay, &text),
            SessionEvent::SendFailed {
                subscription_id,
                error,
            } => {
                tracing::info!(%relay, %error, "a request could not be sent");
                self.handle_closed(
                    &relay,
                    &subscription_id,
                    "error: could not send",
                    first_answer_filters,
                );
            }
            SessionEvent::CloseSent(id) => self.handle_close_sent(&relay, &id),
            SessionEvent::AuthChallenge => self.handle_auth_challenge(&relay),
            SessionEvent::Authenticated => self.handle_authenticated(&relay),
            SessionEvent::AuthFailed => self.handle_auth_failed(&relay),
            SessionEvent::Ended { reason } => self.handle_session_ended(&key, &reason),
        }
    }

    /// CLOSED from the relay (or a send failure standing in for one). `sent_filters` is the
    /// number of filters the REQ was sent with, when the relay had not answered it before.
    fn handle_closed(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        message: &str,
        sent_filters: Option<usize>,
    ) {
        let now = self.now();
        let outbox = &self.outbox;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let answer =
            runtime
                .machine
                .handle_closed(now, subscription_id, message, sent_filters, |batch| {
                    outbox.refusal_scope(relay, batch)
                });
        self.perform_closed(relay, subscription_id, message, answer);
    }

    /// Logs, counts and performs what the relay's machine made of a CLOSED.
    fn perform_closed(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        message: &str,
        answer: ClosedAnswer,
    ) {
        if answer.counted {
            self.report_refusal(relay, &answer.refusal, message);
        }
        match answer.outcome {
            ClosedOutcome::NoSession => {}
            ClosedOutcome::Retired { stale, ceiling } => {
                if stale {
                    tracing::debug!(%relay, %message, "refusal for a retired subscription");
                }
                log_learned(
                    relay,
                    LimitsLearned {
                        ceiling,
                        byte_cap: None,
                    },
                );
            }
            ClosedOutcome::Parked(AuthParked::Discovery) => {
                // Its batch stays pending: the request is sent again in it.
                tracing::info!(%relay, "a participant discovery request needs NIP-42 authentication; it is sent again once the relay accepts ours");
            }
            ClosedOutcome::Parked(AuthParked::Page { batch }) => {
                tracing::info!(%relay, "a request needs NIP-42 authentication; it is sent again once the relay accepts ours");
                self.fail_batch(relay, batch, message);
            }
            ClosedOutcome::Parked(AuthParked::Live { auxiliary }) => {
                tracing::info!(%relay, "a request needs NIP-42 authentication; it is sent again once the relay accepts ours");
                if auxiliary {
                    self.retire_auxiliary(relay);
                }
            }
            ClosedOutcome::BudgetLearned(budget) => self.restart_under_budget(relay, budget),
            ClosedOutcome::Judged(judged) => {
                self.perform_judged(relay, subscription_id, message, judged);
            }
        }
    }

    /// What health's judgement of a CLOSED asks of the other work: a discovery asked again,
    /// queued work readmitted around refused coverage, and the refused work's consequence.
    fn perform_judged(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        message: &str,
        judged: Judged,
    ) {
        let now = self.now();
        log_learned(relay, judged.learned);
        if let Some(batch) = judged.retry_discovery {
            self.outbox.handle_limit_refusal(relay, batch);
        }
        if let Some(refused) = judged.refused_coverage {
            self.after_coverage_refused(relay, refused, message);
        }
        match judged.consequence {
            Consequence::FailBatch {
                batch,
                rebuild_live,
            } => {
                self.release_transient(relay, subscription_id, ReleaseReason::Closed);
                if rebuild_live {
                    self.rebuild_live(relay);
                }
                self.fail_batch(relay, batch, message);
            }
            Consequence::RetireAuxiliary => {
                self.retire_live_group(relay, subscription_id);
                self.retire_auxiliary(relay);
            }
            Consequence::RebuildLive => {
                self.retire_live_group(relay, subscription_id);
                self.rebuild_live(relay);
            }
            Consequence::RepairLive { split_suspects } => {
                self.retire_live_group(relay, subscription_id);
                if split_suspects {
                    for filter in &judged.refused_filters {
                        self.open_historic_batch(
                            relay,
                            grasp_sync_model::PendingItems::default(),
                            vec![crate::machine::refused::without_bounds(filter)],
                        );
                    }
                }
                self.retire_auxiliary(relay);
                if let Some(runtime) = self.runtimes.get_mut(relay) {
                    let pause_end = runtime.machine.health.sync_paused_until(now).unwrap_or(now);
                    runtime
                        .machine
                        .timers
                        .set(RelayTimer::CoverageRetry, pause_end.max(now));
                }
                self.repair_live(relay);
            }
            Consequence::Nothing => {}
        }
    }

    /// After refused coverage was paused (or its filters became suspects): rounds queued
    /// before the refusal would send refused coverage by NIP-77, where a refusal does not name
    /// its filter, so their batches go to REQs, which are admitted; queued history is
    /// admitted again.
    pub(super) fn after_coverage_refused(
        &mut self,
        relay: &RelayUrl,
        refused: CoverageRefused,
        message: &str,
    ) {
        let queued: std::collections::BTreeSet<grasp_sync_model::BatchId> = self
            .runtimes
            .get(relay)
            .and_then(|r| r.machine.session.as_ref())
            .map(|s| s.neg_queue.iter().map(|round| round.batch).collect())
            .unwrap_or_default();
        for batch in queued {
            self.fall_back_rounds(relay, batch, crate::negentropy::FallbackReason::Refused);
        }
        self.readmit_queued_history(relay);
        match refused {
            CoverageRefused::Paused => {
                tracing::info!(%relay, reason = %message, "refused coverage paused for the policy pause; the rest goes on");
            }
            CoverageRefused::Suspects { filters } => {
                tracing::info!(%relay, reason = %message, filters,
                    "a multi-filter request was refused by policy; its filters will be tried one per request");
            }
        }
    }

    /// Historic REQs queued before a policy refusal were admitted before it: each goes back
    /// through admission, so refused coverage waits for its pause and suspects go one filter
    /// per REQ. A batch left with nothing to send confirms as is, as at admission.
    fn readmit_queued_history(&mut self, relay: &RelayUrl) {
        let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
        else {
            return;
        };
        let mut readmit = Vec::new();
        session.queue.retain(|start| {
            let first_page = start.kind == grasp_sync_ledger::StartKind::Historic && !start.exact;
            if first_page {
                readmit.push((
                    start.batch,
                    start.subscription_id.clone(),
                    start.pagination.current_filters(),
                ));
            }
            !first_page
        });
        for (batch, subscription_id, filters) in readmit {
            let _ = self.pending.resolve_subscription(relay, &subscription_id);
            // Regrouping one start's filters cannot make a REQ larger than the start was.
            let queued = self.queue_req_groups(
                relay,
                batch,
                filters,
                super::history::FilterCeiling::Learned,
            );
            let drained = self
                .pending
                .batches(relay)
                .iter()
                .any(|b| b.batch_id == batch && b.outstanding_subs.is_empty());
            if !queued && drained {
                self.confirm(relay, batch);
            }
        }
    }

    /// A smaller subscription budget a refusal taught: coverage starts over under it.
    fn restart_under_budget(&mut self, relay: &RelayUrl, budget: BudgetLearned) {
        tracing::info!(%relay, learned = budget.learned, previous = budget.previous,
            "learned the relay's subscription budget from a refusal");
        self.restart_coverage(relay);
    }

    fn handle_notice(&mut self, relay: &RelayUrl, text: &str) {
        let now = self.now();
        let outbox = &self.outbox;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let answer = runtime
            .machine
            .handle_notice(now, text, |batch| outbox.refusal_scope(relay, batch));
        match answer {
            NoticeAnswer::Unknown => tracing::debug!(%relay, notice = %text, "notice"),
            NoticeAnswer::Closed {
                subscription_id,
                answer,
            } => {
                tracing::debug!(%relay, subscription = %subscription_id, notice = %text,
                    "a refusal NOTICE answers an unanswered REQ");
                self.perform_closed(relay, &subscription_id, text, answer);
            }
            NoticeAnswer::Relay { refusal, outcome } => {
                self.report_refusal(relay, &refusal, text);
                match outcome {
                    NoticeOutcome::AuthRequiredAlone => {
                        // With a key, the challenge is answered by the transport.
                        tracing::debug!(%relay, notice = %text, "an auth-required NOTICE that refuses no request of ours");
                    }
                    NoticeOutcome::BudgetLearned(budget) => {
                        self.restart_under_budget(relay, budget);
                    }
                    NoticeOutcome::Judged(learned) => log_learned(relay, learned),
                }
            }
        }
    }

    /// A refusal the relay's machine counted: in the metrics and the log.
    pub(super) fn report_refusal(&self, relay: &RelayUrl, refusal: &Refusal, text: &str) {
        let label = refusal.category.metric_label();
        if let Some(metrics) = &self.metrics {
            metrics.record_refusal(label);
        }
        tracing::info!(%relay, category = label, text = %text.chars().take(200).collect::<String>(), "relay refusal");
    }

    pub(super) fn release_transient(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        reason: ReleaseReason,
    ) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && let (Some(session), Some(ledger)) = (
                runtime.machine.session.as_mut(),
                runtime.machine.ledger.as_mut(),
            )
        {
            session.release_page(ledger, subscription_id, reason, now);
        }
    }

    pub(super) fn retire_live_group(&mut self, relay: &RelayUrl, subscription_id: &SubscriptionId) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay)
            && let (Some(session), Some(ledger)) = (
                runtime.machine.session.as_mut(),
                runtime.machine.ledger.as_mut(),
            )
        {
            session.retire_live(ledger, subscription_id, now);
        }
    }
}

/// Logs what a refusal taught the relay's learned limits.
pub(super) fn log_learned(relay: &RelayUrl, learned: LimitsLearned) {
    if let Some(ceiling) = learned.ceiling {
        tracing::info!(%relay, ceiling, "lowered the filters-per-REQ ceiling");
    }
    if let Some(bytes) = learned.byte_cap {
        tracing::info!(%relay, bytes, "learned the relay's retained-subscription byte cap");
    }
}
