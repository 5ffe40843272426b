//! The NIP-77 dry-run diff's result and error types, and how relay texts and client-library
//! errors map onto them.
//!
//! A diff only says which IDs differ: it never downloads an event. Hydration of the missing IDs
//! is the engine's job, through exact-ID REQs admitted by its ledger.

use std::time::Duration;

use grasp_sync_health::{RefusalCategory, classify};
use nostr::EventId;
use thiserror::Error;

/// The total wall-clock deadline of one dry-run diff, however active the relay keeps it.
pub const NEGENTROPY_DEADLINE: Duration = Duration::from_secs(15);

/// The outcome of one dry-run negentropy reconciliation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegentropyDiff {
    /// IDs the relay holds that the "have" set lacks, sorted and unique.
    pub missing: Vec<EventId>,
    /// How many IDs of the "have" set the relay lacks (never uploaded).
    pub relay_lacks: usize,
}

/// Why a negentropy round did not produce a diff.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NegentropyError {
    /// The relay does not speak NIP-77 (NOTICE "unknown cmd", NEG-ERR "unsupported", or the
    /// client library's own detection).
    #[error("negentropy unsupported by relay")]
    Unsupported,
    /// The round did not finish before its deadline (including a relay that never answers).
    #[error("negentropy round timed out")]
    Timeout,
    /// The relay refused because of its query rate.
    #[error("negentropy rate limited: {0}")]
    RateLimited(String),
    /// The relay refused the round for another reason (NEG-ERR text, verbatim).
    #[error("negentropy refused: {0}")]
    Refused(String),
    /// The exchange broke: undecodable frames or an unexpected protocol state.
    #[error("negentropy protocol failure: {0}")]
    Protocol(String),
    /// The session is not connected; nothing was sent or the connection ended mid-round.
    #[error("not connected")]
    NotConnected,
}

/// Maps a relay's NEG-ERR or NOTICE text onto an error, if it refuses negentropy at all.
///
/// Texts that say the command is unknown or unsupported are [`NegentropyError::Unsupported`];
/// query-rate refusals are [`NegentropyError::RateLimited`]; anything else is
/// [`NegentropyError::Refused`].
pub fn classify_refusal(text: &str) -> NegentropyError {
    if says_unsupported(text) {
        return NegentropyError::Unsupported;
    }
    match classify(text).category {
        RefusalCategory::RateLimited => NegentropyError::RateLimited(text.to_owned()),
        _ => NegentropyError::Refused(text.to_owned()),
    }
}

/// What a NOTICE that arrives during a round means for that round, if anything.
///
/// A NOTICE is not tied to a subscription, so only two kinds end a round: one saying the relay
/// does not know the NIP-77 verbs (it must name an unknown command or negentropy itself), and a
/// query-rate refusal (after which NIP-77 is off for the session anyway). Every other NOTICE is
/// left to the engine's own handling.
pub(crate) fn notice_ends_round(text: &str) -> Option<NegentropyError> {
    let lower = text.to_ascii_lowercase();
    let names_negentropy = lower.contains("negentropy") || lower.contains("neg-");
    if lower.contains("unknown cmd")
        || lower.contains("unknown command")
        || (names_negentropy && says_unsupported(&lower))
    {
        return Some(NegentropyError::Unsupported);
    }
    match classify(text).category {
        RefusalCategory::RateLimited => Some(NegentropyError::RateLimited(text.to_owned())),
        _ => None,
    }
}

/// Whether a relay text says the negentropy verbs are not understood.
fn says_unsupported(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("unknown cmd")
        || lower.contains("unknown command")
        || lower.contains("unsupported")
        || lower.contains("not supported")
        // A relay that expects the older four-element NEG-OPEN.
        || lower.contains("query missing elements")
        || (lower.contains("negentropy") && lower.contains("disabled"))
}
