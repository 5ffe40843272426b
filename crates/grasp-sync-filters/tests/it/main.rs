//! Integration tests of the public API: wire sizes, properties and packing at scale.

mod properties;
mod scale;
mod support;
mod wire;
