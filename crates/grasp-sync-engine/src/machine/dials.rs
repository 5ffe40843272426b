//! The dial attempts one relay's machine decided, as data: its session or an extra live
//! connection it wants opened, numbered so the dial reports that come back name their attempt
//! (the numbers are the driver's, unique across relays). The driver hands them to the dial
//! workers at the end of the step, in the order decided, with what each connection is for; the
//! workers then space the handshakes.

use std::collections::VecDeque;

#[cfg(test)]
mod tests;

/// What a dialled connection is for, which decides how the transport sets it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialPurpose {
    /// The relay's session.
    Session,
    /// An extra connection ([`crate::machine::lanes`]), which holds live groups only: every
    /// REQ it sends asks for `limit: 0`, so it is never sent a stored history.
    LiveOnly,
}

/// One dial attempt decided: its number and what the connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dial {
    /// The attempt's number, echoed by the dial reports.
    pub attempt: u64,
    /// What the connection is for.
    pub purpose: DialPurpose,
}

/// The attempts decided and not yet handed to the dial workers, oldest first.
#[derive(Debug, Default)]
pub struct Dials {
    queue: VecDeque<Dial>,
}

impl Dials {
    /// Queues `dial` after those already waiting.
    pub fn push(&mut self, dial: Dial) {
        self.queue.push_back(dial);
    }

    /// The oldest attempt waiting, to be handed over now.
    pub fn poll_dial(&mut self) -> Option<Dial> {
        self.queue.pop_front()
    }
}
