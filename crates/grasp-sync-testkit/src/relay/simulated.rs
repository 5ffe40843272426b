//! `SimulatedRelay`: a strict relay without a socket, a store task or a runtime, for
//! deterministic simulation. It answers each client message at the instant it is given, with
//! the same limits, refusal texts and query quirks as a [`TestRelay`](super::TestRelay)
//! behind its strict proxy (the same [`Gate`] decides), and the same NIP-11 document.
//!
//! What it leaves out, because a simulation drives those parts itself: NIP-77 rounds are
//! admitted or refused here ([`SimulatedConnection::handle_client`] on the NEG-OPEN) but the
//! reconciliation is computed by the caller from [`SimulatedRelay::matching`]; the rust-nostr
//! relay builder's `CLOSED ""` after a by-ID REQ whose every ID was found is not sent.
//!
//! NIP-42 is enforced either as the strict proxy enforces it ([`StrictLimits::auth`]) or, with
//! [`RelayAuth::Reads`], as the rust-nostr relay builder behind the proxy does (see `auth`).

use std::collections::BTreeMap;
use std::sync::Arc;

use nostr::{ClientMessage, Event, EventId, Filter, JsonUtil, RelayMessage, SubscriptionId};
use tokio::time::Instant;

use self::auth::ReadsAuth;
use super::strict::gate::{Gate, Verdict};
use super::strict::{Dialect, RefusalKind, StartKind, StrictLimits, SubscriptionLimit};
use super::{RelayAuth, TestRelayConfig};

/// One relay's configuration and stored events.
#[derive(Debug, Clone)]
pub struct SimulatedRelay {
    config: TestRelayConfig,
    limits: Arc<StrictLimits>,
    events: Vec<Event>,
}

/// What the relay does with one client message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientReply {
    /// Relay frames to send the client, in order.
    pub frames: Vec<String>,
    /// The query start the message was (REQ or NEG-OPEN), refused or not.
    pub start: Option<StartKind>,
    /// Why it was refused, if it was.
    pub refusal: Option<RefusalKind>,
    /// A NEG-OPEN the relay admitted: the caller runs the reconciliation.
    pub negentropy_admitted: bool,
    /// The relay drops the connection instead of answering.
    pub disconnect: bool,
}

/// One client connection's state: the gate's limit state and the open subscriptions that
/// receive events published later.
#[derive(Debug)]
pub struct SimulatedConnection {
    gate: Gate,
    live: BTreeMap<String, Vec<Filter>>,
    /// The relay builder's NIP-42 read mode, when the relay runs it ([`RelayAuth::Reads`]).
    reads_auth: Option<ReadsAuth>,
}

impl SimulatedRelay {
    /// A relay configured as `config` (its `strict` limits, filter caps, quirks, NIP-11
    /// settings and `auth`; `store` is ignored) holding `events`. Without strict subscription limits,
    /// `max_subscriptions` is enforced with the rust-nostr relay builder's text, as a
    /// [`TestRelay`](super::TestRelay) enforces it.
    pub fn new(config: TestRelayConfig, events: Vec<Event>) -> Self {
        let mut limits = config.strict.clone().unwrap_or_default();
        if limits.subscriptions.is_none() {
            limits.subscriptions = Some(SubscriptionLimit {
                max: config.max_subscriptions,
                dialect: Dialect::RustNostr,
                counts_negentropy: false,
                advertised: true,
            });
        }
        Self {
            config,
            limits: Arc::new(limits),
            events,
        }
    }

    /// The relay's configuration.
    pub fn config(&self) -> &TestRelayConfig {
        &self.config
    }

    /// The NIP-11 document, as a [`TestRelay`](super::TestRelay) serves it (`None` when
    /// it serves none).
    pub fn nip11_document(&self) -> Option<String> {
        super::nip11::document(&self.config).map(|doc| doc.to_string())
    }

    /// Every stored event.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Stores `event` (no open subscription hears of it: see
    /// [`SimulatedConnection::handle_published`]).
    pub fn store(&mut self, event: Event) {
        if !self.events.iter().any(|e| e.id == event.id) {
            self.events.push(event);
        }
    }

    /// The IDs and timestamps of every stored event matching `filter`, ignoring its `limit`,
    /// as a NIP-77 reconciliation sees them.
    pub fn matching(&self, filter: &Filter) -> Vec<(EventId, nostr::Timestamp)> {
        let mut unlimited = filter.clone();
        unlimited.limit = None;
        self.events
            .iter()
            .filter(|event| self.config_quirks().matches(&unlimited, event))
            .map(|event| (event.id, event.created_at))
            .collect()
    }

