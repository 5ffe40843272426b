//! Signed NIP-65 relay lists (kind 10002): the `r` tags a participant names its relays with,
//! each marked `read`, `write` or neither (both), with an explicit `created_at` so the same
//! keys and inputs always give the same event ID.

use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, Keys, RelayUrl, Timestamp};

use crate::TestkitError;

/// Kind of a relay list (NIP-65), a replaceable event.
pub const KIND_RELAY_LIST: u16 = 10002;

/// Builds and signs a relay list naming `relays` in order, each with its marker (`None`:
/// read and write).
pub fn relay_list(
    author: &Keys,
    relays: &[(RelayUrl, Option<RelayMetadata>)],
    created_at: Timestamp,
) -> Result<Event, TestkitError> {
    Ok(EventBuilder::relay_list(relays.iter().cloned())
        .custom_created_at(created_at)
        .sign_with_keys(author)?)
}
