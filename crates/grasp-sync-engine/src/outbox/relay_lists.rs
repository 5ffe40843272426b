//! Participants' NIP-65 relay lists (kind 10002), kept in memory only: they are not NIP-34
//! events and never reach the store. The newest list of an author wins (the kind is
//! replaceable), capped at `max_relays_per_participant` relays.
//!
//! Per-author query deadlines: an author is due when first seen; handing their name to a
//! query moves the deadline one retry interval on (an author without a list is asked again on
//! that cadence, and their events are still found on the repositories' own relays meanwhile);
//! a list found moves it one refresh interval on; a failed query makes them due again at once
//! (the failing source's own identity pause decides when it is asked again).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use grasp_sync_model::RelayUrl;
use nostr::nips::nip65::{RelayMetadata, extract_relay_list};
use nostr::{Event, Kind, PublicKey, Timestamp};

use crate::error::RelayListError;

/// One author's newest relay list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RelayList {
    /// `created_at` of the event it came from.
    pub(crate) created_at: Timestamp,
    /// Relays the author writes to (unmarked `r` tags count as both).
    pub(crate) write: Vec<RelayUrl>,
    /// Relays the author reads from.
    pub(crate) read: Vec<RelayUrl>,
}

/// Every participant's relay list and query deadline.
#[derive(Debug)]
pub(crate) struct RelayLists {
    max_relays: usize,
    refresh: Duration,
    retry: Duration,
    lists: BTreeMap<PublicKey, RelayList>,
    next_query: BTreeMap<PublicKey, Instant>,
}

impl RelayLists {
    /// Empty, with the list cap and the two cadences.
    pub(crate) fn new(max_relays: usize, refresh: Duration, retry: Duration) -> Self {
        Self {
            max_relays,
            refresh,
            retry,
            lists: BTreeMap::new(),
            next_query: BTreeMap::new(),
        }
    }

    /// The participants are now `authors`: new ones are due at `now`, gone ones forgotten.
    pub(crate) fn handle_authors<'a>(
        &mut self,
        authors: impl IntoIterator<Item = &'a PublicKey>,
        now: Instant,
    ) {
        let mut next = BTreeMap::new();
        for author in authors {
            let at = self.next_query.get(author).copied().unwrap_or(now);
            next.insert(*author, at);
        }
        self.next_query = next;
        let known = &self.next_query;
        self.lists.retain(|author, _| known.contains_key(author));
    }

    /// Up to `limit` authors whose deadline passed; each moves one retry interval on.
    pub(crate) fn poll_due(&mut self, now: Instant, limit: usize) -> Vec<PublicKey> {
        let due: Vec<PublicKey> = self
            .next_query
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(author, _)| *author)
            .take(limit)
            .collect();
        for author in &due {
            self.next_query.insert(*author, now + self.retry);
        }
        due
    }

    /// A query naming `authors` failed: they are due again at once.
    pub(crate) fn handle_query_failed(&mut self, authors: &[PublicKey], now: Instant) {
        for author in authors {
            if let Some(at) = self.next_query.get_mut(author) {
                *at = (*at).min(now);
            }
        }
    }

    /// A relay list arrived. Returns whether it replaced what was known.
    pub(crate) fn handle_relay_list(
        &mut self,
        event: &Event,
        now: Instant,
    ) -> Result<bool, RelayListError> {
        if event.kind != Kind::RelayList {
            return Err(RelayListError::WrongKind(event.kind.as_u16()));
        }
        if !self.next_query.contains_key(&event.pubkey) {
            return Err(RelayListError::NotAParticipant);
        }
        self.next_query.insert(event.pubkey, now + self.refresh);
        if self
            .lists
            .get(&event.pubkey)
            .is_some_and(|known| known.created_at >= event.created_at)
        {
            return Ok(false);
        }
        let list = self.parse(event);
        self.lists.insert(event.pubkey, list);
        Ok(true)
    }

    /// One author's list.
    pub(crate) fn get(&self, author: &PublicKey) -> Option<&RelayList> {
        self.lists.get(author)
    }

    /// Authors with a known list.
    pub(crate) fn len(&self) -> usize {
        self.lists.len()
    }

    /// The earliest author deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.next_query.values().min().copied()
    }

    fn parse(&self, event: &Event) -> RelayList {
        let mut list = RelayList {
            created_at: event.created_at,
            write: Vec::new(),
            read: Vec::new(),
        };
        let mut taken = 0;
        for (url, marker) in extract_relay_list(event) {
            if taken >= self.max_relays {
                break;
            }
            let Ok(url) = RelayUrl::parse(url.as_str()) else {
                continue;
            };
            if list.write.contains(&url) || list.read.contains(&url) {
                continue;
            }
            taken += 1;
            match marker {
                Some(RelayMetadata::Write) => list.write.push(url),
                Some(RelayMetadata::Read) => list.read.push(url),
                None => {
                    list.write.push(url.clone());
                    list.read.push(url);
                }
            }
        }
        list
    }
}
