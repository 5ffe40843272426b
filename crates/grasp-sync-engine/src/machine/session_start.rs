//! How a new session of a relay starts: the 15-minute rule that picks a fresh start or a quick
//! reconnect, the overlap a quick reconnect reaches back by, the daily reconciliation's window,
//! and the subscription budget a session opens with.

use std::time::{Duration, Instant};

use grasp_sync_ledger::SessionBudget;
use grasp_sync_model::RelayState;
use nostr::Timestamp;

#[cfg(test)]
mod tests;

/// Overlap subtracted from the last connection time for a quick reconnect's `since`.
pub const RECONNECT_OVERLAP: Duration = Duration::from_secs(60);

/// The daily reconciliation runs at a random point between these after the last one.
pub const DAILY_MIN: Duration = Duration::from_secs(23 * 3600);
/// See [`DAILY_MIN`].
pub const DAILY_MAX: Duration = Duration::from_secs(25 * 3600);

/// Smallest subscription budget worth learning: one live group, one transient slot and the
/// two-slot margin.
pub const MIN_LEARNED_SLOTS: usize = 4;

/// The subscription budget a "too many subscriptions" refusal teaches, if it is below the
/// `current` one: the `held` subscriptions the relay held when it refused, at least
/// [`MIN_LEARNED_SLOTS`]. A refusal never raises the budget.
pub fn budget_taught_by_refusal(current: usize, held: usize) -> Option<usize> {
    let learned = held.max(MIN_LEARNED_SLOTS);
    (learned < current).then_some(learned)
}

/// How a new session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStart {
    /// Never connected before (or state already forgotten): fresh start.
    First,
    /// Disconnected at most 15 minutes ago: keep confirmed state, catch up from `since`.
    Quick {
        /// The last connection, less [`RECONNECT_OVERLAP`].
        since: Timestamp,
    },
    /// Disconnected longer: the state is too stale to trust; fresh start.
    Long,
}

impl SessionStart {
    /// The start a session of a relay gets at `now`, from what the relay's sync state says of
    /// its previous session (`None`: the relay was never tracked).
    pub fn for_relay(state: Option<&RelayState>, now: Timestamp) -> Self {
        let Some(state) = state else {
            return SessionStart::First;
        };
        match (state.last_connected, state.disconnected_at) {
            (Some(last_connected), Some(_)) if !state.should_clear_state(now) => {
                SessionStart::Quick {
                    since: reconnect_since(last_connected),
                }
            }
            (Some(_), Some(_)) => SessionStart::Long,
            _ => SessionStart::First,
        }
    }
}

/// Where a catch-up after a session's coverage was lost, last connected at `last_connected`,
/// starts from: [`RECONNECT_OVERLAP`] before it.
pub fn reconnect_since(last_connected: Timestamp) -> Timestamp {
    Timestamp::from_secs(
        last_connected
            .as_secs()
            .saturating_sub(RECONNECT_OVERLAP.as_secs()),
    )
}

/// When the next daily reconciliation is due, from `now`: [`DAILY_MIN`] plus `draw(spread)`
/// seconds, where `draw` picks uniformly from `0..spread` and `spread` is the window's width
/// (so relays reconciled together drift apart).
pub fn daily_deadline(now: Instant, draw: impl FnOnce(u64) -> u64) -> Instant {
    let spread = DAILY_MAX.saturating_sub(DAILY_MIN).as_secs().max(1);
    let offset = draw(spread).min(spread - 1);
    now + DAILY_MIN + Duration::from_secs(offset)
}

/// The budget of a new session: the advertised value, lowered to what the relay taught us.
pub fn session_budget(advertised: Option<u32>, learned: Option<usize>) -> SessionBudget {
    let advertised = SessionBudget::from_nip11(advertised);
    match learned {
        Some(slots) if slots < advertised.slots() => SessionBudget::from_slots(slots),
        _ => advertised,
    }
}
