//! The simulated network: the engine's transport ([`RelayConnector`], [`RelaySession`]) over
//! the testkit's [`SimulatedRelay`]s, with the seed's faults, on virtual time.
//!
//! Every client message goes through the relay's connection state at the instant it is sent
//! and is checked by the [`Monitor`] first. Answers go back through one FIFO delivery task per
//! connection, each after a seeded delay, so they arrive in the order the relay sent them, as
//! over a WebSocket. What a connection the simulation drops had
//! sent before the drop and not yet delivered is lost, as over a closed socket: the engine gets
//! [`RelayInbound::Disconnected`] at once, and nothing follows.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::transport::{
    NegentropyDiff, NegentropyError, RoundLimits, classify_refusal,
};
use grasp_sync_engine::{
    RelayConnection, RelayConnector, RelayInbound, RelayInfo, RelaySession, TransportError,
};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{RefusalKind, SimulatedConnection, SimulatedRelay};
use nostr::{ClientMessage, Event, EventId, Filter, JsonUtil, RelayMessage, SubscriptionId};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::faults::FaultPlan;
use crate::monitor::{ConnectionRecord, Monitor, Start};

/// Inbound messages a connection may hold undelivered.
const INBOUND_CAPACITY: usize = 65_536;

/// The text of the transient refusals the simulation injects.
const TRANSIENT_REFUSAL: &str = "error: temporarily unavailable, try again later";

/// Everything the simulation knows, behind one lock that is never held across an `.await`.
pub(crate) struct World {
    relays: BTreeMap<String, RelaySlot>,
    rng: ChaCha8Rng,
    faults: FaultPlan,
    faults_on: bool,
    started: Instant,
    pub(crate) monitor: Monitor,
    trace: DefaultHasher,
    /// Client messages read, over every relay.
    pub(crate) messages: u64,
    next_connection: usize,
    next_negentropy: u64,
}

struct RelaySlot {
    relay: SimulatedRelay,
    /// The advertised subscription budget, and whether NIP-77 sessions take slots in it.
    advertised: Option<(usize, bool)>,
    connections: BTreeMap<usize, ConnectionSlot>,
}

struct ConnectionSlot {
    state: SimulatedConnection,
    record: ConnectionRecord,
    deliveries: mpsc::UnboundedSender<Delivery>,
    /// Set when the connection is dropped: its delivery task stops at once.
    cut: tokio::sync::watch::Sender<bool>,
}

/// Messages to deliver at an instant, after everything queued before.
struct Delivery(Instant, Vec<RelayInbound>);

/// The network handle the engine dials through. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SimNetwork {
    world: Arc<Mutex<World>>,
}

impl SimNetwork {
    pub(crate) fn new(
        relays: Vec<(String, SimulatedRelay)>,
        rng: ChaCha8Rng,
        faults: FaultPlan,
    ) -> Self {
        let relays = relays
            .into_iter()
            .map(|(url, relay)| {
                let advertised = advertised_budget(&relay);
                let slot = RelaySlot {
                    relay,
                    advertised,
                    connections: BTreeMap::new(),
                };
                (url, slot)
            })
            .collect();
        let world = World {
            relays,
            rng,
            faults,
            faults_on: true,
            started: Instant::now(),
            monitor: Monitor::default(),
            trace: DefaultHasher::new(),
            messages: 0,
            next_connection: 0,
            next_negentropy: 0,
        };
        Self {
            world: Arc::new(Mutex::new(world)),
        }
    }

    pub(crate) fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().expect("world lock")
    }

    /// Turns every fault off.
    pub(crate) fn stop_faults(&self) {
        self.world().faults_on = false;
    }
}

impl World {
    /// A digest of every client message and when it was read: two runs of one seed must
    /// agree on it.
    pub(crate) fn trace(&self) -> u64 {
        self.trace.finish()
    }

    fn chance(&mut self, p: f64) -> bool {
        self.faults_on && p > 0.0 && self.rng.random_bool(p.min(1.0))
    }

    fn delay(&mut self) -> Duration {
        let max = self.faults.max_delay;
        if !self.faults_on || max.is_zero() {
            return Duration::ZERO;
        }
        Duration::from_millis(self.rng.random_range(0..=max.as_millis() as u64))
    }

    fn cut(&mut self, url: &str, connection: usize) {
        if let Some(slot) = self.relays.get_mut(url)
            && let Some(connection) = slot.connections.remove(&connection)
        {
            let _ = connection.cut.send(true);
        }
    }

