//! [`HealthConfig`]: every timing rule of relay health, with the design's numbers as defaults.

use std::time::Duration;

use crate::{BackoffPolicy, HealthError};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
/// The longest duration a field accepts, in days.
pub const LONGEST_DAYS: u64 = 366;
const LONGEST: Duration = Duration::from_secs(LONGEST_DAYS * 24 * 3600);

/// Timing rules for one relay's health. `Default` is the design's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// First connection-failure backoff (default 5 s).
    pub connect_backoff_base: Duration,
    /// Largest connection-failure backoff (default 1 h).
    pub connect_backoff_max: Duration,
    /// Connection backoffs are shortened by a random share of up to this percentage
    /// (default 10; 0 gives the exact formula).
    pub jitter_percent: u8,
    /// Continuous failure after which a relay is dead (default 24 h).
    pub dead_after: Duration,
    /// Interval between attempts on a dead relay (default 24 h).
    pub dead_retry_interval: Duration,
    /// How long a recovered connection must last before the failure streak clears (default 5 min).
    pub stability_period: Duration,
    /// First rate-limit cooldown (default 65 s: a 60 s window plus 5 s).
    pub rate_limit_cooldown: Duration,
    /// Largest rate-limit pause after failed recovery probes (default 1 h).
    pub rate_limit_max: Duration,
    /// Unpaused, connected time without a refusal that resets the rate and request
    /// escalations (default 5 min).
    pub recovery_window: Duration,
    /// Pause after a policy refusal before one recovery probe (default 24 h).
    pub policy_pause: Duration,
    /// First incomplete-request pause (default 65 s).
    pub request_pause_base: Duration,
    /// Largest incomplete-request pause (default 1 h).
    pub request_pause_max: Duration,
    /// First mailbox-probe or identity-discovery pause (default 5 min).
    pub discovery_pause_base: Duration,
    /// Largest mailbox-probe or identity-discovery pause (default 1 h).
    pub discovery_pause_max: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            connect_backoff_base: Duration::from_secs(5),
            connect_backoff_max: HOUR,
            jitter_percent: 10,
            dead_after: DAY,
            dead_retry_interval: DAY,
            stability_period: 5 * MINUTE,
            rate_limit_cooldown: Duration::from_secs(65),
            rate_limit_max: HOUR,
            recovery_window: 5 * MINUTE,
            policy_pause: DAY,
            request_pause_base: Duration::from_secs(65),
            request_pause_max: HOUR,
            discovery_pause_base: 5 * MINUTE,
            discovery_pause_max: HOUR,
        }
    }
}

impl HealthConfig {
    /// Checks every field: durations positive and at most 366 days, each base no larger than
    /// its cap, jitter at most 100 %.
    ///
    /// # Errors
    /// The first [`HealthError`] found.
    pub fn validate(&self) -> Result<(), HealthError> {
        let fields = [
            ("connect_backoff_base", self.connect_backoff_base),
            ("connect_backoff_max", self.connect_backoff_max),
            ("dead_after", self.dead_after),
            ("dead_retry_interval", self.dead_retry_interval),
            ("stability_period", self.stability_period),
            ("rate_limit_cooldown", self.rate_limit_cooldown),
            ("rate_limit_max", self.rate_limit_max),
            ("recovery_window", self.recovery_window),
            ("policy_pause", self.policy_pause),
            ("request_pause_base", self.request_pause_base),
            ("request_pause_max", self.request_pause_max),
            ("discovery_pause_base", self.discovery_pause_base),
            ("discovery_pause_max", self.discovery_pause_max),
        ];
        for (field, value) in fields {
            if value.is_zero() {
                return Err(HealthError::ZeroDuration { field });
            }
            if value > LONGEST {
                return Err(HealthError::TooLong { field });
            }
        }
        let pairs = [
            (
                "connect",
                self.connect_backoff_base,
                self.connect_backoff_max,
            ),
            ("rate_limit", self.rate_limit_cooldown, self.rate_limit_max),
            (
                "request_pause",
                self.request_pause_base,
                self.request_pause_max,
            ),
            (
                "discovery_pause",
                self.discovery_pause_base,
                self.discovery_pause_max,
            ),
        ];
        for (field, base, cap) in pairs {
            if base > cap {
                return Err(HealthError::BaseExceedsCap { field });
            }
        }
        if self.jitter_percent > 100 {
            return Err(HealthError::JitterOutOfRange(self.jitter_percent));
        }
        Ok(())
    }

    pub(crate) fn connect_policy(&self) -> Result<BackoffPolicy, HealthError> {
        BackoffPolicy::new(self.connect_backoff_base, self.connect_backoff_max)
    }
}
