//! An EOSE as an input of the relay's machine ([`RelayMachine::handle_eose`]).
//!
//! Every EOSE, live or historic, tells the learned limits that the relay took that REQ's
//! filter count. A live group stays open. A historic page is closed and its slot released (a
//! live group's first page, [`crate::machine::live_history`], ends the same way but its group
//! stays open); then:
//! - refused coverage it settles (suspects that proved innocent) is forgotten;
//! - paging quirks it showed first are kept in the relay's statistics;
//! - its next pages go to the front of the session's queue, under IDs the driver gives;
//! - the parts of its history the relay cannot page through are returned.
//!
//! The driver registers the next pages in the page's batch before the page resolves there, so
//! the batch cannot confirm in between; it marks a truncated batch incomplete, and logs and
//! counts the rest.

use std::time::Instant;

use grasp_sync_filters::{PageStep, Truncation};
use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::BatchId;
use nostr::{Filter, SubscriptionId};

use crate::machine::relay::RelayMachine;
use crate::machine::session::{Eose, QueuedStart};

#[cfg(test)]
mod tests;

/// What an EOSE did to the relay's machine.
#[derive(Debug)]
pub enum EoseAnswer {
    /// A live group's EOSE that ended no page: it stays open.
    Live {
        /// The filter count its REQ proved the relay takes, when that is more than before.
        proved: Option<usize>,
    },
    /// A historic page's EOSE.
    Page(PageAnswer),
}

/// A historic page that reached its EOSE, and what it asks of the driver.
#[derive(Debug)]
pub struct PageAnswer {
    /// The page's batch.
    pub batch: BatchId,
    /// The filter count its REQ proved the relay takes, when that is more than before.
    pub proved: Option<usize>,
    /// It settled refused coverage: suspects proved innocent may be live again.
    pub settled: bool,
    /// Paging quirks of the relay this page showed first.
    pub learned_quirks: Vec<&'static str>,
    /// The next pages, queued first, with their filters: the driver registers them in the
    /// batch.
    pub next: Vec<(SubscriptionId, Vec<Filter>)>,
    /// Parts of the batch's history the relay cannot page through: the batch is never
    /// confirmed.
    pub truncated: Vec<Truncation>,
}

impl<Round, Parked> RelayMachine<Round, Parked> {
    /// The relay's EOSE for `subscription_id` at `now`. `next_id` names each next page.
    /// `None` for a subscription the session does not hold (or a live group's later EOSE).
    pub fn handle_eose(
        &mut self,
        now: Instant,
        subscription_id: &SubscriptionId,
        mut next_id: impl FnMut() -> SubscriptionId,
    ) -> Option<EoseAnswer> {
        let (Some(session), Some(ledger)) = (self.session.as_mut(), self.ledger.as_mut()) else {
            return None;
        };
        let page = match session.handle_eose(ledger, subscription_id, now)? {
            Eose::Live { filters } => {
                let proved = self.handle_accepted_req(filters);
                return Some(EoseAnswer::Live { proved });
            }
            Eose::Page(page) => page,
        };
        if !page.learned_quirks.is_empty() {
            self.stats.quirks = session.pages.quirks().labels();
        }
        let mut next = Vec::new();
        let mut truncated = Vec::new();
        match page.step {
            PageStep::Next(plans) => {
                let starts: Vec<QueuedStart> = plans
                    .into_iter()
                    .map(|pagination| {
                        let subscription_id = next_id();
                        next.push((subscription_id.clone(), pagination.current_filters()));
                        QueuedStart {
                            subscription_id,
                            batch: page.batch,
                            class: PermitClass::PaginationPage,
                            kind: StartKind::Pagination,
                            pagination,
                            exact: false,
                        }
                    })
                    .collect();
                for start in starts.into_iter().rev() {
                    session.queue.push_front(start);
                }
            }
            PageStep::Complete { truncated: cut } => truncated = cut,
        }
        let proved = self.handle_accepted_req(page.filters.len());
        let settled = !self.refused.is_empty() && self.refused.handle_success(&page.filters);
        Some(EoseAnswer::Page(PageAnswer {
            batch: page.batch,
            proved,
            settled,
            learned_quirks: page.learned_quirks,
            next,
            truncated,
        }))
    }

    /// A REQ of `filters` filters was accepted: the relay takes that many in this session.
    /// Returns the count when it proved more than before.
    fn handle_accepted_req(&mut self, filters: usize) -> Option<usize> {
        let proven = self.learned.proven_filters();
        self.learned.handle_accepted_req(filters);
        (self.learned.proven_filters() > proven).then_some(filters)
    }
}
