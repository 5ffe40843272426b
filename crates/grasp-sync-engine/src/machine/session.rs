//! One connected session of a relay, as state: its pacing gates and page hints, its live
//! groups and transient subscriptions, the starts queued for a slot and the gates, the order
//! REQs were sent in and which the relay has not answered yet, its NIP-42 state, its timers and
//! what it decided to send. The actor holds it beside the connection's handle; everything here
//! ends with the session.
//!
//! The session is generic over what the driver queues for NIP-77 (`Round`, a round and the
//! reading of its have-set) and parks for the AUTH (`Parked`), so the rules here do not depend
//! on how either is performed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use grasp_sync_filters::{
    CompactGroup, CoverageTier, GroupedPagination, PageStep, RelayPageSession,
};
use grasp_sync_ledger::{
    BackgroundGate, GateRejection, HeldGroup, Permit, PermitClass, ReactiveGate, ReleaseReason,
    StartDecision, StartKind, SubscriptionLedger,
};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::live_history::{EndedPage, LiveHistory};
use crate::machine::session_auth::SessionAuth;
use crate::machine::timers::{SessionTimer, Timers};
use crate::machine::transmit::{Outbound, SessionKey, Transmits};
use crate::machine::unanswered::{NoticeTarget, UnansweredReqs};

/// The send order of a live group whose REQ has not been sent: after every real one.
pub const UNSENT: u64 = u64::MAX;

/// One connected session of a relay.
pub struct SessionState<Round, Parked> {
    /// Which relay and which of its connections this is: the generation that tells this
    /// session's messages and job reports from those of an ended one.
    pub key: SessionKey,
    /// The background pacing gate: one start per second.
    pub background: BackgroundGate,
    /// The reactive gate: spaces starts during a query-rate episode.
    pub reactive: ReactiveGate,
    /// What the session learned of the relay's paging.
    pub pages: RelayPageSession,
    /// The live groups held, by subscription.
    pub live: BTreeMap<SubscriptionId, LiveGroup>,
    /// The transient REQ+EOSE subscriptions in flight, by subscription.
    pub transients: BTreeMap<SubscriptionId, Transient>,
    /// Historic pages and exact-ID fetches waiting to start, in order.
    pub queue: VecDeque<QueuedStart>,
    /// The session's named timers (gate wait, live repair): they end with the session.
    pub timers: Timers<SessionTimer>,
    /// REQs sent in this session (the next one's send order).
    pub sent: u64,
    /// The latest REQs the relay has not answered yet: what a refusal NOTICE answers.
    pub unanswered: UnansweredReqs,
    /// Live groups admitted by the ledger whose REQ waits for the reactive gate (only while
    /// a query-rate episode spaces starts; otherwise they are sent at once).
    pub live_queue: VecDeque<SubscriptionId>,
    /// The deferred live planning is a full rebuild (a consolidation or a learned byte cap).
    pub rebuild_pending: bool,
    /// Negentropy rounds waiting for a permit and the gates.
    pub neg_queue: VecDeque<Round>,
    /// Negentropy rounds running as background jobs, with their batch and permit.
    pub neg_in_flight: BTreeMap<SubscriptionId, (BatchId, Permit)>,
    /// Rounds in flight that started before the session authenticated: their refusal, read
    /// on the round's own channel, may come after the relay accepted the AUTH.
    pub rounds_before_auth: BTreeSet<SubscriptionId>,
    /// NIP-42 on this connection and the work parked until its AUTH succeeds.
    pub auth: SessionAuth<Parked>,
    /// An index update changed this relay's targets while background starts were queued: its
    /// diff runs once the queue has drained ([`SessionState::has_queued_background`]).
    pub index_update_waits: bool,
    /// REQs, CLOSEs and the disconnect decided for this connection and not yet handed to it,
    /// performed by the driver once per step and when the session is dropped.
    pub transmit: Transmits,
    /// Pages that rode on a live group that ended before its EOSE (closed by a plan, retired
    /// by the relay): queued again as historic pages of their batch
    /// ([`crate::machine::live_history`]).
    pub ended_live_pages: Vec<EndedPage>,
}

/// What one [`SessionState::drive_live`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveDriven {
    /// Live REQs queued for sending.
    pub sent: usize,
    /// The reactive gate asked the next one to wait ([`SessionTimer::GateWait`] is set).
    pub waiting: bool,
    /// The reactive gate rejected the next one for a reason no wait cures.
    pub rejected: Option<GateRejection>,
}

