//! Grouped REQ+EOSE pagination: the per-relay adaptive page threshold and the per-group
//! planner that decides, at each EOSE, which filters need a next page.
//!
//! NIP-01 has no cursor and no "exhausted" signal, so a filter is assumed to have more events
//! when its page reached the relay's page size. The page size is not known; it is estimated per
//! connection session ([`RelayPageSession`]) from the largest raw page seen and, while trusted,
//! the relay's advertised NIP-11 `default_limit`.

mod group;
mod session;

pub use group::{GroupedPagination, PageStep, Truncation};
pub use session::{MIN_PAGE_THRESHOLD, RelayPageSession};

#[cfg(test)]
mod tests;
