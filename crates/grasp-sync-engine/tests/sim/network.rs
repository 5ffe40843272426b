//! The simulated network: the testkit's [`MemoryNetwork`] (the engine's transport over
//! [`SimulatedRelay`]s, on virtual time) with the seed's faults and the [`Monitor`] as its
//! hooks.
//!
//! Every client message is traced and checked by the [`Monitor`] before the relay reads it.
//! Answers are delivered in order, each after a seeded delay, and what a connection the
//! simulation drops had sent before the drop and not yet delivered is lost, as over a closed
//! socket: the engine gets [`RelayInbound::Disconnected`](grasp_sync_engine::RelayInbound)
//! at once, and nothing follows.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{RelayConnection, RelayConnector, RelayInbound, RelayInfo, TransportError};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{
    ClientStart, MemoryNetwork, MessageFate, NetworkHooks, RefusalKind, SimulatedRelay,
};
use nostr::{ClientMessage, Filter, JsonUtil, RelayMessage};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::faults::FaultPlan;
use crate::monitor::{ConnectionRecord, Monitor, Start};

/// The text of the transient refusals the simulation injects.
const TRANSIENT_REFUSAL: &str = "error: temporarily unavailable, try again later";

/// Everything the simulation adds to the network, behind one lock the network takes inside
/// its own, never held across an `.await`.
pub(crate) struct World {
    /// Per relay, the advertised subscription budget and whether NIP-77 sessions take slots
    /// in it.
    advertised: BTreeMap<String, Option<(usize, bool)>>,
    records: BTreeMap<usize, ConnectionRecord>,
    rng: ChaCha8Rng,
    faults: FaultPlan,
    faults_on: bool,
    started: Instant,
    pub(crate) monitor: Monitor,
    trace: DefaultHasher,
    /// Client messages read, over every relay.
    pub(crate) messages: u64,
    /// Whether every frame is printed as it passes (`GRASP_SYNC_SIM_WIRE`).
    wire: bool,
}

/// The network handle the engine dials through. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SimNetwork {
    network: MemoryNetwork,
    world: Arc<SimHooks>,
}

/// The faults and the monitor, as the network's hooks.
struct SimHooks(Mutex<World>);

impl SimNetwork {
    pub(crate) fn new(
        relays: Vec<(String, SimulatedRelay)>,
        mut rng: ChaCha8Rng,
        faults: FaultPlan,
    ) -> Self {
        let auth_keys = loop {
            if let Ok(secret) = nostr::SecretKey::from_slice(&rng.random::<[u8; 32]>()) {
                break nostr::Keys::new(secret);
            }
        };
        let advertised = relays
            .iter()
            .map(|(url, relay)| (url.clone(), advertised_budget(relay)))
            .collect();
        let world = Arc::new(SimHooks(Mutex::new(World {
            advertised,
            records: BTreeMap::new(),
            rng,
            faults,
            faults_on: true,
            started: Instant::now(),
            monitor: Monitor::default(),
            trace: DefaultHasher::new(),
            messages: 0,
            wire: std::env::var_os("GRASP_SYNC_SIM_WIRE").is_some(),
        })));
        let network = MemoryNetwork::with_hooks(relays, world.clone());
        // The engine's key answers NIP-42 challenges, as a daemon configured with one does.
        network.answer_auth_with(auth_keys);
        Self { network, world }
    }

    pub(crate) fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.world()
    }

    /// Turns every fault off.
    pub(crate) fn stop_faults(&self) {
        self.world().faults_on = false;
    }

    /// Turns `faults` on, in place of the plan before.
    pub(crate) fn start_faults(&self, faults: FaultPlan) {
        let mut world = self.world();
        world.faults = faults;
        world.faults_on = true;
    }

    /// Stores `event` on relay `url` without sending it to any subscription.
    pub(crate) fn store(&self, url: &str, event: nostr::Event) {
        self.network.store(url, event);
    }
}

impl SimHooks {
    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.0.lock().expect("world lock")
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
}

impl NetworkHooks for SimHooks {
    fn dial(&self, _relay: &str) -> bool {
        let mut world = self.world();
        let dial_failure = world.faults.dial_failure;
        !world.chance(dial_failure)
    }

