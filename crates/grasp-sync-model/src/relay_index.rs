//! `RelaySyncIndex`: what we have confirmed syncing from each relay, with its connection
//! lifecycle (`ConnectionStatus`) and the 15-minute rule that decides whether confirmed state
//! survives a disconnect.

use std::collections::{BTreeMap, BTreeSet};

use nostr::{EventId, Timestamp};

use crate::coordinate::RepoCoordinate;
use crate::diff::RelaySyncNeeds;
use crate::relay_url::RelayUrl;
use crate::repo_index::SyncLevel;
use crate::shared::Shared;

/// How long confirmed state survives a disconnect, in seconds: a reconnect within this window
/// is a quick reconnect, a later one starts fresh.
pub const STATE_RETENTION_SECS: u64 = 900;

/// Connection status of one relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConnectionStatus {
    /// Not connected.
    #[default]
    Disconnected,
    /// A connection attempt is in progress.
    Connecting,
    /// Connected, historic sync in progress.
    Syncing,
    /// Connected, historic sync completed.
    Connected,
    /// Connected and live, but some historic batch failed.
    ConnectedHistoricSyncFailures,
}

impl ConnectionStatus {
    /// Whether a session is up and subscriptions may be sent.
    pub fn is_connected(self) -> bool {
        matches!(
            self,
            Self::Syncing | Self::Connected | Self::ConnectedHistoricSyncFailures
        )
    }

    /// The value of the relay-connected metric: 0 disconnected … 4 connected with failures.
    pub fn metric_value(self) -> u8 {
        match self {
            Self::Disconnected => 0,
            Self::Connecting => 1,
            Self::Syncing => 2,
            Self::Connected => 3,
            Self::ConnectedHistoricSyncFailures => 4,
        }
    }
}

/// Confirmed state and connection lifecycle of one relay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayState {
    /// Repositories confirmed syncing from this relay, with the level confirmed.
    pub repos: Shared<BTreeMap<RepoCoordinate, SyncLevel>>,
    /// Root events confirmed tracked on this relay.
    pub root_events: Shared<BTreeSet<EventId>>,
    /// A bootstrap relay is never disconnected for lack of work.
    pub is_bootstrap: bool,
    /// Current connection status.
    pub connection_status: ConnectionStatus,
    /// When the current or last session started; the `since` for a quick reconnect.
    pub last_connected: Option<Timestamp>,
    /// When the relay last disconnected; `None` while connected or never connected.
    pub disconnected_at: Option<Timestamp>,
    /// Whether the announcement (layer 1) historic sync has completed.
    pub announcements_synced: bool,
    /// Whether the initial historic sync of all layers has completed.
    pub historic_sync_completed: bool,
    /// When the historic sync completed.
    pub historic_sync_completed_at: Option<Timestamp>,
    /// Whether any batch failed in the current session.
    pub batch_failed: bool,
    /// When a batch was last confirmed on this relay.
    pub last_batch_confirmed_at: Option<Timestamp>,
}

impl RelayState {
    /// A disconnected relay with no confirmed state.
    pub fn new(is_bootstrap: bool) -> Self {
        Self {
            is_bootstrap,
            ..Self::default()
        }
    }

    /// The 15-minute rule: whether more than [`STATE_RETENTION_SECS`] passed since the
    /// disconnect. A connected or never-connected relay keeps its state.
    pub fn should_clear_state(&self, now: Timestamp) -> bool {
        self.disconnected_at
            .is_some_and(|at| now.as_secs().saturating_sub(at.as_secs()) > STATE_RETENTION_SECS)
    }

    /// Forgets confirmed repositories and root events.
    pub fn clear_sync_state(&mut self) {
        // Replaced, not cleared: a copy shared with the targets is not copied to be emptied.
        self.repos = Shared::default();
        self.root_events = Shared::default();
    }

    /// Whether the repository is confirmed at `level` or stronger.
    pub fn covers_repo(&self, coordinate: &RepoCoordinate, level: SyncLevel) -> bool {
        self.repos
            .get(coordinate)
            .is_some_and(|confirmed| *confirmed >= level)
    }

    /// Records a repository as confirmed; the level only ever rises.
    pub fn confirm_repo(&mut self, coordinate: RepoCoordinate, level: SyncLevel) {
        let confirmed = self.repos.entry(coordinate).or_insert(level);
        *confirmed = (*confirmed).max(level);
    }

    /// Lets the confirmed repositories and root events hold `target`'s copies where they equal
    /// them, as they do once the relay's sync caught up (see [`Shared::share_if_equal`]):
    /// whether both now do.
    pub fn share_with(&mut self, target: &RelaySyncNeeds) -> bool {
        let repos = self.repos.share_if_equal(&target.repos);
        let roots = self.root_events.share_if_equal(&target.root_events);
        repos && roots
    }

    /// A connection attempt started.
    pub fn mark_connecting(&mut self) {
        self.connection_status = ConnectionStatus::Connecting;
    }

    /// A session started at `now`: historic sync begins and per-session failure is reset.
    pub fn mark_syncing(&mut self, now: Timestamp) {
        self.connection_status = ConnectionStatus::Syncing;
        self.last_connected = Some(now);
        self.disconnected_at = None;
        self.batch_failed = false;
        self.historic_sync_completed = false;
    }

    /// The session ended, or an attempt failed, at `now`. A failed attempt keeps the time the
    /// last session ended, so retries do not restart the 15-minute window.
    pub fn mark_disconnected(&mut self, now: Timestamp) {
        if self.connection_status.is_connected() || self.disconnected_at.is_none() {
            self.disconnected_at = Some(now);
        }
        self.connection_status = ConnectionStatus::Disconnected;
    }

    /// Historic sync finished with no batch pending: `Syncing` becomes `Connected`, or
    /// `ConnectedHistoricSyncFailures` if a batch failed this session. No effect otherwise.
    pub fn complete_historic_sync(&mut self, now: Timestamp) {
        if self.connection_status != ConnectionStatus::Syncing {
            return;
        }
        self.connection_status = if self.batch_failed {
            ConnectionStatus::ConnectedHistoricSyncFailures
        } else {
            ConnectionStatus::Connected
        };
        self.historic_sync_completed = true;
        self.historic_sync_completed_at = Some(now);
    }
}

/// Confirmed state of every known relay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelaySyncIndex {
    relays: BTreeMap<RelayUrl, RelayState>,
}

impl RelaySyncIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state of a relay, registering it (disconnected, not bootstrap) if unknown.
    pub fn register(&mut self, relay: &RelayUrl) -> &mut RelayState {
        self.relays.entry(relay.clone()).or_default()
    }

    /// The state of a relay.
    pub fn get(&self, relay: &RelayUrl) -> Option<&RelayState> {
        self.relays.get(relay)
    }

    /// The state of a relay, mutably.
    pub fn get_mut(&mut self, relay: &RelayUrl) -> Option<&mut RelayState> {
        self.relays.get_mut(relay)
    }

    /// Forgets a relay, returning its state.
    pub fn remove(&mut self, relay: &RelayUrl) -> Option<RelayState> {
        self.relays.remove(relay)
    }

    /// Inserts or replaces a relay's state.
    pub fn insert(&mut self, relay: RelayUrl, state: RelayState) -> Option<RelayState> {
        self.relays.insert(relay, state)
    }

    /// Every relay in URL order.
    pub fn iter(&self) -> impl Iterator<Item = (&RelayUrl, &RelayState)> {
        self.relays.iter()
    }

    /// Number of relays.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether no relay is known.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }
}

#[cfg(test)]
mod tests;
