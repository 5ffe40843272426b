//! Integration tests of the `grasp-sync` daemon: the command line (the built binary), the
//! embedded relay's acceptance policy over WebSocket, live delivery of synced events to its
//! subscribers, the limits its NIP-11 document advertises, the demo, the sim, and external
//! mode, and the status page in a real browser.

mod acceptance;
mod cli;
mod demo;
mod external;
mod full_store;
mod limits;
mod live;
mod outbound;
#[path = "../common/process.rs"]
mod process;
#[path = "../common/raw.rs"]
mod raw;
mod sim;
mod status_page;
mod support;
mod tracking;
