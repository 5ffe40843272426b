//! `MemoryNetwork`: the engine's transport ([`RelayConnector`],
//! [`RelaySession`](grasp_sync_engine::RelaySession)) over [`SimulatedRelay`]s in memory, on
//! the tokio clock, so the real engine runs against strict relays on paused time and every
//! start is read at an exact virtual instant.
//!
//! Each client message goes through its relay's connection state at the instant it is sent
//! (the strict relay's gate enforces its [`StrictLimits`](crate::StrictLimits), as behind a
//! [`TestRelay`]'s proxy), and the relay counts it in the [`StrictStats`] a [`TestRelay`]
//! keeps. Answers go
//! back through one FIFO delivery task per connection, so they arrive in the order the relay
//! sent them, as over a WebSocket. A connection cut (by the engine, by [`MemoryNetwork::kill`]
//! or by a hook) loses what was not yet delivered: the engine gets
//! [`RelayInbound::Disconnected`], and nothing follows.
//!
//! It has no faults of its own: [`NetworkHooks`] lets a layer on top add them.
//!
//! With [`MemoryNetwork::answer_auth_with`], every connection answers a relay's NIP-42 challenge
//! at once with an `AUTH` signed by those keys, as the engine's client library does, and
//! reports the challenge and the relay's `OK` to the engine ([`RelayInbound::AuthChallenge`],
//! then [`RelayInbound::Authenticated`] or [`RelayInbound::AuthFailed`]) after the frames that
//! carried the challenge.
//!
//! [`TestRelay`]: crate::TestRelay

mod hooks;
mod session;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{RelayConnection, RelayConnector, RelayInbound, RelayInfo, TransportError};
use grasp_sync_model::RelayUrl;
use nostr::{ClientMessage, Event, Filter, JsonUtil, RelayMessage};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

pub use hooks::{ClientStart, MessageFate, NetworkHooks};

use self::hooks::NoHooks;
use self::session::MemorySession;
use crate::TestkitError;
use crate::network::{GeneratedNetwork, NetworkSpec, generate};
use crate::relay::strict::Recorder;
use crate::{SimulatedConnection, SimulatedRelay, StartKind, StrictStats, TestRelayConfig};

/// Inbound messages a connection may hold undelivered.
const INBOUND_CAPACITY: usize = 65_536;

/// Relays in memory, by URL. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct MemoryNetwork {
    state: Arc<Mutex<NetworkState>>,
}

impl std::fmt::Debug for MemoryNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let relays: Vec<String> = self.lock().relays.keys().cloned().collect();
        f.debug_struct("MemoryNetwork")
            .field("relays", &relays)
            .finish()
    }
}

/// Everything the network holds, behind one lock that is never held across an `.await`.
pub(crate) struct NetworkState {
    relays: BTreeMap<String, RelaySlot>,
    /// The relays' URLs in the order they were added.
    order: Vec<String>,
    hooks: Arc<dyn NetworkHooks>,
    next_connection: usize,
    next_negentropy: u64,
    /// The keys connections answer NIP-42 challenges with, if any.
    auth_keys: Option<nostr::Keys>,
}

struct RelaySlot {
    relay: SimulatedRelay,
    up: bool,
    recorder: Recorder,
    connections: BTreeMap<usize, ConnectionSlot>,
}

struct ConnectionSlot {
    state: SimulatedConnection,
    /// The connection's index in the relay's [`StrictStats::per_connection`].
    index: usize,
    deliveries: mpsc::UnboundedSender<Delivery>,
    /// Set when the connection is cut: its delivery task stops at once.
    cut: watch::Sender<bool>,
}

/// Messages to deliver at an instant, after everything queued before.
struct Delivery(Instant, Vec<RelayInbound>);

/// What the relay made of one client message.
pub(crate) struct Read {
    pub(crate) frames: Vec<String>,
    pub(crate) negentropy_admitted: bool,
}

impl Default for MemoryNetwork {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl MemoryNetwork {
    /// A fault-free network of `relays`, each at its URL.
    pub fn new(relays: Vec<(String, SimulatedRelay)>) -> Self {
        Self::with_hooks(relays, Arc::new(NoHooks))
    }

    /// A network of `relays` whose dials, messages and answers go through `hooks`.
    pub fn with_hooks(relays: Vec<(String, SimulatedRelay)>, hooks: Arc<dyn NetworkHooks>) -> Self {
        let network = Self {
            state: Arc::new(Mutex::new(NetworkState {
                relays: BTreeMap::new(),
                order: Vec::new(),
                hooks,
                next_connection: 0,
                next_negentropy: 0,
                auth_keys: None,
            })),
        };
        for (url, relay) in relays {
            network.add(&url, relay);
        }
        network
    }

