//! Byte-budgeted Nostr filter building, REQ packing and pagination planning for GRASP-02
//! proactive sync.
//!
//! The crate turns sets of repositories, root events and direct thread members into filters
//! that each fit a byte budget, tags every filter with the [`CoverageTier`] it is admitted in,
//! packs filters into REQ-sized [`FilterGroup`]s, and plans grouped REQ+EOSE pagination with a
//! per-relay adaptive page threshold.
//!
//! It deliberately does not send anything, hold subscriptions, decide which tiers a relay can
//! afford (that is the ledger's job), verify events or read a clock: it is pure functions and
//! plain state machines over data passed in.
#![doc = include_str!("../README.md")]

pub mod budget;
pub mod build;
pub mod compact;
pub mod error;
pub mod exact;
pub mod pack;
pub mod pagination;
pub mod subtract;
pub mod tier;

pub use budget::{DEFAULT_MAX_FILTER_BYTES, FilterBudget};
pub use build::{
    Coverage, Window, announcement_filter, descendant_filters, repo_tag_filters,
    root_event_tag_filters, state_filters,
};
pub use compact::{CompactFilter, CompactGroup, Compactor};
pub use error::FilterError;
pub use exact::{MAX_IDS_PER_FILTER, exact_id_filters};
pub use pack::{FilterGroup, PackLimits, filter_payload_bytes, pack_requests, req_envelope_bytes};
pub use pagination::{
    CapScope, GroupedPagination, PageHints, PageStep, RelayPageSession, RelayQuirks, Truncation,
    split_filter,
};
pub use subtract::{CoveredValues, Covering, uncovered};
pub use tier::{CoverageTier, TieredFilter};
