//! A live group that carries its coverage's first historic page
//! ([`RelayMachine::apply_live_plan_with_history`]).
//!
//! During a first sync, a batch's new coverage needs both its history and a live tail. Instead
//! of a paced historic REQ and a `limit: 0` REQ over the same coverage, one REQ does both: the
//! live groups the plan opens send the batch's filters with the page limit, their EOSE ends the
//! first page, and they stay open as the live tail. The driver asks for it only with
//! `EngineConfig::live_first_page` (on by default), and not for coverage another
//! relay already confirmed (the store holds it). The rules:
//! - **Only the batch's filters, only in new groups.** The page covers the batch's filters in
//!   the groups the plan opens. Held filters a repack moved into those groups go in the same
//!   REQ with `limit: 0`, as before, so nothing held is fetched again. The driver checks that
//!   the plan places all of the batch's coverage in the groups it opens
//!   ([`plan_carries_page`]), and this session holds none of it live already, refused none of
//!   its coverage by policy, and is under no health pause
//!   ([`RelayMachine::live_page_allowed`]).
//! - **A bounded burst.** A page is sent at once, not paced, so the pages in flight on a
//!   session together ask for no more events than one full historic page
//!   ([`RelayMachine::live_page_budget`]); the batch's filters in groups past that budget go
//!   as paced historic pages of the same batch.
//! - **Paged like any page.** Events on the group before its EOSE move the page's cursors; at
//!   the EOSE the walk's next pages are queued as ordinary paced pages of the batch, and the
//!   group's REQ is never sent again with a limit.
//! - **A page that ends early goes to history.** A group closed by a plan or retired by the
//!   relay (a refusal) before its EOSE ends its page: the page's filters are queued again,
//!   from the start, as ordinary paced pages of the same batch
//!   ([`RelayMachine::requeue_ended_live_pages`]), so the batch still confirms only once its
//!   history arrived. A failed batch drops the pages of its groups, which stay live.
//! - **The watchdog.** A page the relay leaves without EOSE for [`WATCHDOG_TIMEOUT`] fails
//!   its batch, as a historic page's does; the group stays live.

use std::collections::BTreeSet;
use std::time::Instant;

use grasp_sync_filters::{CompactFilter, FilterGroup, GroupedPagination, TieredFilter};
use grasp_sync_ledger::{LivePlan, WATCHDOG_TIMEOUT};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::history_pages::{FilterCeiling, QueuedHistory};
use crate::machine::live_plan::PlanApplied;
use crate::machine::relay::RelayMachine;
use crate::machine::session::{LiveGroup, SessionState};
use crate::machine::timers::SessionTimer;

#[cfg(test)]
mod tests;

/// The first pages a plan's new groups carry, and the batch's filters that did not fit the
/// budget of pages in flight.
#[derive(Debug, Default)]
pub struct LivePages {
    /// Each carrying group's subscription and its page's filters, for the driver to register
    /// in the batch.
    pub carried: Vec<(SubscriptionId, Vec<Filter>)>,
    /// The batch's filters in groups that carry no page (their limit is 0): the driver queues
    /// them as paced historic pages of the batch.
    pub apart: Vec<Filter>,
}

impl LivePages {
    /// Whether nothing of the batch rides on the groups or waits apart.
    pub fn is_empty(&self) -> bool {
        self.carried.is_empty() && self.apart.is_empty()
    }
}

/// A live group's page that ended before its EOSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedPage {
    /// The page's batch.
    pub batch: BatchId,
    /// The live group that carried it.
    pub subscription_id: SubscriptionId,
    /// The page's filters, as sent.
    pub filters: Vec<Filter>,
}

/// The first historic page of a batch, carried by a new live group until its EOSE.
#[derive(Debug)]
pub struct LiveHistory {
    /// The page's batch.
    pub batch: BatchId,
    /// The page's filters (the batch's filters of the group, with the page limit) and its
    /// cursors.
    pub pagination: GroupedPagination,
    /// The group's other filters, held before: sent in the same REQ with `limit: 0`.
    pub others: Vec<Filter>,
    /// When its EOSE is due: [`WATCHDOG_TIMEOUT`] after the REQ was sent.
    pub deadline: Option<Instant>,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// Applies `plan` at `now` as [`RelayMachine::apply_live_plan`] does, and makes the groups
    /// it opens carry the first historic page of `batch` over their filters among `incoming`,
    /// the batch's live coverage, as far as [`RelayMachine::live_page_budget`] allows. Returns
    /// what the plan did and the pages (nothing when the plan was not applied as it was).
    pub fn apply_live_plan_with_history(
        &mut self,
        now: Instant,
        plan: LivePlan,
        ids: Vec<SubscriptionId>,
        batch: BatchId,
        incoming: &[TieredFilter],
    ) -> (PlanApplied, LivePages) {
        let page: BTreeSet<Filter> = incoming.iter().map(|f| f.filter.clone()).collect();
        self.apply_live_plan_as(now, plan, ids, Some((batch, &page)))
    }