    /// From now on, every connection answers NIP-42 challenges with `keys`.
    pub fn answer_auth_with(&self, keys: nostr::Keys) {
        self.lock().auth_keys = Some(keys);
    }

    /// A relay for each of `spec.relay_count()` URLs `ws://relay-{i}.memory`, relay `i`
    /// configured as `configs[i]` (or `configs[0]` for every relay when one config is given),
    /// holding what the network generated for it, as [`TestNetwork::start`](crate::TestNetwork::start)
    /// seeds real relays.
    pub fn generate(
        spec: &NetworkSpec,
        configs: &[TestRelayConfig],
    ) -> Result<(Self, GeneratedNetwork), TestkitError> {
        let count = spec.relay_count();
        if configs.len() != count && configs.len() != 1 {
            return Err(TestkitError::InvalidSpec(format!(
                "{count} relays in the spec (outbox relays included) but {} relay configs",
                configs.len()
            )));
        }
        let urls: Vec<String> = (0..count)
            .map(|i| normal(&format!("ws://relay-{i}.memory")))
            .collect();
        let generated = generate(spec, &urls)?;
        let relays = urls
            .iter()
            .zip(&generated.relay_events)
            .enumerate()
            .map(|(i, (url, events))| {
                let config = configs.get(i).unwrap_or(&configs[0]).clone();
                (url.clone(), SimulatedRelay::new(config, events.clone()))
            })
            .collect();
        Ok((Self::new(relays), generated))
    }

    /// Adds `relay` at `url` (replacing a relay there); returns the URL in normal form, the
    /// key every other method takes.
    pub fn add(&self, url: &str, relay: SimulatedRelay) -> String {
        let key = normal(url);
        let mut state = self.lock();
        if !state.order.contains(&key) {
            state.order.push(key.clone());
        }
        state.relays.insert(
            key.clone(),
            RelaySlot {
                relay,
                up: true,
                recorder: Recorder::default(),
                connections: BTreeMap::new(),
            },
        );
        key
    }

    /// Every relay's URL, in normal form, in the order they were added (by index for
    /// [`generate`](Self::generate)).
    pub fn urls(&self) -> Vec<String> {
        self.lock().order.clone()
    }

    /// What relay `url` counted since it was added, in the shape a [`TestRelay`](crate::TestRelay)'s
    /// strict proxy counts it (every start with its instant on the tokio clock). Empty for an
    /// unknown relay.
    pub fn stats(&self, url: &str) -> StrictStats {
        self.lock()
            .relays
            .get(&normal(url))
            .map(|slot| slot.recorder.snapshot())
            .unwrap_or_default()
    }

    /// Connections to relay `url` open now (neither closed by the engine nor cut); 0 for an
    /// unknown relay. [`stats`](Self::stats) counts every connection ever opened.
    pub fn open_connections(&self, url: &str) -> usize {
        self.lock()
            .relays
            .get(&normal(url))
            .map_or(0, |slot| slot.connections.len())
    }

    /// The events relay `url` holds.
    pub fn events(&self, url: &str) -> Vec<Event> {
        self.lock()
            .relays
            .get(&normal(url))
            .map(|slot| slot.relay.events().to_vec())
            .unwrap_or_default()
    }

    /// Stores `event` on relay `url` and sends it now to every open subscription on it whose
    /// filters match, as a relay does with an event published to it.
    pub fn publish(&self, url: &str, event: Event) {
        let key = normal(url);
        let mut state = self.lock();
        let Some(slot) = state.relays.get_mut(&key) else {
            return;
        };
        slot.relay.store(event.clone());
        let answers: Vec<(usize, Vec<String>)> = slot
            .connections
            .iter()
            .map(|(id, c)| (*id, c.state.handle_published(&slot.relay, &event)))
            .filter(|(_, frames)| !frames.is_empty())
            .collect();
        for (connection, frames) in answers {
            state.deliver(&key, connection, frames);
        }
    }

    /// Stores `event` on relay `url` without sending it to anyone (it arrived while nobody
    /// was subscribed).
    pub fn store(&self, url: &str, event: Event) {
        if let Some(slot) = self.lock().relays.get_mut(&normal(url)) {
            slot.relay.store(event);
        }
    }

    /// Takes relay `url` down: every connection to it is cut, and dials fail until
    /// [`revive`](Self::revive).
    pub fn kill(&self, url: &str) {
        let key = normal(url);
        let mut state = self.lock();
        if let Some(slot) = state.relays.get_mut(&key) {
            slot.up = false;
            for (_, connection) in std::mem::take(&mut slot.connections) {
                let _ = connection.cut.send(true);
            }
        }
    }

