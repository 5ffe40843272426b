//! Integration tests of the `grasp-sync` daemon: the command line (the built binary), the
//! embedded relay's acceptance policy over WebSocket, live delivery of synced events to its
//! subscribers, the limits its NIP-11 document advertises, the demo, the sim, events that
//! arrive before their announcement, external mode under the acceptance policy, the status
//! page in a real browser, and the Grafana dashboard and deployment examples in `docs/`. The
//! demo's and the sim's tests need the `sim` feature (`cargo xtask test` passes it).

mod acceptance;
mod cli;
mod dashboard;
#[cfg(feature = "sim")]
mod demo;
mod deploy_examples;
mod early_events;
mod external;
mod external_policy;
mod full_store;
mod git_data;
mod limits;
mod live;
mod outbound;
#[path = "../common/process.rs"]
mod process;
#[path = "../common/raw.rs"]
mod raw;
mod shards;
#[cfg(feature = "sim")]
mod sim;
mod status_page;
mod support;
mod tracking;
