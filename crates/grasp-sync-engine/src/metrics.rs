//! The engine's metrics, recorded through opentelemetry with the `grasp_sync_` prefix.
//!
//! The per-relay gauges and the per-relay byte counter carry a `relay` label (the normalised
//! URL). They are observed: each collection reports the relays of the engine's last health
//! tick, so a retired relay's series disappear with it, and the series are bounded by the
//! tracked relays (`max_tracked_relays`).
//! Every other metric is labelled by class, category, stage or reason only: at most
//! [`MAX_LABEL_SETS`] label sets each, so a meter provider can size its per-instrument tables
//! by [`PER_RELAY_INSTRUMENTS`] (see the daemon's `MetricsRegistry`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Meter, ObservableCounter, ObservableGauge};

/// The instruments with a `relay` label: as many label sets as tracked relays (the byte
/// counter two per relay).
pub const PER_RELAY_INSTRUMENTS: [&str; 6] = [
    RELAY_CONNECTED,
    RELAY_STATUS,
    RELAY_FAILURES,
    RELAY_CONNECTIONS,
    RELAY_LIVE_SUBSCRIPTIONS,
    RELAY_BYTES,
];

/// The most label sets any other instrument records, with room to spare: the largest, the
/// refusals by category, has 14.
pub const MAX_LABEL_SETS: usize = 64;

const RELAY_CONNECTED: &str = "grasp_sync_relay_connected";
const RELAY_STATUS: &str = "grasp_sync_relay_status";
const RELAY_FAILURES: &str = "grasp_sync_relay_failures";
const RELAY_CONNECTIONS: &str = "grasp_sync_relay_connections";
const RELAY_LIVE_SUBSCRIPTIONS: &str = "grasp_sync_relay_live_subscriptions";
const RELAY_BYTES: &str = "grasp_sync_relay_bytes_total";

/// One relay's gauges at the last health tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReading {
    /// Connection lifecycle (`grasp_sync_relay_connected`).
    pub connected: u64,
    /// Health (`grasp_sync_relay_status`).
    pub status: u64,
    /// Consecutive connection failures (`grasp_sync_relay_failures`).
    pub failures: u64,
    /// Connections open now, the session and its extra live connections
    /// (`grasp_sync_relay_connections`).
    pub connections: u64,
    /// Live subscriptions held now over every connection (`grasp_sync_relay_live_subscriptions`).
    pub live_subscriptions: u64,
    /// Text-frame bytes sent and received since the relay was first tracked
    /// (`grasp_sync_relay_bytes_total`).
    pub wire: crate::transport::WireBytes,
}

/// The tracked relays' readings, read by the observed gauges at each collection.
type Readings = Arc<Mutex<BTreeMap<String, RelayReading>>>;

/// Every instrument the engine records.
#[derive(Debug, Clone)]
pub struct SyncMetrics {
    readings: Readings,
    _relay_gauges: Arc<[ObservableGauge<u64>; 5]>,
    _relay_bytes: Arc<ObservableCounter<u64>>,
    connection_attempts: Counter<u64>,
    events_synced: Counter<u64>,
    relays_tracked: Gauge<u64>,
    relays_connected: Gauge<u64>,
    relays_dead: Gauge<u64>,
    ledger_slots: Gauge<u64>,
    refusals: Counter<u64>,
    pending_batches: Gauge<u64>,
    req_starts: Counter<u64>,
    reconnects: Counter<u64>,
    negentropy_rounds: Gauge<u64>,
    negentropy_fallbacks: Gauge<u64>,
    recovery_ids: Gauge<u64>,
    history_truncated: Counter<u64>,
    quirks_learned: Counter<u64>,
    write_failures: Counter<u64>,
    address_refusals: Counter<u64>,
    untracked: Gauge<u64>,
    other_shards: Gauge<u64>,
    waiting_roots: Gauge<u64>,
    participants: Gauge<u64>,
    participant_discovery: Gauge<u64>,
    rejected_entries: Gauge<u64>,
    rejected_evictions: Counter<u64>,
    /// Evictions already counted (hot, cold): the store reports totals, the counter adds.
    rejected_evicted: Arc<Mutex<(u64, u64)>>,
}