impl<Round, Parked> SessionState<Round, Parked> {
    /// The session `key` connected at `now`, with its relay's page hints; `answers_auth` when
    /// it holds a key and answers NIP-42 challenges.
    pub fn new(key: SessionKey, now: Instant, pages: RelayPageSession, answers_auth: bool) -> Self {
        Self {
            key,
            background: BackgroundGate::new(now),
            reactive: ReactiveGate::new(now),
            pages,
            live: BTreeMap::new(),
            transients: BTreeMap::new(),
            queue: VecDeque::new(),
            timers: Timers::default(),
            sent: 0,
            unanswered: UnansweredReqs::default(),
            live_queue: VecDeque::new(),
            rebuild_pending: false,
            neg_queue: VecDeque::new(),
            neg_in_flight: BTreeMap::new(),
            rounds_before_auth: BTreeSet::new(),
            auth: SessionAuth::new(answers_auth),
            index_update_waits: false,
            transmit: Transmits::default(),
            ended_live_pages: Vec::new(),
        }
    }

    /// Whether historic REQs or negentropy rounds wait in this session's queues for the gates
    /// or a slot.
    pub fn has_queued_background(&self) -> bool {
        self.queued_background() > 0
    }

    /// How many historic REQs and negentropy rounds wait in this session's queues.
    pub fn queued_background(&self) -> usize {
        self.queue.len() + self.neg_queue.len()
    }

    /// The send order for the next REQ, `id`'s, sent with `filters` filters; it stays
    /// unanswered until the relay says anything about it.
    pub fn next_sent(&mut self, id: &SubscriptionId, filters: usize) -> u64 {
        self.sent += 1;
        self.unanswered.sent(id, filters);
        self.sent
    }

    /// The relay answered `id` (an event, EOSE or CLOSED): the number of filters its REQ was
    /// sent with, if this is the first answer to it.
    pub fn handle_answer(&mut self, id: &SubscriptionId) -> Option<usize> {
        self.unanswered.answered(id)
    }

    /// The oldest REQ the relay has not answered, held or closed since: the one an
    /// `auth-required:` NOTICE answers (a relay that wants AUTH before it serves reads refuses
    /// every REQ until then, in order).
    pub fn take_oldest_unanswered(&mut self) -> Option<NoticeTarget> {
        let (live, transients) = (&self.live, &self.transients);
        self.unanswered
            .take_oldest(|id| live.contains_key(id) || transients.contains_key(id))
    }

    /// The newest REQ still held that the relay has not answered: the one a NOTICE refusing
    /// a REQ for a limit most likely answers (relays answer a connection's messages in order,
    /// and a refusal comes before any result).
    pub fn take_newest_unanswered(&mut self) -> Option<SubscriptionId> {
        let (live, transients) = (&self.live, &self.transients);
        self.unanswered
            .take_newest_held(|id| live.contains_key(id) || transients.contains_key(id))
    }

    /// The REQ still held that a NOTICE refusing a REQ for its filter count most likely
    /// answers: see [`UnansweredReqs::take_widest_held`].
    pub fn take_widest_unanswered(&mut self) -> Option<SubscriptionId> {
        let (live, transients) = (&self.live, &self.transients);
        self.unanswered
            .take_widest_held(|id| live.contains_key(id) || transients.contains_key(id))
    }

    /// Subscriptions still open that were sent before the one with send order `before`.
    pub fn held_before(&self, before: u64) -> usize {
        self.live.values().filter(|g| g.sent < before).count()
            + self.transients.values().filter(|t| t.sent < before).count()
    }

    /// The send order of an open subscription.
    pub fn sent_order(&self, id: &SubscriptionId) -> Option<u64> {
        self.live
            .get(id)
            .map(|g| g.sent)
            .or_else(|| self.transients.get(id).map(|t| t.sent))
    }

