//! The one place that knows about the `backoff` crate: exponential delays `base × 2^(n−1)` capped,
//! plus jitter drawn from an injected seeded RNG.
//!
//! `backoff::ExponentialBackoff` is driven with randomization off and a fixed clock, so it never
//! reads the system clock and its global RNG draw cannot change the result. Replacing the crate
//! means rewriting this file only.

use std::time::{Duration, Instant};

use backoff::backoff::Backoff as _;
use rand::RngCore;

use crate::HealthError;

/// An exponential backoff: attempt `n` (1-based) waits `base × 2^(n−1)`, never more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    base: Duration,
    cap: Duration,
}

impl BackoffPolicy {
    /// A policy starting at `base` and doubling up to `cap`.
    ///
    /// # Errors
    /// [`HealthError::ZeroDuration`] if `base` is zero, [`HealthError::BaseExceedsCap`] if
    /// `base > cap`.
    pub fn new(base: Duration, cap: Duration) -> Result<Self, HealthError> {
        if base.is_zero() {
            return Err(HealthError::ZeroDuration {
                field: "backoff base",
            });
        }
        if base > cap {
            return Err(HealthError::BaseExceedsCap { field: "backoff" });
        }
        Ok(Self { base, cap })
    }

    /// The first delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The largest delay.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The delay before attempt `attempt` (1-based; 0 is treated as 1), without jitter.
    ///
    /// `anchor` is any instant (usually the caller's `now`): the `backoff` crate needs one to
    /// anchor its elapsed-time limit, which is switched off here, so the value never matters.
    pub fn delay(&self, attempt: u32, anchor: Instant) -> Duration {
        let mut backoff = backoff::exponential::ExponentialBackoff {
            current_interval: self.base,
            initial_interval: self.base,
            randomization_factor: 0.0,
            multiplier: 2.0,
            max_interval: self.cap,
            start_time: anchor,
            max_elapsed_time: None,
            clock: FixedClock(anchor),
        };
        backoff.reset();
        let mut delay = self.base;
        for _ in 0..attempt.max(1) {
            delay = backoff.next_backoff().map_or(self.cap, |d| d.min(self.cap));
            if delay >= self.cap {
                break;
            }
        }
        delay
    }

    /// The delay before attempt `attempt`, shortened by up to `jitter_percent` % using `rng`.
    ///
    /// The result lies in `[delay × (1 − jitter_percent/100), delay]`, so it never exceeds the
    /// cap; `jitter_percent` above 100 is treated as 100.
    pub fn jittered(
        &self,
        attempt: u32,
        jitter_percent: u8,
        rng: &mut impl RngCore,
        anchor: Instant,
    ) -> Duration {
        let delay = self.delay(attempt, anchor);
        let percent = u128::from(jitter_percent.min(100));
        if percent == 0 {
            return delay;
        }
        let nanos = delay.as_nanos();
        let draw = u128::from(rng.next_u32());
        let cut = nanos * percent * draw / (100 * (1u128 << 32));
        duration_from_nanos(nanos - cut)
    }
}

fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, sub)
}

/// A clock that always answers the instant it was built with; the elapsed-time limit is off,
/// so the backoff never consults the real clock.
#[derive(Debug, Clone, Copy)]
struct FixedClock(Instant);

impl backoff::Clock for FixedClock {
    fn now(&self) -> Instant {
        self.0
    }
}

#[cfg(test)]
mod tests;
