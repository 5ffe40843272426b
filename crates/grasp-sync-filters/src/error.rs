//! Errors of the filters crate: inputs that cannot be turned into filters or REQs within budget.

use thiserror::Error;

/// Why filters could not be built or packed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FilterError {
    /// One tag value is larger, serialised, than a whole filter may carry.
    #[error("a `#{tag}` value of {bytes} serialised bytes exceeds the {budget}-byte filter budget")]
    ValueTooLarge {
        /// The tag letter the value was meant for (`i` for `ids`).
        tag: char,
        /// Serialised size of the value, quotes and separator included.
        bytes: usize,
        /// Bytes available for values in one filter.
        budget: usize,
    },
    /// One filter is larger, serialised, than a whole REQ may carry.
    #[error("a filter of {bytes} serialised bytes exceeds the {budget}-byte REQ budget")]
    FilterTooLarge {
        /// Bytes the filter adds to a REQ message.
        bytes: usize,
        /// The REQ payload budget.
        budget: usize,
    },
    /// A budget or limit is unusable (zero, or too small for any filter).
    #[error("invalid limits: {0}")]
    InvalidLimits(&'static str),
}