    /// Brings relay `url` back up.
    pub fn revive(&self, url: &str) {
        if let Some(slot) = self.lock().relays.get_mut(&normal(url)) {
            slot.up = true;
        }
    }

    fn lock(&self) -> MutexGuard<'_, NetworkState> {
        lock(&self.state)
    }
}

impl NetworkState {
    fn cut(&mut self, url: &str, connection: usize) {
        if let Some(slot) = self.relays.get_mut(url)
            && let Some(connection) = slot.connections.remove(&connection)
        {
            let _ = connection.cut.send(true);
        }
    }

    /// Whether `connection` to `url` is open.
    pub(crate) fn connected(&self, url: &str, connection: usize) -> bool {
        self.relays
            .get(url)
            .is_some_and(|slot| slot.connections.contains_key(&connection))
    }

    /// Reads one client message on a connection; `None` when the connection is gone (or is
    /// cut by a hook now).
    pub(crate) fn read(&mut self, url: &str, connection: usize, text: &str) -> Option<Read> {
        let now = Instant::now();
        let fate = self.hooks.message(url, connection, text);
        if fate == MessageFate::Cut {
            self.cut(url, connection);
            return None;
        }
        let start = parse_start(text);
        let hooks = Arc::clone(&self.hooks);
        let slot = self.relays.get_mut(url)?;
        let conn = slot.connections.get_mut(&connection)?;
        if let Some((kind, id, filters)) = &start {
            let subscription = (*kind == StartKind::Req).then_some(id.as_str());
            hooks.start(&ClientStart {
                relay: url,
                connection,
                subscription,
                filters,
                replacing: subscription.is_some_and(|id| conn.state.holds(id)),
                open: conn.state.open(),
            });
        }
        if let MessageFate::Answer(frames) = fate {
            return Some(Read {
                frames,
                negentropy_admitted: false,
            });
        }
        let reply = conn.state.handle_client(&slot.relay, now, text);
        let refusal = reply.refusal;
        let open = conn.state.open();
        let index = conn.index;
        if let (Some(kind), Some((StartKind::Req, _, filters))) = (refusal, &start) {
            hooks.refused(url, connection, filters, kind);
        }
        slot.recorder
            .client_message(index, text, start, now, refusal, open);
        if reply.disconnect {
            self.cut(url, connection);
            return None;
        }
        Some(Read {
            frames: reply.frames,
            negentropy_admitted: reply.negentropy_admitted,
        })
    }

    /// Queues `frames` the relay sends on a connection for delivery, through the hooks.
    pub(crate) fn deliver(&mut self, url: &str, connection: usize, frames: Vec<String>) {
        let Some(slot) = self.relays.get(url) else {
            return;
        };
        let index = slot.connections.get(&connection).map(|c| c.index);
        let answers_auth = self.auth_keys.is_some();
        let mut inbound: Vec<RelayInbound> = Vec::with_capacity(frames.len());
        for frame in &frames {
            if let Some(index) = index {
                slot.recorder.text_sent(index, frame);
            }
            if let Some(message) = to_inbound(frame, answers_auth) {
                if let (Some(index), RelayInbound::Event { event, .. }) = (index, &message) {
                    slot.recorder.event_sent(index, Some(event.id.to_hex()));
                }
                inbound.push(message);
            }
        }
        let delay = self.hooks.deliver(url, connection, &mut inbound);
        let at = Instant::now() + delay;
        if let Some(slot) = self.relays.get(url)
            && let Some(connection) = slot.connections.get(&connection)
        {
            let _ = connection.deliveries.send(Delivery(at, inbound));
        }
    }

    /// The keys connections answer NIP-42 challenges with, if any.
    pub(crate) fn auth_keys(&self) -> Option<&nostr::Keys> {
        self.auth_keys.as_ref()
    }

    /// A fresh negentropy subscription ID.
    pub(crate) fn negentropy_id(&mut self) -> String {
        self.next_negentropy += 1;
        format!("neg-{}", self.next_negentropy)
    }
}

