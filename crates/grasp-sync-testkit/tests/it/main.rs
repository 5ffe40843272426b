//! Integration tests for the test kit through its public API: real relays on loopback,
//! a real nostr-sdk client, NIP-11 over HTTP, and the network generator.

mod generator;
mod relay;
mod support;
