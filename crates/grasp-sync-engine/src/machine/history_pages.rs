//! How a relay's historic REQs are packed and queued, in its machine
//! ([`RelayMachine::queue_history`]).
//!
//! - **Admission first.** Coverage the relay refused by policy is left out while its pause
//!   runs; a suspect filter (from a refused group of several) goes in a REQ of its own
//!   ([`RefusedCoverage::admit`](crate::machine::refused::RefusedCoverage::admit)).
//! - **Packing.** The admitted filters share REQs up to a filter ceiling
//!   ([`RelayMachine::history_pack_limits`]): the learned one ([`FilterCeiling::Learned`], a
//!   guess until the relay states or proves it) or the one the relay is known to take
//!   ([`FilterCeiling::Trusted`]), and one filter per REQ on a relay whose pages cap whole
//!   REQs. History ignores the live tiers: every family shares REQs.
//! - **Pages.** Each REQ becomes the first page of a per-filter pagination, queued in the
//!   session behind what already waits, under a subscription ID the driver gives. The driver
//!   registers each page in its batch before anything is sent.
//! - **Exact IDs.** Events known by ID (a NIP-77 diff's hydration, its retry, a recovery
//!   attempt, a dependency the store asked for) are fetched by exact-ID REQs, queued the same
//!   way ([`RelayMachine::queue_exact_fetch`]).

use std::time::Instant;

use grasp_sync_filters::{
    CoverageTier, FilterBudget, FilterError, GroupedPagination, PackLimits, TieredFilter,
    exact_id_filters, pack_requests,
};
use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::BatchId;
use nostr::{EventId, Filter, SubscriptionId};

use crate::machine::refused::Admission;
use crate::machine::relay::RelayMachine;
use crate::machine::session::{QueuedStart, SessionState};

#[cfg(test)]
mod tests;

/// How many filters a historic REQ may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterCeiling {
    /// The session's learned ceiling, known or a guess: a REQ above the relay's hidden cap is
    /// refused and regrouped, the cost of finding the cap.
    Learned,
    /// What the relay stated or accepted (`LearnedLimits::trusted_filter_ceiling`): for a batch
    /// sent by REQ+EOSE only to save starts, which must not cost a refusal.
    Trusted,
}

/// What [`RelayMachine::queue_history`] queued.
#[derive(Debug, Default)]
pub struct QueuedHistory {
    /// Each queued page's subscription ID and filters, in queue order, for the driver to
    /// register in the batch.
    pub pages: Vec<(SubscriptionId, Vec<Filter>)>,
    /// Why the filters admitted together could not be packed; then nothing was queued.
    pub failed: Option<FilterError>,
    /// Why a suspect filter could not be packed in a REQ of its own; the others were queued.
    pub suspects_failed: Vec<FilterError>,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// How this session packs historic REQs: at most `ceiling` filters per REQ, one on a relay
    /// whose pages cap whole REQs. `None` without a session.
    pub fn history_pack_limits(&self, ceiling: FilterCeiling) -> Option<PackLimits> {
        let pages = &self.session.as_ref()?.pages;
        let mut limits = match ceiling {
            FilterCeiling::Learned => self.learned.pack_limits(PackLimits::default()),
            FilterCeiling::Trusted => self.learned.trusted_pack_limits(PackLimits::default()),
        };
        if let Some(most) = pages.filters_per_request() {
            limits.max_filters_per_req = limits.max_filters_per_req.min(most);
        }
        Some(limits)
    }

    /// Queues `filters` as historic pages of `batch` at `now`, as far as the refused coverage
    /// admits them (see the module). `None` without a session.
    pub fn queue_history(
        &mut self,
        now: Instant,
        batch: BatchId,
        filters: Vec<Filter>,
        ceiling: FilterCeiling,
        next_id: impl FnMut() -> SubscriptionId,
    ) -> Option<QueuedHistory> {
        let mut together = Vec::new();
        let mut alone = Vec::new();
        for admission in self.refused.admit(now, filters) {
            match admission {
                Admission::Send(filter) => together.push(filter),
                Admission::Alone(filter) => alone.push(filter),
            }
        }
        self.queue_packed(batch, together, alone, ceiling, next_id)
    }

