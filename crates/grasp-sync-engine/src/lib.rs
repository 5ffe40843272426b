//! grasp-sync-engine: the async shell of GRASP-02 proactive sync.
//!
//! One actor owns the sync indices, the per-relay ledgers and health; connection and history
//! work runs in bounded background jobs. The engine reaches the world only through trait
//! objects: [`RelayConnector`] for remote relays, [`EventStore`] for the own relay's store,
//! [`SelfFeed`] for the events the own relay accepted, [`PurgatorySource`] for announcements
//! awaiting git data, [`SyncedEventHook`] for newly saved events, and [`Clock`] for time.
//!
//! It deliberately does not decide what an event is worth: the store's acceptance policy does
//! ([`GraspPolicy`] in [`store`]), and nothing from a remote relay reaches the store any other
//! way.
#![doc = include_str!("../README.md")]

mod actor;
pub mod address;
pub mod boundary;
pub mod clock;
pub mod config;
pub mod dial;
pub mod engine;
pub mod error;
#[cfg(feature = "front")]
pub mod front;
mod ingest;
pub mod limits_memory;
mod machine;
pub mod metrics;
pub mod negentropy;
pub mod outbox;
mod session;
pub mod status;
pub mod store;
pub mod transport;

pub use actor::MAX_CONNECTIONS_PER_RELAY;
pub use address::{AddressPolicy, AddressRefusal};
pub use boundary::{
    EventStore, IngestOutcome, NoPurgatory, PurgatorySource, SelfFeed, SyncedEventHook,
};
pub use clock::{Clock, TokioClock};
pub use config::EngineConfig;
pub use dial::DialLimits;
pub use engine::{EngineEnd, EngineExit, EngineHandle, EngineParts, SyncEngine};
pub use error::{RelayListError, StoreError, TransportError};
pub use ingest::{HOOK_BATCH_WINDOW, IngestTotals};
pub use limits_memory::{FileLimitsMemory, LimitsMemory, LimitsMemoryError, RelayLimitsRecord};
pub use metrics::{RelayReading, SyncMetrics};
pub use negentropy::{
    FallbackReason, HydrationOutcome, HydrationPass, MissingEventRecovery, NegentropyCounts,
    NegentropyFallbacks, Nip77Support, NoNip77, RecoveryAttempt, RecoveryConfig, RecoveryExpiry,
};
pub use outbox::OutboxConfig;
pub use status::{
    EngineStatus, NegentropyStatus, ParticipantStatus, RelayNip77Status, RelayStatus,
    TrackingStatus,
};
pub use store::{
    GitDataProbe, GraspDatabase, GraspPolicy, GraspWritePolicy, GuardedStore, LmdbStore,
    MemoryStore, PolicyConfig, PolicyDecision, PurgatoryConfig, PurgatoryParts, PurgatoryStats,
    RejectedUsage, StoreConfig, StoreFeed,
};
pub use transport::{
    NEGENTROPY_DEADLINE, NEGENTROPY_PROBE_DEADLINE, NegentropyDiff, NegentropyError, NipListing,
    RelayConnection, RelayConnector, RelayInbound, RelayInfo, RelaySession, RoundLimits,
    SdkConnector, WireBytes,
};
