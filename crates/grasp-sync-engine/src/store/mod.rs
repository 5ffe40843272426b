//! The own relay's store: [`GraspPolicy`] (the GRASP acceptance rules, pure), [`LmdbStore`]
//! (the persistent [`EventStore`](crate::EventStore)), [`GraspWritePolicy`] (the same policy
//! for events published to the embedded relay), [`StoreFeed`] (the
//! [`SelfFeed`](crate::SelfFeed)) and [`MemoryStore`] for tests.
//!
//! Every write, from sync or from a client, passes one policy instance and one database
//! ([`GraspDatabase`]), which announces saved events to the self feed. Rejected IDs are kept in
//! a bounded hot cache so sync does not fetch them again.

mod bounded;
mod config;
mod core;
mod database;
mod feed;
mod lmdb;
mod memory;
mod policy;
mod rejected;
mod write_policy;

pub use config::StoreConfig;
pub use core::{BAD_SIGNATURE_REASON, REBUILD_SCAN_LIMIT};
pub use database::GraspDatabase;
pub use feed::{DEFAULT_FEED_CAPACITY, FEED_KINDS, StoreFeed};
pub use lmdb::LmdbStore;
pub use memory::MemoryStore;
pub use policy::{GraspPolicy, OLDER_ANNOUNCEMENT_REASON, PolicyConfig, PolicyDecision};
pub use rejected::DEFAULT_REJECTED_CAPACITY;
pub use write_policy::GraspWritePolicy;