    /// Queues `together` packed into REQs of at most `ceiling` filters and each of `alone` in
    /// a REQ of its own, as historic pages of `batch`, without asking the refused coverage (a
    /// recovery probe is what may send refused coverage). `None` without a session.
    pub fn queue_packed(
        &mut self,
        batch: BatchId,
        together: Vec<Filter>,
        alone: Vec<Filter>,
        ceiling: FilterCeiling,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> Option<QueuedHistory> {
        let limits = self.history_pack_limits(ceiling)?;
        let session = self.session.as_mut()?;
        let mut queued = QueuedHistory::default();
        let mut groups = match pack_requests(historic(together), &limits) {
            Ok(groups) => groups,
            Err(error) => {
                queued.failed = Some(error);
                return Some(queued);
            }
        };
        for filter in alone {
            match pack_requests(historic(vec![filter]), &limits) {
                Ok(single) => groups.extend(single),
                Err(error) => queued.suspects_failed.push(error),
            }
        }
        let start = PageStart {
            batch,
            class: PermitClass::HistoricPage,
            kind: StartKind::Historic,
            exact: false,
        };
        for group in groups {
            let pagination = GroupedPagination::new(group.to_filters(), &session.pages);
            let subscription_id = next_id();
            queued
                .pages
                .push((subscription_id.clone(), pagination.current_filters()));
            start.queue(session, subscription_id, pagination);
        }
        Some(queued)
    }

    /// Queues exact-ID REQs for `ids` in `batch` (a hydration pass, a retry, a recovery
    /// attempt or a dependency the store asked for), one page per filter of at most
    /// [`MAX_IDS_PER_FILTER`](grasp_sync_filters::MAX_IDS_PER_FILTER) IDs, under the IDs `next_id`
    /// gives and as `class` and `kind` of start. Returns each page's subscription and filters,
    /// for the driver to register in the batch (none without a session), or why the filters
    /// could not be built.
    pub fn queue_exact_fetch(
        &mut self,
        batch: BatchId,
        ids: &[EventId],
        class: PermitClass,
        kind: StartKind,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> Result<Vec<(SubscriptionId, Vec<Filter>)>, FilterError> {
        let filters = exact_id_filters(ids, &FilterBudget::default())?;
        let Some(session) = self.session.as_mut() else {
            return Ok(Vec::new());
        };
        let start = PageStart {
            batch,
            class,
            kind,
            exact: true,
        };
        let mut queued = Vec::with_capacity(filters.len());
        for filter in filters {
            let subscription_id = next_id();
            let filters = vec![filter.filter];
            queued.push((subscription_id.clone(), filters.clone()));
            let pagination = GroupedPagination::new(filters, &session.pages);
            start.queue(session, subscription_id, pagination);
        }
        Ok(queued)
    }
}

/// How the pages of one call start: their batch, permit class, the kind of start the gates
/// count, and whether they fetch exact IDs.
#[derive(Clone, Copy)]
struct PageStart {
    batch: BatchId,
    class: PermitClass,
    kind: StartKind,
    exact: bool,
}

impl PageStart {
    /// Queues one page, `pagination` under `subscription_id`, behind what waits in `session`.
    fn queue<Round, Parked>(
        self,
        session: &mut SessionState<Round, Parked>,
        subscription_id: SubscriptionId,
        pagination: GroupedPagination,
    ) {
        session.queue.push_back(QueuedStart {
            subscription_id,
            batch: self.batch,
            class: self.class,
            kind: self.kind,
            pagination,
            exact: self.exact,
        });
    }
}

/// `filters` in the one tier history packs them in.
fn historic(filters: Vec<Filter>) -> Vec<TieredFilter> {
    filters
        .into_iter()
        .map(|f| TieredFilter::new(f, CoverageTier::HistoricOnly))
        .collect()
}
