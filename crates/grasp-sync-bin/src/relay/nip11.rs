//! The embedded relay's NIP-11 document: what it is, the NIPs it serves, and its limits.

use serde_json::{Value, json};

use super::limits::RelayLimits;

/// The NIPs the embedded relay serves: the protocol (1), deletions (9), this document (11),
/// git collaboration events (34), COUNT (45) and negentropy sync (77).
pub(crate) const SUPPORTED_NIPS: [u16; 6] = [1, 9, 11, 34, 45, 77];

/// The relay's NIP-11 document.
pub(crate) fn document(limits: &RelayLimits) -> Value {
    json!({
        "name": "grasp-sync",
        "description": "GRASP relay kept complete by proactive sync",
        "software": "grasp-sync",
        "version": env!("CARGO_PKG_VERSION"),
        "supported_nips": SUPPORTED_NIPS,
        "limitation": limits.limitation(),
    })
}
