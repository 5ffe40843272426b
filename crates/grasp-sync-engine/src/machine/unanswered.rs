//! The REQs a connection sent that the relay has not answered yet, oldest first: what a
//! refusal in a `NOTICE`, which names no subscription, answers.
//!
//! The rules, from how relays answer a connection:
//! - A relay reads a connection's messages in order and refuses a REQ at once, while an
//!   accepted REQ's events and `EOSE` come after its query. So an answer to one REQ (an event,
//!   an `EOSE`, a `CLOSED`) shows that every REQ sent before it was either answered already or
//!   not refused: they leave the list ([`UnansweredReqs::answered`]).
//! - The engine may `CLOSE` a REQ before the relay's answer to it arrives (a rebuild, a
//!   repack). It stays in the list: a `NOTICE` on its way may answer it, and then refuses
//!   nothing the connection still holds ([`NoticeTarget::Retired`]).
//! - A relay that asks for NIP-42 authentication before it serves reads refuses every REQ
//!   until then, in order: an `auth-required:` `NOTICE` answers the oldest REQ not answered
//!   ([`UnansweredReqs::take_oldest`]).
//! - A filter-count refusal answers the held REQ with the most filters
//!   ([`UnansweredReqs::take_widest_held`]); any other refusal the newest held REQ, since a
//!   refusal comes before the results of an earlier accepted REQ
//!   ([`UnansweredReqs::take_newest_held`]).

use std::collections::VecDeque;

use nostr::SubscriptionId;

/// How many unanswered REQs a connection remembers for matching a refusal `NOTICE`.
pub const UNANSWERED_KEPT: usize = 64;

/// The REQs a connection sent that the relay has not answered yet, oldest first, with the
/// number of filters each was sent with (at most [`UNANSWERED_KEPT`]).
#[derive(Debug, Default)]
pub struct UnansweredReqs {
    entries: VecDeque<(SubscriptionId, usize)>,
}

/// The REQ a refusal `NOTICE` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeTarget {
    /// A REQ the connection still holds.
    Held(SubscriptionId),
    /// A REQ the engine closed before the relay's answer arrived, sent with this many filters.
    Retired(SubscriptionId, usize),
}

impl UnansweredReqs {
    /// REQ `id` was sent with `filters` filters (a REQ sent again under the same ID moves to
    /// the end).
    pub fn sent(&mut self, id: &SubscriptionId, filters: usize) {
        self.entries.retain(|(u, _)| u != id);
        if self.entries.len() >= UNANSWERED_KEPT {
            self.entries.pop_front();
        }
        self.entries.push_back((id.clone(), filters));
    }

    /// The relay answered `id`: the number of filters its REQ was sent with, if this is the
    /// first answer to it. The REQs sent before it leave the list with it.
    pub fn answered(&mut self, id: &SubscriptionId) -> Option<usize> {
        let at = self.entries.iter().position(|(u, _)| u == id)?;
        self.entries
            .drain(..=at)
            .next_back()
            .map(|(_, filters)| filters)
    }

    /// The oldest REQ not answered, held or retired (what an `auth-required:` `NOTICE`
    /// answers); `held` says whether the connection still holds a subscription.
    pub fn take_oldest(&mut self, held: impl Fn(&SubscriptionId) -> bool) -> Option<NoticeTarget> {
        let (id, filters) = self.entries.pop_front()?;
        Some(if held(&id) {
            NoticeTarget::Held(id)
        } else {
            NoticeTarget::Retired(id, filters)
        })
    }

    /// The newest REQ not answered that the connection still holds; the retired ones after it
    /// leave the list.
    pub fn take_newest_held(
        &mut self,
        held: impl Fn(&SubscriptionId) -> bool,
    ) -> Option<SubscriptionId> {
        while let Some((id, _)) = self.entries.pop_back() {
            if held(&id) {
                return Some(id);
            }
        }
        None
    }

    /// Of the REQs not answered that the connection still holds, the one with the most
    /// filters, the newest among equals: what a refusal of a filter count answers. A REQ of
    /// one filter is never refused for its count, and a burst of REQs may be answered in any
    /// order (a refusal comes at once, results after a query), so the newest unanswered REQ
    /// is not always the one refused.
    pub fn take_widest_held(
        &mut self,
        held: impl Fn(&SubscriptionId) -> bool,
    ) -> Option<SubscriptionId> {
        let at = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, (id, filters))| *filters > 1 && held(id))
            .max_by_key(|(at, (_, filters))| (*filters, *at))
            .map(|(at, _)| at)?;
        self.entries.remove(at).map(|(id, _)| id)
    }

    /// How many REQs are not answered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests;