    /// Reads one client message on a connection; `None` when the connection is gone (or
    /// is dropped by a fault now).
    fn read(&mut self, url: &str, connection: usize, text: &str) -> Option<Read> {
        let now = Instant::now();
        let at = now.saturating_duration_since(self.started);
        self.messages += 1;
        self.trace.write_u128(at.as_millis());
        self.trace.write(url.as_bytes());
        self.trace.write_usize(connection);
        self.trace.write(text.as_bytes());
        if self.chance(self.faults.disconnect) {
            self.cut(url, connection);
            return None;
        }
        let message = ClientMessage::from_json(text).ok();
        let (subscription, filters, opens_slot) = match &message {
            Some(ClientMessage::Req {
                subscription_id,
                filters,
            }) => (
                Some(subscription_id.to_string()),
                filters.iter().map(|f| f.clone().into_owned()).collect(),
                true,
            ),
            Some(ClientMessage::NegOpen { filter, .. }) => {
                (None, vec![filter.clone().into_owned()], true)
            }
            _ => (None, Vec::new(), false),
        };
        let is_start = opens_slot;
        let transient = subscription.is_some() && self.chance(self.faults.transient_refusal);
        let slot = self.relays.get_mut(url)?;
        let advertised = slot.advertised;
        let conn = slot.connections.get_mut(&connection)?;
        if is_start {
            let (subs, negs) = conn.state.open();
            let replacing = subscription
                .as_deref()
                .is_some_and(|id| conn.state.holds(id));
            let counts_negentropy = advertised.is_some_and(|(_, counts)| counts);
            let in_use = subs + if counts_negentropy { negs } else { 0 };
            let start = Start {
                relay: url,
                connection,
                at,
                now,
                subscription: subscription.as_deref(),
                filters: &filters,
                opens_slot: !replacing,
                in_use,
                advertised: advertised.map(|(budget, _)| budget),
            };
            self.monitor.check_start(&mut conn.record, &start);
        }
        if transient && let Some(id) = &subscription {
            let frame = RelayMessage::closed(SubscriptionId::new(id), TRANSIENT_REFUSAL).as_json();
            return Some(Read {
                frames: vec![frame],
                negentropy_admitted: false,
            });
        }
        let reply = conn.state.handle_client(&slot.relay, now, text);
        if reply.disconnect {
            self.cut(url, connection);
            return None;
        }
        if subscription.is_some() {
            match reply.refusal {
                Some(RefusalKind::TooManyFilters) => {
                    self.monitor.record_refusal(url, Some(connection), &filters);
                }
                Some(RefusalKind::Policy) => self.monitor.record_refusal(url, None, &filters),
                _ => {}
            }
        }
        Some(Read {
            frames: reply.frames,
            negentropy_admitted: reply.negentropy_admitted,
        })
    }

    /// Queues `frames` for delivery on a connection, with the seed's duplicates, shuffles
    /// and delay.
    fn deliver(&mut self, url: &str, connection: usize, frames: Vec<String>) {
        let mut inbound: Vec<RelayInbound> = Vec::with_capacity(frames.len());
        for frame in frames {
            let Some(message) = to_inbound(&frame) else {
                continue;
            };
            let twice =
                matches!(message, RelayInbound::Event { .. }) && self.chance(self.faults.duplicate);
            if twice {
                inbound.push(message.clone());
            }
            inbound.push(message);
        }
        // Stored events before their EOSE may come in any order.
        let events_end = inbound
            .iter()
            .position(|m| !matches!(m, RelayInbound::Event { .. }))
            .unwrap_or(inbound.len());
        if events_end > 1 && self.chance(self.faults.shuffle) {
            inbound[..events_end].shuffle(&mut self.rng);
        }
        let at = Instant::now() + self.delay();
        if let Some(slot) = self.relays.get(url)
            && let Some(connection) = slot.connections.get(&connection)
        {
            let _ = connection.deliveries.send(Delivery(at, inbound));
        }
    }
}

struct Read {
    frames: Vec<String>,
    negentropy_admitted: bool,
}

#[async_trait]
impl RelayConnector for SimNetwork {
    async fn connect(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        let (tx, inbound) = mpsc::channel(INBOUND_CAPACITY);
        let (deliveries, queue) = mpsc::unbounded_channel();
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        let connection = {
            let mut world = self.world();
            let dial_failure = world.faults.dial_failure;
            if world.chance(dial_failure) {
                return Err(TransportError::Connect("connection refused".to_owned()));
            }
            let id = world.next_connection;
            world.next_connection += 1;
            let slot = world
                .relays
                .get_mut(url.as_str())
                .ok_or_else(|| TransportError::Connect("no such host".to_owned()))?;
            let state = slot.relay.connect();
            slot.connections.insert(
                id,
                ConnectionSlot {
                    state,
                    record: ConnectionRecord::default(),
                    deliveries,
                    cut,
                },
            );
            id
        };
        tokio::spawn(deliver(queue, cut_rx, tx));
        let session = SimSession {
            url: url.clone(),
            key: url.as_str().to_owned(),
            connection,
            world: Arc::clone(&self.world),
        };
        Ok(RelayConnection {
            session: Arc::new(session),
            inbound,
        })
    }

