//! An in-memory relay network implementing the engine's transport, for tests on paused time
//! (reconnect windows, the daily timer). It follows NIP-01 as `LocalRelay` does: per-filter
//! limits (`default_limit` when a filter has none), results newest first, then EOSE; every open
//! subscription also receives matching events published later, until CLOSE. End-to-end tests
//! use real relays; this exists only because real sockets and paused time do not mix.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::transport::{NegentropyDiff, NegentropyError};
use grasp_sync_engine::{
    RelayConnection, RelayConnector, RelayInbound, RelayInfo, RelaySession, TransportError,
};
use grasp_sync_model::RelayUrl;
use nostr::filter::MatchEventOptions;
use nostr::{Event, Filter, SubscriptionId};
use tokio::sync::mpsc;

/// Every relay of the network, by URL.
#[derive(Clone, Default)]
pub(crate) struct MemoryNetwork {
    relays: Arc<Mutex<BTreeMap<String, Arc<MemoryRelay>>>>,
}

/// One relay: its events, whether it is up, and its sessions' open subscriptions.
pub(crate) struct MemoryRelay {
    events: Mutex<Vec<Event>>,
    up: AtomicBool,
    default_limit: usize,
    sessions: Mutex<Vec<Arc<SessionState>>>,
    /// Every REQ received: (subscription, filters).
    reqs: Mutex<Vec<(SubscriptionId, Vec<Filter>)>>,
}

struct SessionState {
    tx: mpsc::Sender<RelayInbound>,
    subs: Mutex<BTreeMap<SubscriptionId, Vec<Filter>>>,
    alive: AtomicBool,
}

impl MemoryNetwork {
    /// Adds a relay at `url` holding `events`.
    pub(crate) fn add(&self, url: &str, events: Vec<Event>) -> Arc<MemoryRelay> {
        let relay = Arc::new(MemoryRelay {
            events: Mutex::new(events),
            up: AtomicBool::new(true),
            default_limit: 500,
            sessions: Mutex::new(Vec::new()),
            reqs: Mutex::new(Vec::new()),
        });
        let key = RelayUrl::parse(url).expect("relay url").to_string();
        self.relays
            .lock()
            .expect("lock")
            .insert(key, Arc::clone(&relay));
        relay
    }
}