impl SyncMetrics {
    /// Creates the instruments on `meter`.
    pub fn new(meter: &Meter) -> Self {
        let readings = Readings::default();
        let observed = |name: &'static str,
                        description: &'static str,
                        pick: fn(&RelayReading) -> u64| {
            let readings = Arc::clone(&readings);
            meter
                .u64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |observer| {
                    let readings = readings.lock().unwrap_or_else(PoisonError::into_inner);
                    for (relay, reading) in readings.iter() {
                        observer.observe(pick(reading), &[KeyValue::new("relay", relay.clone())]);
                    }
                })
                .build()
        };
        let relay_gauges = [
            observed(
                RELAY_CONNECTED,
                "connection status per relay: 0 disconnected, 1 connecting, 2 syncing, 3 connected, 4 connected with historic sync failures",
                |reading| reading.connected,
            ),
            observed(
                RELAY_STATUS,
                "health per relay: 1 healthy, 2 disconnected, 3 degraded, 4 dead, 5 rate limited",
                |reading| reading.status,
            ),
            observed(
                RELAY_FAILURES,
                "consecutive connection failures per relay",
                |reading| reading.failures,
            ),
            observed(
                RELAY_CONNECTIONS,
                "connections open per relay: the session and the extra connections that hold live coverage one connection's budget cannot",
                |reading| reading.connections,
            ),
            observed(
                RELAY_LIVE_SUBSCRIPTIONS,
                "live subscriptions held per relay, over every connection",
                |reading| reading.live_subscriptions,
            ),
        ];
        let relay_bytes = {
            let readings = Arc::clone(&readings);
            meter
                .u64_observable_counter(RELAY_BYTES)
                .with_description("bytes of WebSocket text frames (the client and relay messages) per relay since it was first tracked, by direction (sent, received)")
                .with_callback(move |observer| {
                    let readings = readings.lock().unwrap_or_else(PoisonError::into_inner);
                    for (relay, reading) in readings.iter() {
                        for (direction, bytes) in
                            [("sent", reading.wire.sent), ("received", reading.wire.received)]
                        {
                            observer.observe(
                                bytes,
                                &[
                                    KeyValue::new("relay", relay.clone()),
                                    KeyValue::new("direction", direction),
                                ],
                            );
                        }
                    }
                })
                .build()
        };
        Self {
            readings,
            _relay_gauges: Arc::new(relay_gauges),
            _relay_bytes: Arc::new(relay_bytes),
            connection_attempts: meter
                .u64_counter("grasp_sync_connection_attempts_total")
                .with_description("connection attempts by result")
                .build(),
            events_synced: meter
                .u64_counter("grasp_sync_events_synced_total")
                .with_description("events newly saved by sync (not duplicates, not rejected)")
                .build(),
            relays_tracked: meter
                .u64_gauge("grasp_sync_relays_tracked_total")
                .with_description("relays discovered and tracked")
                .build(),
            relays_connected: meter
                .u64_gauge("grasp_sync_relays_connected_total")
                .with_description("relays currently connected")
                .build(),
            relays_dead: meter
                .u64_gauge("grasp_sync_relays_dead_total")
                .with_description("relays marked dead")
                .build(),
            ledger_slots: meter
                .u64_gauge("grasp_sync_ledger_slots_in_use")
                .with_description("subscription slots held across relays, by class")
                .build(),
            refusals: meter
                .u64_counter("grasp_sync_refusals_total")
                .with_description("relay refusals by category")
                .build(),
            pending_batches: meter
                .u64_gauge("grasp_sync_pending_batches")
                .with_description("historic batches in flight across relays")
                .build(),
            req_starts: meter
                .u64_counter("grasp_sync_req_starts_total")
                .with_description("REQ messages sent, by kind (live or historic)")
                .build(),
            negentropy_rounds: meter
                .u64_gauge("grasp_sync_negentropy_rounds")
                .with_description("NIP-77 rounds since start, by state (started, completed)")
                .build(),
            negentropy_fallbacks: meter
                .u64_gauge("grasp_sync_negentropy_fallbacks")
                .with_description("fallbacks from NIP-77 to REQ+EOSE since start, by reason")
                .build(),
            recovery_ids: meter
                .u64_gauge("grasp_sync_recovery_ids")
                .with_description("missing-event recovery: IDs pending now, recovered and expired since start")
                .build(),
            history_truncated: meter
                .u64_counter("grasp_sync_history_truncated_total")
                .with_description("historic filter parts a relay could not page through (one second of one value and kind over its page size); their batches stay incomplete")
                .build(),
            quirks_learned: meter
                .u64_counter("grasp_sync_relay_quirks_learned_total")
                .with_description("relay sessions that showed a paging quirk, by quirk (oldest_first, exclusive_until, cap_per_request)")
                .build(),
            write_failures: meter
                .u64_counter("grasp_sync_store_write_failures_total")
                .with_description("synced events the own store failed to save, by reason (backend, closed, full)")
                .build(),
            untracked: meter
                .u64_gauge("grasp_sync_relays_untracked")
                .with_description("what the tracking bounds leave out: relays over the total cap (reason over_cap), repository-relay pairs beyond their author's host cap (reason author_hosts)")
                .build(),
            other_shards: meter
                .u64_gauge("grasp_sync_relays_other_shards")
                .with_description("relays announcements name that another shard of the deployment syncs (0 without sharding)")
                .build(),
            waiting_roots: meter
                .u64_gauge("grasp_sync_waiting_roots")
                .with_description("root events whose repository is not tracked yet: remembered now (state waiting), and not remembered since start because max_waiting_roots were (state dropped)")
                .build(),
            participants: meter
                .u64_gauge("grasp_sync_participants")
                .with_description("participants of tracked repositories: tracked now (state tracked), turned away by max_participants since start (state dropped), with a known NIP-65 relay list (state with_relay_list), and their relays probed as mailboxes (state mailbox_relays)")
                .build(),
            participant_discovery: meter
                .u64_gauge("grasp_sync_participant_discovery")
                .with_description("participant discovery since start, by kind (identity: kind-10002 queries; mailbox: mailbox probes) and outcome (started, failed)")
                .build(),
            address_refusals: meter
                .u64_counter("grasp_sync_address_refusals_total")
                .with_description("relays refused by the address policy, by stage (discovery: by URL; dial: by resolved address) and reason (internal, denied)")
                .build(),
            reconnects: meter
                .u64_counter("grasp_sync_reconnects_total")
                .with_description(format!(
                    "reconnections after a disconnect longer than {} minutes",
                    grasp_sync_model::relay_index::STATE_RETENTION_SECS / 60
                ))
                .build(),
            rejected_entries: meter
                .u64_gauge("grasp_sync_rejected_index_entries")
                .with_description("entries in the own store's rejected-events index, by tier (hot: full events, cold: IDs)")
                .build(),
            rejected_evictions: meter
                .u64_counter("grasp_sync_rejected_index_evictions_total")
                .with_description("rejected-events index entries forgotten before their lifetime ended because the tier was full, by tier (hot, cold)")
                .build(),
            rejected_evicted: Arc::default(),
        }
    }

    /// The tracked relays' gauges: replaces the last readings, so a relay left out (retired)
    /// has no series from the next collection on.
    pub fn record_relays(&self, readings: BTreeMap<String, RelayReading>) {
        *self.readings.lock().unwrap_or_else(PoisonError::into_inner) = readings;
    }

    /// The rejected-events index's fill and its evictions (totals since the store opened).
    /// Returns the cold-tier evictions not counted before.
    pub fn record_rejected_index(&self, usage: &crate::store::RejectedUsage) -> u64 {
        let tier = |name: &'static str| [KeyValue::new("tier", name)];
        self.rejected_entries
            .record(usage.hot_events as u64, &tier("hot"));
        self.rejected_entries
            .record(usage.cold_ids as u64, &tier("cold"));
        let mut counted = self
            .rejected_evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.rejected_evictions
            .add(usage.hot_evicted.saturating_sub(counted.0), &tier("hot"));
        let cold = usage.cold_evicted.saturating_sub(counted.1);
        self.rejected_evictions.add(cold, &tier("cold"));
        *counted = (
            counted.0.max(usage.hot_evicted),
            counted.1.max(usage.cold_evicted),
        );
        cold
    }

    /// One connection attempt's result.
    pub fn record_attempt(&self, success: bool) {
        let result = if success { "success" } else { "failure" };
        self.connection_attempts
            .add(1, &[KeyValue::new("result", result)]);
    }

    /// Newly saved events.
    pub fn record_synced(&self, count: u64) {
        self.events_synced.add(count, &[]);
    }

    /// Relay totals.
    pub fn record_totals(&self, tracked: u64, connected: u64, dead: u64, pending_batches: u64) {
        self.relays_tracked.record(tracked, &[]);
        self.relays_connected.record(connected, &[]);
        self.relays_dead.record(dead, &[]);
        self.pending_batches.record(pending_batches, &[]);
    }

    /// Root events waiting for their repository now, and those dropped at the cap since start.
    pub fn record_waiting_roots(&self, waiting: u64, dropped: u64) {
        self.waiting_roots
            .record(waiting, &[KeyValue::new("state", "waiting")]);
        self.waiting_roots
            .record(dropped, &[KeyValue::new("state", "dropped")]);
    }

    /// Participants and their relays now ([`ParticipantStatus`](crate::status::ParticipantStatus)).
    pub fn record_participants(&self, status: &crate::status::ParticipantStatus) {
        for (state, value) in [
            ("tracked", status.participants as u64),
            ("dropped", status.participants_dropped),
            ("with_relay_list", status.relay_lists as u64),
            ("mailbox_relays", status.mailbox_relays as u64),
        ] {
            self.participants
                .record(value, &[KeyValue::new("state", state)]);
        }
        for (kind, outcome, value) in [
            ("identity", "started", status.identity_queries),
            ("identity", "failed", status.identity_failures),
            ("mailbox", "started", status.mailbox_probes),
            ("mailbox", "failed", status.mailbox_failures),
        ] {
            self.participant_discovery.record(
                value,
                &[
                    KeyValue::new("kind", kind),
                    KeyValue::new("outcome", outcome),
                ],
            );
        }
    }

    /// What the tracking bounds leave out now.
    pub fn record_untracked(&self, over_cap: u64, author_pairs: u64) {
        self.untracked
            .record(over_cap, &[KeyValue::new("reason", "over_cap")]);
        self.untracked
            .record(author_pairs, &[KeyValue::new("reason", "author_hosts")]);
    }

    /// Relays another shard syncs, now.
    pub fn record_other_shards(&self, relays: u64) {
        self.other_shards.record(relays, &[]);
    }

    /// Slots in use for one ledger class, summed over relays.
    pub fn record_ledger_class(&self, class: &'static str, slots: u64) {
        self.ledger_slots
            .record(slots, &[KeyValue::new("class", class)]);
    }

    /// One refusal.
    pub fn record_refusal(&self, category: &'static str) {
        self.refusals.add(1, &[KeyValue::new("category", category)]);
    }

    /// Historic filter parts found truncated.
    pub fn record_truncated(&self, parts: u64) {
        self.history_truncated.add(parts, &[]);
    }

    /// One session that showed a paging quirk (a bounded label).
    pub fn record_quirk(&self, quirk: &'static str) {
        self.quirks_learned.add(1, &[KeyValue::new("quirk", quirk)]);
    }

    /// One relay refused by the address policy, at discovery or at dial time (bounded labels).
    pub fn record_address_refusal(&self, stage: &'static str, reason: &'static str) {
        self.address_refusals.add(
            1,
            &[
                KeyValue::new("stage", stage),
                KeyValue::new("reason", reason),
            ],
        );
    }

    /// One synced event the store failed to save (a bounded label).
    pub fn record_write_failure(&self, reason: &'static str) {
        self.write_failures
            .add(1, &[KeyValue::new("reason", reason)]);
    }

    /// One REQ sent.
    pub fn record_req(&self, kind: &'static str) {
        self.req_starts.add(1, &[KeyValue::new("kind", kind)]);
    }

    /// One reconnect of the given kind.
    pub fn record_reconnect(&self, kind: &'static str) {
        self.reconnects.add(1, &[KeyValue::new("kind", kind)]);
    }

    /// NIP-77 activity since start.
    pub fn record_negentropy(&self, status: &crate::status::NegentropyStatus) {
        self.negentropy_rounds
            .record(status.rounds_started, &[KeyValue::new("state", "started")]);
        self.negentropy_rounds.record(
            status.rounds_completed,
            &[KeyValue::new("state", "completed")],
        );
        for (reason, count) in &status.fallbacks {
            self.negentropy_fallbacks
                .record(*count, &[KeyValue::new("reason", reason.clone())]);
        }
        self.recovery_ids.record(
            status.recovery_pending_ids,
            &[KeyValue::new("state", "pending")],
        );
        self.recovery_ids
            .record(status.recovered_ids, &[KeyValue::new("state", "recovered")]);
        self.recovery_ids
            .record(status.expired_ids, &[KeyValue::new("state", "expired")]);
    }
}
