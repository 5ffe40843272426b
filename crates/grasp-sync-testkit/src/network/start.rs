//! `TestNetwork`: one running `TestRelay` per relay index (outbox relays last), seeded with a
//! generated network.

use std::collections::BTreeSet;

use nostr::EventId;

use super::{GeneratedNetwork, NetworkSpec, generate};
use crate::TestkitError;
use crate::relay::{TestRelay, TestRelayConfig, seed_database};

/// Running relays seeded with a generated network.
#[derive(Debug)]
pub struct TestNetwork {
    /// The relays, by index.
    pub relays: Vec<TestRelay>,
    /// What was seeded and what a correct sync must store.
    pub generated: GeneratedNetwork,
}

impl TestNetwork {
    /// Starts `spec.relay_count()` relays (the listed relays, then the outbox relays), relay
    /// `i` with `configs[i]` (or `configs[0]` for every relay when one config is given),
    /// generates the network for their URLs and seeds it.
    pub async fn start(
        spec: &NetworkSpec,
        configs: &[TestRelayConfig],
    ) -> Result<TestNetwork, TestkitError> {
        let count = spec.relay_count();
        if configs.len() != count && configs.len() != 1 {
            return Err(TestkitError::InvalidSpec(format!(
                "{count} relays in the spec (outbox relays included) but {} relay configs",
                configs.len()
            )));
        }
        let mut relays = Vec::with_capacity(count);
        for i in 0..count {
            let config = configs.get(i).unwrap_or(&configs[0]);
            relays.push(TestRelay::start(config.clone()).await?);
        }
        let urls: Vec<String> = relays.iter().map(TestRelay::url).collect();
        let generated = generate(spec, &urls)?;
        let mut seeding = tokio::task::JoinSet::new();
        for (relay, events) in relays.iter().zip(&generated.relay_events) {
            let database = relay.database();
            let events = events.clone();
            seeding.spawn(async move { seed_database(&database, events).await });
        }
        while let Some(seeded) = seeding.join_next().await {
            seeded??;
        }
        Ok(TestNetwork { relays, generated })
    }

    /// The relays' URLs, by index.
    pub fn urls(&self) -> Vec<String> {
        self.relays.iter().map(TestRelay::url).collect()
    }

    /// IDs a correct sync into the service stores.
    pub fn expected(&self) -> &BTreeSet<EventId> {
        &self.generated.expected
    }

    /// Stops every relay.
    pub async fn stop(&mut self) -> Result<(), TestkitError> {
        for relay in &mut self.relays {
            relay.stop().await?;
        }
        Ok(())
    }
}
