//! `GroupedPagination`: the walk of one REQ's filters through a relay's history, one cursor
//! per filter (or per part of a split filter), each with its own time window.

use nostr::filter::MatchEventOptions;
use nostr::{Event, Filter, Timestamp};

use super::cursor::Cursor;
use super::page::Distinct;
use super::session::{MAX_PAGE_LIMIT, RelayPageSession};

/// What to do after an EOSE.
#[derive(Debug, Clone, PartialEq)]
pub enum PageStep {
    /// Send each planner's [`current_filters`](GroupedPagination::current_filters) as one REQ
    /// and keep feeding that REQ's events and EOSE to that planner. Usually one; more when
    /// some filters must go alone (a relay that caps whole REQs, a filter being verified).
    Next(Vec<GroupedPagination>),
    /// Every filter of this planner is finished.
    Complete {
        /// Parts of the history the relay cannot page through: never confirm them as
        /// complete.
        truncated: Vec<Truncation>,
    },
}

/// A part of a filter's history the walk could not complete: one second of one value of one
/// kind held more events than the relay returns in a page, so neither `until`, `since` nor
/// splitting the filter reaches the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The filter as first handed to the planner.
    pub filter: Filter,
    /// The narrowest part that still overflowed, without time bounds.
    pub part: Filter,
    /// The second that holds too many events.
    pub at: Timestamp,
    /// Raw events the last page of that part delivered.
    pub delivered: usize,
}

/// The pagination planner of one REQ.
///
/// Feed it every raw event delivery of the subscription with [`handle_event`] (before any
/// deduplication or acceptance; the relay's cap is estimated from distinct events) and its
/// EOSE with [`handle_eose`], which returns the planners of the next REQs.
///
/// Every filter is sent with `limit` (the session's page limit) and a window. A full page moves
/// the window past what it covered: for a newest-first page `until` becomes its oldest second,
/// for an oldest-first page `since` becomes its newest second, and the boundary second is read
/// again. A full page inside one second splits the filter into halves for that second
/// ([`split_filter`](crate::split_filter)); a part that cannot be split is a [`Truncation`]. A short filter of a
/// multi-filter REQ whose total may have been cut by a per-REQ cap is verified before it
/// counts as finished: when its page told the relay's order, the rest of its window past
/// what the page covered is read, in REQs shared with the other such filters, the way a full
/// page moves on (a relay that cut the REQ sends events the first REQ lacked; one that did
/// not sends the boundary second again); otherwise the same window is sent again alone.
///
/// Termination: every next window is strictly narrower than the page's window, or is one
/// second of a strictly narrower filter, or is the same window sent alone once.
///
/// [`handle_event`]: GroupedPagination::handle_event
/// [`handle_eose`]: GroupedPagination::handle_eose
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedPagination {
    cursors: Vec<Cursor>,
    pub(super) truncated: Vec<Truncation>,
    /// The most filters one REQ of this walk carries: the first REQ's count.
    max_filters: usize,
    /// Raw deliveries of the page in flight that matched any cursor.
    total: usize,
    /// The distinct events among them (each cursor's page holds at most
    /// [`MAX_PAGE_LIMIT`] of them): what a REQ-wide cap is learned from.
    distinct: Distinct,
}

impl GroupedPagination {
    /// A planner for the first page of `filters`. Their `since` and `until` bound the walk;
    /// any `limit` is replaced by the session's page limit.
    pub fn new(filters: Vec<Filter>, session: &RelayPageSession) -> Self {
        let max_filters = filters.len().max(1);
        let distinct = Distinct::bounded(MAX_PAGE_LIMIT.saturating_mul(max_filters));
        let cursors = filters
            .into_iter()
            .map(|filter| Cursor::new(filter, session))
            .collect();
        Self {
            cursors,
            truncated: Vec::new(),
            max_filters,
            total: 0,
            distinct,
        }
    }

    /// The filters of the page in flight, as sent (empty once complete).
    pub fn current_filters(&self) -> Vec<Filter> {
        self.cursors.iter().map(|c| c.wire.clone()).collect()
    }

    /// Whether every filter is finished.
    pub fn is_complete(&self) -> bool {
        self.cursors.is_empty()
    }

    /// Counts one raw delivery against every filter of the page in flight that it matches.
    /// Returns whether it matched any.
    pub fn handle_event(&mut self, event: &Event) -> bool {
        let mut matched = false;
        for cursor in &mut self.cursors {
            if cursor.matcher.match_event(event, MatchEventOptions::new()) {
                cursor
                    .page
                    .record(event.id, event.created_at, cursor.boundary.as_ref());
                matched = true;
            }
        }
        if matched {
            self.total += 1;
            self.distinct.record(event.id);
        }
        matched
    }

    /// Ends the page in flight, learns from it, and plans the next REQs.
    pub fn handle_eose(self, session: &mut RelayPageSession) -> PageStep {
        let filters = self.cursors.len();
        for cursor in &self.cursors {
            session.observe_page(cursor.page.distinct.count);
        }
        session.observe_request(self.distinct.count, filters);
        let outcome = EoseContext {
            filters,
            distinct: self.distinct.count,
            may_be_cut: filters > 1 && session.request_may_be_cut(self.total),
        };
        let mut next = Vec::new();
        let mut truncated = self.truncated;
        for cursor in self.cursors {
            cursor.settle(session, &outcome, &mut next, &mut truncated);
        }
        let per_request = session.filters_per_request() == Some(1);
        let mut reqs: Vec<Vec<Cursor>> = Vec::new();
        let mut grouped: Vec<Cursor> = Vec::new();
        for mut cursor in next {
            cursor.rebuild(session);
            if cursor.alone || per_request {
                reqs.push(vec![cursor]);
            } else {
                grouped.push(cursor);
            }
        }
        while !grouped.is_empty() {
            let rest = grouped.split_off(grouped.len().min(self.max_filters));
            reqs.push(std::mem::replace(&mut grouped, rest));
        }
        if reqs.is_empty() {
            return PageStep::Complete { truncated };
        }
        let mut planners: Vec<GroupedPagination> = reqs
            .into_iter()
            .map(|cursors| GroupedPagination {
                distinct: Distinct::bounded(MAX_PAGE_LIMIT.saturating_mul(cursors.len())),
                cursors,
                truncated: Vec::new(),
                max_filters: self.max_filters,
                total: 0,
            })
            .collect();
        if let Some(first) = planners.first_mut() {
            first.truncated = truncated;
        }
        PageStep::Next(planners)
    }
}

/// What the whole REQ's page showed, for each cursor's decision.
pub(super) struct EoseContext {
    pub(super) filters: usize,
    /// Distinct events the whole REQ delivered.
    pub(super) distinct: usize,
    /// The REQ may have been cut as a whole: its short filters prove nothing.
    pub(super) may_be_cut: bool,
}
