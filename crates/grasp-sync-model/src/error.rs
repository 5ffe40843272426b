//! Errors of the model crate: every way input from a relay or a user can be malformed, and the
//! few ways a caller can name something the indices do not hold.

use thiserror::Error;

use crate::pending::BatchId;

/// Why a value could not be parsed into the model, or an index operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A repository coordinate is not `30617:<hex pubkey>:<identifier>`.
    #[error("malformed repository coordinate: {0}")]
    MalformedCoordinate(String),
    /// A coordinate names a kind other than 30617.
    #[error("coordinate kind {0} is not a repository announcement (30617)")]
    WrongCoordinateKind(u16),
    /// A public key is not 64 lowercase or uppercase hex characters.
    #[error("invalid public key: {0}")]
    InvalidPublicKey(String),
    /// A repository identifier breaks a rule.
    #[error("invalid repository identifier: {0}")]
    InvalidIdentifier(&'static str),
    /// A relay URL is longer than [`crate::MAX_RELAY_URL_BYTES`].
    #[error("relay url is {0} bytes, more than the cap")]
    RelayUrlTooLong(usize),
    /// A relay URL uses a scheme other than `ws` or `wss`.
    #[error("relay url scheme is not ws or wss: {0}")]
    UnsupportedRelayScheme(String),
    /// A relay URL is malformed; the reason says which rule it breaks.
    #[error("invalid relay url ({reason}): {url}")]
    InvalidRelayUrl {
        /// The rule the URL breaks.
        reason: &'static str,
        /// The offending URL, shortened.
        url: String,
    },
    /// An event has a kind the parser does not accept.
    #[error("event kind {found} is not {expected}")]
    WrongKind {
        /// What the parser accepts.
        expected: &'static str,
        /// The event's kind.
        found: u16,
    },
    /// An addressable event has no `d` tag, or an empty one.
    #[error("event has no `d` tag")]
    MissingIdentifier,
    /// A root event references no repository through a well-formed `a` tag.
    #[error("event references no repository through an `a` tag")]
    NoRepositoryReference,
    /// A shard is not `INDEX/COUNT` with a count in `1..=64` and an index below it.
    #[error("invalid shard: {0}")]
    InvalidShard(String),
    /// A batch is not pending on the given relay.
    #[error("batch {0} is not pending on this relay")]
    UnknownBatch(BatchId),
}
