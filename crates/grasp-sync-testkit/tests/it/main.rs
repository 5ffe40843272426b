//! Integration tests for the test kit through its public API: real relays on loopback,
//! a real nostr-sdk client, NIP-11 over HTTP, the strict relay's limits, texts and query
//! quirks, and the network generator.

mod auth;
mod generator;
mod quirks;
mod relay;
mod strict;
mod support;
