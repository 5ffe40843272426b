//! Whether a relay speaks NIP-77, as state. [`Nip77Support`]: what the engine knows about
//! whether one relay speaks NIP-77, and so how the next negentropy round of its session may
//! start: normally, as the session's one probe, after the probe in flight, or not at all
//! (every batch then goes REQ+EOSE).
//!
//! A session starts from the relay's NIP-11 document and from what earlier sessions learned. A
//! document whose `supported_nips` lacks 77 means no NIP-77 for that session. Otherwise a relay
//! not known to speak it is probed: one round with a short first-answer deadline while the
//! others wait. Any answered round means it speaks NIP-77. Any round it answered as an unknown
//! verb means it does not: for the rest of the session, and, remembered, for new sessions
//! during [`NIP77_VERDICT_TTL`] or until the next daily reconciliation. A probe it did not
//! answer means it does not for [`NIP77_NO_ANSWER_TTL`], on the session and on new ones, or
//! until the next daily reconciliation; then it is probed again. Time is passed in.
//!
//! Its inputs are data defined here and re-exported where the engine's users find them: what
//! a NIP-11 document says of a NIP ([`NipListing`], `transport`), why a round produced no diff
//! ([`NegentropyError`], `transport`) and why a round fell back to REQ+EOSE
//! ([`FallbackReason`], `negentropy`).

use std::time::{Duration, Instant};

use nostr::SubscriptionId;
use thiserror::Error;

#[cfg(test)]
mod tests;

/// How long a relay that said it does not know the NIP-77 verbs is not asked again on new
/// connections. A daily reconciliation asks again sooner.
pub const NIP77_VERDICT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a relay whose probe got no first answer is taken not to speak NIP-77, on its
/// session and on new ones, before the next round probes it again. Silence is weaker evidence
/// than an answer: a relay that speaks NIP-77 but was too busy to answer within the probe's
/// deadline gets its rounds back within the hour, and one that ignores the verb costs one short
/// probe an hour.
pub const NIP77_NO_ANSWER_TTL: Duration = Duration::from_secs(60 * 60);

/// Why a relay is taken not to speak NIP-77.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NoNip77 {
    /// Its NIP-11 `supported_nips` is an array without 77.
    NotListed,
    /// It answered a NEG-OPEN saying the verb is unknown, unsupported or turned off.
    Refused,
    /// Its probe's NEG-OPEN got no answer within the first-answer deadline.
    NoAnswer,
}

impl NoNip77 {
    /// A stable lowercase label for the status.
    pub fn label(self) -> &'static str {
        match self {
            NoNip77::NotListed => "nip11_not_listed",
            NoNip77::Refused => "unsupported",
            NoNip77::NoAnswer => "no_answer",
        }
    }

    /// The fallback reason counted for rounds that were queued when this became known.
    pub fn fallback_reason(self) -> FallbackReason {
        match self {
            NoNip77::NotListed | NoNip77::Refused => FallbackReason::Unsupported,
            NoNip77::NoAnswer => FallbackReason::Timeout,
        }
    }
}

/// How the next negentropy round of the session may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundStart {
    /// The relay speaks NIP-77: with the normal deadlines.
    Normal,
    /// Nobody knows yet: as the session's probe, with the short first-answer deadline.
    Probe,
    /// The probe is in flight: wait for its end.
    AfterProbe,
    /// The relay does not speak NIP-77: no round; REQ+EOSE instead.
    Off(NoNip77),
}

/// What the status shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nip77State {
    /// Not known yet; the next round is a probe.
    Unknown,
    /// The probe is in flight.
    Probing,
    /// The relay answered a round.
    Supported,
    /// Not used, for `reason`; a remembered verdict holds until `until`.
    Unsupported {
        /// Why.
        reason: NoNip77,
        /// When new connections ask again (none: the next connection reads NIP-11 again).
        until: Option<Instant>,
    },
}

/// NIP-77 knowledge of one relay: the current session's and the one kept across sessions.
#[derive(Debug, Clone, Default)]
pub struct Nip77Support {
    session: Knowledge,
    learned: Option<Learned>,
}

/// What the current session knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Knowledge {
    #[default]
    Unknown,
    Probing(SubscriptionId),
    Speaks,
    Lacks(NoNip77),
}

/// What a round taught, kept across sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Learned {
    Speaks,
    Lacks { reason: NoNip77, until: Instant },
}

