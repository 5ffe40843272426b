//! Start spacing on injected time: a governor rate limiter whose clock reads the instant the
//! caller passes in. This is the only module that touches governor.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// Allows one start per `period`, the first one immediately.
#[derive(Debug)]
pub(crate) struct Spacer {
    period: Duration,
    limiter: RateLimiter<NotKeyed, InMemoryState, InjectedClock, NoOpMiddleware<Instant>>,
}

impl Spacer {
    /// A spacer whose first start is allowed at `origin`.
    pub(crate) fn new(origin: Instant, period: Duration) -> Spacer {
        let period = period.max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::MIN);
        let clock = InjectedClock {
            origin,
            offset_nanos: AtomicU64::new(0),
        };
        Spacer {
            period,
            limiter: RateLimiter::direct_with_clock(quota, clock),
        }
    }

    /// The spacing between starts.
    pub(crate) fn period(&self) -> Duration {
        self.period
    }

    /// Takes a start at `now` if one is allowed, else answers when the next one is.
    pub(crate) fn try_start(&self, now: Instant) -> Result<(), Instant> {
        self.limiter.clock().set(now);
        self.limiter
            .check()
            .map_err(|not_until| not_until.earliest_possible())
    }
}

/// A governor clock whose "now" is the last instant set by the caller.
#[derive(Debug)]
struct InjectedClock {
    origin: Instant,
    offset_nanos: AtomicU64,
}

impl InjectedClock {
    fn set(&self, now: Instant) {
        let offset = now.saturating_duration_since(self.origin).as_nanos();
        let offset = u64::try_from(offset).unwrap_or(u64::MAX);
        self.offset_nanos.store(offset, Ordering::Relaxed);
    }
}

impl Clock for InjectedClock {
    type Instant = Instant;

    fn now(&self) -> Instant {
        let offset = Duration::from_nanos(self.offset_nanos.load(Ordering::Relaxed));
        self.origin.checked_add(offset).unwrap_or(self.origin)
    }
}
