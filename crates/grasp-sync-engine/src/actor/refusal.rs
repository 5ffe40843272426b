//! Session messages and refusals: every CLOSED, NOTICE and send failure is classified into a
//! bounded category and routed to health (pauses), the ledger (learned limits, reactive gate)
//! and the batch it concerns. The routing of a CLOSED is decided in
//! [`crate::machine::closed_route`]; this module reads the session's facts for it and performs
//! what it decides.

use grasp_sync_health::{Refusal, RefusalAction, RefusalCategory, RefusalScope, classify};
use grasp_sync_ledger::{FilterCountOutcome, ReleaseReason};
use grasp_sync_model::RelayUrl;
use nostr::SubscriptionId;

use super::Actor;
use crate::machine::closed_route::{self, Answered, Consequence, NoticeAnswers, Remedy};
use crate::machine::timers::RelayTimer;
use crate::machine::unanswered::NoticeTarget;
use crate::session::{Outbound, SessionEvent, SessionKey};

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
        let refusal = classify(message);
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(session) = runtime.machine.session.as_mut() else {
            return;
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
                filters: g.group.filters.len(),
                auxiliary: g.is_auxiliary(),
            },
            (None, None) => Answered::Retired,
        };
        // An identity query or mailbox probe refused pauses only that discovery.
        let discovery = answered
            .batch()
            .and_then(|batch| self.outbox.refusal_scope(relay, batch));
        let scope = answered.scope(discovery);
        let sent = session.sent_order(subscription_id);
        if scope == RefusalScope::Retired {
            // An answer to a subscription already retired (replaced, abandoned or closed): the
            // work it refused is gone, so it pauses nothing. A refusal of its filter count
            // still teaches the relay's ceiling, or the same count would be sent again.
            if !message.is_empty() {
                runtime.machine.stats.stale_refusals += 1;
                tracing::debug!(%relay, %message, "refusal for a retired subscription");
            }
            if let Some(filters) = closed_route::retired_teaches_ceiling(
                refusal.category,
                sent_filters,
                runtime.machine.learned.filter_ceiling(),
            ) && let FilterCountOutcome::Regroup { ceiling } = runtime
                .machine
                .learned
                .handle_filter_count_refusal(now, Some(filters))
            {
                tracing::info!(%relay, ceiling, "lowered the filters-per-REQ ceiling");
            }
            return;
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
        self.count_refusal(relay, &refusal, message);
        // Refused for want of NIP-42 authentication: sent again once, after the session's AUTH
        // succeeds; otherwise (no key, the AUTH failed, or it already succeeded) a policy
        // refusal of this coverage. A subscription-count refusal teaches the budget; the
        // learned budget is the remedy, so no pause: every subscription is re-derived under it
        // at once.
        let remedied = match closed_route::remedy_first(refusal.category) {
            Some(Remedy::ParkForAuth) => {
                self.park_for_auth(relay, subscription_id, refused_filters.clone(), message)
            }
            Some(Remedy::LearnBudget) => self.learn_subscription_budget(relay, sent),
            None => false,
        };
        if remedied {
            return;
        }
        let action = self
            .runtimes
            .get_mut(relay)
            .map(|r| r.machine.health.handle_refusal(now, &refusal, scope));
        let learned_before = self.runtimes.get(relay).map(|r| r.machine.learned.clone());
        self.apply_learned_limits(relay, &refusal, action);
        if let (Some(batch), RefusalScope::Identity | RefusalScope::Mailbox) =
            (answered.batch(), scope)
        {
            let learned_now = self.runtimes.get(relay).map(|r| r.machine.learned.clone());
            if closed_route::discovery_retries_now(learned_now != learned_before, refusal.category)
            {
                self.outbox.handle_limit_refusal(relay, batch);
            }
        }
        if let Some(RefusalAction::CoveragePaused { until }) = action {
            self.pause_refused_coverage(relay, &refused_filters, until, message);
        }
        match closed_route::consequence(answered, action.as_ref()) {
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
                    for filter in &refused_filters {
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

    /// A policy refusal of `filters`: one filter is paused until `until`; several become
    /// suspects that later work sends one per REQ.
    pub(super) fn pause_refused_coverage(
        &mut self,
        relay: &RelayUrl,
        filters: &[nostr::Filter],
        until: std::time::Instant,
        message: &str,
    ) {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let paused = runtime.machine.refused.handle_refusal(filters, until);
        // Rounds queued before the refusal would send refused coverage by NIP-77, where a
        // refusal does not name its filter: their batches go to REQs, which are admitted.
        let queued: std::collections::BTreeSet<grasp_sync_model::BatchId> = runtime
            .machine
            .session
            .as_ref()
            .map(|s| s.neg_queue.iter().map(|round| round.batch).collect())
            .unwrap_or_default();
        for batch in queued {
            self.fall_back_rounds(relay, batch, crate::negentropy::FallbackReason::Refused);
        }
        self.readmit_queued_history(relay);
        if paused {
            tracing::info!(%relay, reason = %message, "refused coverage paused for the policy pause; the rest goes on");
        } else {
            tracing::info!(%relay, reason = %message, filters = filters.len(),
                "a multi-filter request was refused by policy; its filters will be tried one per request");
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

    /// A "too many subscriptions" refusal: the relay holds fewer than we believed. Learn how
    /// many it held when it refused — the subscriptions still open that were sent before the
    /// refused one (`refused` is its send order; a NOTICE names none, so every other held one
    /// counts) — and start coverage over under that budget. Returns whether a lower budget was
    /// learned.
    fn learn_subscription_budget(&mut self, relay: &RelayUrl, refused: Option<u64>) -> bool {
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return false;
        };
        let current = runtime
            .machine
            .ledger
            .as_ref()
            .map_or(0, |l| l.budget().slots());
        let held = match (runtime.machine.session.as_ref(), refused) {
            (Some(session), Some(order)) => session.held_before(order),
            _ => runtime.machine.held_subscriptions().saturating_sub(1),
        };
        let Some(learned) = crate::machine::session_start::budget_taught_by_refusal(current, held)
        else {
            return false;
        };
        runtime.machine.learned_slots = Some(learned);
        tracing::info!(%relay, learned, previous = current, "learned the relay's subscription budget from a refusal");
        self.restart_coverage(relay);
        true
    }

    fn handle_notice(&mut self, relay: &RelayUrl, text: &str) {
        let now = self.now();
        let refusal = classify(text);
        if refusal.category == RefusalCategory::Unknown {
            tracing::debug!(%relay, notice = %text, "notice");
            return;
        }
        // A NOTICE names no subscription: one that refuses a REQ answers a REQ not answered
        // yet (`machine::unanswered` says which), and is handled as that REQ's CLOSED, which
        // frees its slot. An `auth-required:` NOTICE so becomes that REQ's `auth-required:`
        // CLOSED: parked for the session's AUTH with a key, its coverage paused by policy
        // without one; never a pause of the whole relay. One that answers a REQ closed since
        // refuses nothing held.
        if let Some(answers) = closed_route::notice_answers(refusal.category) {
            let refused = self
                .runtimes
                .get_mut(relay)
                .and_then(|r| r.machine.session.as_mut())
                .and_then(|s| match answers {
                    NoticeAnswers::Widest => s.take_widest_unanswered().map(NoticeTarget::Held),
                    NoticeAnswers::Newest => s.take_newest_unanswered().map(NoticeTarget::Held),
                    NoticeAnswers::Oldest => s.take_oldest_unanswered(),
                });
            match refused {
                Some(NoticeTarget::Held(subscription_id)) => {
                    tracing::debug!(%relay, subscription = %subscription_id, notice = %text,
                        "a refusal NOTICE answers an unanswered REQ");
                    // A NOTICE names no subscription: it may have refused an earlier REQ (one
                    // a restart of coverage closed, say) while the relay holds this one, which
                    // may never answer (no EOSE for `limit: 0` on some relays). CLOSE it, so
                    // the relay frees the slot if it held it (NIP-01 gives a CLOSE no answer,
                    // so one for a REQ the relay did refuse costs one message).
                    if let Some(session) = self
                        .runtimes
                        .get_mut(relay)
                        .and_then(|r| r.machine.session.as_mut())
                    {
                        session
                            .transmit
                            .push(Outbound::Close(subscription_id.clone()));
                    }
                    self.handle_closed(relay, &subscription_id, text, None);
                    return;
                }
                Some(NoticeTarget::Retired(subscription_id, filters)) => {
                    self.handle_closed(relay, &subscription_id, text, Some(filters));
                    return;
                }
                None => {}
            }
        }
        self.count_refusal(relay, &refusal, text);
        if refusal.category == RefusalCategory::AuthRequired {
            // No request of ours is waiting for an answer, so nothing was refused: a relay
            // that sends this beside a CLOSED (nostrcheck-server) names the request there, and
            // one that sends it on its own (an AUTH timeout, before closing) ends the
            // connection itself. With a key, the challenge is answered by the transport.
            tracing::debug!(%relay, notice = %text, "an auth-required NOTICE that refuses no request of ours");
            return;
        }
        if refusal.category == RefusalCategory::TooManySubscriptions
            && self.learn_subscription_budget(relay, None)
        {
            return;
        }
        let action = self.runtimes.get_mut(relay).map(|r| {
            r.machine
                .health
                .handle_refusal(now, &refusal, RefusalScope::Notice)
        });
        self.apply_learned_limits(relay, &refusal, action);
    }

    /// A query-rate refusal of a negentropy round (NEG-ERR): counted, a rate-limit pause,
    /// and the reactive gate's cooldown, as for a refused REQ.
    pub(super) fn handle_rate_refusal(&mut self, relay: &RelayUrl, text: &str) {
        let now = self.now();
        let refusal = classify(text);
        self.count_refusal(relay, &refusal, text);
        let action = self.runtimes.get_mut(relay).map(|r| {
            r.machine
                .health
                .handle_refusal(now, &refusal, RefusalScope::Request { filters: 1 })
        });
        self.apply_learned_limits(relay, &refusal, action);
    }

    pub(super) fn count_refusal(&mut self, relay: &RelayUrl, refusal: &Refusal, text: &str) {
        let label = refusal.category.metric_label();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            *runtime.machine.stats.refusals.entry(label).or_default() += 1;
            runtime.machine.stats.last_error = Some(text.chars().take(200).collect());
        }
        if let Some(metrics) = &self.metrics {
            metrics.record_refusal(label);
        }
        tracing::info!(%relay, category = label, text = %text.chars().take(200).collect::<String>(), "relay refusal");
    }

    /// Teaches the connection what the refusal says about its limits.
    fn apply_learned_limits(
        &mut self,
        relay: &RelayUrl,
        refusal: &Refusal,
        action: Option<RefusalAction>,
    ) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        match action {
            Some(RefusalAction::Regroup { submitted_filters }) => {
                let submitted = submitted_filters.and_then(|n| usize::try_from(n).ok());
                if let FilterCountOutcome::Regroup { ceiling } = runtime
                    .machine
                    .learned
                    .handle_filter_count_refusal(now, submitted)
                {
                    tracing::info!(%relay, ceiling, "lowered the filters-per-REQ ceiling");
                }
            }
            Some(RefusalAction::ByteCap { bytes }) => {
                if let Some(bytes) = bytes.and_then(|b| usize::try_from(b).ok()) {
                    runtime
                        .machine
                        .learned
                        .handle_retained_bytes_refusal(now, bytes);
                    tracing::info!(%relay, bytes, "learned the relay's retained-subscription byte cap");
                    // Transient REQs are serialised so the relay's occupancy cannot overdraw the
                    // one transient REQ the cap reserves.
                    let cap = runtime.machine.learned.transient_req_cap();
                    if let Some(ledger) = runtime.machine.ledger.as_mut() {
                        ledger.handle_transient_req_cap(now, cap);
                    }
                }
            }
            _ => {}
        }
        if refusal.category == RefusalCategory::RateLimited {
            // The reactive cooldown ends with health's rate-limit pause, which escalates.
            let until = runtime
                .machine
                .health
                .paused_until(grasp_sync_health::PauseKind::RateLimit, now)
                .unwrap_or_else(|| now + runtime.machine.health.config().rate_limit_cooldown);
            if let Some(session) = runtime.machine.session.as_mut() {
                session.reactive.handle_query_rate_refusal_until(now, until);
            }
        }
    }

    pub(super) fn release_transient(
        &mut self,
        relay: &RelayUrl,
        subscription_id: &SubscriptionId,
        reason: ReleaseReason,
    ) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            if let (Some(session), Some(ledger)) = (
                runtime.machine.session.as_mut(),
                runtime.machine.ledger.as_mut(),
            ) {
                session.release_page(ledger, subscription_id, reason, now);
            }
        }
    }

    pub(super) fn retire_live_group(&mut self, relay: &RelayUrl, subscription_id: &SubscriptionId) {
        let now = self.now();
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            if let (Some(session), Some(ledger)) = (
                runtime.machine.session.as_mut(),
                runtime.machine.ledger.as_mut(),
            ) {
                session.retire_live(ledger, subscription_id, now);
            }
        }
    }
}