impl Nip77Support {
    /// Nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new session started at `now`; `listing` is what its NIP-11 document says of NIP-77
    /// ([`NipListing::Unknown`] without a document).
    pub fn handle_session_started(&mut self, now: Instant, listing: NipListing) {
        if let Some(Learned::Lacks { until, .. }) = self.learned
            && now >= until
        {
            self.learned = None;
        }
        self.session = match (listing, self.learned) {
            (NipListing::NotListed, _) => Knowledge::Lacks(NoNip77::NotListed),
            (_, Some(Learned::Lacks { reason, .. })) => Knowledge::Lacks(reason),
            (_, Some(Learned::Speaks)) => Knowledge::Speaks,
            (_, None) => Knowledge::Unknown,
        };
    }

    /// The daily reconciliation starts on the session: a relay that did not answer or said
    /// it does not know the verbs is asked again (one probe), unless its NIP-11 says no.
    pub fn handle_daily_reconciliation(&mut self) {
        if let Some(Learned::Lacks { .. }) = self.learned {
            self.learned = None;
        }
        if matches!(
            self.session,
            Knowledge::Lacks(NoNip77::Refused | NoNip77::NoAnswer)
        ) {
            self.session = Knowledge::Unknown;
        }
    }

    /// Time passed to `now`: a no-answer verdict whose [`NIP77_NO_ANSWER_TTL`] is up ends, on
    /// the session too, so the next round probes again.
    pub fn handle_time(&mut self, now: Instant) {
        if let Some(Learned::Lacks {
            reason: NoNip77::NoAnswer,
            until,
        }) = self.learned
            && now >= until
        {
            self.learned = None;
            if self.session == Knowledge::Lacks(NoNip77::NoAnswer) {
                self.session = Knowledge::Unknown;
            }
        }
    }

    /// How the session's next round may start.
    pub fn poll_round(&self) -> RoundStart {
        match &self.session {
            Knowledge::Unknown => RoundStart::Probe,
            Knowledge::Probing(_) => RoundStart::AfterProbe,
            Knowledge::Speaks => RoundStart::Normal,
            Knowledge::Lacks(reason) => RoundStart::Off(*reason),
        }
    }

    /// Whether negentropy batches may be opened on the session (rounds may start now or later).
    pub fn allows_rounds(&self) -> bool {
        !matches!(self.poll_round(), RoundStart::Off(_))
    }

    /// The round `round` started as the session's probe ([`RoundStart::Probe`]).
    pub fn handle_probe_started(&mut self, round: SubscriptionId) {
        if self.session == Knowledge::Unknown {
            self.session = Knowledge::Probing(round);
        }
    }

    /// The round `round` of the current session ended at `now` with `result`.
    ///
    /// A diff, or (for the probe) a deadline missed after the relay answered, means the relay
    /// speaks NIP-77. An "unsupported" answer to any round, or no answer to the probe, means
    /// it does not, until [`NIP77_VERDICT_TTL`] from `now`. A probe that failed otherwise
    /// (refused, rate limited, broken, disconnected) taught nothing: the next round probes.
    pub fn handle_round_ended<T>(
        &mut self,
        now: Instant,
        round: &SubscriptionId,
        result: &Result<T, NegentropyError>,
    ) {
        let probe = matches!(&self.session, Knowledge::Probing(id) if id == round);
        let lacks = |reason| Learned::Lacks {
            reason,
            until: now
                + match reason {
                    NoNip77::NoAnswer => NIP77_NO_ANSWER_TTL,
                    NoNip77::NotListed | NoNip77::Refused => NIP77_VERDICT_TTL,
                },
        };
        let learned = match result {
            Ok(_) => Some(Learned::Speaks),
            Err(NegentropyError::Timeout) if probe => Some(Learned::Speaks),
            Err(NegentropyError::Unsupported) => Some(lacks(NoNip77::Refused)),
            Err(NegentropyError::NoAnswer) if probe => Some(lacks(NoNip77::NoAnswer)),
            Err(_) => None,
        };
        match learned {
            Some(learned) => {
                self.learned = Some(learned);
                self.session = match learned {
                    Learned::Speaks => Knowledge::Speaks,
                    Learned::Lacks { reason, .. } => Knowledge::Lacks(reason),
                };
            }
            None if probe => self.session = Knowledge::Unknown,
            None => {}
        }
    }

    /// What the status shows.
    pub fn state(&self) -> Nip77State {
        match &self.session {
            Knowledge::Unknown => Nip77State::Unknown,
            Knowledge::Probing(_) => Nip77State::Probing,
            Knowledge::Speaks => Nip77State::Supported,
            Knowledge::Lacks(reason) => Nip77State::Unsupported {
                reason: *reason,
                until: match self.learned {
                    Some(Learned::Lacks {
                        reason: held,
                        until,
                    }) if held == *reason => Some(until),
                    _ => None,
                },
            },
        }
    }
}