    fn message(&self, relay: &str, connection: usize, text: &str) -> MessageFate {
        let mut world = self.world();
        let at = Instant::now().saturating_duration_since(world.started);
        world.messages += 1;
        world.trace.write_u128(at.as_millis());
        world.trace.write(relay.as_bytes());
        world.trace.write_usize(connection);
        if world.wire {
            println!(
                "{:>10.3} {relay} #{connection} > {}",
                at.as_secs_f64(),
                clip(text)
            );
        }
        // A signature is not deterministic: an `AUTH` counts by its verb alone.
        if text.starts_with(r#"["AUTH""#) {
            world.trace.write(b"AUTH");
        } else {
            world.trace.write(text.as_bytes());
        }
        let disconnect = world.faults.disconnect;
        if world.chance(disconnect) {
            return MessageFate::Cut;
        }
        let Ok(ClientMessage::Req {
            subscription_id, ..
        }) = ClientMessage::from_json(text)
        else {
            return MessageFate::Read;
        };
        let transient = world.faults.transient_refusal;
        if world.chance(transient) {
            let frame =
                RelayMessage::closed(subscription_id.into_owned(), TRANSIENT_REFUSAL).as_json();
            return MessageFate::Answer(vec![frame]);
        }
        MessageFate::Read
    }

    fn start(&self, start: &ClientStart<'_>) {
        let now = Instant::now();
        let mut world = self.world();
        let World {
            advertised,
            records,
            monitor,
            started,
            ..
        } = &mut *world;
        let advertised = advertised.get(start.relay).copied().flatten();
        let counts_negentropy = advertised.is_some_and(|(_, counts)| counts);
        let (subs, negs) = start.open;
        let in_use = subs + if counts_negentropy { negs } else { 0 };
        let record = records.entry(start.connection).or_default();
        monitor.check_start(
            record,
            &Start {
                relay: start.relay,
                connection: start.connection,
                at: now.saturating_duration_since(*started),
                now,
                subscription: start.subscription,
                filters: start.filters,
                opens_slot: !start.replacing,
                in_use,
                advertised: advertised.map(|(budget, _)| budget),
            },
        );
    }

    fn refused(&self, relay: &str, connection: usize, filters: &[Filter], kind: RefusalKind) {
        let mut world = self.world();
        match kind {
            RefusalKind::TooManyFilters => {
                world
                    .monitor
                    .record_refusal(relay, Some(connection), filters);
            }
            RefusalKind::Policy => world.monitor.record_refusal(relay, None, filters),
            _ => {}
        }
    }

    /// The seed's duplicates, shuffles and delay.
    fn deliver(&self, relay: &str, connection: usize, inbound: &mut Vec<RelayInbound>) -> Duration {
        let mut world = self.world();
        if world.wire {
            let at = Instant::now().saturating_duration_since(world.started);
            for message in inbound.iter() {
                let text = format!("{message:?}");
                println!(
                    "{:>10.3} {relay} #{connection} < {}",
                    at.as_secs_f64(),
                    clip(&text)
                );
            }
        }
        let mut shaped: Vec<RelayInbound> = Vec::with_capacity(inbound.len());
        for message in inbound.drain(..) {
            let duplicate = world.faults.duplicate;
            if matches!(message, RelayInbound::Event { .. }) && world.chance(duplicate) {
                shaped.push(message.clone());
            }
            shaped.push(message);
        }
        // Stored events before their EOSE may come in any order.
        let events_end = shaped
            .iter()
            .position(|m| !matches!(m, RelayInbound::Event { .. }))
            .unwrap_or(shaped.len());
        let shuffle = world.faults.shuffle;
        if events_end > 1 && world.chance(shuffle) {
            shaped[..events_end].shuffle(&mut world.rng);
        }
        *inbound = shaped;
        world.delay()
    }

    fn negentropy_delay(&self, _relay: &str, _connection: usize) -> Duration {
        self.world().delay()
    }
}

#[async_trait]
impl RelayConnector for SimNetwork {
    async fn connect(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayConnection, TransportError> {
        self.network.connect(url, timeout).await
    }

    async fn fetch_info(
        &self,
        url: &RelayUrl,
        timeout: Duration,
    ) -> Result<RelayInfo, TransportError> {
        self.network.fetch_info(url, timeout).await
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

/// The first 160 characters of a frame, for the wire log.
fn clip(text: &str) -> &str {
    text.char_indices()
        .nth(160)
        .map_or(text, |(at, _)| &text[..at])
}
