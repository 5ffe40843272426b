//! grasp-sync-bin: the `grasp-sync` daemon as a library, so its commands can be tested.
//!
//! It wires the engine to the world: an own relay (embedded: a `nostr-relay-builder` relay
//! over the engine's LMDB store and acceptance policy; external: another relay over
//! WebSocket), the nostr-sdk connector, configuration from a TOML file, `GRASP_SYNC_*`
//! variables and flags, Prometheus metrics and a JSON status endpoint, signals and graceful
//! shutdown; with the `sim` feature, the `demo` command and the `sim` simulator, which run it
//! against the test relays of `grasp-sync-testkit` (the default build has neither).
//!
//! It deliberately holds no sync logic and no acceptance rules: those are the engine's and the
//! store's. In external mode the other relay's own policy decides what it keeps.
#![doc = include_str!("../README.md")]

pub mod cli;
pub mod config;
pub mod daemon;
#[cfg(feature = "sim")]
pub mod demo;
mod endpoints;
pub mod error;
pub mod external;
pub mod feed;
pub mod follow;
pub mod git;
mod history;
pub mod hook;
pub mod metrics;
pub mod progress;
pub mod purgatory;
mod relay;
#[cfg(feature = "sim")]
pub mod sim;
pub mod status_cli;
mod status_page;
mod status_view;
#[cfg(target_os = "linux")]
mod store_pages;
pub mod synced;

#[cfg(not(feature = "sim"))]
pub use cli::NotInThisBuild;
pub use cli::{Cli, Command, RunArgs, StatusArgs};
#[cfg(feature = "sim")]
pub use cli::{DemoArgs, SimArgs};
pub use config::{AuthKey, RawConfig, SecretText, Settings};
pub use daemon::{Daemon, run};
#[cfg(feature = "sim")]
pub use demo::{DemoOptions, DemoSummary, run_demo};
pub use error::ConfigError;
pub use relay::RelayLimits;
/// The embedded relay's per-connection guard, for the fuzz targets only (`fuzzing` feature).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use relay::fuzzing;
#[cfg(feature = "sim")]
pub use sim::{SimOptions, SimReport, run_sim};
pub use status_cli::run_status;
