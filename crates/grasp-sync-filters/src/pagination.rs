//! REQ+EOSE pagination that holds on any relay: the per-session page limit, threshold and
//! learned relay quirks ([`RelayPageSession`]), and the per-REQ planner that decides, at each
//! EOSE, which windows and filters to ask for next ([`GroupedPagination`]).
//!
//! NIP-01 has no cursor and no "exhausted" signal, so a filter is assumed to have more events
//! when its page reached the relay's page size. Relays differ in what else they do: some return
//! the oldest matches first, some read `until` as exclusive, some cap a whole REQ rather than
//! each filter, and any second can hold more events than a page. The planner detects each from
//! the pages themselves and pages around it; what it still cannot reach it reports as a
//! [`Truncation`], never as complete.

mod cursor;
mod group;
mod page;
mod session;
mod split;

pub use group::{GroupedPagination, PageStep, Truncation};
pub use session::{
    CapScope, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, MIN_PAGE_THRESHOLD, PageHints, RelayPageSession,
    RelayQuirks,
};
pub use split::split_filter;

#[cfg(test)]
mod tests;
