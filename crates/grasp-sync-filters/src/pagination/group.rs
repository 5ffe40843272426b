//! `GroupedPagination`: the walk of one REQ's filters through a relay's history, one cursor
//! per filter (or per part of a split filter), each with its own time window.

use std::collections::BTreeSet;

use nostr::filter::MatchEventOptions;
use nostr::{Event, EventId, Filter, Timestamp};

use super::session::RelayPageSession;
use super::split::split_filter;

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
/// deduplication or acceptance) and its EOSE with [`handle_eose`], which returns the planners
/// of the next REQs.
///
/// Every filter is sent with `limit` (the session's page limit) and a window. A full page moves
/// the window past what it covered: for a newest-first page `until` becomes its oldest second,
/// for an oldest-first page `since` becomes its newest second, and the boundary second is read
/// again. A full page inside one second splits the filter into halves for that second
/// ([`split_filter`]); a part that cannot be split is a [`Truncation`]. A short filter of a
/// multi-filter REQ whose total may have been cut by a per-REQ cap is sent again alone before
/// it counts as finished.
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
}

impl GroupedPagination {
    /// A planner for the first page of `filters`. Their `since` and `until` bound the walk;
    /// any `limit` is replaced by the session's page limit.
    pub fn new(filters: Vec<Filter>, session: &RelayPageSession) -> Self {
        let max_filters = filters.len().max(1);
        let cursors = filters
            .into_iter()
            .map(|filter| {
                let base = unbounded(&filter);
                Cursor::new(filter.clone(), base, filter.since, filter.until, session)
            })
            .collect();
        Self {
            cursors,
            truncated: Vec::new(),
            max_filters,
            total: 0,
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
        }
        matched
    }

    /// Ends the page in flight, learns from it, and plans the next REQs.
    pub fn handle_eose(self, session: &mut RelayPageSession) -> PageStep {
        let filters = self.cursors.len();
        for cursor in &self.cursors {
            session.observe_page(cursor.page.count);
        }
        session.observe_request(self.total, filters);
        let outcome = EoseContext {
            filters,
            total: self.total,
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
struct EoseContext {
    filters: usize,
    total: usize,
    /// The REQ may have been cut as a whole: its short filters prove nothing.
    may_be_cut: bool,
}

/// The second a page reads again, and what the previous page delivered in it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Boundary {
    at: Timestamp,
    seen: BTreeSet<EventId>,
    /// The page asks `until: at` of a relay not yet known to treat `until` as exclusive: if
    /// it brings none of the events at `at`, it is.
    tests_until: bool,
}

/// The order a page's events came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    NewestFirst,
    OldestFirst,
    /// All in one second: the page does not say.
    Unknown,
}

/// The counters of one cursor's page in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Page {
    count: usize,
    /// Deliveries the previous page had not delivered at the boundary second.
    new_events: usize,
    at_boundary: usize,
    min_t: Option<Timestamp>,
    max_t: Option<Timestamp>,
    last_t: Option<Timestamp>,
    ascending: usize,
    descending: usize,
    ids_at_min: BTreeSet<EventId>,
    ids_at_max: BTreeSet<EventId>,
}

impl Page {
    fn record(&mut self, id: EventId, created_at: Timestamp, boundary: Option<&Boundary>) {
        self.count += 1;
        let at_boundary = boundary.is_some_and(|b| b.at == created_at);
        if at_boundary {
            self.at_boundary += 1;
        }
        if !(at_boundary && boundary.is_some_and(|b| b.seen.contains(&id))) {
            self.new_events += 1;
        }
        match self.last_t {
            Some(last) if created_at > last => self.ascending += 1,
            Some(last) if created_at < last => self.descending += 1,
            _ => {}
        }
        self.last_t = Some(created_at);
        match self.min_t {
            Some(min) if created_at > min => {}
            Some(min) if created_at == min => {
                self.ids_at_min.insert(id);
            }
            _ => {
                self.min_t = Some(created_at);
                self.ids_at_min = BTreeSet::from([id]);
            }
        }
        match self.max_t {
            Some(max) if created_at < max => {}
            Some(max) if created_at == max => {
                self.ids_at_max.insert(id);
            }
            _ => {
                self.max_t = Some(created_at);
                self.ids_at_max = BTreeSet::from([id]);
            }
        }
    }

