//! The NIP-77 building blocks around a dry-run diff, as plain state machines with time passed
//! in: the hydration decision after an exact-ID pass ([`HydrationPass`]), bounded background
//! recovery of IDs a relay advertised but did not deliver ([`MissingEventRecovery`]), and
//! per-relay fallback bookkeeping ([`NegentropyFallbacks`]).
//!
//! Nothing here does I/O: the engine runs the diff through
//! [`RelaySession::negentropy_diff`](crate::RelaySession::negentropy_diff), sends the exact-ID
//! REQs through its ledger, and feeds what happened back in.

mod fallback;
mod hydration;
mod recovery;

pub use fallback::{FallbackReason, NegentropyCounts, NegentropyFallbacks};
pub use hydration::{
    HydrationOutcome, HydrationPass, SEMANTIC_FALLBACK_MAX_DELIVERED_PERCENT,
    SEMANTIC_FALLBACK_MIN_ADVERTISED,
};
pub use recovery::{MissingEventRecovery, RecoveryAttempt, RecoveryConfig, RecoveryExpiry};