/// What a NIP-11 document says about one NIP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NipListing {
    /// `supported_nips` lists it.
    Listed,
    /// `supported_nips` is an array without it.
    NotListed,
    /// No document, no `supported_nips`, or not an array: the relay said nothing.
    #[default]
    Unknown,
}

/// Why a negentropy round did not produce a diff.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NegentropyError {
    /// The relay does not speak NIP-77: it said the verb is unknown, unsupported or turned off
    /// (see [`classify_refusal`](crate::transport::classify_refusal) and `notice_ends_round`).
    #[error("negentropy unsupported by relay")]
    Unsupported,
    /// The NEG-OPEN went out and the relay did not answer it within the round's first-answer
    /// deadline ([`RoundLimits::first_answer`](crate::transport::RoundLimits::first_answer)).
    #[error("relay did not answer the negentropy open")]
    NoAnswer,
    /// The round did not finish before its deadline although the relay answered its NEG-OPEN
    /// (a stalled exchange).
    #[error("negentropy round timed out")]
    Timeout,
    /// The relay refused because of its query rate.
    #[error("negentropy rate limited: {0}")]
    RateLimited(String),
    /// The relay refused the round until the client authenticates (NIP-42): a NEG-ERR or
    /// CLOSED `auth-required:` (text verbatim), as strfry and khatru answer a NEG-OPEN for
    /// filters they serve to authenticated clients only.
    #[error("negentropy needs authentication: {0}")]
    AuthRequired(String),
    /// The relay refused the round for another reason (NEG-ERR text, verbatim).
    #[error("negentropy refused: {0}")]
    Refused(String),
    /// The exchange broke: undecodable frames or an unexpected protocol state.
    #[error("negentropy protocol failure: {0}")]
    Protocol(String),
    /// The relay named more missing IDs than the round takes
    /// ([`RoundLimits::max_missing`](crate::transport::RoundLimits::max_missing)).
    #[error("the relay names more than {0} missing IDs")]
    TooManyMissing(usize),
    /// The session is not connected; nothing was sent or the connection ended mid-round.
    #[error("not connected")]
    NotConnected,
}

/// Why a negentropy round fell back to REQ+EOSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FallbackReason {
    /// The relay does not speak NIP-77.
    Unsupported,
    /// The round missed its deadline, or the relay never answered its NEG-OPEN.
    Timeout,
    /// The exchange broke.
    Protocol,
    /// The relay refused because of its query rate.
    RateLimited,
    /// The relay refused the round for another reason.
    Refused,
}

impl FallbackReason {
    /// Every reason, in declaration order.
    pub const ALL: [FallbackReason; 5] = [
        FallbackReason::Unsupported,
        FallbackReason::Timeout,
        FallbackReason::Protocol,
        FallbackReason::RateLimited,
        FallbackReason::Refused,
    ];

    /// The reason for a failed round, or `None` when the session ended (nothing to fall back
    /// to on this connection: the batch is abandoned and derived again).
    pub fn from_error(error: &NegentropyError) -> Option<FallbackReason> {
        Some(match error {
            NegentropyError::Unsupported => FallbackReason::Unsupported,
            NegentropyError::Timeout | NegentropyError::NoAnswer => FallbackReason::Timeout,
            NegentropyError::RateLimited(_) => FallbackReason::RateLimited,
            NegentropyError::Refused(_) => FallbackReason::Refused,
            NegentropyError::Protocol(_) | NegentropyError::TooManyMissing(_) => {
                FallbackReason::Protocol
            }
            // Sent again by NIP-77 after the session's AUTH, or its coverage paused: a REQ
            // would be refused the same way.
            NegentropyError::NotConnected | NegentropyError::AuthRequired(_) => return None,
        })
    }

    /// A stable lowercase label, safe as a metric label value.
    pub fn metric_label(self) -> &'static str {
        match self {
            FallbackReason::Unsupported => "unsupported",
            FallbackReason::Timeout => "timeout",
            FallbackReason::Protocol => "protocol",
            FallbackReason::RateLimited => "rate_limited",
            FallbackReason::Refused => "refused",
        }
    }

    /// Whether this reason turns NIP-77 off for the rest of the relay's session.
    pub fn disables_session(self) -> bool {
        matches!(
            self,
            FallbackReason::RateLimited | FallbackReason::Unsupported
        )
    }

    /// Its position in [`FallbackReason::ALL`], for counters kept per reason.
    pub fn index(self) -> usize {
        self as usize
    }
}
