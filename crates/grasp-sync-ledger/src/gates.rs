//! The two pacing gates of a connection session: the proactive [`BackgroundGate`] (one
//! non-urgent start per second) and the [`ReactiveGate`] that a "too many queries" refusal arms.
//! A gate is asked whether a start may happen now and answers with a [`StartDecision`].

use std::time::{Duration, Instant};

use crate::spacing::Spacer;

#[cfg(test)]
mod tests;

/// Spacing of non-urgent starts from session start.
pub const BACKGROUND_INTERVAL: Duration = Duration::from_secs(1);
/// After a query-rate refusal, queued starts are rejected for this long.
pub const REACTIVE_COOLDOWN: Duration = Duration::from_secs(65);
/// The reactive spacing after the first query-rate episode.
pub const REACTIVE_INITIAL_INTERVAL: Duration = Duration::from_millis(600);
/// The reactive spacing never exceeds this.
pub const REACTIVE_MAX_INTERVAL: Duration = Duration::from_secs(10);

/// The kind of start a gate is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartKind {
    /// A persistent live subscription (bypasses the background gate).
    Live,
    /// A historic sync REQ.
    Historic,
    /// A dependency (exact-ID) fetch.
    Dependency,
    /// A pagination page.
    Pagination,
    /// A negentropy hydration page.
    Hydration,
    /// A retry of failed work.
    Retry,
    /// A NIP-77 negentropy round.
    NegentropyRound,
}

impl StartKind {
    /// Whether the start is non-urgent background work.
    pub fn is_background(self) -> bool {
        self != StartKind::Live
    }
}

/// A gate's answer to "may this start now?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartDecision {
    /// Start now; the gate counted the start.
    Ready,
    /// Ask again at this instant; nothing was counted.
    NotBefore(Instant),
    /// Do not start: drop the queued start and re-derive its work.
    Rejected(GateRejection),
}

/// Why a gate rejected a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateRejection {
    /// The connection is in the cooldown after a query-rate refusal.
    Cooldown {
        /// When the cooldown ends.
        until: Instant,
    },
    /// NIP-77 is disabled for the rest of this session after a query-rate refusal.
    Nip77Disabled,
}

/// Proactive spacing of non-urgent starts: one per [`BACKGROUND_INTERVAL`] from session start.
/// Live starts bypass it.
#[derive(Debug)]
pub struct BackgroundGate {
    spacer: Spacer,
}

impl BackgroundGate {
    /// A gate for a session that started at `session_start`.
    pub fn new(session_start: Instant) -> BackgroundGate {
        BackgroundGate {
            spacer: Spacer::new(session_start, BACKGROUND_INTERVAL),
        }
    }

    /// A new connection session started: the spacing starts over.
    pub fn new_session(&mut self, now: Instant) {
        *self = BackgroundGate::new(now);
    }

    /// May a start of `kind` happen at `now`? `Ready` counts it.
    pub fn poll_start(&mut self, now: Instant, kind: StartKind) -> StartDecision {
        if !kind.is_background() {
            return StartDecision::Ready;
        }
        match self.spacer.try_start(now) {
            Ok(()) => StartDecision::Ready,
            Err(at) => StartDecision::NotBefore(at),
        }
    }
}

/// Reactive spacing of every start, armed by an explicit query-rate refusal.
///
/// Inactive until [`handle_query_rate_refusal`](Self::handle_query_rate_refusal). A refusal
/// starts an episode: starts are rejected for [`REACTIVE_COOLDOWN`], then every start (live
/// included) is spaced, [`REACTIVE_INITIAL_INTERVAL`] after the first episode and doubling for
/// each later distinct episode up to [`REACTIVE_MAX_INTERVAL`]. A refusal during a cooldown
/// belongs to that cooldown's episode. Any refusal disables NIP-77 for the session.
///
/// Background work passes both gates: ask the [`BackgroundGate`] first, then this one, so a
/// start this gate defers costs a background interval rather than a live start's turn.
#[derive(Debug)]
pub struct ReactiveGate {
    state: Reactive,
    nip77_disabled: bool,
    episodes: u32,
}

#[derive(Debug)]
enum Reactive {
    Inactive,
    Cooldown { until: Instant, interval: Duration },
    Spacing(Spacer),
}

impl ReactiveGate {
    /// An inactive gate for a session that started at `session_start`.
    pub fn new(_session_start: Instant) -> ReactiveGate {
        ReactiveGate {
            state: Reactive::Inactive,
            nip77_disabled: false,
            episodes: 0,
        }
    }

    /// A new connection session started: inactive again, NIP-77 allowed again.
    pub fn new_session(&mut self, now: Instant) {
        *self = ReactiveGate::new(now);
    }

    /// The relay refused a query for its query rate ("too many queries"): a cooldown of
    /// [`REACTIVE_COOLDOWN`].
    pub fn handle_query_rate_refusal(&mut self, now: Instant) {
        let until = now.checked_add(REACTIVE_COOLDOWN).unwrap_or(now);
        self.handle_query_rate_refusal_until(now, until);
    }

    /// [`handle_query_rate_refusal`](Self::handle_query_rate_refusal) with the cooldown ending
    /// at `until`, for a caller whose health state decides the cooldown (it escalates on failed
    /// recovery probes).
    pub fn handle_query_rate_refusal_until(&mut self, now: Instant, until: Instant) {
        self.nip77_disabled = true;
        self.advance(now);
        let interval = match &self.state {
            Reactive::Cooldown { .. } => return,
            Reactive::Inactive => REACTIVE_INITIAL_INTERVAL,
            Reactive::Spacing(spacer) => {
                spacer.period().saturating_mul(2).min(REACTIVE_MAX_INTERVAL)
            }
        };
        self.episodes = self.episodes.saturating_add(1);
        self.state = Reactive::Cooldown {
            until: until.max(now),
            interval,
        };
    }

    /// May a start of `kind` happen at `now`? `Ready` counts it.
    pub fn poll_start(&mut self, now: Instant, kind: StartKind) -> StartDecision {
        if kind == StartKind::NegentropyRound && self.nip77_disabled {
            return StartDecision::Rejected(GateRejection::Nip77Disabled);
        }
        self.advance(now);
        match &self.state {
            Reactive::Inactive => StartDecision::Ready,
            Reactive::Cooldown { until, .. } => {
                StartDecision::Rejected(GateRejection::Cooldown { until: *until })
            }
            Reactive::Spacing(spacer) => match spacer.try_start(now) {
                Ok(()) => StartDecision::Ready,
                Err(at) => StartDecision::NotBefore(at),
            },
        }
    }

    /// Whether NIP-77 may be used in this session.
    pub fn nip77_allowed(&self) -> bool {
        !self.nip77_disabled
    }

    /// Distinct query-rate episodes in this session.
    pub fn episodes(&self) -> u32 {
        self.episodes
    }

    /// The spacing between starts once the current cooldown ends; `None` while inactive.
    pub fn interval(&self) -> Option<Duration> {
        match &self.state {
            Reactive::Inactive => None,
            Reactive::Cooldown { interval, .. } => Some(*interval),
            Reactive::Spacing(spacer) => Some(spacer.period()),
        }
    }

    /// When the current cooldown ends, if one is running.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            Reactive::Cooldown { until, .. } => Some(*until),
            _ => None,
        }
    }

    fn advance(&mut self, now: Instant) {
        if let Reactive::Cooldown { until, interval } = self.state
            && now >= until
        {
            self.state = Reactive::Spacing(Spacer::new(until, interval));
        }
    }
}
