//! [`HealthState`]: the health labels reported to operators, and their metric values.

/// A relay's health as reported to operators and the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthState {
    /// Connected, no recent failures, or past the stability period after recovering.
    Healthy,
    /// Not connected, with no failure streak.
    Disconnected,
    /// Failing to connect, or reconnected but still inside the stability period.
    Degraded,
    /// 24 h or more of continuous failure; one attempt per 24 h.
    Dead,
    /// A rate, policy or request pause is active.
    RateLimited,
    /// Connected, every sync pause has expired, and the recovery probe has not yet succeeded.
    Probing,
}

impl HealthState {
    /// The `ngit_sync_relay_status` value: 1 healthy, 2 disconnected, 3 degraded, 4 dead,
    /// 5 rate limited. Probing reports 5: the relay is still inside its pause episode.
    pub fn metric_value(self) -> u8 {
        match self {
            HealthState::Healthy => 1,
            HealthState::Disconnected => 2,
            HealthState::Degraded => 3,
            HealthState::Dead => 4,
            HealthState::RateLimited | HealthState::Probing => 5,
        }
    }
}
