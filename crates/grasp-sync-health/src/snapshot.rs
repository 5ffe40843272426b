//! [`HealthSnapshot`]: the metric values of one relay at one instant.

use std::time::Instant;

use crate::{HealthState, PauseKind, RefusalCounts};

/// One relay's metric values at one instant, from [`crate::RelayHealth::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// The health state.
    pub state: HealthState,
    /// `ngit_sync_relay_status`: 1 healthy, 2 disconnected, 3 degraded, 4 dead, 5 rate limited.
    pub status: u8,
    /// `ngit_sync_relay_failures`: consecutive connection failures.
    pub consecutive_failures: u32,
    /// Whether the relay is a bootstrap relay (never retired).
    pub is_bootstrap: bool,
    /// The earliest dial instant including pauses, `None` while connecting or connected.
    pub next_dial_at: Option<Instant>,
    /// The transport backoff deadline alone, `None` while connecting or connected.
    pub dial_backoff_until: Option<Instant>,
    /// Every active pause with its deadline, in [`PauseKind::ALL`] order.
    pub pauses: Vec<(PauseKind, Instant)>,
    /// Refusals seen, per category.
    pub refusals: RefusalCounts,
}
