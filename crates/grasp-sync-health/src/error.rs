//! Errors of this crate: a rejected [`HealthConfig`](crate::HealthConfig) or backoff policy.

use thiserror::Error;

/// Why a configuration or backoff policy was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HealthError {
    /// A duration that must be positive is zero.
    #[error("{field} must be greater than zero")]
    ZeroDuration {
        /// The configuration field at fault.
        field: &'static str,
    },
    /// A duration is longer than the largest accepted value ([`crate::LONGEST_DAYS`] days).
    #[error("{field} is longer than {} days", crate::LONGEST_DAYS)]
    TooLong {
        /// The configuration field at fault.
        field: &'static str,
    },
    /// A backoff starts above its own cap.
    #[error("{field} base exceeds its cap")]
    BaseExceedsCap {
        /// The backoff whose base is larger than its cap.
        field: &'static str,
    },
    /// The jitter percentage is above 100.
    #[error("jitter percent {0} is above 100")]
    JitterOutOfRange(u8),
}
