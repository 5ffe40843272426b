//! grasp-sync's test-support crate: real Nostr relays on 127.0.0.1 (WebSocket, NIP-11,
//! negentropy, enforced subscription and result limits), a strict relay that enforces real
//! relays' per-connection limits with their exact refusal texts, and deterministic NIP-34
//! test data, for the end-to-end tests, the conformance suite, the `demo` command and the
//! simulator.
//!
//! Its [`TestRelay`]s do not fake a relay: each is a `nostr-relay-builder` relay behind a real
//! socket, so the engine meets real framing, real `CLOSED` and `EOSE` messages and real
//! disconnects. Where time is what a test checks, [`MemoryNetwork`] runs the same strict relay
//! logic ([`SimulatedRelay`]) in memory as the engine's transport, on the tokio clock, so
//! paused time applies. It does not sync anything itself and holds no sync logic;
//! the only rules it knows are which generated events a correct sync must end up with, and
//! the limits its strict relays enforce.
//! Its relays are not for production use: stores live in memory or in temporary
//! directories. They are served on the engine's HTTP/WebSocket front
//! (`grasp_sync_engine::front`), the same front the grasp-sync daemon serves its own relay and
//! endpoints on.
#![doc = include_str!("../README.md")]

mod error;
mod memory;
pub mod network;
pub mod nip34;
pub mod nip65;
mod relay;

pub use error::TestkitError;
pub use memory::{ClientStart, MemoryNetwork, MessageFate, NetworkHooks};
pub use network::{
    GeneratedNetwork, GeneratedOutbox, GeneratedRelayList, GeneratedRepo, NetworkSpec, OutboxSpec,
    RootCount, TestNetwork, generate,
};
pub use relay::simulated::{ClientReply, SimulatedConnection, SimulatedRelay};
pub use relay::strict::{
    AuthAccepts, AuthRefusal, ConnectionStats, Dialect, FRAME_VERBS, FilterCaps, FilterFn,
    FilterLimit, FilterPredicate, PolicyRule, QueryQuirks, QueryStart, RefusalKind, ServeById,
    StartKind, StrictAuth, StrictLimits, StrictStats, SubscriptionLimit, frame_verb,
};
pub use relay::{Nip11Mode, RelayAuth, StoreKind, TestRelay, TestRelayConfig};
