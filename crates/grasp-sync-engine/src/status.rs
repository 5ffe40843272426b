//! A snapshot of the engine for operators (`/status`), tests and the demo: per relay, the
//! connection and health state, ledger use, pending batches, traffic (requests, events and
//! bytes) and refusals. It reads back from its JSON form, for clients of `/status`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole engine at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineStatus {
    /// Repositories in the sync index.
    pub repos_tracked: usize,
    /// Root events in the sync index.
    pub root_events_tracked: usize,
    /// Per relay, by normalised URL.
    pub relays: BTreeMap<String, RelayStatus>,
    /// NIP-77 rounds and fallbacks, and missing-event recovery.
    pub negentropy: NegentropyStatus,
    /// Relays refused by the address policy, by `stage:reason` (`discovery:internal`,
    /// `dial:internal`, `discovery:denied`, ...); each relay counts once.
    pub address_refusals: BTreeMap<String, u64>,
    /// The tracking bounds and what they leave out now.
    pub tracking: TrackingStatus,
    /// Participants of the tracked repositories, their relay lists and mailbox probes.
    pub participants: ParticipantStatus,
    /// The own store's rejected-events index: how full its tiers are and how often their
    /// bounds made it forget an entry; `None` for a store without one.
    pub rejected_index: Option<crate::store::RejectedUsage>,
    /// Announcements held in purgatory for their git data; `None` without a purgatory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purgatory: Option<crate::store::PurgatoryStats>,
}

/// The tracking bounds ([`TrackingBounds`](grasp_sync_model::TrackingBounds)) in force and
/// what they leave out of the current targets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrackingStatus {
    /// Relays tracked at most.
    pub max_tracked_relays: usize,
    /// Relay hosts one author's repositories may name.
    pub max_relay_hosts_per_author: usize,
    /// Relays announcements name beyond the total cap.
    pub relays_over_cap: usize,
    /// (repository, relay) pairs beyond their author's host cap.
    pub author_relays_dropped: usize,
    /// This daemon's shard, `INDEX/COUNT` (`0/1` without sharding).
    pub shard: String,
    /// Relays announcements name that another shard syncs (not left out: that shard
    /// tracks them).
    pub other_shards: usize,
    /// Root events remembered at most while they wait for their repository
    /// (`max_waiting_roots`).
    pub max_waiting_roots: usize,
    /// Root events remembered now while they wait for their repository.
    pub waiting_roots: usize,
    /// Root events not remembered while waiting for their repository, because
    /// `max_waiting_roots` were.
    pub waiting_roots_dropped: u64,
    /// Pending missing-event recovery IDs one relay may hold (`max_recovery_ids_per_relay`);
    /// the IDs past it count as expired in `negentropy`.
    pub max_recovery_ids_per_relay: usize,
}

/// Participant discovery: who takes part in the tracked repositories, their NIP-65 relay
/// lists, and the mailbox relays probed for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParticipantStatus {
    /// Participants tracked at most (`max_participants`).
    pub max_participants: usize,
    /// Participants tracked now.
    pub participants: usize,
    /// Participants turned away by the cap since start.
    pub participants_dropped: u64,
    /// Relays taken from one participant's list at most (`max_relays_per_participant`).
    pub max_relays_per_participant: usize,
    /// Participants whose relay list is known.
    pub relay_lists: usize,
    /// Relay lists received that replaced what was known, since start.
    pub relay_lists_received: u64,
    /// Index relays configured (`index_relays`).
    pub index_relays: usize,
    /// Relays probed as participants' mailboxes now.
    pub mailbox_relays: usize,
    /// Interval between two probes of one mailbox relay, in seconds.
    pub mailbox_probe_interval_secs: u64,
    /// Identity queries (kind 10002) started since start.
    pub identity_queries: u64,
    /// Identity queries failed since start.
    pub identity_failures: u64,
    /// Mailbox probes started since start.
    pub mailbox_probes: u64,
    /// Mailbox probes failed since start.
    pub mailbox_failures: u64,
    /// Relays whose identity discovery is paused now.
    pub identity_paused_relays: usize,
    /// Relays whose mailbox probes are paused now.
    pub mailbox_paused_relays: usize,
}

/// NIP-77 activity over the engine's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NegentropyStatus {
    /// Rounds started.
    pub rounds_started: u64,
    /// Rounds that produced a diff.
    pub rounds_completed: u64,
    /// Fallbacks to REQ+EOSE, by reason.
    pub fallbacks: BTreeMap<String, u64>,
    /// IDs waiting for missing-event recovery now.
    pub recovery_pending_ids: u64,
    /// IDs recovered.
    pub recovered_ids: u64,
    /// IDs given up after twelve attempts without progress.
    pub expired_ids: u64,
    /// Per relay (by normalised URL), whether it speaks NIP-77 as far as the engine knows.
    pub relays: BTreeMap<String, RelayNip77Status>,
}

/// What the engine knows about one relay's NIP-77 support.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayNip77Status {
    /// `unknown` (the next round probes), `probing`, `supported` or `unsupported`.
    pub support: String,
    /// Why NIP-77 is not used: `nip11_not_listed` (its NIP-11 `supported_nips` leaves 77
    /// out), `unsupported` (it answered a NEG-OPEN as an unknown verb) or `no_answer` (its
    /// probe got no answer in time).
    pub reason: Option<String>,
    /// Seconds until new connections ask it again (an `unsupported` or `no_answer` verdict is
    /// kept for a day, or until the next daily reconciliation).
    pub reprobe_in_secs: Option<u64>,
}

