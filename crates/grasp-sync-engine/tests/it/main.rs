//! End-to-end tests of the engine on paused time over the testkit's memory network, whose
//! relays enforce the strict relay's limits and quirks; time is logic there, never a wall-clock
//! tolerance. Only the transport's tests (`bytes`) run against real relays on loopback, on real
//! time, with a real LMDB store.

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
mod live_page;
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
