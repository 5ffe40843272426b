//! The NIP-77 dry-run diff's result, error and limit types, and the one place where relay
//! texts and client-library errors are read as answers to a NEG-OPEN.
//!
//! A diff only says which IDs differ: it never downloads an event. Hydration of the missing IDs
//! is the engine's job, through exact-ID REQs admitted by its ledger.

use std::time::Duration;

pub use crate::machine::nip77::NegentropyError;
use grasp_sync_health::{RefusalCategory, classify};
use nostr::EventId;

/// The total wall-clock deadline of one dry-run diff, however active the relay keeps it.
pub const NEGENTROPY_DEADLINE: Duration = Duration::from_secs(15);

/// How long a session's probe round waits for the relay's first answer to its NEG-OPEN, while
/// the session does not know whether the relay speaks NIP-77. A relay that speaks it answers
/// within milliseconds; one that ignores the verb would otherwise cost a whole
/// [`NEGENTROPY_DEADLINE`].
pub const NEGENTROPY_PROBE_DEADLINE: Duration = Duration::from_secs(3);

/// The most IDs a round takes as missing unless its limits say fewer. The relay names them, so
/// a hostile one could name any number within the deadline; a round past its limit fails with
/// [`NegentropyError::TooManyMissing`]. A relay's whole coverage for one filter stays well
/// below it.
pub const MAX_MISSING_IDS: usize = 200_000;

/// How long one round may take, and whether it is its session's probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundLimits {
    /// The relay must answer the NEG-OPEN (NEG-MSG, NEG-ERR or CLOSED) within this, counted
    /// from when the NEG-OPEN goes out; otherwise the round ends with
    /// [`NegentropyError::NoAnswer`].
    pub first_answer: Duration,
    /// The whole round ends by then.
    pub deadline: Duration,
    /// The session does not know yet whether the relay speaks NIP-77. A NOTICE cannot name the
    /// round it answers; during a probe, one saying that some message is unsupported or could
    /// not be parsed ends the round as [`NegentropyError::Unsupported`] even when it does not
    /// name negentropy (see `notice_ends_round`).
    pub probe: bool,
    /// The round fails with [`NegentropyError::TooManyMissing`] once the relay names more
    /// IDs than this that the "have" set lacks.
    pub max_missing: usize,
}

impl RoundLimits {
    /// A round on a relay known to speak NIP-77: [`NEGENTROPY_DEADLINE`] for everything, at
    /// most [`MAX_MISSING_IDS`] missing.
    pub const NORMAL: RoundLimits = RoundLimits {
        first_answer: NEGENTROPY_DEADLINE,
        deadline: NEGENTROPY_DEADLINE,
        probe: false,
        max_missing: MAX_MISSING_IDS,
    };

    /// A session's probe: [`NEGENTROPY_PROBE_DEADLINE`] for the first answer, then the normal
    /// deadline for the whole round.
    pub const PROBE: RoundLimits = RoundLimits {
        first_answer: NEGENTROPY_PROBE_DEADLINE,
        deadline: NEGENTROPY_DEADLINE,
        probe: true,
        max_missing: MAX_MISSING_IDS,
    };

    /// A round that is not a probe and ends by `deadline`, whatever the relay does.
    pub fn within(deadline: Duration) -> Self {
        Self {
            first_answer: deadline,
            deadline,
            probe: false,
            max_missing: MAX_MISSING_IDS,
        }
    }

    /// These limits, failing once the relay names more than `max_missing` missing IDs.
    pub fn taking_at_most(self, max_missing: usize) -> Self {
        Self {
            max_missing,
            ..self
        }
    }
}

/// The outcome of one dry-run negentropy reconciliation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NegentropyDiff {
    /// IDs the relay holds that the "have" set lacks, sorted and unique.
    pub missing: Vec<EventId>,
    /// IDs of the "have" set the relay lacks (never uploaded), sorted and unique.
    pub relay_lacks: Vec<EventId>,
}

/// Maps a relay's NEG-ERR text, or a CLOSED for the round's own subscription, onto an error.
///
/// It answers the round itself, so any text saying a verb is unknown, unsupported, turned off
/// or could not be parsed is [`NegentropyError::Unsupported`] (unless it names another verb);
/// query-rate refusals are [`NegentropyError::RateLimited`]; `auth-required:` refusals are
/// [`NegentropyError::AuthRequired`]; anything else is [`NegentropyError::Refused`].
pub fn classify_refusal(text: &str) -> NegentropyError {
    if reads_unsupported(text) != Unsupported::No {
        return NegentropyError::Unsupported;
    }
    match classify(text).category {
        RefusalCategory::RateLimited => NegentropyError::RateLimited(text.to_owned()),
        RefusalCategory::AuthRequired => NegentropyError::AuthRequired(text.to_owned()),
        _ => NegentropyError::Refused(text.to_owned()),
    }
}

