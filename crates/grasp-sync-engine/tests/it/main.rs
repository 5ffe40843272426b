//! End-to-end tests of the engine against real relays on loopback and a real LMDB store.

mod auth;
mod auth_discovery;
mod auth_negentropy;
mod auth_notice;
mod bytes;
mod conformance;
mod coverage;
mod delivery;
mod discovery;
mod exit;
mod learned_restart;
mod memory;
mod negentropy;
mod notice;
mod participants;
mod proven_ceiling;
mod rate_limit;
mod reconnect;
mod support;
mod sync;
mod unsaved;
mod waiting;
