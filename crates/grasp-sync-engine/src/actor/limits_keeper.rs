//! Keeping what relays taught for the next run: restored into a relay's runtime when it is
//! first tracked, observed at every health tick, written one write at a time on a blocking
//! thread, and flushed at shutdown.

use std::sync::Arc;

use futures::FutureExt;

use grasp_sync_ledger::LearnedLimits;
use grasp_sync_model::RelayUrl;

use super::Actor;
use super::runtime::RelayRuntime;
use crate::limits_memory::{LimitsMemory, RememberedRelays};

/// The kept limits and where they are written.
pub(crate) struct LimitsKeeper {
    memory: Arc<dyn LimitsMemory>,
    remembered: RememberedRelays,
    /// The running write; it answers whether it succeeded.
    write: Option<tokio::task::JoinHandle<bool>>,
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

    /// Starts a write of the records if they changed and no write is running. A write that
    /// failed leaves the records changed, so the next call writes them again.
    fn write_changes(&mut self) {
        match self.write.take() {
            Some(write) if !write.is_finished() => {
                self.write = Some(write);
                return;
            }
            Some(write) => self.written(write.now_or_never()),
            None => {}
        }
        if let Some(records) = self.remembered.take_changes() {
            let memory = Arc::clone(&self.memory);
            self.write = Some(tokio::task::spawn_blocking(move || {
                match memory.save(&records) {
                    Ok(()) => true,
                    Err(error) => {
                        tracing::warn!(%error, "could not keep the learned relay limits; trying again at the next change check");
                        false
                    }
                }
            }));
        }
    }

    /// What a finished write answered: anything but success keeps the records changed.
    fn written(&mut self, outcome: Option<Result<bool, tokio::task::JoinError>>) {
        if !matches!(outcome, Some(Ok(true))) {
            self.remembered.mark_changed();
        }
    }

    /// Waits for a running write, then writes what changed since (once more if it failed).
    async fn flush(&mut self) {
        for _ in 0..2 {
            if let Some(write) = self.write.take() {
                let outcome = write.await;
                self.written(Some(outcome));
            }
            self.write_changes();
        }
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
        runtime.machine.learned = LearnedLimits::remembered(record.ledger_limits());
        runtime.machine.learned_slots = record.subscription_slots;
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
                runtime.machine.learned_slots,
                runtime.machine.learned.to_remember(),
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use grasp_sync_ledger::RememberedLimits;

    use super::*;
    use crate::limits_memory::{LimitsMemoryError, RelayLimitsRecord};

    /// A memory whose first `failures` saves fail; it keeps what the last good save wrote.
    struct FlakyMemory {
        failures: Mutex<usize>,
        saves: Mutex<usize>,
        kept: Mutex<Vec<(RelayUrl, RelayLimitsRecord)>>,
    }

    impl LimitsMemory for FlakyMemory {
        fn load(&self) -> Result<Vec<(RelayUrl, RelayLimitsRecord)>, LimitsMemoryError> {
            Ok(Vec::new())
        }

        fn save(&self, records: &[(RelayUrl, RelayLimitsRecord)]) -> Result<(), LimitsMemoryError> {
            *self.saves.lock().expect("lock") += 1;
            let mut failures = self.failures.lock().expect("lock");
            if *failures > 0 {
                *failures -= 1;
                return Err(LimitsMemoryError::Io {
                    path: "memory".to_owned(),
                    source: std::io::Error::other("disk full"),
                });
            }
            *self.kept.lock().expect("lock") = records.to_vec();
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_failed_write_is_written_again() {
        let memory = Arc::new(FlakyMemory {
            failures: Mutex::new(1),
            saves: Mutex::new(0),
            kept: Mutex::new(Vec::new()),
        });
        let mut keeper = LimitsKeeper::new(
            Arc::clone(&memory) as Arc<dyn LimitsMemory>,
            RememberedRelays::default(),
        );
        let relay = RelayUrl::parse("wss://relay.example").expect("url");
        keeper
            .remembered
            .observe(&relay, Some(6), RememberedLimits::default(), 10);
        keeper.flush().await;
        assert_eq!(*memory.saves.lock().expect("lock"), 2);
        let kept = memory.kept.lock().expect("lock").clone();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].1.subscription_slots, Some(6));
    }
}
