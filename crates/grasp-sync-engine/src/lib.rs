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

#[cfg(feature = "runtime")]
mod actor;
#[cfg(feature = "runtime")]
pub mod address;
#[cfg(feature = "runtime")]
pub mod boundary;
#[cfg(feature = "runtime")]
pub mod clock;
#[cfg(feature = "runtime")]
pub mod config;
#[cfg(feature = "runtime")]
pub mod dial;
#[cfg(feature = "runtime")]
pub mod engine;
#[cfg(feature = "runtime")]
pub mod error;
#[cfg(feature = "front")]
pub mod front;
#[cfg(feature = "runtime")]
pub mod holdings;
#[cfg(feature = "runtime")]
mod ingest;
#[cfg(feature = "runtime")]
pub mod limits_memory;
pub mod machine;
#[cfg(feature = "runtime")]
pub mod metrics;
#[cfg(feature = "runtime")]
pub mod negentropy;
#[cfg(feature = "runtime")]
pub mod outbox;
#[cfg(feature = "runtime")]
mod session;
#[cfg(feature = "runtime")]
pub mod status;
#[cfg(feature = "runtime")]
pub mod store;
#[cfg(feature = "runtime")]
pub mod transport;

#[cfg(feature = "runtime")]
pub use crate::{
    actor::MAX_CONNECTIONS_PER_RELAY,
    address::{AddressPolicy, AddressRefusal},
    boundary::{
        EventStore, IngestOutcome, NoPurgatory, PurgatorySource, SelfFeed, SyncedEventHook,
    },
    clock::{Clock, TokioClock},
    config::EngineConfig,
    dial::DialLimits,
    engine::{EngineEnd, EngineExit, EngineHandle, EngineParts, SyncEngine},
    error::{RelayListError, StoreError, TransportError},
    holdings::{FileHoldingsMemory, HoldingsMemory, MemoryHoldings},
    ingest::{HOOK_BATCH_WINDOW, IngestTotals},
    limits_memory::{FileLimitsMemory, LimitsMemory, LimitsMemoryError, RelayLimitsRecord},
    metrics::{RelayReading, SyncMetrics},
    negentropy::{
        FallbackReason, HydrationOutcome, HydrationPass, MissingEventRecovery, NegentropyCounts,
        NegentropyFallbacks, Nip77Support, NoNip77, RecoveryAttempt, RecoveryConfig,
        RecoveryExpiry,
    },
    outbox::OutboxConfig,
    status::{
        EngineStatus, NegentropyStatus, ParticipantStatus, RelayNip77Status, RelayStatus,
        TrackingStatus,
    },
    store::{
        GitDataProbe, GraspDatabase, GraspPolicy, GraspWritePolicy, GuardedStore, LmdbStore,
        MemoryStore, PolicyConfig, PolicyDecision, PurgatoryConfig, PurgatoryParts, PurgatoryStats,
        RejectedUsage, StoreConfig, StoreFeed,
    },
    transport::{
        NEGENTROPY_DEADLINE, NEGENTROPY_PROBE_DEADLINE, NegentropyDiff, NegentropyError,
        NipListing, RelayConnection, RelayConnector, RelayInbound, RelayInfo, RelaySession,
        RoundLimits, SdkConnector, WireBytes,
    },
};
