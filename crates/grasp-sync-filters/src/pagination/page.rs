//! `Page`: the counters of one cursor's page in flight, and the order its events came in.

use std::collections::BTreeSet;

use nostr::{EventId, Timestamp};

use super::cursor::Boundary;
use super::session::MAX_PAGE_LIMIT;

/// The order a page's events came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    NewestFirst,
    OldestFirst,
    /// The page does not say which end of the window it read: it steps both ways in like
    /// measure (a relay sending its pages in an order of its own), or too seldom between
    /// seconds for its order to be told from chance.
    Mixed,
    /// All in one second: the page does not say.
    Unknown,
}

/// A page is in one order when it steps that way at least this many times as often as the
/// other way: a relay answering several filters one after another steps back about once per
/// filter, one sending in no order about as often as forward.
const AGAINST_THE_ORDER: usize = 4;

/// A page tells its order only when it steps that way at least this often. Fewer steps
/// come out in one order by chance too often: a page of a hundred events in two seconds, one
/// of them holding a single event, sent in no order, looks sorted one time in fifty. Three
/// steps one way take four seconds in order, which chance seldom gives a full page.
const DECISIVE_STEPS: usize = 3;

/// The counters of one cursor's page in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Page {
    pub(super) count: usize,
    /// Deliveries the previous page had not delivered at the boundary second.
    pub(super) new_events: usize,
    pub(super) at_boundary: usize,
    pub(super) min_t: Option<Timestamp>,
    pub(super) max_t: Option<Timestamp>,
    pub(super) last_t: Option<Timestamp>,
    pub(super) ascending: usize,
    pub(super) descending: usize,
    pub(super) ids_at_min: BTreeSet<EventId>,
    pub(super) ids_at_max: BTreeSet<EventId>,
    /// Deliveries of distinct events: what the relay's cap is estimated from. A relay whose
    /// cap counts each event once may still send one twice; counted twice, it would raise
    /// the estimated cap above the relay's, and a later full page would look short. (Whether
    /// a page is full is still decided on [`Page::count`], the raw deliveries: a relay may
    /// count repeats against its cap too.)
    pub(super) distinct: Distinct,
}

/// A count of distinct event IDs, remembering at most `bound` of them: past it, every
/// delivery counts as new (more than any page the bound is chosen for holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Distinct {
    pub(super) count: usize,
    seen: BTreeSet<EventId>,
    bound: usize,
}

impl Default for Distinct {
    fn default() -> Self {
        Self::bounded(MAX_PAGE_LIMIT)
    }
}

impl Distinct {
    pub(super) fn bounded(bound: usize) -> Self {
        Self {
            count: 0,
            seen: BTreeSet::new(),
            bound,
        }
    }

    pub(super) fn record(&mut self, id: EventId) {
        if self.seen.len() >= self.bound || self.seen.insert(id) {
            self.count += 1;
        }
    }
}

impl Page {
    pub(super) fn record(
        &mut self,
        id: EventId,
        created_at: Timestamp,
        boundary: Option<&Boundary>,
    ) {
        self.count += 1;
        self.distinct.record(id);
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

    /// The page's order by a clear majority of at least [`DECISIVE_STEPS`] steps between
    /// seconds (a relay answering overlapping filters one after another steps back now and
    /// then); without one, [`Order::Mixed`].
    pub(super) fn order(&self) -> Order {
        let decisive = |along: usize, against: usize| {
            along >= DECISIVE_STEPS && against * AGAINST_THE_ORDER <= along
        };
        match (self.descending, self.ascending) {
            (0, 0) => Order::Unknown,
            (down, up) if decisive(down, up) => Order::NewestFirst,
            (down, up) if decisive(up, down) => Order::OldestFirst,
            _ => Order::Mixed,
        }
    }
}