    async fn fetch_info(
        &self,
        url: &RelayUrl,
        _timeout: Duration,
    ) -> Result<RelayInfo, TransportError> {
        let document = self
            .world()
            .relays
            .get(url.as_str())
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
    mut cut: tokio::sync::watch::Receiver<bool>,
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

struct SimSession {
    url: RelayUrl,
    key: String,
    connection: usize,
    world: Arc<Mutex<World>>,
}

impl SimSession {
    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().expect("world lock")
    }

    /// Sends one client message; false when the connection is gone.
    fn send(&self, text: &str) -> Option<Read> {
        let mut world = self.world();
        let read = world.read(&self.key, self.connection, text)?;
        let frames = read.frames.clone();
        world.deliver(&self.key, self.connection, frames);
        Some(read)
    }

    fn connected(&self) -> bool {
        self.world()
            .relays
            .get(&self.key)
            .is_some_and(|slot| slot.connections.contains_key(&self.connection))
    }
}

#[async_trait]
impl RelaySession for SimSession {
    fn url(&self) -> &RelayUrl {
        &self.url
    }

    fn is_connected(&self) -> bool {
        self.connected()
    }

    async fn subscribe(
        &self,
        id: SubscriptionId,
        filters: Vec<Filter>,
    ) -> Result<(), TransportError> {
        let text = ClientMessage::req(id, filters).as_json();
        self.send(&text)
            .map(|_| ())
            .ok_or(TransportError::NotConnected)
    }

    async fn close(&self, id: SubscriptionId) -> Result<(), TransportError> {
        let text = ClientMessage::close(id).as_json();
        self.send(&text)
            .map(|_| ())
            .ok_or(TransportError::NotConnected)
    }

    async fn publish(&self, _event: &Event) -> Result<(), TransportError> {
        Ok(())
    }

    async fn negentropy_diff(
        &self,
        filter: Filter,
        have: Vec<(EventId, nostr::Timestamp)>,
        limits: RoundLimits,
    ) -> Result<NegentropyDiff, NegentropyError> {
        let id = {
            let mut world = self.world();
            world.next_negentropy += 1;
            format!("neg-{}", world.next_negentropy)
        };
        let open =
            ClientMessage::neg_open(SubscriptionId::new(&id), filter.clone(), "61".to_owned());
        let read = {
            let mut world = self.world();
            world.read(&self.key, self.connection, &open.as_json())
        };
        let Some(read) = read else {
            return Err(NegentropyError::NotConnected);
        };
        if !read.negentropy_admitted {
            return match read.frames.first().and_then(|frame| refusal_text(frame)) {
                Some(text) => Err(classify_refusal(&text)),
                None => {
                    tokio::time::sleep(limits.first_answer).await;
                    Err(NegentropyError::NoAnswer)
                }
            };
        }
        let delay = self.world().delay();
        tokio::time::sleep(delay).await;
        let mut world = self.world();
        let World { relays, .. } = &mut *world;
        let Some(slot) = relays.get_mut(&self.key) else {
            return Err(NegentropyError::NotConnected);
        };
        let remote: std::collections::BTreeSet<EventId> = slot
            .relay
            .matching(&filter)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let Some(connection) = slot.connections.get_mut(&self.connection) else {
            return Err(NegentropyError::NotConnected);
        };
        connection
            .state
            .close_negentropy(&slot.relay, Instant::now(), &id);
        let have: std::collections::BTreeSet<EventId> =
            have.into_iter().map(|(id, _)| id).collect();
        Ok(NegentropyDiff {
            missing: remote.difference(&have).copied().collect(),
            relay_lacks: have.difference(&remote).count(),
        })
    }

    async fn disconnect(&self) {
        let mut world = self.world();
        world.cut(&self.key, self.connection);
    }
}

/// The relay's advertised subscription budget and whether NIP-77 sessions share it.
fn advertised_budget(relay: &SimulatedRelay) -> Option<(usize, bool)> {
    let document = relay.nip11_document()?;
    let info = RelayInfo::from_json(document.as_bytes()).ok()?;
    let budget = info.max_subscriptions? as usize;
    let counts = relay
        .config()
        .strict
        .as_ref()
        .and_then(|s| s.subscriptions)
        .is_some_and(|s| s.counts_negentropy);
    Some((budget, counts))
}

/// What the engine's transport would make of one relay frame.
fn to_inbound(frame: &str) -> Option<RelayInbound> {
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
        _ => None,
    }
}

/// The text of a refusal frame answering a NEG-OPEN.
fn refusal_text(frame: &str) -> Option<String> {
    match RelayMessage::from_json(frame).ok()? {
        RelayMessage::NegErr { message, .. } | RelayMessage::Closed { message, .. } => {
            Some(message.into_owned())
        }
        RelayMessage::Notice(message) => Some(message.into_owned()),
        _ => None,
    }
}
