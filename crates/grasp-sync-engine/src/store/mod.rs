//! The own relay's store: [`GraspPolicy`] (the GRASP acceptance rules, pure), [`LmdbStore`]
//! (the persistent [`EventStore`](crate::EventStore)), [`GraspWritePolicy`] (the same policy
//! for events published to the embedded relay), [`StoreFeed`] (the
//! [`SelfFeed`](crate::SelfFeed)) and [`MemoryStore`] for tests.
//!
//! Every write, from sync or from a client, passes one policy instance and one database
//! ([`GraspDatabase`]), which announces saved events to the self feed. Rejections go to the
//! rejected-events index: a hot cache of full events that a later event could make acceptable,
//! and a cold index of IDs ([`RejectedConfig`]), persisted by [`LmdbStore`], so sync does not
//! fetch them again; when the dependency arrives they are re-processed, or reported through
//! [`LmdbStore::poll_refetch`] for fetching by ID. With [`PurgatoryParts`], announcements whose
//! git data is absent, and the events that depend on them, are held in a purgatory instead of
//! the database until a [`GitDataProbe`] finds the data ([`LmdbStore::promote_ready`]).
//! [`GuardedStore`] is the same core over any other `NostrDatabase`, such as an external own
//! relay.

mod bounded;
mod cold;
mod config;
mod core;
mod database;
mod feed;
mod guarded;
mod lmdb;
mod memory;
mod policy;
mod purgatory;
mod rejected;
mod write_policy;

pub use cold::{COLD_DIRECTORY, COLD_RECORD_KIND};
pub use config::{DEFAULT_MAX_FUTURE_CREATED_AT, StoreConfig};
pub use core::{BAD_SIGNATURE_REASON, PURGATORY_FULL_REASON, PurgatoryParts, REBUILD_SCAN_LIMIT};
pub use database::{GraspDatabase, MAX_SAVES_IN_FLIGHT};
pub use feed::{DEFAULT_FEED_CAPACITY, FEED_KINDS, StoreFeed};
pub use guarded::GuardedStore;
pub use lmdb::LmdbStore;
pub use memory::MemoryStore;
pub use policy::{
    DEFAULT_ACCEPTED_IDS, GraspPolicy, OLDER_ANNOUNCEMENT_REASON, PolicyConfig, PolicyDecision,
};
pub use purgatory::{
    DEFAULT_MAX_HELD_PER_REPO, DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS, DEFAULT_PURGATORY_SOFT_TTL,
    GitDataProbe, PURGATORY_REVIVAL_WINDOW, PurgatoryConfig, PurgatoryStats,
};
pub use rejected::{
    DEFAULT_COLD_CAPACITY, DEFAULT_COLD_TTL, DEFAULT_HOT_CAPACITY, DEFAULT_HOT_MAX_BYTES,
    DEFAULT_HOT_TTL, DEFAULT_REFETCH_REPORTS, DEFAULT_REFETCH_RETRY, MAX_DEPENDENCIES, MAX_SOURCES,
    RejectedConfig, RejectedUsage,
};
pub use write_policy::GraspWritePolicy;
