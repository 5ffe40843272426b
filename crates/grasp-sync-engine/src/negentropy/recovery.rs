//! [`MissingEventRecovery`]: the per-relay index of event IDs a relay advertised in a failed
//! batch but never delivered, retried in the background with bounded, backed-off attempts.
//!
//! Rules: attempts per relay back off from 30 s, doubling to 15 min; one attempt in flight per
//! relay; at most 300 IDs per attempt, taken in turn so every pending ID gets tried. An attempt
//! that recovers anything clears exactly the recovered IDs and resets the backoff. A failed
//! batch whose IDs are already pending merges into the pending set. IDs the engine obtains any
//! other way are cleared without an attempt. Twelve consecutive attempts without progress drop
//! the relay's pending IDs with a reported expiry. A disconnected relay gets no attempts, and
//! neither the wait nor a lost in-flight attempt counts against it. A relay whose pending IDs
//! are all recovered, with no unrelated batch failure since its historic sync began, is reported
//! for promotion back to connected.
//!
//! Bounds (the IDs are advertised by remote relays): a relay holds at most
//! [`RecoveryConfig::max_pending_per_relay`] pending IDs, and the IDs past the cap are dropped
//! with a reported expiry; a retired relay's state is forgotten ([`MissingEventRecovery::
//! handle_retired`]). So the index holds at most the cap times the tracked relays.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::time::{Duration, Instant};

use grasp_sync_filters::{FilterBudget, FilterError, TieredFilter, exact_id_filters};
use grasp_sync_model::RelayUrl;
use nostr::EventId;

/// Tuning of missing-event recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// Wait before a relay's first attempt, and after an attempt that made progress.
    pub base_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
    /// Most IDs one attempt asks for.
    pub max_ids_per_attempt: usize,
    /// Consecutive attempts without progress after which a relay's pending IDs are dropped.
    pub max_zero_progress_attempts: u32,
    /// Pending IDs one relay may hold; more are dropped with an expiry.
    pub max_pending_per_relay: usize,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            base_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(15 * 60),
            max_ids_per_attempt: 300,
            max_zero_progress_attempts: 12,
            max_pending_per_relay: 10_000,
        }
    }
}

/// An exact-ID fetch to send: ask `relay` for `ids`, then report with
/// [`MissingEventRecovery::handle_attempt_result`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryAttempt {
    /// The relay to ask.
    pub relay: RelayUrl,
    /// The IDs to ask for (sorted, at most [`RecoveryConfig::max_ids_per_attempt`]).
    pub ids: Vec<EventId>,
}

impl RecoveryAttempt {
    /// The exact-ID filters for the attempt (one, unless `budget` is tighter than 300 IDs).
    pub fn filters(&self, budget: &FilterBudget) -> Result<Vec<TieredFilter>, FilterError> {
        exact_id_filters(&self.ids, budget)
    }
}

/// A relay's pending IDs dropped after too many attempts without progress: warn once; the relay
/// stays in its historic-sync-failures state until the next full sync rediscovers the gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryExpiry {
    /// The relay.
    pub relay: RelayUrl,
    /// The IDs dropped (sorted).
    pub ids: Vec<EventId>,
}

/// The per-relay missing-event recovery index.
#[derive(Debug, Clone)]
pub struct MissingEventRecovery {
    config: RecoveryConfig,
    relays: BTreeMap<RelayUrl, RelayRecovery>,
    offline: BTreeSet<RelayUrl>,
    unrelated_failures: BTreeSet<RelayUrl>,
    promotions: VecDeque<RelayUrl>,
    expiries: VecDeque<RecoveryExpiry>,
    recovered: u64,
    expired: u64,
}

impl Default for MissingEventRecovery {
    fn default() -> Self {
        Self::new(RecoveryConfig::default())
    }
}

impl MissingEventRecovery {
    /// An empty index.
    pub fn new(config: RecoveryConfig) -> Self {
        Self {
            config,
            relays: BTreeMap::new(),
            offline: BTreeSet::new(),
            unrelated_failures: BTreeSet::new(),
            promotions: VecDeque::new(),
            expiries: VecDeque::new(),
            recovered: 0,
            expired: 0,
        }
    }

