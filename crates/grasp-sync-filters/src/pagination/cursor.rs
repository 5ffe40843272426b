//! `Cursor`: one filter (or one part of a split filter) of a walk, its window, and the rules
//! that decide its next step after each page: advance the window, read a boundary or a single
//! second again, split a full second, read on past a short filter's page or send it again
//! alone.

use std::collections::BTreeSet;

use nostr::{Filter, Timestamp};

use super::group::{EoseContext, Truncation};
use super::page::{Order, Page};
use super::session::RelayPageSession;
use super::split::split_filter;

/// The second a page reads again, and what the previous page delivered in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Boundary {
    pub(super) at: Timestamp,
    pub(super) seen: BTreeSet<nostr::EventId>,
    /// The page asks `until: at` of a relay not yet known to treat `until` as exclusive: if
    /// it brings none of the events at `at`, it is.
    pub(super) tests_until: bool,
}

/// How a short page of a REQ that may have been cut as a whole is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suspect {
    /// The rest of the window, past what the page covered, goes on in a REQ shared with the
    /// other suspects: any event it brings beyond the boundary second's known ones is one the
    /// REQ of `grouped_request` distinct events cut.
    Continued { grouped_request: usize },
    /// The same window is sent again alone (the page was empty, told no order, or left no
    /// narrower window): more than the page's `grouped_page` distinct events means the REQ of
    /// `grouped_request` was cut.
    Alone {
        grouped_page: usize,
        grouped_request: usize,
    },
}

/// The seconds a page covered, its raw deliveries, and the events it brought at its oldest
/// and newest second.
#[derive(Debug, Clone)]
struct Cover {
    min_t: Timestamp,
    max_t: Timestamp,
    count: usize,
    ids_at_min: BTreeSet<nostr::EventId>,
    ids_at_max: BTreeSet<nostr::EventId>,
}

impl Cover {
    /// What `page` covered; `None` for a page without events.
    fn of(page: &Page) -> Option<Cover> {
        Some(Cover {
            min_t: page.min_t?,
            max_t: page.max_t?,
            count: page.count,
            ids_at_min: page.ids_at_min.clone(),
            ids_at_max: page.ids_at_max.clone(),
        })
    }
}

/// One filter (or one part of a split filter) and its window.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Cursor {
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
    pub(super) matcher: Filter,
    /// The filter as sent.
    pub(super) wire: Filter,
    /// Send in a REQ of its own.
    pub(super) alone: bool,
    /// Its short page came in a REQ that may have been cut, and is being checked.
    suspect: Option<Suspect>,
    pub(super) boundary: Option<Boundary>,
    /// The previous page was this cursor alone in its REQ and full: its count.
    prev_single_full: Option<usize>,
    pub(super) page: Page,
}

impl Cursor {
    /// A cursor for the first page of `origin`, bounded by its own `since` and `until`.
    pub(super) fn new(origin: Filter, session: &RelayPageSession) -> Self {
        let base = unbounded(&origin);
        let (lo, hi) = (origin.since, origin.until);
        let mut cursor = Self::blank(origin, base, lo, hi);
        cursor.rebuild(session);
        cursor
    }

    /// A cursor over `base` for another window of the same walk.
    fn with_window(&self, lo: Option<Timestamp>, hi: Option<Timestamp>, base: Filter) -> Self {
        Self::blank(self.origin.clone(), base, lo, hi)
    }

    fn blank(origin: Filter, base: Filter, lo: Option<Timestamp>, hi: Option<Timestamp>) -> Self {
        Self {
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
        }
    }

    /// Recomputes the filter as meant and as sent from the window and what the session
    /// knows: an exclusive `until` is asked one second later.
    pub(super) fn rebuild(&mut self, session: &RelayPageSession) {
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
            .map_or(session.page_limit(), |ids| ids.len().max(1));
        self.matcher = matcher;
        self.wire = wire.limit(limit);
    }