impl MemoryNetwork {
    /// Opens a connection to `url`, recorded as opened for live subscriptions only or not.
    fn open(&self, url: &RelayUrl, live_only: bool) -> Result<RelayConnection, TransportError> {
        let (tx, inbound) = mpsc::channel(INBOUND_CAPACITY);
        let (deliveries, queue) = mpsc::unbounded_channel();
        let (cut, cut_rx) = watch::channel(false);
        let connection = {
            let mut state = self.lock();
            if !state.hooks.dial(url.as_str()) {
                return Err(TransportError::Connect("connection refused".to_owned()));
            }
            let id = state.next_connection;
            state.next_connection += 1;
            let slot = state
                .relays
                .get_mut(url.as_str())
                .ok_or_else(|| TransportError::Connect("no such host".to_owned()))?;
            if !slot.up {
                return Err(TransportError::Connect("connection refused".to_owned()));
            }
            let index = slot.recorder.open_connection_as(live_only);
            let connection = ConnectionSlot {
                state: slot.relay.connect(),
                index,
                deliveries,
                cut,
            };
            slot.connections.insert(id, connection);
            id
        };
        tokio::spawn(deliver(queue, cut_rx, tx));
        let session = MemorySession::new(url.clone(), connection, Arc::clone(&self.state));
        Ok(RelayConnection {
            session: Arc::new(session),
            inbound,
        })
    }
}

#[async_trait]
impl RelayConnector for MemoryNetwork {
    async fn connect(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        self.open(url, false)
    }

    async fn connect_live_only(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        self.open(url, true)
    }

    async fn fetch_info(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayInfo, TransportError> {
        let document = self
            .lock()
            .relays
            .get(url.as_str())
            .filter(|slot| slot.up)
            .and_then(|slot| slot.relay.nip11_document());
        match document {
            Some(document) => RelayInfo::from_json(document.as_bytes()),
            None => Err(TransportError::Info("404 Not Found".to_owned())),
        }
    }
}

/// Delivers one connection's queued answers in order, each at its instant, until the
/// connection is cut; then [`RelayInbound::Disconnected`].
async fn deliver(
    mut queue: mpsc::UnboundedReceiver<Delivery>,
    mut cut: watch::Receiver<bool>,
    tx: mpsc::Sender<RelayInbound>,
) {
    let delivered = async {
        while let Some(Delivery(at, messages)) = queue.recv().await {
            tokio::time::sleep_until(at).await;
            for message in messages {
                if tx.send(message).await.is_err() {
                    return;
                }
            }
        }
    };
    tokio::select! {
        biased;
        _ = cut.wait_for(|cut| *cut) => {}
        () = delivered => {}
    }
    let _ = tx.send(RelayInbound::Disconnected).await;
}

pub(crate) fn lock(state: &Mutex<NetworkState>) -> MutexGuard<'_, NetworkState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `url` in the engine's normal form, as it dials it; unparsable URLs stay as given.
fn normal(url: &str) -> String {
    RelayUrl::parse(url).map_or_else(|_| url.to_owned(), |url| url.to_string())
}

/// The start a client message is: REQ or NEG-OPEN, its subscription ID and filters.
fn parse_start(text: &str) -> Option<(StartKind, String, Vec<Filter>)> {
    match ClientMessage::from_json(text).ok()? {
        ClientMessage::Req {
            subscription_id,
            filters,
        } => Some((
            StartKind::Req,
            subscription_id.to_string(),
            filters.into_iter().map(|f| f.into_owned()).collect(),
        )),
        ClientMessage::NegOpen {
            subscription_id,
            filter,
            ..
        } => Some((
            StartKind::NegOpen,
            subscription_id.to_string(),
            vec![filter.into_owned()],
        )),
        _ => None,
    }
}

/// What the engine's transport would make of one relay frame; `answers_auth` when the
/// connection answers NIP-42 challenges (the only `OK` such a connection is sent answers its
/// `AUTH`: events are never published over it).
fn to_inbound(frame: &str, answers_auth: bool) -> Option<RelayInbound> {
    match RelayMessage::from_json(frame).ok()? {
        RelayMessage::Event {
            subscription_id,
            event,
        } => Some(RelayInbound::Event {
            subscription_id: subscription_id.into_owned(),
            event: Box::new(event.into_owned()),
        }),
        RelayMessage::EndOfStoredEvents(id) => Some(RelayInbound::Eose(id.into_owned())),
        RelayMessage::Closed {
            subscription_id,
            message,
        } => Some(RelayInbound::Closed {
            subscription_id: subscription_id.into_owned(),
            message: message.into_owned(),
        }),
        RelayMessage::Notice(message) => Some(RelayInbound::Notice(message.into_owned())),
        RelayMessage::Auth { .. } if answers_auth => Some(RelayInbound::AuthChallenge),
        RelayMessage::Ok { status: true, .. } if answers_auth => Some(RelayInbound::Authenticated),
        RelayMessage::Ok { status: false, .. } if answers_auth => Some(RelayInbound::AuthFailed),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