impl MemoryRelay {
    /// Stores an event and delivers it to matching open subscriptions.
    pub(crate) async fn publish(&self, event: Event) {
        self.events.lock().expect("lock").push(event.clone());
        let sessions: Vec<Arc<SessionState>> = self.sessions.lock().expect("lock").clone();
        for session in sessions {
            let matching: Vec<SubscriptionId> = session
                .subs
                .lock()
                .expect("lock")
                .iter()
                .filter(|(_, filters)| {
                    filters
                        .iter()
                        .any(|f| f.match_event(&event, MatchEventOptions::new()))
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in matching {
                let _ = session
                    .tx
                    .send(RelayInbound::Event {
                        subscription_id: id,
                        event: Box::new(event.clone()),
                    })
                    .await;
            }
        }
    }

    /// Stores an event without delivering it (it happened while nobody was connected).
    pub(crate) fn store(&self, event: Event) {
        self.events.lock().expect("lock").push(event);
    }

    /// Takes the relay down: every session sees a disconnect; dialing fails until `revive`.
    pub(crate) async fn kill(&self) {
        self.up.store(false, Ordering::SeqCst);
        let sessions: Vec<Arc<SessionState>> =
            std::mem::take(&mut *self.sessions.lock().expect("lock"));
        for session in sessions {
            session.alive.store(false, Ordering::SeqCst);
            let _ = session.tx.send(RelayInbound::Disconnected).await;
        }
    }

    /// Brings the relay back.
    pub(crate) fn revive(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// Every REQ received so far.
    pub(crate) fn reqs(&self) -> Vec<(SubscriptionId, Vec<Filter>)> {
        self.reqs.lock().expect("lock").clone()
    }

    fn query(&self, filters: &[Filter]) -> Vec<Event> {
        let events = self.events.lock().expect("lock");
        let mut out: BTreeMap<nostr::EventId, Event> = BTreeMap::new();
        for filter in filters {
            let limit = filter.limit.unwrap_or(self.default_limit);
            let mut matching: Vec<&Event> = events
                .iter()
                .filter(|e| filter.match_event(e, MatchEventOptions::new()))
                .collect();
            matching.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
            for event in matching.into_iter().take(limit) {
                out.insert(event.id, event.clone());
            }
        }
        let mut result: Vec<Event> = out.into_values().collect();
        result.sort_by_key(|e| std::cmp::Reverse(e.created_at));
        result
    }
}

#[async_trait]
impl RelayConnector for MemoryNetwork {
    async fn connect(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        let relay = self
            .relays
            .lock()
            .expect("lock")
            .get(url.as_str())
            .cloned()
            .ok_or_else(|| TransportError::Connect("no such relay".to_owned()))?;
        if !relay.up.load(Ordering::SeqCst) {
            return Err(TransportError::Connect("connection refused".to_owned()));
        }
        let (tx, inbound) = mpsc::channel(65_536);
        let state = Arc::new(SessionState {
            tx,
            subs: Mutex::new(BTreeMap::new()),
            alive: AtomicBool::new(true),
        });
        relay
            .sessions
            .lock()
            .expect("lock")
            .push(Arc::clone(&state));
        let session = MemorySession {
            url: url.clone(),
            relay,
            state,
        };
        Ok(RelayConnection {
            session: Arc::new(session),
            inbound,
        })
    }

    async fn fetch_info(
        &self,
        _url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayInfo, TransportError> {
        Ok(RelayInfo::default())
    }
}

struct MemorySession {
    url: RelayUrl,
    relay: Arc<MemoryRelay>,
    state: Arc<SessionState>,
}

#[async_trait]
impl RelaySession for MemorySession {
    fn url(&self) -> &RelayUrl {
        &self.url
    }

    fn is_connected(&self) -> bool {
        self.state.alive.load(Ordering::SeqCst)
    }

    async fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
    ) -> Result<(), TransportError> {
        if !self.is_connected() {
            return Err(TransportError::NotConnected);
        }
        self.relay
            .reqs
            .lock()
            .expect("lock")
            .push((id.clone(), filters.clone()));
        let stored = self.relay.query(&filters);
        self.state
            .subs
            .lock()
            .expect("lock")
            .insert(id.clone(), filters);
        for event in stored {
            let _ = self
                .state
                .tx
                .send(RelayInbound::Event {
                    subscription_id: id.clone(),
                    event: Box::new(event),
                })
                .await;
        }
        let _ = self.state.tx.send(RelayInbound::Eose(id)).await;
        Ok(())
    }

    async fn close(&self, id: SubscriptionId) -> Result<(), TransportError> {
        self.state.subs.lock().expect("lock").remove(&id);
        Ok(())
    }

    async fn publish(&self, event: &Event) -> Result<(), TransportError> {
        self.relay.publish(event.clone()).await;
        Ok(())
    }

    async fn disconnect(&self) {
        self.state.alive.store(false, Ordering::SeqCst);
    }

    async fn negentropy_diff(
        &self,
        filter: Filter,
        have: Vec<(nostr::EventId, nostr::Timestamp)>,
        _limits: grasp_sync_engine::transport::RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError> {
        if !self.is_connected() {
            return Err(NegentropyError::NotConnected);
        }
        let have: std::collections::BTreeSet<nostr::EventId> =
            have.into_iter().map(|(id, _)| id).collect();
        let events = self.relay.events.lock().expect("lock");
        let remote: std::collections::BTreeSet<nostr::EventId> = events
            .iter()
            .filter(|e| filter.match_event(e, MatchEventOptions::new()))
            .map(|e| e.id)
            .collect();
        Ok(NegentropyDiff {
            missing: remote.difference(&have).copied().collect(),
            relay_lacks: have.difference(&remote).count(),
        })
    }
}
