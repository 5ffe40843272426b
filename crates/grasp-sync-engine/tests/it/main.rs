//! End-to-end tests of the engine against real relays on loopback and a real LMDB store, and,
//! where time is the point, on paused time over the testkit's memory network.

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
