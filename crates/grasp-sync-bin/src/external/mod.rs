//! External mode: sync into another relay over WebSocket instead of the embedded one, under
//! the same GRASP acceptance policy.
//!
//! [`OwnRelayLink`] is the one connection to that relay (reconnecting). [`RelayDatabase`] makes
//! the relay the backend of the engine's store core: a save is an `EVENT` and the relay's `OK`,
//! reads come from [`HaveIndex`], the local LMDB record of the accepted events the relay holds.
//! [`ExternalStore`] is that core as the engine's `EventStore`: the policy and the
//! rejected-events index decide what is published, as in embedded mode. [`ExternalFeed`] is the
//! `SelfFeed`: the core's feed of accepted events, fed also by an intake that offers every event
//! the relay holds or receives from other writers to the same policy. The relay's own
//! acceptance decides nothing: a general-purpose relay that keeps everything makes no
//! announcement count that the policy refuses.

mod database;
mod feed;
mod index;
mod link;
mod store;

pub use database::{NotSaved, OK_DEADLINE, RelayDatabase};
pub use feed::ExternalFeed;
pub use index::{ACCEPTED_DIR, HaveIndex};
pub use link::{OkReply, OwnRelayLink};
pub use store::ExternalStore;