    /// Registers the IDs a failed batch (the generic announcements batch included) advertised
    /// but never delivered. IDs already pending merge; a relay with nothing pending before gets
    /// its first attempt after the base backoff.
    pub fn handle_failed_batch(
        &mut self,
        relay: &RelayUrl,
        ids: impl IntoIterator<Item = EventId>,
        now: Instant,
    ) {
        let mut ids = ids.into_iter().peekable();
        if ids.peek().is_none() {
            return;
        }
        let base = self.config.base_backoff;
        let cap = self.config.max_pending_per_relay.max(1);
        let entry = self.relays.entry(relay.clone()).or_default();
        entry.pending.extend(ids);
        if entry.next_attempt.is_none() {
            entry.next_attempt = Some(later(now, base));
        }
        if entry.pending.len() > cap {
            let first_dropped = entry.pending.iter().nth(cap).copied();
            if let Some(first_dropped) = first_dropped {
                let dropped = entry.pending.split_off(&first_dropped);
                self.expired += dropped.len() as u64;
                self.expiries.push_back(RecoveryExpiry {
                    relay: relay.clone(),
                    ids: dropped.into_iter().collect(),
                });
            }
        }
    }

    /// The relay is no longer tracked: forget everything about it.
    pub fn handle_retired(&mut self, relay: &RelayUrl) {
        self.relays.remove(relay);
        self.offline.remove(relay);
        self.unrelated_failures.remove(relay);
        self.promotions.retain(|promoted| promoted != relay);
    }

    /// The next attempt due at `now`, if any: a connected relay with pending IDs, no attempt in
    /// flight and its backoff over. Call until `None`.
    pub fn poll_attempt(&mut self, now: Instant) -> Option<RecoveryAttempt> {
        let max = self.config.max_ids_per_attempt.max(1);
        let (relay, entry) = self
            .relays
            .iter_mut()
            .find(|(relay, entry)| !self.offline.contains(*relay) && entry.due(now))?;
        let ids: Vec<EventId> = match entry.cursor {
            Some(cursor) => entry
                .pending
                .range((Bound::Excluded(cursor), Bound::Unbounded))
                .chain(entry.pending.range(..=cursor))
                .take(max)
                .copied()
                .collect(),
            None => entry.pending.iter().take(max).copied().collect(),
        };
        entry.cursor = ids.last().copied();
        let mut ids_sorted = ids;
        ids_sorted.sort_unstable();
        entry.in_flight = Some(ids_sorted.iter().copied().collect());
        Some(RecoveryAttempt {
            relay: relay.clone(),
            ids: ids_sorted,
        })
    }

    /// Reports how a relay's attempt ended (EOSE, CLOSED, watchdog or send failure: always
    /// report, with whatever was delivered). Delivered IDs leave the pending set. Progress
    /// resets the backoff; an attempt without progress doubles it, and the twelfth in a row
    /// expires the relay's pending IDs.
    pub fn handle_attempt_result(
        &mut self,
        relay: &RelayUrl,
        delivered: impl IntoIterator<Item = EventId>,
        now: Instant,
    ) {
        let Some(entry) = self.relays.get_mut(relay) else {
            return;
        };
        let delivered: BTreeSet<EventId> = delivered.into_iter().collect();
        let before = entry.pending.len();
        entry.pending.retain(|id| !delivered.contains(id));
        self.recovered += count(before - entry.pending.len());
        // No attempt in flight: a result that outlived its connection. Its deliveries still
        // count as recovered, but it is not an attempt.
        if let Some(attempt) = entry.in_flight.take() {
            let progress = attempt.iter().filter(|id| delivered.contains(id)).count();
            if progress > 0 {
                entry.zero_progress = 0;
                let all = progress == attempt.len();
                let wait = if all {
                    Duration::ZERO
                } else {
                    self.config.base_backoff
                };
                entry.next_attempt = Some(later(now, wait));
            } else if !entry.pending.is_empty() {
                entry.zero_progress = entry.zero_progress.saturating_add(1);
                if entry.zero_progress >= self.config.max_zero_progress_attempts {
                    self.expire(relay);
                    return;
                }
                let wait = backoff(&self.config, entry.zero_progress);
                entry.next_attempt = Some(later(now, wait));
            }
        }
        self.finish_if_recovered(relay);
    }

    /// Clears IDs the engine now holds, whichever way they arrived (live sync, another relay,
    /// a user's submission), from every relay's pending set, without using an attempt.
    pub fn handle_known(&mut self, ids: impl IntoIterator<Item = EventId>) {
        let known: BTreeSet<EventId> = ids.into_iter().collect();
        if known.is_empty() {
            return;
        }
        let relays: Vec<RelayUrl> = self.relays.keys().cloned().collect();
        for relay in relays {
            if let Some(entry) = self.relays.get_mut(&relay) {
                let before = entry.pending.len();
                entry.pending.retain(|id| !known.contains(id));
                self.recovered += count(before - entry.pending.len());
            }
            self.finish_if_recovered(&relay);
        }
    }

    /// The relay's connection is up: its deferred attempts may run.
    pub fn handle_connected(&mut self, relay: &RelayUrl) {
        self.offline.remove(relay);
    }

