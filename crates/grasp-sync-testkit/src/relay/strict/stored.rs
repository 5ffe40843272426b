//! `StoredPhases`: the sans-IO bookkeeping of a quirk relay's proxy for the stored-event phase
//! of each forwarded REQ. It decides which REQs the proxy answers itself (forwarding them to
//! the relay with every `limit` set to 0, for the live part), which EOSE of the relay takes
//! the proxy's answer instead, which EOSE is dropped, and which live events repeat an event
//! the proxy's answer already carried.

use std::collections::{HashMap, HashSet, VecDeque};

use nostr::{ClientMessage, Filter, JsonUtil, SubscriptionId};

use super::QueryQuirks;
use super::quirks::asks_stored;

/// What the proxy does with the relay's EOSE that ends one forwarded REQ's stored phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EoseAction {
    /// Pass it to the client.
    Pass,
    /// Drop it (`no_eose_for_live`).
    Drop,
    /// Send the proxy's own answer to these filters, then an EOSE, in its place.
    Answer(Vec<Filter>),
}

/// Per-connection state; one per proxied connection of a relay with quirks.
#[derive(Debug)]
pub(crate) struct StoredPhases {
    quirks: QueryQuirks,
    /// Per subscription ID, one action per forwarded REQ whose relay EOSE has not come yet,
    /// oldest first: the relay answers a connection's REQs in order.
    pending: HashMap<String, VecDeque<EoseAction>>,
    /// Per subscription ID, the events the proxy's answers sent, until the subscription ends.
    answered: HashMap<String, HashSet<String>>,
    /// Live events seen on this connection (`skip_live_every`).
    live_events: u64,
    /// The last live event counted, and whether it is skipped: the relay skips an event for
    /// the whole connection, so its frames for other subscriptions share the decision.
    last_live: Option<(String, bool)>,
}

impl StoredPhases {
    pub(crate) fn new(quirks: QueryQuirks) -> Self {
        Self {
            quirks,
            pending: HashMap::new(),
            answered: HashMap::new(),
            live_events: 0,
            last_live: None,
        }
    }

    /// A REQ the gate forwards. Returns the frame to send the relay instead of the client's,
    /// when the proxy answers the stored part itself.
    pub(crate) fn handle_req(&mut self, id: &str, filters: &[Filter]) -> Option<String> {
        let asks = filters.iter().any(asks_stored);
        let (action, upstream) = if asks && self.quirks.answers_stored() {
            let live: Vec<Filter> = filters.iter().cloned().map(|f| f.limit(0)).collect();
            let frame = ClientMessage::req(SubscriptionId::new(id), live).as_json();
            (EoseAction::Answer(filters.to_vec()), Some(frame))
        } else if !asks && !filters.is_empty() && self.quirks.no_eose_for_live {
            (EoseAction::Drop, None)
        } else {
            (EoseAction::Pass, None)
        };
        self.pending
            .entry(id.to_owned())
            .or_default()
            .push_back(action);
        upstream
    }

    /// The subscription ended on the client's side (its CLOSE, or a refusal that ended it).
    pub(crate) fn handle_close(&mut self, id: &str) {
        self.answered.remove(id);
    }

    /// The relay's EOSE for `id`: what to do with it. An EOSE nothing is pending for passes.
    pub(crate) fn handle_eose(&mut self, id: &str) -> EoseAction {
        let Some(queue) = self.pending.get_mut(id) else {
            return EoseAction::Pass;
        };
        let action = queue.pop_front().unwrap_or(EoseAction::Pass);
        if queue.is_empty() {
            self.pending.remove(id);
        }
        action
    }

    /// The relay's CLOSED for `id` with `message`. A refusal (non-empty text) answers the REQ
    /// instead of an EOSE and ends its stored phase; the empty `CLOSED` the rust-nostr relay
    /// builder sends after the EOSE of a REQ whose every ID was found does not.
    pub(crate) fn handle_closed(&mut self, id: &str, message: &str) {
        self.answered.remove(id);
        if message.is_empty() {
            return;
        }
        if let Some(queue) = self.pending.get_mut(id) {
            queue.pop_front();
            if queue.is_empty() {
                self.pending.remove(id);
            }
        }
    }

    /// Records the events the proxy's answer for `id` sent.
    pub(crate) fn answered(&mut self, id: &str, events: impl IntoIterator<Item = String>) {
        self.answered
            .entry(id.to_owned())
            .or_default()
            .extend(events);
    }

    /// Whether the relay skips `event`, delivered for subscription `id` (`skip_live_every`):
    /// every Nth live event of the connection, one that comes after the subscription's stored
    /// phase ended. The relay builder drops a lagged event from the connection's broadcast
    /// before it matches any subscription, so an event counts once however many
    /// subscriptions it matches, and every one of them misses it or none does.
    pub(crate) fn skips(&mut self, id: &str, event: &str) -> bool {
        let Some(every) = self.quirks.skip_live_every.filter(|n| *n > 0) else {
            return false;
        };
        if self.pending.contains_key(id) {
            return false;
        }
        if let Some((last, skipped)) = &self.last_live
            && last == event
        {
            return *skipped;
        }
        self.live_events += 1;
        let skipped = self.live_events.is_multiple_of(u64::from(every));
        self.last_live = Some((event.to_owned(), skipped));
        skipped
    }

    /// Whether a live event for `id` repeats one the proxy's answer already sent: an event
    /// stored after the relay took the subscription and before the proxy read the store.
    pub(crate) fn repeats(&self, id: &str, event: &str) -> bool {
        self.answered
            .get(id)
            .is_some_and(|sent| sent.contains(event))
    }
}

#[cfg(test)]
mod tests;
