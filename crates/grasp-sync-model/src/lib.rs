//! The data model of GRASP-02 proactive sync: NIP-34 parsing, the sync indices and the
//! three-way diff that decides what to subscribe to next.
//!
//! - [`RelayUrl`] is the one normal form of a relay address; every relay set uses it.
//! - [`nip34`] turns events into [`RepoAnnouncement`], [`RootEvent`] and [`RepoState`].
//! - [`RepoSyncIndex`] is what we want to sync (repository → relays, root events, level);
//!   [`PendingSyncIndex`] is what is in flight; [`RelaySyncIndex`] is what is confirmed, with
//!   each relay's connection lifecycle.
//! - [`derive_relay_targets`] and [`compute_actions`] turn those three into [`AddFilters`];
//!   [`RelayTargets`] keeps the bounded targets up to date by the delta of each index update.
//!
//! This crate is a plain library: it holds no sockets, runs no async runtime and never reads a
//! clock. Time is passed in as a [`nostr::Timestamp`]. It does not build filters, plan pages,
//! verify signatures or decide whether an event is accepted: those belong to other crates.
#![doc = include_str!("../README.md")]

pub mod compact_set;
pub mod coordinate;
pub mod diff;
pub mod error;
pub mod nip34;
pub mod pack;
pub mod pagination;
pub mod pending;
pub mod relay_index;
pub mod relay_targets;
pub mod relay_url;
pub mod repo_index;
pub mod shard;
pub mod shared;
pub mod tracking;

#[cfg(test)]
mod test_support;

pub use compact_set::CompactSet;
pub use coordinate::{REPO_ANNOUNCEMENT_KIND, RepoCoordinate};
pub use diff::{AddFilters, RelaySyncNeeds, compute_actions, derive_relay_targets};
pub use error::ModelError;
pub use nip34::{
    AnnouncementLimits, EventVersion, ISSUE_KIND, Nip34Event, PATCH_KIND, PULL_REQUEST_KIND,
    REPO_STATE_KIND, RepoAnnouncement, RepoState, RootEvent, RootKind,
};
pub use pack::Pack;
pub use pagination::{FilterPaginationState, PaginationState};
pub use pending::{
    BatchId, ConfirmOutcome, PendingBatch, PendingItems, PendingSyncIndex, ResolvedSubscription,
    SyncMethod,
};
pub use relay_index::{ConnectionStatus, RelayState, RelaySyncIndex};
pub use relay_targets::RelayTargets;
pub use relay_url::{MAX_RELAY_URL_BYTES, RelayUrl};
pub use repo_index::{
    DEFAULT_MAX_WAITING_ROOTS, ExpiryStatus, IndexUpdate, PurgatoryEntry, RepoSyncIndex,
    RepoSyncNeeds, SyncLevel,
};
pub use shard::{MAX_SHARDS, Shard};
pub use shared::Shared;
pub use tracking::{TrackingBounds, TrackingReport, derive_bounded_relay_targets};
