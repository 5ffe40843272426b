//! What a refusal means for a relay: the [`RefusalScope`] it came from, the [`RefusalAction`]
//! taken, the discovery kinds only a success resets, the [`RecoveryProbe`] after a pause episode,
//! and the decision table from category and scope to action.

use std::time::Instant;

use crate::{PauseKind, Refusal, RefusalCategory};

/// Where a refusal came from, which decides what it pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalScope {
    /// A NOTICE, not tied to one request.
    Notice,
    /// A CLOSED, NEG-ERR or OK-false for a request this session still owns, carrying
    /// `filters` filters.
    Request {
        /// How many filters the refused request carried.
        filters: u32,
    },
    /// Like [`RefusalScope::Request`], for a caller that pauses refused coverage on its own: a
    /// policy refusal (`auth-required:` included: the caller answers NIP-42 challenges itself
    /// and reports here only what stays refused) then pauses only that coverage
    /// ([`RefusalAction::CoveragePaused`]), not the relay.
    Coverage {
        /// How many filters the refused request carried.
        filters: u32,
    },
    /// A CLOSED for a subscription already retired: counted, never acted on.
    Retired,
    /// A refused participant mailbox fetch.
    Mailbox,
    /// A refused NIP-65 identity query.
    Identity,
}

/// The two discovery pause kinds that only a success resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiscoveryKind {
    /// Participant mailbox probes.
    Mailbox,
    /// NIP-65 identity discovery.
    Identity,
}

impl From<DiscoveryKind> for PauseKind {
    fn from(kind: DiscoveryKind) -> Self {
        match kind {
            DiscoveryKind::Mailbox => PauseKind::Mailbox,
            DiscoveryKind::Identity => PauseKind::Identity,
        }
    }
}

/// What [`crate::RelayHealth::handle_refusal`] or [`crate::RelayHealth::handle_failure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalAction {
    /// A new pause of `kind` started and lasts until `until`.
    Paused {
        /// The pause started.
        kind: PauseKind,
        /// When it ends.
        until: Instant,
    },
    /// A pause of `kind` was already active; its deadline is unchanged.
    AlreadyPaused {
        /// The active pause.
        kind: PauseKind,
        /// Its unchanged deadline.
        until: Instant,
    },
    /// A policy refusal of coverage the caller pauses on its own until `until` (the policy
    /// pause); the relay's other coverage goes on.
    CoveragePaused {
        /// When the refused coverage may be probed again.
        until: Instant,
    },
    /// A multi-filter request exceeded the relay's filter count: regroup it smaller
    /// (session-local), no pause.
    Regroup {
        /// The submitted count the relay stated, if any.
        submitted_filters: Option<u32>,
    },
    /// The relay's retained-subscription byte cap was exceeded: rebuild within it, no pause.
    ByteCap {
        /// The cap the relay stated, if any.
        bytes: Option<u64>,
    },
    /// Counted only.
    Ignored,
}

/// The single recovery probe due after a pause episode, from [`crate::RelayHealth::poll_probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecoveryProbe {
    /// The episode included a rate-limit pause.
    pub rate_limit: bool,
    /// The episode included a policy pause.
    pub policy: bool,
    /// The episode included an incomplete-request pause.
    pub request: bool,
}

/// What a refusal does, before it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Pause(PauseKind),
    PauseCoverage,
    Regroup,
    ByteCap,
    Ignore,
}

pub(crate) fn decide(refusal: &Refusal, scope: RefusalScope) -> Decision {
    use RefusalCategory as C;
    let (filters, owned) = match scope {
        RefusalScope::Retired => return Decision::Ignore,
        RefusalScope::Mailbox | RefusalScope::Identity => {
            let discovery = if scope == RefusalScope::Mailbox {
                PauseKind::Mailbox
            } else {
                PauseKind::Identity
            };
            // What a refusal says about the connection's limits is learned whoever asked; every
            // other refusal pauses only that discovery.
            return match refusal.category {
                C::Duplicate => Decision::Ignore,
                C::RateLimited => Decision::Pause(PauseKind::RateLimit),
                C::TooManyFilters if refusal.submitted_filters != Some(1) => Decision::Regroup,
                C::RetainedBytesExceeded => Decision::ByteCap,
                _ => Decision::Pause(discovery),
            };
        }
        RefusalScope::Notice => (refusal.submitted_filters, false),
        RefusalScope::Request { filters } => (Some(filters), true),
        RefusalScope::Coverage { filters } => {
            return match decide(refusal, RefusalScope::Request { filters }) {
                Decision::Pause(PauseKind::Policy) => Decision::PauseCoverage,
                other => other,
            };
        }
    };
    match refusal.category {
        C::RateLimited => Decision::Pause(PauseKind::RateLimit),
        C::Blocked | C::Restricted | C::AuthRequired | C::InvalidFilter => {
            Decision::Pause(PauseKind::Policy)
        }
        C::TooManyFilters if filters == Some(1) => Decision::Pause(PauseKind::Policy),
        C::TooManyFilters => Decision::Regroup,
        C::RetainedBytesExceeded => Decision::ByteCap,
        C::TooManySubscriptions | C::TooManyConcurrentNeg => Decision::Pause(PauseKind::Request),
        C::Invalid if owned => Decision::Pause(PauseKind::Policy),
        C::Error | C::Unknown if owned => Decision::Pause(PauseKind::Request),
        C::Invalid | C::Error | C::Unknown | C::Duplicate | C::Pow => Decision::Ignore,
    }
}
