//! `QueryQuirks`: how a strict relay answers stored-event queries where real relays differ
//! from the usual reading of NIP-01, and [`QueryQuirks::answer`], the pure function that says
//! which stored events a REQ gets and in which order. The proxy reads the store and sends
//! what `answer` picks; nothing here touches a socket or a store.

use std::collections::BTreeSet;

use nostr::filter::MatchEventOptions;
use nostr::{Event, Filter};

/// How a strict relay answers stored-event queries where real relays differ from the usual
/// reading of NIP-01. The default has no quirk: every filter gets its newest matches, newest
/// first, `until` is inclusive and every REQ gets its `EOSE`.
///
/// Each switch breaks naive `until` pagination its own way. Oldest first, the next page's
/// `until` (the oldest event received) lies before everything not yet seen, so the client
/// stops after the first page. With an exclusive `until`, a next page at `until` = the
/// oldest second received skips that second's events the cap cut off. With a per-REQ cap, a
/// filter that got fewer events than its `limit` looks exhausted though it is not. Without
/// EOSE for `limit: 0`, a client that waits for it before counting a subscription as live
/// waits forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryQuirks {
    /// A filter without `limit` gets the *oldest* `default_filter_limit` matches, sent oldest
    /// first (a filter with an explicit `limit` still gets the newest, newest first).
    pub oldest_first_without_limit: bool,
    /// `until: T` matches only `created_at < T` (exclusive), instead of `<= T`.
    pub exclusive_until: bool,
    /// At most N stored events for the whole REQ, summed over its filters (the merged,
    /// de-duplicated result is cut to N, keeping the end the ordering sends first), on top of
    /// each filter's own cap.
    pub per_req_cap: Option<usize>,
    /// A REQ whose every filter has `limit: 0` gets no EOSE.
    pub no_eose_for_live: bool,
    /// Every Nth live event (one stored after the subscription's EOSE) of a connection is not
    /// delivered, without a notice: as the rust-nostr relay builder skips, silently, the new
    /// events a connection fell more than 1,024 behind on (its per-connection broadcast
    /// lags), which happens when several clients write at once. Modelled by the proxy only.
    pub skip_live_every: Option<u32>,
}

/// The per-filter result caps a relay applies before any quirk, as the rust-nostr relay
/// builder applies them: a filter without `limit` gets `default_limit` results (one per ID
/// when it lists `ids`), an explicit `limit` is cut to `max_limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterCaps {
    /// Results for a filter without `limit` (`TestRelayConfig::default_filter_limit`).
    pub default_limit: usize,
    /// Cap on an explicit `limit` (`TestRelayConfig::max_filter_limit`).
    pub max_limit: Option<usize>,
}

impl FilterCaps {
    /// The most stored events `filter` gets on its own.
    pub fn cap(&self, filter: &Filter) -> usize {
        match filter.limit {
            Some(limit) => self.max_limit.map_or(limit, |max| limit.min(max)),
            None => filter
                .ids
                .as_ref()
                .map_or(self.default_limit, BTreeSet::len),
        }
    }
}

impl QueryQuirks {
    /// Whether `event` matches `filter` on this relay: NIP-01 matching (`since` inclusive),
    /// with `until` exclusive when [`exclusive_until`](Self::exclusive_until) is on.
    pub fn matches(&self, filter: &Filter, event: &Event) -> bool {
        filter.match_event(event, MatchEventOptions::new())
            && !(self.exclusive_until && filter.until == Some(event.created_at))
    }

    /// Exactly the stored events a REQ with `filters` gets, in the order they are sent.
    ///
    /// Each filter picks its matches among `stored` (repeats ignored) up to `caps`: the
    /// newest, or the oldest for a filter without `limit` when
    /// [`oldest_first_without_limit`](Self::oldest_first_without_limit) is on. The picks are
    /// merged without repeats and sent newest first (`created_at` descending, ties by ID
    /// ascending), or in exactly the reverse order when that switch is on and every filter
    /// asking for stored events has no `limit`; a REQ mixing both kinds of filter is sent
    /// newest first. [`per_req_cap`](Self::per_req_cap) then keeps the first N of that order.
    /// A filter with `limit: 0` picks nothing.
    pub fn answer<'a>(
        &self,
        filters: &[Filter],
        stored: impl IntoIterator<Item = &'a Event>,
        caps: FilterCaps,
    ) -> Vec<Event> {
        let mut stored: Vec<&Event> = stored.into_iter().collect();
        newest_first(&mut stored);
        let mut picked: Vec<&Event> = Vec::new();
        for filter in filters {
            let cap = caps.cap(filter);
            let matching = stored.iter().copied().filter(|e| self.matches(filter, e));
            if self.oldest_first_without_limit && filter.limit.is_none() {
                picked.extend(matching.rev().take(cap));
            } else {
                picked.extend(matching.take(cap));
            }
        }
        newest_first(&mut picked);
        let mut answer: Vec<Event> = picked.into_iter().cloned().collect();
        if self.sends_oldest_first(filters) {
            answer.reverse();
        }
        if let Some(max) = self.per_req_cap {
            answer.truncate(max);
        }
        answer
    }

    /// Whether no switch is on.
    pub(crate) fn is_off(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the proxy answers stored events itself (a switch changes which or in what
    /// order).
    pub(crate) fn answers_stored(&self) -> bool {
        self.oldest_first_without_limit || self.exclusive_until || self.per_req_cap.is_some()
    }

    /// Whether a REQ with `filters` is sent oldest first.
    fn sends_oldest_first(&self, filters: &[Filter]) -> bool {
        let mut asking = filters.iter().filter(|f| asks_stored(f)).peekable();
        self.oldest_first_without_limit
            && asking.peek().is_some()
            && asking.all(|f| f.limit.is_none())
    }
}

/// Sorts `events` newest first (`Event`'s order: `created_at` descending, ties by ID) and
/// drops repeats.
fn newest_first(events: &mut Vec<&Event>) {
    events.sort_unstable();
    events.dedup_by_key(|e| e.id);
}

/// Whether `filter` asks for stored events (its `limit` is not 0).
pub(crate) fn asks_stored(filter: &Filter) -> bool {
    filter.limit != Some(0)
}

#[cfg(test)]
mod tests;
