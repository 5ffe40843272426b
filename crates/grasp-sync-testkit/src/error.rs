//! The crate's error type: everything that can go wrong starting relays, seeding them or
//! generating a network.

use nostr_database::DatabaseError;

/// An error from the test kit.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// A socket could not be bound, accepted or read, or a temporary directory not created.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The relay's event store refused an operation.
    #[error("relay store error: {0}")]
    Database(#[from] DatabaseError),
    /// An event could not be built or signed.
    #[error("cannot build event: {0}")]
    Event(#[from] nostr::event::builder::Error),
    /// The operation needs a running relay, and this one is stopped.
    #[error("relay is not running")]
    NotRunning,
    /// The relay was asked to start while it is already running.
    #[error("relay is already running")]
    AlreadyRunning,
    /// A network spec or its arguments are inconsistent.
    #[error("invalid network spec: {0}")]
    InvalidSpec(String),
    /// A background task ended abnormally.
    #[error("relay task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}
