//! A named timer table: the deadlines one owner keeps, each under a name from a closed set, and
//! the earliest of them ([`Timers::poll_timeout`]) for the driver to sleep until. Pure state:
//! the driver passes the time in, and a timer fires only when its owner asks whether it is due.
//!
//! The per-relay timers ([`RelayTimer`]) outlive sessions; the per-session timers
//! ([`SessionTimer`]) live in the session value and end with it.

use std::collections::BTreeMap;
use std::time::Instant;

#[cfg(test)]
mod tests;

/// The timers of one relay, kept across its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelayTimer {
    /// Re-check that historic sync is complete (the six-second double check).
    CompletionCheck,
    /// Re-derive coverage that failed or was parked, once its pause is over.
    CoverageRetry,
    /// The daily reconciliation, 23–25 h after the last one.
    DailyReconciliation,
}

/// The timers of one connected session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SessionTimer {
    /// The earliest instant a gate (background, reactive, a health pause) lets the head of the
    /// queues start.
    GateWait,
    /// Live planning waits for a query-rate cooldown: re-derive live coverage then.
    LiveRepair,
    /// The earliest EOSE due on a live group carrying a historic page.
    LivePageWatchdog,
}

/// Deadlines by name. Bounded by the names: at most one deadline per variant of `T`.
#[derive(Debug, Clone)]
pub struct Timers<T> {
    deadlines: BTreeMap<T, Instant>,
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Self {
            deadlines: BTreeMap::new(),
        }
    }
}

impl<T: Ord + Copy> Timers<T> {
    /// Arms `timer` at `at`, replacing any deadline it had.
    pub fn set(&mut self, timer: T, at: Instant) {
        self.deadlines.insert(timer, at);
    }

    /// Arms `timer` at `at` unless it is already armed earlier.
    pub fn set_earliest(&mut self, timer: T, at: Instant) {
        let deadline = self.deadlines.entry(timer).or_insert(at);
        *deadline = (*deadline).min(at);
    }

    /// Arms `timer` at `at` only if it is not armed.
    pub fn set_unless_armed(&mut self, timer: T, at: Instant) {
        self.deadlines.entry(timer).or_insert(at);
    }

    /// Disarms `timer`.
    pub fn cancel(&mut self, timer: T) {
        self.deadlines.remove(&timer);
    }

    /// Whether `timer` is armed and its deadline has come at `now`.
    pub fn is_due(&self, timer: T, now: Instant) -> bool {
        self.deadlines.get(&timer).is_some_and(|at| *at <= now)
    }

    /// Whether `timer` is armed for later than `now`: what it guards must still wait.
    pub fn is_waiting(&self, timer: T, now: Instant) -> bool {
        self.deadlines.get(&timer).is_some_and(|at| *at > now)
    }

    /// Fires `timer` if it is due at `now`: disarms it and says so.
    pub fn take_due(&mut self, timer: T, now: Instant) -> bool {
        let due = self.is_due(timer, now);
        if due {
            self.deadlines.remove(&timer);
        }
        due
    }

    /// The earliest deadline of any armed timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.values().min().copied()
    }
}
