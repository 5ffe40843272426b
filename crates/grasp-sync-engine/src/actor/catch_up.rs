//! Drives each relay's paced catch-up ([`crate::machine::catch_up`]): hands it the coverage no
//! live connection holds, opens its due query as a historic batch, and tells it how its batch
//! ended.

use grasp_sync_ledger::LivePlan;
use grasp_sync_model::{PendingItems, RelayUrl};
use nostr::Filter;

use super::Actor;
use crate::machine::catch_up::catch_up_filters;

impl Actor {
    /// Records the coverage `plan` left out of the live set for the byte cap (and the lower
    /// tiers deferred behind it), so the catch-up fetches it.
    pub(super) fn note_catch_up(&mut self, relay: &RelayUrl, plan: &LivePlan) {
        let filters = catch_up_filters(plan);
        if !filters.is_empty() {
            self.hand_to_catch_up(relay, filters);
        }
    }

    /// Adds coverage no live connection holds to the catch-up: a byte cap or every
    /// connection's budget keeps it out of the live set.
    pub(super) fn hand_to_catch_up(&mut self, relay: &RelayUrl, filters: Vec<Filter>) {
        let now = self.now();
        let unix = self.clock.unix_now();
        let interval = self.config.catch_up_interval;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if runtime
            .machine
            .catch_up
            .handle_coverage(now, unix, interval, filters)
        {
            tracing::info!(%relay, filters = runtime.machine.catch_up.len(),
                "coverage no live subscription holds gets a paced catch-up");
        }
    }

    /// Opens the catch-up query when it is due, the relay is connected and none is in flight.
    /// A batch with nothing to send is complete at once.
    pub(super) fn run_catch_up(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let interval = self.config.catch_up_interval;
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if runtime.machine.session.is_none() {
            return;
        }
        let Some(filters) = runtime.machine.catch_up.poll_query(now, interval) else {
            return;
        };
        runtime.machine.stats.catch_ups += 1;
        let unix = self.clock.unix_now();
        let Some(batch) = self.open_historic_batch(relay, PendingItems::default(), filters) else {
            return;
        };
        let pending = self
            .pending
            .batches(relay)
            .iter()
            .any(|b| b.batch_id == batch);
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime
                .machine
                .catch_up
                .handle_opened(pending.then_some(batch), unix);
        }
        self.drive_queue(relay);
    }

    /// A new session re-derives the mode from its own live planning.
    pub(super) fn reset_catch_up(&mut self, relay: &RelayUrl) {
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.catch_up = Default::default();
        }
    }
}