    /// Decides this cursor's next step after its page; pushes what goes on into `next`.
    pub(super) fn settle(
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
        let full = session.is_full(page.count);
        let order = read_order(&page, full, session);
        let boundary = self.boundary.take();
        // The page's own order, not the session's: a page of one second tests `until`
        // whatever order the relay's pages come in.
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
        match self.suspect.take() {
            Some(Suspect::Continued { grouped_request }) if page.new_events > 0 => {
                session.learn_per_request_cap(grouped_request);
            }
            Some(Suspect::Alone {
                grouped_page,
                grouped_request,
            }) => {
                self.alone = false;
                if page.distinct.count > grouped_page {
                    session.learn_per_request_cap(grouped_request);
                }
            }
            Some(Suspect::Continued { .. }) | None => {}
        }
        if !full {
            if eose.may_be_cut {
                // Before calling it finished, read on past what the page covered, with the
                // REQ's other suspects, where the page's order says which end of the window is
                // unread and a narrower window is left; otherwise send it again alone.
                if self.second.is_none()
                    && matches!(order, Order::NewestFirst | Order::OldestFirst)
                    && let Some(cover) = Cover::of(&page)
                    && self.narrows(&cover, order)
                {
                    let continued = Suspect::Continued {
                        grouped_request: eose.distinct,
                    };
                    let first = next.len();
                    self.read_on(cover, order, session, eose, next);
                    for cursor in &mut next[first..] {
                        cursor.suspect = Some(continued);
                    }
                    return;
                }
                self.suspect = Some(Suspect::Alone {
                    grouped_page: page.distinct.count,
                    grouped_request: eose.distinct,
                });
                self.alone = true;
                self.boundary = boundary;
                next.push(self);
            } else if let Some(at) = self.second {
                // The second read on its own fitted a page: the rest of the window goes on.
                self.push_sides(at, order, next);
            }
            return;
        }
        let Some(cover) = Cover::of(&page) else {
            return;
        };
        let (min_t, max_t) = (cover.min_t, cover.max_t);
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
        self.read_on(cover, order, session, eose, next);
    }

    /// Whether reading on past `cover` in `order` leaves a window narrower than this one.
    fn narrows(&self, cover: &Cover, order: Order) -> bool {
        match order {
            Order::OldestFirst => self.lo.is_none_or(|lo| cover.max_t > lo),
            Order::NewestFirst | Order::Mixed | Order::Unknown => {
                self.hi.is_none_or(|hi| cover.min_t < hi)
            }
        }
    }

    /// Moves the window past what a page read (`cover`, in `order`), the edge second read
    /// again, and pushes what goes on into `next`.
    fn read_on(
        mut self,
        cover: Cover,
        order: Order,
        session: &RelayPageSession,
        eose: &EoseContext,
        next: &mut Vec<Cursor>,
    ) {
        let Cover {
            min_t,
            max_t,
            count,
            ids_at_min,
            ids_at_max,
        } = cover;
        match order {
            Order::Mixed => {
                // Either end of the window may be the one read: read on from both edges of the
                // page, each edge second again. The side already read comes back short.
                let mut newer = self.with_window(Some(max_t), self.hi, self.base.clone());
                newer.boundary = Some(Boundary {
                    at: max_t,
                    seen: ids_at_max,
                    tests_until: false,
                });
                next.push(newer);
                self.hi = Some(min_t);
                self.boundary = Some(Boundary {
                    at: min_t,
                    seen: ids_at_min,
                    tests_until: !session.until_known(),
                });
            }
            Order::OldestFirst => {
                self.lo = Some(max_t);
                self.boundary = Some(Boundary {
                    at: max_t,
                    seen: ids_at_max,
                    tests_until: false,
                });
            }
            Order::NewestFirst | Order::Unknown => {
                self.hi = Some(min_t);
                self.boundary = Some(Boundary {
                    at: min_t,
                    seen: ids_at_min,
                    tests_until: !session.until_known(),
                });
            }
        }
        self.prev_single_full = (eose.filters == 1).then_some(count);
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

/// The end of the window a page read: its own order when it tells one and the session knows
/// no other (a full page teaches it), else the order the session learned. A page that does
/// not tell, on a session that knows nothing (or saw both orders), is [`Order::Mixed`]: both
/// ends are read on.
fn read_order(page: &Page, full: bool, session: &mut RelayPageSession) -> Order {
    let known = session.known_order();
    match page.order() {
        Order::NewestFirst if known != Order::OldestFirst && known != Order::Mixed => {
            if full {
                session.learn_newest_first();
            }
            Order::NewestFirst
        }
        Order::OldestFirst if known != Order::NewestFirst && known != Order::Mixed => {
            if full {
                session.learn_oldest_first();
            }
            Order::OldestFirst
        }
        // A page contradicting what the session learned teaches nothing: read both ends.
        Order::NewestFirst | Order::OldestFirst => Order::Mixed,
        Order::Mixed if known == Order::Unknown => Order::Mixed,
        Order::Mixed | Order::Unknown => known,
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
