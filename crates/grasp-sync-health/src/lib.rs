//! Relay health for GRASP-02 proactive sync: per-relay connection state, failure backoff, the
//! stability period, dead relays, rate-limit / policy / request / mailbox / identity pauses, the
//! single recovery probe, and classification of relay refusal texts into bounded categories.
//!
//! This crate is a sans-IO core. It does not open sockets, run timers, read a clock or log: every
//! method takes `now: std::time::Instant`, randomness comes from a seed, and the caller arms one
//! timer at [`RelayHealth::poll_timeout`]. It does not decide which relays to keep (it only flags
//! bootstrap relays as never retired), does not pace queries and does not hold subscription
//! budgets; the engine owns those and asks this crate whether a relay may be dialled or used.
//!
//! The `backoff` crate is used only behind [`BackoffPolicy`], in one file, so it can be
//! replaced there alone.

#![doc = include_str!("../README.md")]

mod action;
mod backoff_policy;
mod config;
mod error;
mod health;
mod pause;
mod refusal;
mod snapshot;
mod state;

pub use action::{DiscoveryKind, RecoveryProbe, RefusalAction, RefusalScope};
pub use backoff_policy::BackoffPolicy;
pub use config::{HealthConfig, LONGEST_DAYS};
pub use error::HealthError;
pub use health::RelayHealth;
pub use pause::PauseKind;
pub use refusal::{
    MAX_PLAUSIBLE_BYTE_CAP, MAX_PLAUSIBLE_FILTERS, Refusal, RefusalCategory, RefusalCounts,
    classify,
};
pub use snapshot::HealthSnapshot;
pub use state::HealthState;
