//! The NIP-77 building blocks around a dry-run diff, as plain state machines with time passed
//! in: the hydration decision after an exact-ID pass ([`HydrationPass`]), bounded background
//! recovery of IDs a relay advertised but did not deliver ([`MissingEventRecovery`]),
//! per-relay fallback bookkeeping ([`NegentropyFallbacks`]), and whether a relay speaks NIP-77
//! at all, from its NIP-11 document and one short probe per session ([`Nip77Support`]).
//!
//! Nothing here does I/O: the engine runs the diff through
//! [`RelaySession::negentropy_diff`](crate::RelaySession::negentropy_diff), sends the exact-ID
//! REQs through its ledger, and feeds what happened back in.

mod fallback;
mod recovery;

pub use crate::machine::hydration::{
    HydrationOutcome, HydrationPass, SEMANTIC_FALLBACK_MAX_DELIVERED_PERCENT,
    SEMANTIC_FALLBACK_MIN_ADVERTISED,
};
pub use crate::machine::nip77::{
    NIP77_NO_ANSWER_TTL, NIP77_VERDICT_TTL, Nip77State, Nip77Support, NoNip77, RoundStart,
};
pub use fallback::{FallbackReason, NegentropyCounts, NegentropyFallbacks};
pub use recovery::{MissingEventRecovery, RecoveryAttempt, RecoveryConfig, RecoveryExpiry};