    /// The page's order by the majority of its steps between seconds (a relay answering
    /// overlapping filters one after another can step back now and then).
    fn order(&self) -> Order {
        match (self.descending, self.ascending) {
            (0, 0) => Order::Unknown,
            (down, up) if down >= up => Order::NewestFirst,
            _ => Order::OldestFirst,
        }
    }
}

/// One filter (or one part of a split filter) and its window.
#[derive(Debug, Clone, PartialEq)]
struct Cursor {
    origin: Filter,
    /// `origin` narrowed by splits, without `since`, `until` and `limit`.
    base: Filter,
    /// Inclusive bounds of the window still to read.
    lo: Option<Timestamp>,
    hi: Option<Timestamp>,
    /// Read only this second of the window first, to learn how the relay reads `until`
    /// before the window is split around it.
    second: Option<Timestamp>,
    /// The window as meant, without `limit`: what the page's deliveries count against.
    matcher: Filter,
    /// The filter as sent.
    wire: Filter,
    /// Send in a REQ of its own.
    alone: bool,
    /// Sent alone because its short page came in a REQ that may have been cut: that page's
    /// count and the REQ's total.
    suspect: Option<(usize, usize)>,
    boundary: Option<Boundary>,
    /// The previous page was this cursor alone in its REQ and full: its count.
    prev_single_full: Option<usize>,
    page: Page,
}

impl Cursor {
    fn new(
        origin: Filter,
        base: Filter,
        lo: Option<Timestamp>,
        hi: Option<Timestamp>,
        session: &RelayPageSession,
    ) -> Self {
        let mut cursor = Self {
            origin,
            matcher: base.clone(),
            wire: base.clone(),
            base,
            lo,
            hi,
            second: None,
            alone: false,
            suspect: None,
            boundary: None,
            prev_single_full: None,
            page: Page::default(),
        };
        cursor.rebuild(session);
        cursor
    }

    /// A cursor over `base` for another window.
    fn with_window(&self, lo: Option<Timestamp>, hi: Option<Timestamp>, base: Filter) -> Self {
        Self {
            origin: self.origin.clone(),
            matcher: base.clone(),
            wire: base.clone(),
            base,
            lo,
            hi,
            second: None,
            alone: false,
            suspect: None,
            boundary: None,
            prev_single_full: None,
            page: Page::default(),
        }
    }

    /// Recomputes the filter as meant and as sent from the window and what the session
    /// knows: an exclusive `until` is asked one second later.
    fn rebuild(&mut self, session: &RelayPageSession) {
        let (lo, hi) = match self.second {
            Some(at) => (Some(at), Some(at)),
            None => (self.lo, self.hi),
        };
        let mut matcher = self.base.clone();
        matcher.since = lo;
        matcher.until = hi;
        let mut wire = matcher.clone();
        if session.quirks().exclusive_until {
            wire.until = hi.map(|hi| Timestamp::from(hi.as_secs().saturating_add(1)));
        }
        // A filter of exact IDs asks for every one of them.
        let limit = self
            .base
            .ids
            .as_ref()
            .map_or(session.page_limit(), BTreeSet::len);
        self.matcher = matcher;
        self.wire = wire.limit(limit);
    }

