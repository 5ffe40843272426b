//! The daily round over a relay's holdings, while it runs ([`HoldingsRound`]).
//!
//! One NIP-77 round over `{}` asks the relay what it holds against what it held last time. Its
//! diff says which of those events the relay still holds and which IDs are new to the store;
//! the new ones are fetched by exact ID, and each delivery adds its `created_at` (which only
//! the event carries) to what the relay holds, whatever the acceptance policy makes of it.
//! When the fetches drained, the round's [`HoldingsRound::finish`] is what to keep for the
//! next daily run. A round that failed keeps nothing, except that a relay naming more new IDs
//! than a round takes, or refusing the round, is remembered as too large.
//!
//! Before its first daily run, a relay's holdings are learned from its first connection in
//! the run ([`HoldingsLearning`]): every event it delivers, and what each NIP-77 round showed
//! it holds of the store's events. So the first daily run asks about what the relay holds
//! beyond the coverage (events of repositories not tracked here) and little else.
//!
//! A session that starts without confirmed state, where holdings are kept, starts over them
//! ([`OverHoldings`]): one round covers what the relay targets then, and coverage the index
//! adds later goes by more rounds over `{}`, one at a time, instead of named rounds.
//!
//! Pure state: the driver reads and writes the kept holdings and runs the round.

use std::collections::BTreeSet;

use grasp_sync_model::BatchId;
use nostr::{Event, EventId, SubscriptionId, Timestamp};

#[cfg(test)]
mod tests;

/// The most events learned or kept for one relay.
pub const MAX_HELD_EVENTS: usize = 250_000;

/// What a relay showed it holds from its first connection in this run until its first daily
/// run: the events it delivered (live ones too) and those of the store its NIP-77 rounds found
/// it holding, with `created_at`. The driver takes what it learned at each completion of the
/// relay's historic sync. Past [`MAX_HELD_EVENTS`] distinct events between two completions it
/// stops learning and keeps nothing; duplicates are dropped once twice that many arrived, so
/// the list holds at most twice the cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldingsLearning {
    held: Vec<(EventId, Timestamp)>,
    overflowed: bool,
}

impl HoldingsLearning {
    /// The relay holds `events`.
    pub fn handle_held(&mut self, events: impl IntoIterator<Item = (EventId, Timestamp)>) {
        if self.overflowed {
            return;
        }
        for event in events {
            self.held.push(event);
            if self.held.len() > 2 * MAX_HELD_EVENTS {
                self.held.sort_unstable();
                self.held.dedup_by_key(|(id, _)| *id);
                if self.held.len() > MAX_HELD_EVENTS {
                    self.overflowed = true;
                    self.held = Vec::new();
                    return;
                }
            }
        }
    }

    /// What was learned, unless the relay showed too much to learn.
    pub fn finish(self) -> Option<Vec<(EventId, Timestamp)>> {
        (!self.overflowed).then_some(self.held)
    }

    /// Whether the relay showed too much to learn.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }
}

/// The daily round over one relay's holdings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldingsRound {
    /// Its pending batch.
    pub batch: BatchId,
    /// Its round's subscription.
    pub subscription_id: SubscriptionId,
    held: Vec<(EventId, Timestamp)>,
    fetching: BTreeSet<EventId>,
    state: RoundState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundState {
    Running,
    Diffed,
    Failed { too_large: bool },
}

/// What a finished round leaves to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldingsOutcome {
    /// What the relay holds: the IDs and `created_at` the diff and the fetches showed.
    Held(Vec<(EventId, Timestamp)>),
    /// The relay named more new IDs than a round takes, or refused the round.
    TooLarge,
    /// Nothing to keep: the round failed, or never reported.
    Nothing,
}

impl HoldingsRound {
    /// The round `subscription_id` of `batch`, not reported yet.
    pub fn new(batch: BatchId, subscription_id: SubscriptionId) -> Self {
        Self {
            batch,
            subscription_id,
            held: Vec::new(),
            fetching: BTreeSet::new(),
            state: RoundState::Running,
        }
    }

    /// The round's diff: `held`, the events of the "have" set the relay still holds and the
    /// new ones the store holds already (with their `created_at`), and `fetching`, the new IDs
    /// fetched by exact ID.
    pub fn handle_diff(&mut self, held: Vec<(EventId, Timestamp)>, fetching: &[EventId]) {
        self.held = held;
        self.fetching = fetching.iter().copied().collect();
        self.state = RoundState::Diffed;
    }

    /// The round failed; `too_large` when the relay named more new IDs than it takes, or
    /// refused it.
    pub fn handle_failed(&mut self, too_large: bool) {
        self.held = Vec::new();
        self.fetching.clear();
        self.state = RoundState::Failed { too_large };
    }

    /// A fetch of the batch delivered `event`: the relay holds it, whether or not the store
    /// keeps it. Only IDs the diff named count, each once.
    pub fn handle_delivered(&mut self, event: &Event) {
        if self.fetching.remove(&event.id) {
            self.held.push((event.id, event.created_at));
        }
    }

    /// Whether the round failed.
    pub fn failed(&self) -> bool {
        matches!(self.state, RoundState::Failed { .. })
    }

    /// What to keep once the batch ended. New IDs never delivered are left out: the next
    /// round names them again.
    pub fn finish(self) -> HoldingsOutcome {
        match self.state {
            RoundState::Diffed => HoldingsOutcome::Held(self.held),
            RoundState::Failed { too_large: true } => HoldingsOutcome::TooLarge,
            RoundState::Running | RoundState::Failed { too_large: false } => {
                HoldingsOutcome::Nothing
            }
        }
    }
}

/// A session that started over the relay's kept holdings: coverage the index adds to the relay
/// later is reconciled by rounds over `{}` too, one at a time. What is added while a round
/// is queued joins its batch (its "have" set is the relay's holdings, whatever the batch
/// covers); what is added once it started goes into the next round's batch, pending at once,
/// whose round the driver queues when the running one ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverHoldings {
    next: Option<BatchId>,
}

/// Where coverage added to a session over kept holdings goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldingsPlacement {
    /// Into a pending batch: the queued round's, or the next round's.
    Join(BatchId),
    /// Into a new batch for the next round, after the one running
    /// ([`OverHoldings::handle_next_opened`]).
    OpenNext,
    /// Into a new round: none is queued or running.
    Open,
}

impl OverHoldings {
    /// Coverage is added while `round` is queued (`started` false), running, or absent:
    /// where it goes.
    pub fn handle_added(&self, round: Option<(&HoldingsRound, bool)>) -> HoldingsPlacement {
        match (round, self.next) {
            (Some((round, false)), _) => HoldingsPlacement::Join(round.batch),
            (Some((_, true)), Some(next)) => HoldingsPlacement::Join(next),
            (Some((_, true)), None) => HoldingsPlacement::OpenNext,
            (None, _) => HoldingsPlacement::Open,
        }
    }

    /// The driver opened `batch` for the round after the running one.
    pub fn handle_next_opened(&mut self, batch: BatchId) {
        self.next = Some(batch);
    }

    /// The running round ended: the batch whose round is due now, if coverage waits for one.
    pub fn take_next(&mut self) -> Option<BatchId> {
        self.next.take()
    }
}