    /// Queues the REQs of live groups waiting in the live queue while the reactive gate
    /// allows at `now`; a gate that asks to wait sets [`SessionTimer::GateWait`]. Live starts
    /// never pass the background gate.
    pub fn drive_live(&mut self, now: Instant) -> LiveDriven {
        let mut driven = LiveDriven::default();
        while let Some(id) = self.live_queue.front().cloned() {
            if !self.live.contains_key(&id) {
                self.live_queue.pop_front(); // retired before it was sent
                continue;
            }
            let wait = match self.reactive.poll_start(now, StartKind::Live) {
                StartDecision::Ready => None,
                StartDecision::NotBefore(at) => Some(at),
                StartDecision::Rejected(GateRejection::Cooldown { until }) => Some(until),
                StartDecision::Rejected(reason) => {
                    driven.rejected = Some(reason);
                    break;
                }
            };
            if let Some(at) = wait {
                self.timers.set_earliest(SessionTimer::GateWait, at);
                driven.waiting = true;
                break;
            }
            self.live_queue.pop_front();
            let Some(filters) = self.live.get(&id).map(LiveGroup::req_filters) else {
                continue;
            };
            let sent = self.next_sent(&id, filters.len());
            if let Some(group) = self.live.get_mut(&id) {
                group.sent = sent;
            }
            self.handle_live_page_sent(&id, now);
            self.transmit.push(Outbound::Req {
                subscription_id: id,
                filters,
            });
            driven.sent += 1;
        }
        driven
    }

    /// Whether a query-rate cooldown is running at `now`; if so live planning is deferred to
    /// its end ([`SessionTimer::LiveRepair`]).
    pub fn defer_for_cooldown(&mut self, now: Instant) -> bool {
        let Some(until) = self.reactive.poll_timeout().filter(|until| *until > now) else {
            return false;
        };
        self.timers.set_earliest(SessionTimer::LiveRepair, until);
        true
    }

    /// Live groups carrying core coverage (not descendants).
    pub fn core_live(&self) -> usize {
        self.live.values().filter(|g| !g.is_auxiliary()).count()
    }

    /// Subscriptions held on the wire now (live groups whose REQ still waits do not count).
    pub fn held_subscriptions(&self) -> usize {
        self.live.values().filter(|g| g.was_sent()).count()
            + self.transients.len()
            + self.neg_in_flight.len()
    }

    /// An EOSE for `id` at `now`. A live group stays open; the first page it carried, if any,
    /// ends. A historic page is closed, its slot released and its walk moved on: the next
    /// pages, or its end. `None` for a subscription
    /// the session no longer holds (refused, retired, expired), whose EOSE proves nothing.
    pub fn handle_eose(
        &mut self,
        ledger: &mut SubscriptionLedger,
        id: &SubscriptionId,
        now: Instant,
    ) -> Option<Eose> {
        if let Some(group) = self.live.get_mut(id) {
            let filters = group.group.len();
            return Some(match group.history.take() {
                // The group's first page ends; the group stays open as the live tail. Its REQ
                // carried the group's other filters too, which the relay accepted with it.
                Some(history) => {
                    let mut page = self.end_page(history.batch, history.pagination, false);
                    page.filters.extend(history.others);
                    Eose::Page(page)
                }
                None => Eose::Live { filters },
            });
        }
        let mut transient = self.transients.remove(id)?;
        self.transmit.push(Outbound::Close(id.clone()));
        if let Some(permit) = transient.permit.take() {
            let _ = ledger.handle_release(now, &permit, ReleaseReason::EoseCloseEnqueued);
        }
        Some(Eose::Page(self.end_page(
            transient.batch,
            transient.pagination,
            transient.exact,
        )))
    }

    /// The page of `batch` walking `pagination` reached its EOSE: its next pages or its end,
    /// and the paging quirks it showed first. An exact-ID fetch (`exact`) is never paged.
    fn end_page(
        &mut self,
        batch: BatchId,
        pagination: GroupedPagination,
        exact: bool,
    ) -> PageEnded {
        let filters = pagination.current_filters();
        let known = self.pages.quirks().labels();
        let step = if exact {
            // An exact-ID fetch asks for what it names: it is never paged.
            PageStep::Complete {
                truncated: Vec::new(),
            }
        } else {
            pagination.handle_eose(&mut self.pages)
        };
        let learned_quirks = self
            .pages
            .quirks()
            .labels()
            .into_iter()
            .filter(|label| !known.contains(label))
            .collect();
        PageEnded {
            batch,
            filters,
            step,
            learned_quirks,
        }
    }