    /// Decides this cursor's next step after its page; pushes what goes on into `next`.
    fn settle(
        mut self,
        session: &mut RelayPageSession,
        eose: &EoseContext,
        next: &mut Vec<Cursor>,
        truncated: &mut Vec<Truncation>,
    ) {
        let page = std::mem::take(&mut self.page);
        if let Some(count) = self.prev_single_full.take()
            && page.new_events > 0
        {
            session.observe_proven_cap(count);
        }
        let boundary = self.boundary.take();
        if let Some(boundary) = &boundary
            && boundary.tests_until
            && (page.count > 0 || !eose.may_be_cut)
            && page.order() != Order::OldestFirst
        {
            if page.at_boundary > 0 {
                session.learn_inclusive_until();
            } else {
                // `until: at` brought none of the events known at `at`: the relay reads
                // `until` as exclusive. This page covered the window below `at`; read `at`
                // again, asked the way the relay reads it.
                session.learn_exclusive_until();
                let known = Boundary {
                    tests_until: false,
                    ..boundary.clone()
                };
                if self.second.is_some() {
                    self.boundary = Some(known);
                    next.push(self);
                    return;
                }
                let mut again =
                    self.with_window(Some(boundary.at), Some(boundary.at), self.base.clone());
                again.boundary = Some(known);
                next.push(again);
                match self.below(boundary.at) {
                    Some(hi) => self.hi = Some(hi),
                    None => return,
                }
            }
        }
        if let Some((grouped_count, grouped_total)) = self.suspect.take() {
            self.alone = false;
            if page.count > grouped_count {
                session.learn_per_request_cap(grouped_total);
            }
        }
        let full = session.is_full(page.count);
        let order = match page.order() {
            Order::NewestFirst if full => {
                session.learn_newest_first();
                Order::NewestFirst
            }
            Order::OldestFirst if full => {
                session.learn_oldest_first();
                Order::OldestFirst
            }
            Order::NewestFirst | Order::OldestFirst => page.order(),
            Order::Unknown => session.known_order(),
        };
        if !full {
            if eose.may_be_cut {
                // Send the same window again alone before calling it finished.
                self.suspect = Some((page.count, eose.total));
                self.alone = true;
                self.boundary = boundary;
                next.push(self);
            } else if let Some(at) = self.second {
                // The second read on its own fitted a page: the rest of the window goes on.
                self.push_sides(at, order, next);
            }
            return;
        }
        let (Some(min_t), Some(max_t)) = (page.min_t, page.max_t) else {
            return;
        };
        if min_t == max_t {
            if !session.until_known() {
                // Learn how the relay reads `until` on this second before splitting around it.
                self.second = Some(min_t);
                self.boundary = Some(Boundary {
                    at: min_t,
                    seen: page.ids_at_min,
                    tests_until: true,
                });
                next.push(self);
                return;
            }
            // The whole page sits in one second: read that second by parts, and the rest of
            // the window on whichever side the page's order leaves unread.
            self.split_second(min_t, page.count, next, truncated);
            self.push_sides(min_t, order, next);
            return;
        }
        match order {
            Order::OldestFirst => {
                self.lo = Some(max_t);
                self.boundary = Some(Boundary {
                    at: max_t,
                    seen: page.ids_at_max,
                    tests_until: false,
                });
            }
            Order::NewestFirst | Order::Unknown => {
                self.hi = Some(min_t);
                self.boundary = Some(Boundary {
                    at: min_t,
                    seen: page.ids_at_min,
                    tests_until: !session.until_known(),
                });
            }
        }
        self.prev_single_full = (eose.filters == 1).then_some(page.count);
        next.push(self);
    }

    /// Reads second `at` by the two halves of the filter, or reports it truncated.
    fn split_second(
        &self,
        at: Timestamp,
        delivered: usize,
        next: &mut Vec<Cursor>,
        truncated: &mut Vec<Truncation>,
    ) {
        match split_filter(&self.base) {
            Some(parts) => {
                for part in parts {
                    next.push(self.with_window(Some(at), Some(at), part));
                }
            }
            None => truncated.push(Truncation {
                filter: self.origin.clone(),
                part: self.base.clone(),
                at,
                delivered,
            }),
        }
    }

    /// Pushes the window's parts older and newer than `at` that a page of `order` leaves
    /// unread.
    fn push_sides(&self, at: Timestamp, order: Order, next: &mut Vec<Cursor>) {
        if order != Order::OldestFirst
            && let Some(hi) = self.below(at)
        {
            next.push(self.with_window(self.lo, Some(hi), self.base.clone()));
        }
        if order != Order::NewestFirst
            && let Some(lo) = self.above(at)
        {
            next.push(self.with_window(Some(lo), self.hi, self.base.clone()));
        }
    }

    /// The second before `at`, if the window reaches it.
    fn below(&self, at: Timestamp) -> Option<Timestamp> {
        let below = at.as_secs().checked_sub(1)?;
        let inside = self.lo.is_none_or(|lo| lo.as_secs() <= below);
        inside.then(|| Timestamp::from(below))
    }

    /// The second after `at`, if the window reaches it.
    fn above(&self, at: Timestamp) -> Option<Timestamp> {
        let above = at.as_secs().checked_add(1)?;
        let inside = self.hi.is_none_or(|hi| hi.as_secs() >= above);
        inside.then(|| Timestamp::from(above))
    }
}

/// `filter` without `since`, `until` and `limit`.
fn unbounded(filter: &Filter) -> Filter {
    let mut base = filter.clone();
    base.since = None;
    base.until = None;
    base.limit = None;
    base
}
