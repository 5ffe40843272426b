//! The dial attempts one relay's machine decided, as data: its session or an extra live
//! connection it wants opened, numbered so the dial reports that come back name their attempt
//! (the numbers are the driver's, unique across relays). The driver hands them to the dial
//! workers at the end of the step, in the order decided; the workers then space the
//! handshakes.

use std::collections::VecDeque;

#[cfg(test)]
mod tests;

/// The attempts decided and not yet handed to the dial workers, oldest first.
#[derive(Debug, Default)]
pub struct Dials {
    queue: VecDeque<u64>,
}

impl Dials {
    /// Queues attempt `attempt` after those already waiting.
    pub fn push(&mut self, attempt: u64) {
        self.queue.push_back(attempt);
    }

    /// The oldest attempt waiting, to be handed over now.
    pub fn poll_dial(&mut self) -> Option<u64> {
        self.queue.pop_front()
    }
}
