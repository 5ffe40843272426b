//! The dial attempts decided in a step, as data: a relay's session or an extra live connection
//! the machine wants opened, numbered so the dial reports that come back name their attempt.
//! The actor hands them to the dial workers at the end of the step, in the order decided;
//! the workers then space the handshakes.

use std::collections::VecDeque;

use grasp_sync_model::RelayUrl;

#[cfg(test)]
mod tests;

/// One dial attempt to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DialRequest {
    pub(crate) relay: RelayUrl,
    /// Echoed in the attempt's reports.
    pub(crate) attempt: u64,
}

/// The attempts decided and not yet handed to the dial workers, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Dials {
    queue: VecDeque<DialRequest>,
}

impl Dials {
    /// Queues attempt `attempt` on `relay` after those already waiting.
    pub(crate) fn push(&mut self, relay: RelayUrl, attempt: u64) {
        self.queue.push_back(DialRequest { relay, attempt });
    }

    /// The oldest attempt waiting, to be handed over now.
    pub(crate) fn poll_dial(&mut self) -> Option<DialRequest> {
        self.queue.pop_front()
    }
}