    /// Ends the historic work of `batch`, or of every batch (`None`): its pages in flight get
    /// a CLOSE and their slots back, and its queued starts are dropped. A page the watchdog is
    /// closing is left to it: its slot is released once that CLOSE was sent.
    pub fn close_pages(
        &mut self,
        ledger: &mut SubscriptionLedger,
        batch: Option<BatchId>,
        now: Instant,
    ) {
        let of_batch = |b: BatchId| batch.is_none_or(|batch| batch == b);
        // A live group keeps its subscription; only the page it carries ends.
        for group in self.live.values_mut() {
            if group.history.as_ref().is_some_and(|h| of_batch(h.batch)) {
                group.history = None;
            }
        }
        let doomed: Vec<SubscriptionId> = self
            .transients
            .iter()
            .filter(|(_, t)| of_batch(t.batch) && !t.watchdog_closing)
            .map(|(id, _)| id.clone())
            .collect();
        for id in doomed {
            if let Some(mut transient) = self.transients.remove(&id) {
                self.transmit.push(Outbound::Close(id));
                if let Some(permit) = transient.permit.take() {
                    let _ = ledger.handle_release(now, &permit, ReleaseReason::Closed);
                }
            }
        }
        self.queue.retain(|q| !of_batch(q.batch));
    }

    /// The CLOSE of `id` was handed to the connection at `now`: a page the watchdog closed
    /// gives its slot back. Returns whether one did.
    pub fn handle_close_sent(
        &mut self,
        ledger: &mut SubscriptionLedger,
        id: &SubscriptionId,
        now: Instant,
    ) -> bool {
        if !self.transients.get(id).is_some_and(|t| t.watchdog_closing) {
            return false;
        }
        self.release_page(ledger, id, ReleaseReason::WatchdogCloseAccepted, now);
        true
    }

    /// Forgets page `id` (the relay ended it, or it was closed) and gives its slot back.
    pub fn release_page(
        &mut self,
        ledger: &mut SubscriptionLedger,
        id: &SubscriptionId,
        reason: ReleaseReason,
        now: Instant,
    ) {
        if let Some(mut transient) = self.transients.remove(id)
            && let Some(permit) = transient.permit.take()
        {
            let _ = ledger.handle_release(now, &permit, reason);
        }
    }

    /// Retires live group `id` at `now`: its slot back, and a CLOSE if its REQ was sent (one
    /// still queued is never sent). Returns whether the session held it.
    pub fn close_live(
        &mut self,
        ledger: &mut SubscriptionLedger,
        id: &SubscriptionId,
        now: Instant,
    ) -> bool {
        let Some(held) = self.live.remove(id) else {
            return false;
        };
        self.note_live_page_ended(id, &held);
        // Releasing our own live permit cannot be refused; a stale one is a no-op.
        let _ = ledger.handle_release(now, &held.permit, ReleaseReason::LiveRetired);
        if held.was_sent() {
            self.transmit.push(Outbound::Close(id.clone()));
        }
        true
    }

    /// Retires every auxiliary (descendant) live group at `now`, as [`Self::close_live`] does;
    /// returns how many there were.
    pub fn close_auxiliary(&mut self, ledger: &mut SubscriptionLedger, now: Instant) -> usize {
        let auxiliary: Vec<SubscriptionId> = self
            .live
            .iter()
            .filter(|(_, g)| g.is_auxiliary())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &auxiliary {
            self.close_live(ledger, id, now);
        }
        auxiliary.len()
    }

    /// Forgets live group `id` (the relay closed it) and gives its slot back.
    pub fn retire_live(
        &mut self,
        ledger: &mut SubscriptionLedger,
        id: &SubscriptionId,
        now: Instant,
    ) {
        if let Some(group) = self.live.remove(id) {
            self.note_live_page_ended(id, &group);
            let _ = ledger.handle_release(now, &group.permit, ReleaseReason::Closed);
        }
    }

    /// The watchdog at `now`: each historic REQ the relay left unanswered for
    /// [`grasp_sync_ledger::WATCHDOG_TIMEOUT`] gets one CLOSE, and its batch is returned, to
    /// fail. Its permit stays held until the CLOSE was sent, so its slot is not reused while
    /// the relay may still hold it.
    pub fn handle_watchdog(
        &mut self,
        ledger: &mut SubscriptionLedger,
        now: Instant,
    ) -> Vec<BatchId> {
        let mut expired = Vec::new();
        while let Some(expiry) = ledger.poll_watchdog(now) {
            let Some(transient) = self.transients.get_mut(&expiry.subscription_id) else {
                continue;
            };
            if !transient.watchdog_closing {
                transient.watchdog_closing = true;
                self.transmit.push(Outbound::Close(expiry.subscription_id));
                expired.push(transient.batch);
            }
        }
        for batch in self.expire_live_pages(now) {
            if !expired.contains(&batch) {
                expired.push(batch);
            }
        }
        expired
    }
}