    /// How many events the pages that ride on live groups may ask for together: one full
    /// historic page, the page limit times the filters a historic REQ carries. A live page
    /// is sent at once, not paced, so the relay never sends more history at once than one
    /// paced page would, and a burst stays well within the session's inbound buffer.
    pub fn live_page_budget(&self) -> usize {
        let Some(session) = self.session.as_ref() else {
            return 0;
        };
        let per_req = self
            .history_pack_limits(FilterCeiling::Learned)
            .map_or(1, |limits| limits.max_filters_per_req.max(1));
        session.pages.page_limit().saturating_mul(per_req)
    }

    /// Makes the groups `ids` carry the first page of `batch` over their filters among `page`,
    /// in order, while the pages in flight ask for no more events than
    /// [`RelayMachine::live_page_budget`] (the first page in flight always may). What does not
    /// fit is returned apart, for the driver to queue as paced pages of the batch.
    pub(crate) fn attach_live_pages(
        &mut self,
        ids: &[SubscriptionId],
        batch: BatchId,
        page: &BTreeSet<Filter>,
    ) -> LivePages {
        let budget = self.live_page_budget();
        let mut pages = LivePages::default();
        let Some(session) = self.session.as_mut() else {
            return pages;
        };
        let limit = session.pages.page_limit();
        let asked = |filters: usize| filters.saturating_mul(limit);
        let mut in_flight: usize = session
            .live
            .values()
            .filter_map(|g| g.history.as_ref())
            .map(|h| asked(h.pagination.current_filters().len()))
            .sum();
        for id in ids {
            let Some(group) = session.live.get(id) else {
                continue;
            };
            let mine: Vec<Filter> = group
                .group
                .to_filters()
                .into_iter()
                .filter(|f| page.contains(f))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let wanted = asked(mine.len());
            if in_flight > 0 && in_flight.saturating_add(wanted) > budget {
                pages.apart.extend(mine);
                continue;
            }
            if let Some(filters) = session.attach_live_page(id, batch, page) {
                in_flight = in_flight.saturating_add(wanted);
                pages.carried.push((id.clone(), filters));
            }
        }
        pages
    }

    /// Queues the pages of live groups that ended before their EOSE again, at `now`, as
    /// historic pages of their batches (admitted and packed as
    /// [`RelayMachine::queue_history`] does, under IDs `next_id` gives). A page whose batch is
    /// no longer pending (`pending` says which are) is dropped. Returns, per page queued
    /// again, its batch, the ended live subscription and what was queued, for the driver to
    /// register the new pages before it resolves the ended one.
    pub fn requeue_ended_live_pages(
        &mut self,
        now: Instant,
        pending: impl Fn(BatchId) -> bool,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> Vec<(EndedPage, Option<QueuedHistory>)> {
        let ended = self
            .session
            .as_mut()
            .map(|s| std::mem::take(&mut s.ended_live_pages))
            .unwrap_or_default();
        ended
            .into_iter()
            .filter(|page| pending(page.batch))
            .map(|page| {
                let queued = self.queue_history(
                    now,
                    page.batch,
                    page.filters.clone(),
                    FilterCeiling::Learned,
                    &mut next_id,
                );
                (page, queued)
            })
            .collect()
    }
}

impl<Round, Parked> SessionState<Round, Parked> {
    /// Live group `id` takes the first page of `batch` over its filters among `page`: returns
    /// the page's filters, or `None` when it holds none of them.
    pub(crate) fn attach_live_page(
        &mut self,
        id: &SubscriptionId,
        batch: BatchId,
        page: &BTreeSet<Filter>,
    ) -> Option<Vec<Filter>> {
        let pages = &self.pages;
        let group = self.live.get_mut(id)?;
        let (mine, others): (Vec<Filter>, Vec<Filter>) = group
            .group
            .to_filters()
            .into_iter()
            .partition(|f| page.contains(f));
        if mine.is_empty() {
            return None;
        }
        let pagination = GroupedPagination::new(mine, pages);
        let filters = pagination.current_filters();
        group.history = Some(LiveHistory {
            batch,
            pagination,
            others,
            deadline: None,
        });
        Some(filters)
    }