    /// A new connection.
    pub fn connect(&self) -> SimulatedConnection {
        SimulatedConnection {
            gate: Gate::new(Arc::clone(&self.limits)),
            live: BTreeMap::new(),
            reads_auth: (self.config.auth == RelayAuth::Reads).then(ReadsAuth::default),
        }
    }

    fn config_quirks(&self) -> super::strict::QueryQuirks {
        self.limits.quirks
    }

    /// EVENT frames then EOSE for an accepted REQ, as the strict proxy answers it.
    fn answer(&self, gate: &Gate, subscription: &str, filters: &[Filter]) -> Vec<String> {
        let id = SubscriptionId::new(subscription);
        let stored = self
            .limits
            .quirks
            .answer(filters, &self.events, self.config.filter_caps());
        let mut frames: Vec<String> = stored
            .into_iter()
            .map(|event| RelayMessage::event(id.clone(), event).as_json())
            .filter(|frame| !gate.withholds(frame))
            .collect();
        let live_only = filters.iter().all(|f| f.limit == Some(0));
        if !(live_only && self.limits.quirks.no_eose_for_live) {
            frames.push(RelayMessage::eose(id).as_json());
        }
        frames
    }
}

impl SimulatedConnection {
    /// Open REQ subscriptions and negentropy sessions, as the relay counts them.
    pub fn open(&self) -> (usize, usize) {
        self.gate.open()
    }

    /// Decides on one client text message read at `now` and answers it.
    pub fn handle_client(
        &mut self,
        relay: &SimulatedRelay,
        now: Instant,
        text: &str,
    ) -> ClientReply {
        let outcome = self.gate.handle_client(now, text);
        let mut reply = ClientReply {
            start: outcome.start.as_ref().map(|(kind, _, _)| *kind),
            refusal: outcome.refusal(),
            ..ClientReply::default()
        };
        if let Some(id) = &outcome.closes {
            self.live.remove(id);
        }
        match outcome.verdict {
            Verdict::Forward => match outcome.start {
                Some((StartKind::Req, id, filters)) => {
                    // The relay behind the proxy refuses it: the proxy saw it pass.
                    if let Some(frames) = self.reads_auth.as_mut().and_then(|a| a.refuse_req(&id)) {
                        for frame in &frames {
                            self.gate.handle_relay(frame);
                        }
                        reply.frames = frames;
                    } else {
                        reply.frames = relay.answer(&self.gate, &id, &filters);
                        self.live.insert(id, filters);
                    }
                }
                Some((StartKind::NegOpen, _, _)) => reply.negentropy_admitted = true,
                None => {
                    if let Some(ok) = self.reads_auth.as_mut().and_then(|a| a.handle_client(text)) {
                        reply.frames = vec![ok];
                    }
                }
            },
            Verdict::Refuse { frames, .. } => {
                if let Some((StartKind::Req, id, _)) = &outcome.start {
                    // A refused REQ that reused an open subscription's ID ended it.
                    if !self.holds(id) {
                        self.live.remove(id);
                    }
                }
                for frame in &frames {
                    self.gate.handle_relay(frame);
                }
                reply.frames = frames;
            }
            Verdict::Answer(frame) => reply.frames = vec![frame],
            Verdict::Disconnect => reply.disconnect = true,
            Verdict::Ignore => {}
        }
        reply
    }

    /// EVENT frames for `event`, published to the relay now, on every open subscription
    /// whose filters match it.
    pub fn handle_published(&self, relay: &SimulatedRelay, event: &Event) -> Vec<String> {
        let quirks = relay.config_quirks();
        self.live
            .iter()
            .filter(|(_, filters)| filters.iter().any(|f| quirks.matches(f, event)))
            .map(|(id, _)| RelayMessage::event(SubscriptionId::new(id), event.clone()).as_json())
            .filter(|frame| !self.gate.withholds(frame))
            .collect()
    }

    /// Tells the relay the client closed negentropy session `id` (a NEG-CLOSE).
    pub fn close_negentropy(&mut self, relay: &SimulatedRelay, now: Instant, id: &str) {
        let close = ClientMessage::NegClose {
            subscription_id: std::borrow::Cow::Owned(SubscriptionId::new(id)),
        };
        self.handle_client(relay, now, &close.as_json());
    }

    /// Whether REQ subscription `id` is open on this connection.
    pub fn holds(&self, id: &str) -> bool {
        self.gate.holds(id)
    }
}

mod auth;
#[cfg(test)]
mod tests;
