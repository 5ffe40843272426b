//! `GroupedPagination`: per-filter cursors for the filters of one grouped REQ+EOSE query.

use std::collections::BTreeSet;

use nostr::filter::MatchEventOptions;
use nostr::{Event, EventId, Filter, Timestamp};

use super::session::{Decision, RelayPageSession};

/// What to do after an EOSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageStep {
    /// Send these filters together, as one grouped REQ, and keep feeding its events and EOSE
    /// to the same planner.
    Next(Vec<Filter>),
    /// Every filter is finished.
    Complete {
        /// Filters whose history may be incomplete because a page made no progress.
        truncated: Vec<Truncation>,
    },
}

/// A filter abandoned because a full page held nothing older than its cursor: more events may
/// exist at `at` than the relay returns in one page, and none older can be reached by `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The filter as first sent.
    pub filter: Filter,
    /// The timestamp every event of the stuck page carried.
    pub at: Timestamp,
    /// Raw events delivered by the stuck page.
    pub delivered: usize,
}

/// The pagination planner of one grouped query.
///
/// Feed it every raw event delivery of the subscription with [`handle_event`]
/// (before any deduplication or acceptance) and each EOSE with [`handle_eose`].
///
/// Termination: a filter gets a next page only with a strictly older `until` than its current
/// one, so every filter finishes after at most one page per distinct second.
///
/// [`handle_event`]: GroupedPagination::handle_event
/// [`handle_eose`]: GroupedPagination::handle_eose
#[derive(Debug, Clone)]
pub struct GroupedPagination {
    cursors: Vec<Cursor>,
    truncated: Vec<Truncation>,
}

impl GroupedPagination {
    /// A planner for the first page of `filters` (as sent in the first REQ).
    pub fn new(filters: Vec<Filter>) -> Self {
        Self {
            cursors: filters.into_iter().map(Cursor::new).collect(),
            truncated: Vec::new(),
        }
    }

    /// The filters of the page in flight (empty once complete).
    pub fn current_filters(&self) -> Vec<Filter> {
        self.active().map(|c| c.current.clone()).collect()
    }

    /// Whether every filter is finished.
    pub fn is_complete(&self) -> bool {
        self.active().next().is_none()
    }

    /// Counts one raw delivery against every filter of the page in flight that it matches.
    /// Returns whether it matched any.
    pub fn handle_event(&mut self, event: &Event) -> bool {
        let mut matched = false;
        for cursor in self.cursors.iter_mut().filter(|c| c.state != State::Done) {
            if cursor.current.match_event(event, MatchEventOptions::new()) {
                cursor.record(event.id, event.created_at);
                matched = true;
            }
        }
        matched
    }

    /// Ends the page in flight and decides the next one.
    pub fn handle_eose(&mut self, session: &mut RelayPageSession) -> PageStep {
        for cursor in self.active() {
            session.observe_page(cursor.event_count);
        }
        for cursor in &mut self.cursors {
            match cursor.state {
                State::Done => continue,
                State::Verifying if cursor.new_events == 0 => {
                    session.confirm_hint();
                    cursor.state = State::Done;
                    continue;
                }
                State::Verifying => session.drop_hint(),
                State::Paging => {}
            }
            let Some(oldest) = cursor.min_created_at else {
                cursor.state = State::Done;
                continue;
            };
            let next_state = match session.decide(cursor.event_count) {
                Decision::Exhausted => {
                    cursor.state = State::Done;
                    continue;
                }
                Decision::More => State::Paging,
                Decision::Verify => State::Verifying,
            };
            if cursor.current.until == Some(oldest) {
                // The whole page sat at the cursor second: `until` cannot move past it.
                self.truncated.push(Truncation {
                    filter: cursor.original.clone(),
                    at: oldest,
                    delivered: cursor.event_count,
                });
                cursor.state = State::Done;
            } else {
                cursor.advance(oldest, next_state);
            }
        }
        let next = self.current_filters();
        if next.is_empty() {
            PageStep::Complete {
                truncated: self.truncated.clone(),
            }
        } else {
            PageStep::Next(next)
        }
    }

    fn active(&self) -> impl Iterator<Item = &Cursor> {
        self.cursors.iter().filter(|c| c.state != State::Done)
    }
}

/// Where one filter's pagination stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its page is in flight.
    Paging,
    /// Its page in flight verifies the relay's advertised page size.
    Verifying,
    /// Finished.
    Done,
}

/// One filter's progress: the counters of the page in flight and the cursor.
#[derive(Debug, Clone)]
struct Cursor {
    original: Filter,
    current: Filter,
    state: State,
    /// Raw deliveries matching the filter in the page in flight.
    event_count: usize,
    /// Oldest `created_at` among them.
    min_created_at: Option<Timestamp>,
    /// IDs delivered at `min_created_at` in the page in flight.
    at_oldest: BTreeSet<EventId>,
    /// IDs the previous page delivered at the current `until` second.
    seen_at_until: BTreeSet<EventId>,
    /// Deliveries in the page in flight the previous page had not delivered.
    new_events: usize,
}

impl Cursor {
    fn new(filter: Filter) -> Self {
        Self {
            original: filter.clone(),
            current: filter,
            state: State::Paging,
            event_count: 0,
            min_created_at: None,
            at_oldest: BTreeSet::new(),
            seen_at_until: BTreeSet::new(),
            new_events: 0,
        }
    }

    fn record(&mut self, id: EventId, created_at: Timestamp) {
        self.event_count += 1;
        let repeated = self.current.until == Some(created_at) && self.seen_at_until.contains(&id);
        if !repeated {
            self.new_events += 1;
        }
        match self.min_created_at {
            Some(oldest) if created_at > oldest => {}
            Some(oldest) if created_at == oldest => {
                self.at_oldest.insert(id);
            }
            _ => {
                self.min_created_at = Some(created_at);
                self.at_oldest.clear();
                self.at_oldest.insert(id);
            }
        }
    }

    /// Moves the cursor to `until` = the oldest `created_at` seen (inclusive, so same-second
    /// events are not lost) and resets the page counters.
    fn advance(&mut self, oldest: Timestamp, state: State) {
        self.current = self.current.clone().until(oldest);
        self.state = state;
        self.event_count = 0;
        self.min_created_at = None;
        self.seen_at_until = std::mem::take(&mut self.at_oldest);
        self.new_events = 0;
    }
}
