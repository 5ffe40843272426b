//! Integration tests of the ledger crate through its public API only: a connection session
//! that drives the ledger, gates and planner together, and the gitnostr-sized planning scenario.

mod gitnostr;
mod scenario;
mod session;
