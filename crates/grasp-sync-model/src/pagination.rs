//! Per-filter pagination progress of one REQ+EOSE subscription: how many raw events each OR
//! filter has delivered and the oldest `created_at` among them.
//!
//! This is bookkeeping only. Deciding whether a filter needs another page, and building it,
//! belongs to the filter planner.

use nostr::filter::MatchEventOptions;
use nostr::{Event, Filter, Timestamp};

/// Progress of one OR filter inside a grouped subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterPaginationState {
    /// Raw events delivered that match the filter, before any dedup or acceptance.
    pub event_count: usize,
    /// Oldest `created_at` among them: the next page's `until`.
    pub min_created_at: Option<Timestamp>,
    /// The filter as first requested, to rebuild the next page from.
    pub original_filter: Filter,
}

impl FilterPaginationState {
    /// Fresh progress for a filter.
    pub fn new(original_filter: Filter) -> Self {
        Self {
            event_count: 0,
            min_created_at: None,
            original_filter,
        }
    }

    /// Counts one delivered event if the filter matches it; returns whether it did.
    pub fn record_event(&mut self, event: &Event) -> bool {
        if !self
            .original_filter
            .match_event(event, MatchEventOptions::new())
        {
            return false;
        }
        self.event_count += 1;
        self.min_created_at = Some(match self.min_created_at {
            Some(oldest) => oldest.min(event.created_at),
            None => event.created_at,
        });
        true
    }
}

/// Progress of every OR filter carried by one subscription, in REQ order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaginationState {
    /// One entry per filter of the REQ.
    pub filters: Vec<FilterPaginationState>,
}

impl PaginationState {
    /// Fresh progress for the filters of one REQ.
    pub fn new(filters: impl IntoIterator<Item = Filter>) -> Self {
        Self {
            filters: filters
                .into_iter()
                .map(FilterPaginationState::new)
                .collect(),
        }
    }

    /// Records one raw delivered event against every filter it matches; returns how many
    /// matched. Call it for every EVENT the relay sends on the subscription, duplicates included.
    pub fn record_event(&mut self, event: &Event) -> usize {
        self.filters
            .iter_mut()
            .map(|filter| filter.record_event(event))
            .filter(|matched| *matched)
            .count()
    }
}

#[cfg(test)]
mod tests;
