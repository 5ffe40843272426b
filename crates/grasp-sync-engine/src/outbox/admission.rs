//! When participant discovery may use a relay: the rules that combine a relay's
//! `RelayHealth` pauses with the outbox state, kept apart from the actor so they are checked
//! with an injected `now`.
//!
//! - An identity source is asked only while connected, idle (discovery yields to repository
//!   history) and outside its identity pause; the pause is source-wide, so authors added
//!   during it wait for its end too.
//! - A relay wanted only for discovery is dialled only when a mailbox probe is due and its
//!   mailbox pause is over, or when it is an index relay, an author is due and its identity
//!   pause is over. Reconnecting never resets either pause.
//! - A source that leaves identity scope, or a relay that leaves the mailbox inventory,
//!   forgets its backoff of that kind.

use std::collections::BTreeSet;
use std::time::Instant;

use grasp_sync_health::{PauseKind, RelayHealth};
use grasp_sync_model::RelayUrl;

use super::{MailboxInventory, RelayLists};

/// Whether an identity source may be asked at `now`.
pub(crate) fn identity_source_admits(
    health: &RelayHealth,
    connected: bool,
    idle: bool,
    now: Instant,
) -> bool {
    connected && idle && !health.is_paused(PauseKind::Identity, now)
}

/// Whether a relay wanted only for participant discovery may be dialled at `now`.
pub(crate) fn discovery_dial_due(
    relay: &RelayUrl,
    health: &RelayHealth,
    mailboxes: &MailboxInventory,
    lists: &RelayLists,
    is_index_relay: bool,
    now: Instant,
) -> bool {
    let mailbox_pause = health.paused_until(PauseKind::Mailbox, now);
    if mailboxes.dial_due(relay, now, mailbox_pause) {
        return true;
    }
    is_index_relay
        && !health.is_paused(PauseKind::Identity, now)
        && lists.poll_timeout().is_some_and(|at| at <= now)
}

/// The relays in identity-discovery scope, and which left it since the last call.
#[derive(Debug, Default)]
pub(crate) struct IdentityScope {
    sources: BTreeSet<RelayUrl>,
}

impl IdentityScope {
    /// The scope is now `sources`; returns the relays that left it, whose identity backoff
    /// is to be retired.
    pub(crate) fn handle_scope(&mut self, sources: BTreeSet<RelayUrl>) -> Vec<RelayUrl> {
        let left = self.sources.difference(&sources).cloned().collect();
        self.sources = sources;
        left
    }
}