impl EngineStatus {
    /// Sum of REQ starts over every relay.
    pub fn total_req_starts(&self) -> u64 {
        self.relays
            .values()
            .map(|r| r.req_starts_live + r.req_starts_historic)
            .sum()
    }

    /// Text-frame bytes sent to and received from every relay tracked now.
    pub fn total_wire_bytes(&self) -> crate::transport::WireBytes {
        self.relays
            .values()
            .fold(crate::transport::WireBytes::default(), |sum, r| {
                sum + crate::transport::WireBytes {
                    sent: r.bytes_sent,
                    received: r.bytes_received,
                }
            })
    }

    /// Sum of refusals over every relay.
    pub fn total_refusals(&self) -> u64 {
        self.relays.values().flat_map(|r| r.refusals.values()).sum()
    }
}

/// One relay at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayStatus {
    /// Connection lifecycle: disconnected, connecting, syncing, connected,
    /// connected_historic_sync_failures.
    pub connection: String,
    /// Health state name.
    pub health: String,
    /// Consecutive connection failures.
    pub consecutive_failures: u32,
    /// Whether the relay is a bootstrap relay.
    pub bootstrap: bool,
    /// Subscription budget of the current session (0 when disconnected).
    pub subscription_budget: usize,
    /// Live subscriptions held now (core and auxiliary).
    pub live_subscriptions: usize,
    /// Of those, auxiliary (descendant) live subscriptions.
    pub auxiliary_subscriptions: usize,
    /// Extra connections open now, holding the essential live coverage the session's budget
    /// cannot (at most three).
    pub extra_connections: usize,
    /// Live subscriptions held on the extra connections (not counted in `live_subscriptions`).
    pub extra_live_subscriptions: usize,
    /// Transient subscriptions held now.
    pub transient_subscriptions: usize,
    /// Negentropy rounds running now.
    pub negentropy_rounds: usize,
    /// Starts (REQs and negentropy rounds) waiting for a slot or a gate.
    pub queued_starts: usize,
    /// Most subscriptions held at once over the engine's life.
    pub peak_subscriptions: usize,
    /// Ledger permits held now, by class.
    pub ledger: BTreeMap<String, usize>,
    /// Historic batches in flight.
    pub pending_batches: usize,
    /// Repositories confirmed for this relay.
    pub confirmed_repos: usize,
    /// Root events confirmed for this relay.
    pub confirmed_root_events: usize,
    /// Live REQs sent over the engine's life.
    pub req_starts_live: u64,
    /// Historic, pagination and fetch REQs sent over the engine's life.
    pub req_starts_historic: u64,
    /// Events delivered by this relay (raw, before dedup).
    pub events_received: u64,
    /// Bytes of the client messages sent to this relay since it was first tracked: the
    /// WebSocket text frames (REQ, CLOSE, NEG-*, AUTH, EVENT) of every session, not the
    /// NIP-11 fetch nor control frames.
    pub bytes_sent: u64,
    /// Bytes of the relay messages received from this relay since it was first tracked (the
    /// text frames of every session: EVENT, EOSE, CLOSED, NOTICE, OK, AUTH, NEG-*).
    pub bytes_received: u64,
    /// Events from this relay newly saved.
    pub events_saved: u64,
    /// Events from this relay already stored.
    pub events_duplicate: u64,
    /// Events from this relay refused by the store.
    pub events_rejected: u64,
    /// Events from this relay the store failed to save.
    pub events_unsaved: u64,
    /// Historic batches of this relay left incomplete because the store failed to save some
    /// of their events (abandoned and retried, never confirmed).
    pub history_unsaved: u64,
    /// Refusals by category.
    pub refusals: BTreeMap<String, u64>,
    /// Refusals answering subscriptions already retired (ignored: they teach nothing).
    pub stale_refusals: u64,
    /// Successful connections of the session (extra live connections are not counted).
    pub connections: u64,
    /// Reconnects within 15 minutes of a disconnect (confirmed state kept).
    pub quick_reconnects: u64,
    /// Reconnects after longer than 15 minutes (fresh start).
    pub long_reconnects: u64,
    /// Daily reconciliations run.
    pub daily_reconciliations: u64,
    /// Live coverage rebuilds that bounded fragmentation (consolidations).
    pub consolidations: u64,
    /// Refused filters paused by policy, waiting for their recovery probe.
    pub paused_filters: usize,
    /// NIP-42 on the current session: `unchallenged`, `authenticating`, `authenticated` or
    /// `failed`; empty while not connected.
    #[serde(default)]
    pub auth: String,
    /// Filters no live subscription holds (left out by the relay's byte cap, or by every
    /// connection's budget), fetched by paced catch-up.
    pub catch_up_filters: usize,
    /// Catch-up queries started.
    pub catch_ups: u64,
    /// Historic filter parts this relay could not page through (one second of one value and
    /// kind holding more than a page); their batches were left incomplete and retried.
    pub history_truncated: u64,
    /// Paging quirks the current or last session showed: `oldest_first`, `exclusive_until`,
    /// `cap_per_request`.
    pub quirks: Vec<String>,
    /// The last error or refusal text, if any.
    pub last_error: Option<String>,
}