/// A persistent live group.
pub struct LiveGroup {
    /// The group's filters.
    pub group: CompactGroup,
    /// Its ledger permit.
    pub permit: Permit,
    /// Send order within the session; [`UNSENT`] while its REQ waits in the live queue.
    pub sent: u64,
    /// The first historic page it carries until its EOSE, if any
    /// ([`crate::machine::live_history`]).
    pub history: Option<LiveHistory>,
}

/// The groups of `live` as the live planner takes them.
pub fn held_groups(live: &BTreeMap<SubscriptionId, LiveGroup>) -> Vec<HeldGroup> {
    live.iter()
        .map(|(id, live)| HeldGroup {
            subscription_id: id.clone(),
            group: live.group.clone(),
        })
        .collect()
}

impl LiveGroup {
    /// Whether its REQ was sent (a CLOSE is due when it is retired).
    pub fn was_sent(&self) -> bool {
        self.sent != UNSENT
    }

    /// The filters its REQ carries: while it carries a page, the page's with the page limit
    /// and the others with `limit: 0`; else its own, with `limit: 0`.
    pub fn req_filters(&self) -> Vec<Filter> {
        match &self.history {
            Some(history) => {
                let mut filters = history.pagination.current_filters();
                filters.extend(history.others.iter().cloned());
                filters
            }
            None => self.group.to_filters(),
        }
    }

    /// Whether the group carries descendant coverage: auxiliary, retired before core coverage
    /// is rebuilt and never part of its rollback.
    pub fn is_auxiliary(&self) -> bool {
        matches!(
            self.group.tier(),
            Some(CoverageTier::DescendantCanonical | CoverageTier::DescendantQuote)
        )
    }
}

/// What an EOSE ended.
#[derive(Debug)]
pub enum Eose {
    /// A live group's EOSE that ended no page: it stays open. Its REQ carried `filters`
    /// filters.
    Live {
        /// How many filters its REQ carried.
        filters: usize,
    },
    /// A historic page.
    Page(PageEnded),
}

/// A historic page that reached its EOSE: a transient one closed and its slot released, a
/// live group's first page left open as the live tail.
#[derive(Debug)]
pub struct PageEnded {
    /// The page's batch.
    pub batch: BatchId,
    /// The filters of its REQ, which the relay accepted.
    pub filters: Vec<Filter>,
    /// The next pages of its walk (to queue before the page resolves in its batch, so the
    /// batch cannot confirm in between), or its end.
    pub step: PageStep,
    /// Paging quirks of the relay this page showed first, for the rest of the session.
    pub learned_quirks: Vec<&'static str>,
}

/// A transient REQ+EOSE subscription in flight.
pub struct Transient {
    /// Its batch.
    pub batch: BatchId,
    /// Its ledger permit, released when it ends.
    pub permit: Option<Permit>,
    /// Its filters and where their walk is.
    pub pagination: GroupedPagination,
    /// A CLOSE was queued by the watchdog; the permit is released once it was sent.
    pub watchdog_closing: bool,
    /// Send order within the session.
    pub sent: u64,
    /// An exact-ID fetch: never paged; deliveries count for its batch's hydration.
    pub exact: bool,
}

/// A transient REQ waiting for a slot and the pacing gates. The driver registers its
/// subscription in its batch before anything is sent, so the batch cannot confirm before it ran.
pub struct QueuedStart {
    /// Its subscription.
    pub subscription_id: SubscriptionId,
    /// Its batch.
    pub batch: BatchId,
    /// The permit class it takes.
    pub class: PermitClass,
    /// What kind of start the gates count it as.
    pub kind: StartKind,
    /// Its filters and where their walk is.
    pub pagination: GroupedPagination,
    /// An exact-ID fetch (see [`Transient::exact`]).
    pub exact: bool,
}

#[cfg(test)]
mod tests;
