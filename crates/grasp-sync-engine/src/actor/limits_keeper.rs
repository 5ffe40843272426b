//! Keeping what relays taught for the next run: restored into a relay's runtime when it is
//! first tracked, observed at every health tick, written one write at a time on a blocking
//! thread, and flushed at shutdown.

use std::sync::Arc;

use grasp_sync_ledger::LearnedLimits;
use grasp_sync_model::RelayUrl;

use super::Actor;
use super::runtime::RelayRuntime;
use crate::limits_memory::{LimitsMemory, RememberedRelays};

/// The kept limits and where they are written.
pub(crate) struct LimitsKeeper {
    memory: Arc<dyn LimitsMemory>,
    remembered: RememberedRelays,
    write: Option<tokio::task::JoinHandle<()>>,
}

impl LimitsKeeper {
    /// Keeps `remembered` (already restored) in `memory`.
    pub(crate) fn new(memory: Arc<dyn LimitsMemory>, remembered: RememberedRelays) -> Self {
        Self {
            memory,
            remembered,
            write: None,
        }
    }

    /// Starts a write of the records if they changed and no write is running.
    fn write_changes(&mut self) {
        if self.write.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        if let Some(records) = self.remembered.take_changes() {
            let memory = Arc::clone(&self.memory);
            self.write = Some(tokio::task::spawn_blocking(move || {
                if let Err(error) = memory.save(&records) {
                    tracing::warn!(%error, "could not keep the learned relay limits; a restart learns them again");
                }
            }));
        }
    }

    /// Waits for a running write, then writes what changed since.
    async fn flush(&mut self) {
        if let Some(write) = self.write.take() {
            let _ = write.await;
        }
        self.write_changes();
        if let Some(write) = self.write.take() {
            let _ = write.await;
        }
    }
}

impl Actor {
    /// Starts `runtime` of `relay` from what an earlier run learned, if it is kept.
    pub(super) fn restore_learned(&self, relay: &RelayUrl, runtime: &mut RelayRuntime) {
        let Some(record) = self
            .limits
            .as_ref()
            .and_then(|keeper| keeper.remembered.get(relay))
        else {
            return;
        };
        runtime.learned = LearnedLimits::remembered(record.ledger_limits());
        runtime.learned_slots = record.subscription_slots;
        tracing::info!(%relay, slots = ?record.subscription_slots,
            filter_ceiling = ?record.filter_ceiling, byte_cap = ?record.retained_byte_cap,
            "restored the limits this relay taught an earlier run");
    }

    /// Records what every relay has taught so far and writes it if it changed.
    pub(super) fn keep_learned(&mut self) {
        let unix = self.clock.unix_now().as_secs();
        let Some(keeper) = self.limits.as_mut() else {
            return;
        };
        for (relay, runtime) in &self.runtimes {
            keeper.remembered.observe(
                relay,
                runtime.learned_slots,
                runtime.learned.to_remember(),
                unix,
            );
        }
        keeper.write_changes();
    }

    /// Writes what was learned before the engine stops.
    pub(super) async fn flush_learned(&mut self) {
        self.keep_learned();
        if let Some(keeper) = self.limits.as_mut() {
            keeper.flush().await;
        }
    }
}
