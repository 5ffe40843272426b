//! External mode: sync into another relay over WebSocket instead of the embedded one.
//!
//! [`OwnRelayLink`] is the one connection to that relay (reconnecting); [`ExternalStore`] is the
//! engine's `EventStore` (ingest by `EVENT` and the relay's `OK`), [`ExternalFeed`] its
//! `SelfFeed` (a subscription: stored events page by page, then live), and [`HaveIndex`] the
//! local LMDB record of the IDs the relay holds or refused, which answers the engine's "have"
//! questions without a round trip. The relay's own acceptance policy decides what is kept.

mod feed;
mod index;
mod link;
mod store;

pub use feed::ExternalFeed;
pub use index::HaveIndex;
pub use link::{OkReply, OwnRelayLink};
pub use store::{ExternalStore, OK_DEADLINE};
