//! Participants' own relays (NIP-65 outbox discovery) as pure, time-injected bookkeeping:
//! who takes part in our repositories (`Participants`), the newest kind-10002 relay list of
//! each and when to ask for it again (`RelayLists`), and which participant relays are probed
//! for our repositories' events, with each probe's rotating cursor (`MailboxInventory`).
//!
//! Nothing here opens a socket or reads a clock; the actor feeds it and turns its answers into
//! REQ+EOSE batches through the ordinary ledger and gates. Pauses after failed queries live in
//! each relay's `RelayHealth` (`PauseKind::Identity`, `PauseKind::Mailbox`).

mod admission;
mod mailbox;
mod participants;
mod relay_lists;

use std::time::Duration;

use grasp_sync_model::RelayUrl;

pub(crate) use self::admission::{IdentityScope, discovery_dial_due, identity_source_admits};
pub(crate) use self::mailbox::{MailboxCoverage, MailboxInventory};
pub(crate) use self::participants::Participants;
pub(crate) use self::relay_lists::RelayLists;

/// Participants remembered at most (10,000).
pub const DEFAULT_MAX_PARTICIPANTS: usize = 10_000;
/// Relays taken from one participant's relay list at most (8).
pub const DEFAULT_MAX_RELAYS_PER_PARTICIPANT: usize = 8;
/// Interval between two probes of one mailbox relay (15 min).
pub const DEFAULT_MAILBOX_PROBE_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// When a participant's relay list is asked for again once found (6 h).
pub const DEFAULT_RELAY_LIST_REFRESH: Duration = Duration::from_secs(6 * 3600);
/// When a participant without a known relay list is asked again (1 h).
pub const DEFAULT_RELAY_LIST_RETRY: Duration = Duration::from_secs(3600);
/// Inventory items (repositories and root events) one mailbox probe covers at most (256).
pub const DEFAULT_MAILBOX_PROBE_ITEMS: usize = 256;
/// Authors named by one identity-query filter at most (well under the 32 KB filter budget).
pub const IDENTITY_AUTHORS_PER_FILTER: usize = 256;
/// Repositories and root events one participant is remembered for at most.
pub const MAX_PARTICIPATIONS: usize = 256;

/// How participant relays are discovered and probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxConfig {
    /// Relays asked for participants' relay lists besides the connected repository relays
    /// (none by default).
    pub index_relays: Vec<RelayUrl>,
    /// Participants tracked at most; maintainers are kept before other authors.
    pub max_participants: usize,
    /// Relays taken from one participant's relay list at most.
    pub max_relays_per_participant: usize,
    /// Interval between two probes of one mailbox relay.
    pub mailbox_probe_interval: Duration,
    /// Inventory items (repositories and root events) one mailbox probe covers at most.
    pub mailbox_probe_items: usize,
    /// When a found relay list is asked for again.
    pub relay_list_refresh: Duration,
    /// When a participant without a known relay list is asked again.
    pub relay_list_retry: Duration,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            index_relays: Vec::new(),
            max_participants: DEFAULT_MAX_PARTICIPANTS,
            max_relays_per_participant: DEFAULT_MAX_RELAYS_PER_PARTICIPANT,
            mailbox_probe_interval: DEFAULT_MAILBOX_PROBE_INTERVAL,
            mailbox_probe_items: DEFAULT_MAILBOX_PROBE_ITEMS,
            relay_list_refresh: DEFAULT_RELAY_LIST_REFRESH,
            relay_list_retry: DEFAULT_RELAY_LIST_RETRY,
        }
    }
}

#[cfg(test)]
mod tests;
