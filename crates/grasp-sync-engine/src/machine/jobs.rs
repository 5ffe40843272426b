//! What the machine asks of the store and of a relay's NIP-77 support, as data: the store reads
//! and the dry-run rounds a session decided, queued with the session that asked ([`Jobs`]) and
//! performed by the driver as background jobs, whose reports come back as inputs. The NIP-77
//! rounds running at once across every relay are counted here too ([`HistorySlots`]): a round
//! takes its slot at the pacing decision and gives it back when its report is handled, or when
//! it is never performed because its session ended first.

use std::collections::VecDeque;

use grasp_sync_model::BatchId;
use nostr::{EventId, Filter, SubscriptionId, Timestamp};

use crate::machine::transmit::SessionKey;

#[cfg(test)]
mod tests;

/// The (id, `created_at`) items of a filter in the own store: a round's "have" set.
pub type HaveSet = Vec<(EventId, Timestamp)>;

/// Where a round's "have" set is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaveSource {
    /// The events the store holds under the round's filter.
    Store,
    /// The relay's kept holdings (the round's filter is `{}`), those the store holds or
    /// rejected; where none are kept, or they are too old, the events the store holds under
    /// `coverage`, the relay's coverage named, or no round at all where `coverage` is `None`.
    Holdings {
        /// The relay's coverage, as historic filters; `None` when only kept holdings will do
        /// (a fresh start over them).
        coverage: Option<Vec<Filter>>,
    },
}

/// One background job a session asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Read the IDs of the events the store holds that a new batch's `filters` match, up to
    /// `max_held`: how much of its coverage the store already holds.
    ReadHeld {
        /// The new batch.
        batch: BatchId,
        /// Its filters.
        filters: Vec<Filter>,
        /// At most this many IDs are read.
        max_held: usize,
    },
    /// Read a queued round's "have" set.
    ReadHaveSet {
        /// The queued round.
        subscription_id: SubscriptionId,
        /// The round's filter.
        filter: Filter,
        /// Where the set is read from.
        source: HaveSource,
    },
    /// Run one dry-run NIP-77 round over `have`; `probe` while the session does not know yet
    /// whether the relay speaks NIP-77. It holds a [`HistorySlot`](HistorySlots) taken when it
    /// was decided.
    RunRound {
        /// The round.
        subscription_id: SubscriptionId,
        /// The round's filter.
        filter: Filter,
        /// The events the store holds under the filter.
        have: HaveSet,
        /// Whether it is the session's probe of NIP-77 support.
        probe: bool,
        /// Whether it is a round over the relay's holdings ([`HaveSource::Holdings`]): it
        /// takes fewer new IDs than other rounds and reports what the relay holds.
        holdings: bool,
        /// Whether the relay's holdings are being learned: the round reports what the relay
        /// holds of its "have" set.
        learn: bool,
    },
}

/// The jobs decided and not yet performed, oldest first, each with the session that asked.
#[derive(Debug, Default)]
pub struct Jobs {
    queue: VecDeque<(SessionKey, Job)>,
}

impl Jobs {
    /// Queues `job` for the session `key`, after those already waiting.
    pub fn push(&mut self, key: SessionKey, job: Job) {
        self.queue.push_back((key, job));
    }

    /// The oldest job waiting, to be performed now.
    pub fn poll_job(&mut self) -> Option<(SessionKey, Job)> {
        self.queue.pop_front()
    }
}

/// NIP-77 rounds running at once across every relay, at most `cap`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistorySlots {
    running: usize,
    cap: usize,
}

impl HistorySlots {
    /// No round running, at most `cap` at once.
    pub fn new(cap: usize) -> Self {
        Self { running: 0, cap }
    }

    /// Whether a round may take a slot now.
    pub fn is_free(&self) -> bool {
        self.running < self.cap
    }

    /// Takes a slot for a round about to be decided; `false` when every slot is taken.
    pub fn try_take(&mut self) -> bool {
        if !self.is_free() {
            return false;
        }
        self.running += 1;
        true
    }

    /// Gives a slot back: its round reported, was never performed, or was not started after
    /// all. A release with no slot taken is ignored.
    pub fn release(&mut self) {
        self.running = self.running.saturating_sub(1);
    }
}
