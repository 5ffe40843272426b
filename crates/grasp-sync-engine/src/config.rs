//! Engine configuration: timings and limits, with the design's defaults.

use std::time::Duration;

use grasp_sync_health::HealthConfig;
use grasp_sync_model::{RelayUrl, TrackingBounds};

use crate::address::AddressPolicy;
use crate::dial::DialLimits;

/// How the engine behaves. `Default` gives the design's numbers.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The own relay's URL: never a sync target.
    pub own_relay: Option<RelayUrl>,
    /// Relays connected from the start and never retired.
    pub bootstrap_relays: Vec<RelayUrl>,
    /// Which discovered relays may be dialled.
    pub address_policy: AddressPolicy,
    /// How many relays announcements can make the engine track (256 in total, 16 hosts per
    /// announcement author).
    pub tracking: TrackingBounds,
    /// Root events remembered at most while they wait for their repository's announcement
    /// (100,000).
    pub max_waiting_roots: usize,
    /// Learned relay limits older than this are not restored at start, so they are learned
    /// again (7 days).
    pub learned_limits_max_age: Duration,
    /// When true (the default), a fresh-start batch of coverage the store barely holds (a first
    /// sync: fewer than 100 events of it before the relay's first complete historic sync in
    /// this run, none of it afterwards) goes by REQ+EOSE even on a relay that speaks NIP-77,
    /// which then reconciles only coverage the store holds. False reconciles every fresh-start
    /// batch by NIP-77.
    pub first_sync_by_req: bool,
    /// When true, during the first sync of a store new at start, on a relay that has not
    /// completed a historic sync yet, a batch's first historic page rides on the new live
    /// groups of its coverage: one REQ, sent with the page limit, fetches the history and stays
    /// open as the live tail; further pages are paced as usual. False (the default) sends live
    /// groups with `limit: 0` only and fetches history apart. True by default.
    pub live_first_page: bool,
    /// Self-feed batch window (the interval is not reset by events).
    pub batch_window: Duration,
    /// Purgatory reconciliation interval.
    pub purgatory_interval: Duration,
    /// Health, retry and metrics tick.
    pub health_tick: Duration,
    /// Wait before declaring historic sync complete once no batch is pending.
    pub completion_recheck: Duration,
    /// Connection workers.
    pub dial: DialLimits,
    /// Relay health and backoff.
    pub health: HealthConfig,
    /// Store calls in flight at once.
    pub ingest_in_flight: usize,
    /// Capacity of the actor's inbox from sessions (readers wait when it is full).
    pub session_inbox: usize,
    /// Seed for backoff jitter; `None` derives one from the clock at start.
    pub rng_seed: Option<u64>,
    /// Missing-event recovery timing and bound (30 s doubling to 15 min, 300 IDs, 12 attempts,
    /// 10,000 pending IDs per relay).
    pub recovery: crate::negentropy::RecoveryConfig,
    /// Core live subscriptions allowed above the irreducible baseline of the complete live
    /// set before live coverage is consolidated (70).
    pub consolidation_margin: usize,
    /// Interval of the paced historic catch-up for coverage a relay's byte cap keeps out of
    /// the live set (5 min; each query overlaps the previous by 1 min).
    pub catch_up_interval: Duration,
    /// Participants' relays: index relays, bounds and cadences of identity discovery and
    /// mailbox probes.
    pub outbox: crate::outbox::OutboxConfig,
}

/// How long learned relay limits are restored after they were learned.
pub const DEFAULT_LEARNED_LIMITS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Core live subscriptions allowed above the irreducible live baseline before consolidation.
pub const CONSOLIDATION_MARGIN: usize = 70;

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            own_relay: None,
            bootstrap_relays: Vec::new(),
            address_policy: AddressPolicy::default(),
            tracking: TrackingBounds::default(),
            max_waiting_roots: grasp_sync_model::DEFAULT_MAX_WAITING_ROOTS,
            learned_limits_max_age: DEFAULT_LEARNED_LIMITS_MAX_AGE,
            first_sync_by_req: true,
            live_first_page: true,
            batch_window: Duration::from_secs(5),
            purgatory_interval: Duration::from_secs(5),
            health_tick: Duration::from_secs(2),
            completion_recheck: Duration::from_secs(6),
            dial: DialLimits::default(),
            health: HealthConfig::default(),
            ingest_in_flight: 1024,
            session_inbox: 8192,
            rng_seed: None,
            recovery: crate::negentropy::RecoveryConfig::default(),
            consolidation_margin: CONSOLIDATION_MARGIN,
            catch_up_interval: grasp_sync_ledger::CATCH_UP_INTERVAL,
            outbox: crate::outbox::OutboxConfig::default(),
        }
    }
}