/// What a NOTICE that arrives during a round means for that round, if anything; `probe` when
/// the round is its session's probe ([`RoundLimits::probe`]).
///
/// A NOTICE is not tied to a subscription, so outside a probe only two kinds end a round: one
/// saying the relay does not know the NIP-77 verbs in words that can only be about them (it
/// names negentropy or an unknown command), and a query-rate refusal (after which NIP-77 is
/// off for the session anyway). During a probe the NEG-OPEN is the only unusual message on the
/// wire, so a NOTICE saying some message is unsupported or could not be parsed ends the round
/// too, unless it names another verb. Every other NOTICE is left to the engine's own handling.
pub(crate) fn notice_ends_round(text: &str, probe: bool) -> Option<NegentropyError> {
    match reads_unsupported(text) {
        Unsupported::NamesNegentropy => return Some(NegentropyError::Unsupported),
        Unsupported::Unnamed if probe => return Some(NegentropyError::Unsupported),
        Unsupported::Unnamed | Unsupported::No => {}
    }
    match classify(text).category {
        RefusalCategory::RateLimited => Some(NegentropyError::RateLimited(text.to_owned())),
        _ => None,
    }
}

/// Whether a relay text says a verb is not understood, and whether it says it of NIP-77.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unsupported {
    /// It says the NIP-77 verbs are unknown, unsupported or turned off.
    NamesNegentropy,
    /// It says some message is unsupported or could not be parsed, without naming which.
    Unnamed,
    /// Neither.
    No,
}

/// Texts that say an unknown verb, in words only such an answer uses, whatever else they name.
const UNKNOWN_VERB: [&str; 3] = [
    // strfry before NIP-77, and nostr-sdk's own test for it: "ERROR: bad msg: unknown cmd".
    "unknown cmd",
    // strfry, a `NEG-` verb it does not know: "ERROR: negentropy error: unknown command".
    "unknown command",
    // strfry, expecting the older four-element NEG-OPEN:
    // "ERROR: negentropy error: negentropy query missing elements".
    "query missing elements",
];

/// Texts that say some message is unsupported or could not be parsed, without naming it.
const UNPARSED_MESSAGE: [&str; 8] = [
    // rnostr, any verb it does not know: "Unsupported message".
    "unsupported",
    "not supported",
    // nostr-rs-relay, any message that is not EVENT, REQ or CLOSE: "could not parse command".
    "could not parse command",
    // nostream, a verb outside its message schema:
    // "Invalid message: \"value\" does not match any of the allowed types".
    "invalid message",
    "does not match any of the allowed types",
    // khatru with NIP-77 off: "failed to parse envelope: unknown envelope label".
    "unknown envelope label",
    "failed to parse envelope",
    // Relays that name the message kind they do not know.
    "unknown message type",
];

/// The verbs other than NIP-77's a client sends; a text naming one is about that verb.
const OTHER_VERBS: [&str; 5] = ["EVENT", "REQ", "CLOSE", "COUNT", "AUTH"];

/// How a relay text reads as an answer to a NEG-OPEN.
fn reads_unsupported(text: &str) -> Unsupported {
    let lower = text.to_ascii_lowercase();
    if UNKNOWN_VERB.iter().any(|t| lower.contains(t)) {
        return Unsupported::NamesNegentropy;
    }
    // strfry with NIP-77 off: "ERROR: bad msg: negentropy disabled".
    let names_negentropy = lower.contains("negentropy") || lower.contains("neg-");
    if names_negentropy && lower.contains("disabled") {
        return Unsupported::NamesNegentropy;
    }
    // nostr-sdk's reading of strfry's error frame: "bad msg" together with a `NEG-` verb.
    if names_negentropy && lower.contains("bad msg") {
        return Unsupported::NamesNegentropy;
    }
    if !UNPARSED_MESSAGE.iter().any(|t| lower.contains(t)) {
        return Unsupported::No;
    }
    if names_negentropy {
        return Unsupported::NamesNegentropy;
    }
    let names_other_verb = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .any(|word| OTHER_VERBS.contains(&word));
    if names_other_verb {
        Unsupported::No
    } else {
        Unsupported::Unnamed
    }
}

#[cfg(test)]
mod tests;