    /// The REQ of live group `id` was queued for sending at `now`: a page it carries is due
    /// by [`WATCHDOG_TIMEOUT`].
    pub(crate) fn handle_live_page_sent(&mut self, id: &SubscriptionId, now: Instant) {
        let Some(history) = self.live.get_mut(id).and_then(|g| g.history.as_mut()) else {
            return;
        };
        let deadline = now + WATCHDOG_TIMEOUT;
        history.deadline = Some(deadline);
        self.timers
            .set_earliest(SessionTimer::LivePageWatchdog, deadline);
    }

    /// Live group `id` left the session: a page it still carried has ended.
    pub(crate) fn note_live_page_ended(&mut self, id: &SubscriptionId, group: &LiveGroup) {
        if let Some(history) = &group.history {
            self.ended_live_pages.push(EndedPage {
                batch: history.batch,
                subscription_id: id.clone(),
                filters: history.pagination.current_filters(),
            });
        }
    }

    /// The pages past their deadline at `now` are dropped (their groups stay live); returns
    /// their batches, each once, to fail. The watchdog's timer is armed for the next deadline.
    pub(crate) fn expire_live_pages(&mut self, now: Instant) -> BTreeSet<BatchId> {
        let mut expired = BTreeSet::new();
        let mut next = None::<Instant>;
        for group in self.live.values_mut() {
            let Some(deadline) = group.history.as_ref().and_then(|h| h.deadline) else {
                continue;
            };
            if deadline <= now {
                if let Some(history) = group.history.take() {
                    expired.insert(history.batch);
                }
            } else {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        match next {
            Some(at) => self.timers.set(SessionTimer::LivePageWatchdog, at),
            None => self.timers.cancel(SessionTimer::LivePageWatchdog),
        }
        expired
    }
}

/// Whether `plan` (with `overflow` for the extra connections), planned for `incoming`, can
/// carry `incoming`'s first historic page: it leaves nothing out, every incoming filter is in a
/// group it opens, and no group holds more than `per_req` of them (the relay's pages cap whole
/// REQs). A filter the planner dropped or narrowed because held groups cover some of it would
/// have no history fetched for what they cover, so it rules the plan out.
pub fn plan_carries_page(
    incoming: &[TieredFilter],
    plan: &LivePlan,
    overflow: &[TieredFilter],
    per_req: Option<usize>,
) -> bool {
    if plan.open.is_empty() || !plan.deferred.is_empty() || !overflow.is_empty() {
        return false;
    }
    let page: BTreeSet<&Filter> = incoming.iter().map(|f| &f.filter).collect();
    let in_group = |g: &FilterGroup| {
        g.filters
            .iter()
            .filter(|f| page.contains(&f.filter))
            .count()
    };
    if per_req.is_some_and(|most| plan.open.iter().any(|g| in_group(g) > most)) {
        return false;
    }
    let opened: BTreeSet<&Filter> = plan
        .open
        .iter()
        .flat_map(|g| g.filters.iter().map(|f| &f.filter))
        .collect();
    page.iter().all(|f| opened.contains(f))
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// Whether `plan` for `incoming` may carry its first historic page on this session at
    /// `now` ([`plan_carries_page`]): only while no health pause holds history back, while the
    /// relay refused no coverage by policy (refused coverage is settled by REQs of its own), and
    /// when the session holds none of `incoming` live already (a held filter's history would
    /// go unfetched, or be fetched again, once a repack reopened it).
    pub fn live_page_allowed(
        &self,
        now: Instant,
        incoming: &[TieredFilter],
        plan: &LivePlan,
        overflow: &[TieredFilter],
    ) -> bool {
        let Some(session) = self.session.as_ref() else {
            return false;
        };
        let held: Vec<&CompactFilter> = session
            .live
            .values()
            .flat_map(|g| g.group.filters())
            .collect();
        self.health.sync_paused_until(now).is_none()
            && self.refused.is_empty()
            && !incoming
                .iter()
                .map(CompactFilter::new)
                .any(|f| held.iter().any(|h| h.same_filter(&f)))
            && plan_carries_page(
                incoming,
                plan,
                overflow,
                session.pages.filters_per_request(),
            )
    }
}
