//! Pause kinds and the escalating pause timer they share: a pause starts at a base delay, later
//! pauses double up to a cap, and a refusal during an active pause never extends it.

use std::time::{Duration, Instant};

use crate::BackoffPolicy;

/// An independent reason for not sending new work to a relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PauseKind {
    /// Query-rate cooldown after a rate-limit refusal: 65 s, doubling on failed recovery probes
    /// up to 1 h.
    RateLimit,
    /// Coverage paused 24 h after a definitive policy refusal (blocked, restricted,
    /// auth-required, incompatible filter), then one recovery probe.
    Policy,
    /// Incomplete-request backoff (watchdog expiry, unexpected CLOSED before EOSE): 65 s
    /// doubling to 1 h.
    Request,
    /// Participant mailbox probes: 5 min doubling to 1 h, reset only by a successful fetch.
    Mailbox,
    /// NIP-65 identity discovery: 5 min doubling to 1 h, reset only by a successful query.
    Identity,
}

impl PauseKind {
    /// Every kind, in declaration order.
    pub const ALL: [PauseKind; 5] = [
        PauseKind::RateLimit,
        PauseKind::Policy,
        PauseKind::Request,
        PauseKind::Mailbox,
        PauseKind::Identity,
    ];

    /// The kinds that pause sync coverage and block recovery and dialing until they all expire.
    pub const SYNC: [PauseKind; 3] = [PauseKind::RateLimit, PauseKind::Policy, PauseKind::Request];

    /// A stable lowercase label for logs and metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            PauseKind::RateLimit => "rate_limit",
            PauseKind::Policy => "policy",
            PauseKind::Request => "request",
            PauseKind::Mailbox => "mailbox",
            PauseKind::Identity => "identity",
        }
    }

    /// Whether this kind pauses sync coverage (rate, policy, request).
    pub fn is_sync(self) -> bool {
        Self::SYNC.contains(&self)
    }
}

/// One pause timer with its escalation streak.
#[derive(Debug, Clone)]
pub(crate) struct EscalatingPause {
    policy: BackoffPolicy,
    /// Pauses started since the escalation was last reset.
    streak: u32,
    /// The latest deadline, kept after it passes (recovery is measured from it).
    until: Option<Instant>,
    /// Whether the deadline still needs a timeout to be observed.
    armed: bool,
    /// The latest refusal of this kind, inside a pause or not.
    last_refusal: Option<Instant>,
}

impl EscalatingPause {
    pub(crate) fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            streak: 0,
            until: None,
            armed: false,
            last_refusal: None,
        }
    }

    pub(crate) fn is_active(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| until > now)
    }

    /// The deadline if the pause is active at `now`.
    pub(crate) fn active_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|until| *until > now)
    }

    /// The latest deadline, even if it has passed.
    pub(crate) fn last_until(&self) -> Option<Instant> {
        self.until
    }

    pub(crate) fn last_refusal(&self) -> Option<Instant> {
        self.last_refusal
    }

    pub(crate) fn streak(&self) -> u32 {
        self.streak
    }

    /// The deadline still waiting for its timeout, if any.
    pub(crate) fn armed_deadline(&self) -> Option<Instant> {
        self.until.filter(|_| self.armed)
    }

    /// Records a refusal; starts a pause unless one is active. Returns the deadline and whether
    /// this call started it.
    pub(crate) fn trigger(&mut self, now: Instant) -> (Instant, bool) {
        self.last_refusal = Some(now);
        if let Some(until) = self.active_until(now) {
            return (until, false);
        }
        self.streak = self.streak.saturating_add(1);
        let delay: Duration = self.policy.delay(self.streak, now);
        let until = now.checked_add(delay).unwrap_or(now);
        self.until = Some(until);
        self.armed = true;
        (until, true)
    }

    /// Observes expiry at `now`; returns true if an armed deadline has just passed.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        if self.armed && self.until.is_some_and(|until| until <= now) {
            self.armed = false;
            return true;
        }
        false
    }

    /// Forgets the escalation: the next pause starts at the base delay again.
    pub(crate) fn reset_escalation(&mut self) {
        self.streak = 0;
    }

    /// Forgets everything: the escalation, the deadline and the latest refusal.
    pub(crate) fn retire(&mut self) {
        self.streak = 0;
        self.until = None;
        self.armed = false;
        self.last_refusal = None;
    }
}
