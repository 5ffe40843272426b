//! The refusal texts, verbatim as the named relays send them, and the frames that carry
//! them.

use serde_json::json;

use super::Dialect;

/// strfry, NIP-77 turned off: its ingester rejects every `NEG-` command.
pub(super) const NEGENTROPY_DISABLED: &str = "ERROR: bad msg: negentropy disabled";
/// strfry, more negentropy views than its per-connection budget.
pub(super) const TOO_MANY_CONCURRENT_NEG: &str = "ERROR: too many concurrent NEG requests";
/// The rust-nostr relay builder's query allowance.
pub(super) const TOO_MANY_QUERIES: &str = "rate-limited: too many queries";

/// How a refusal reaches the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    /// `["CLOSED", id, text]`.
    Closed(String),
    /// `["NOTICE", text]`, without a subscription ID.
    Notice(String),
    /// `["NEG-ERR", id, text]`.
    NegErr(String),
}

impl Reply {
    /// The JSON frame for subscription `id`.
    pub(super) fn frame(&self, id: &str) -> String {
        match self {
            Self::Closed(text) => json!(["CLOSED", id, text]).to_string(),
            Self::Notice(text) => json!(["NOTICE", text]).to_string(),
            Self::NegErr(text) => json!(["NEG-ERR", id, text]).to_string(),
        }
    }
}

/// A REQ past the open-subscription cap `max`.
pub(super) fn too_many_subscriptions(dialect: Dialect, max: usize) -> Reply {
    match dialect {
        Dialect::Strfry => Reply::Notice("ERROR: too many concurrent REQs".to_owned()),
        Dialect::RustNostr => Reply::Closed("rate-limited: too many REQs".to_owned()),
        Dialect::Nostream => Reply::Notice(format!(
            "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to {max}"
        )),
        Dialect::Rnostr => Reply::Closed("Number of subscriptions exceeds limit".to_owned()),
    }
}

/// A REQ with `submitted` filters, more than `max`.
pub(super) fn too_many_filters(dialect: Dialect, max: usize, submitted: usize) -> Reply {
    match dialect {
        Dialect::Strfry => Reply::Closed(format!(
            "ERROR: bad req: filter validation failed: invalid number of filters: {submitted}"
        )),
        Dialect::RustNostr => Reply::Closed("blocked: too many filters".to_owned()),
        Dialect::Nostream => Reply::Notice(format!(
            "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to {max}"
        )),
        Dialect::Rnostr => Reply::Closed(format!("invalid: limitation.max_filters {max}")),
    }
}

/// A REQ that would make the open subscriptions hold more than `max` bytes.
pub(super) fn retained_bytes_exceeded(max: usize) -> Reply {
    Reply::Closed(format!(
        "rate-limited: active subscriptions exceed max size {max} bytes"
    ))
}