    /// The relay's connection is down: no attempts until it is back. An attempt in flight is
    /// lost with the connection and does not count.
    pub fn handle_disconnected(&mut self, relay: &RelayUrl) {
        self.offline.insert(relay.clone());
        if let Some(entry) = self.relays.get_mut(relay) {
            entry.in_flight = None;
        }
        self.finish_if_recovered(relay);
    }

    /// A batch at this relay failed for a reason recovery does not cover: full recovery will
    /// not promote the relay until its historic sync restarts.
    pub fn handle_unrelated_failure(&mut self, relay: &RelayUrl) {
        self.unrelated_failures.insert(relay.clone());
    }

    /// The relay's historic sync starts over (reconnect or daily sync): earlier unrelated
    /// failures no longer block promotion. Pending IDs stay.
    pub fn handle_historic_sync_restarted(&mut self, relay: &RelayUrl) {
        self.unrelated_failures.remove(relay);
    }

    /// A relay whose pending IDs were all recovered with no unrelated failure: promote it from
    /// historic-sync-failures back to connected.
    pub fn poll_promotion(&mut self) -> Option<RelayUrl> {
        self.promotions.pop_front()
    }

    /// A relay whose pending IDs were dropped after too many attempts without progress.
    pub fn poll_expiry(&mut self) -> Option<RecoveryExpiry> {
        self.expiries.pop_front()
    }

    /// The earliest instant an attempt becomes due, ignoring relays that are disconnected or
    /// have an attempt in flight (their next step is an input, not time).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.relays
            .iter()
            .filter(|(relay, entry)| {
                !self.offline.contains(*relay)
                    && entry.in_flight.is_none()
                    && !entry.pending.is_empty()
            })
            .filter_map(|(_, entry)| entry.next_attempt)
            .min()
    }

    /// How many IDs are pending for `relay`.
    pub fn pending(&self, relay: &RelayUrl) -> usize {
        self.relays
            .get(relay)
            .map_or(0, |entry| entry.pending.len())
    }

    /// The IDs pending for `relay`, sorted.
    pub fn pending_ids(&self, relay: &RelayUrl) -> Vec<EventId> {
        self.relays
            .get(relay)
            .map(|entry| entry.pending.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Whether `relay` has an attempt in flight.
    pub fn in_flight(&self, relay: &RelayUrl) -> bool {
        self.relays
            .get(relay)
            .is_some_and(|entry| entry.in_flight.is_some())
    }

    /// IDs pending across all relays (an ID pending at two relays counts twice).
    pub fn total_pending(&self) -> usize {
        self.relays.values().map(|entry| entry.pending.len()).sum()
    }

    /// IDs cleared from pending sets because they were obtained, by an attempt or otherwise,
    /// since the index was created.
    pub fn recovered_total(&self) -> u64 {
        self.recovered
    }

    /// IDs dropped by expiry since the index was created.
    pub fn expired_total(&self) -> u64 {
        self.expired
    }

    /// Drops the relay's pending IDs and reports the expiry.
    fn expire(&mut self, relay: &RelayUrl) {
        if let Some(entry) = self.relays.remove(relay) {
            self.expired += count(entry.pending.len());
            self.expiries.push_back(RecoveryExpiry {
                relay: relay.clone(),
                ids: entry.pending.into_iter().collect(),
            });
        }
    }

    /// Forgets a relay with nothing pending and nothing in flight, reporting the promotion if
    /// no unrelated failure blocks it.
    fn finish_if_recovered(&mut self, relay: &RelayUrl) {
        let done = self
            .relays
            .get(relay)
            .is_some_and(|entry| entry.pending.is_empty() && entry.in_flight.is_none());
        if !done {
            return;
        }
        self.relays.remove(relay);
        if !self.unrelated_failures.contains(relay) {
            self.promotions.push_back(relay.clone());
        }
    }
}

/// One relay's recovery state; exists while it has IDs pending or an attempt in flight.
#[derive(Debug, Clone, Default)]
struct RelayRecovery {
    pending: BTreeSet<EventId>,
    in_flight: Option<BTreeSet<EventId>>,
    next_attempt: Option<Instant>,
    zero_progress: u32,
    /// The last ID of the previous attempt: the next one starts after it.
    cursor: Option<EventId>,
}

impl RelayRecovery {
    fn due(&self, now: Instant) -> bool {
        self.in_flight.is_none()
            && !self.pending.is_empty()
            && self.next_attempt.is_some_and(|at| at <= now)
    }
}

/// The wait after `zero_progress` consecutive attempts without progress.
fn backoff(config: &RecoveryConfig, zero_progress: u32) -> Duration {
    let factor = 2u32.saturating_pow(zero_progress);
    config
        .base_backoff
        .saturating_mul(factor)
        .min(config.max_backoff)
}

fn later(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait).unwrap_or(now)
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
