//! Participants' NIP-65 relay lists (kind 10002), kept in memory only: they are not NIP-34
//! events and never reach the store. The newest list of an author wins (the kind is
//! replaceable), capped at `max_relays_per_participant` relays.
//!
//! Per-author query schedule ([`Schedule`]): an author is due when first seen. Only a query
//! that names them moves them on ([`RelayLists::handle_asked`]); an author no available source
//! can ask stays due. While queries naming them are out, they are not due (for one retry
//! interval at most, should a query never end). A list found moves
//! the next query one refresh interval on. When their last query ends without a list, they are
//! due again one retry interval after they were asked if any of those queries succeeded (an
//! author without a list: their events are still found on the repositories' own relays
//! meanwhile), or at once if all failed (the failing sources' own identity pauses decide when
//! they are asked again). A failure never undoes another source's answer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use grasp_sync_model::{Pack, RelayUrl};
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
    schedule: BTreeMap<PublicKey, Schedule>,
}

/// When an author's relay list is asked for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schedule {
    /// Due at this instant.
    Due(Instant),
    /// Named by `outstanding` queries not yet ended, the last of them sent at `asked_at`.
    /// Due again one retry interval after that, should a query never end.
    Asked {
        outstanding: u32,
        asked_at: Instant,
        /// One of the ended queries succeeded.
        answered: bool,
    },
}

impl Schedule {
    fn due_at(self, retry: Duration) -> Instant {
        match self {
            Schedule::Due(at) => at,
            Schedule::Asked { asked_at, .. } => asked_at + retry,
        }
    }
}

impl RelayLists {
    /// Rebuilds the lists' and the schedule's B-trees with full nodes ([`Pack`]); they do not
    /// change.
    pub(crate) fn pack(&mut self) {
        self.lists.pack();
        self.schedule.pack();
    }

    /// Empty, with the list cap and the two cadences.
    pub(crate) fn new(max_relays: usize, refresh: Duration, retry: Duration) -> Self {
        Self {
            max_relays,
            refresh,
            retry,
            lists: BTreeMap::new(),
            schedule: BTreeMap::new(),
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
            let at = self
                .schedule
                .get(author)
                .copied()
                .unwrap_or(Schedule::Due(now));
            next.insert(*author, at);
        }
        self.schedule = next;
        let known = &self.schedule;
        self.lists.retain(|author, _| known.contains_key(author));
    }

    /// The authors due at `now`. Nothing moves until a query names them
    /// ([`RelayLists::handle_asked`]).
    pub(crate) fn due(&self, now: Instant) -> Vec<PublicKey> {
        self.schedule
            .iter()
            .filter(|(_, s)| s.due_at(self.retry) <= now)
            .map(|(author, _)| *author)
            .collect()
    }

    /// A query naming `authors` was sent at `now`: each is not due while it is out.
    pub(crate) fn handle_asked(&mut self, authors: &[PublicKey], now: Instant) {
        for author in authors {
            let Some(schedule) = self.schedule.get_mut(author) else {
                continue;
            };
            *schedule = match *schedule {
                Schedule::Due(_) => Schedule::Asked {
                    outstanding: 1,
                    asked_at: now,
                    answered: false,
                },
                Schedule::Asked {
                    outstanding,
                    answered,
                    ..
                } => Schedule::Asked {
                    outstanding: outstanding.saturating_add(1),
                    asked_at: now,
                    answered,
                },
            };
        }
    }

    /// A query naming `authors` ended at `now`, successfully or not.
    pub(crate) fn handle_query_done(&mut self, authors: &[PublicKey], success: bool, now: Instant) {
        let retry = self.retry;
        for author in authors {
            let Some(schedule) = self.schedule.get_mut(author) else {
                continue;
            };
            let Schedule::Asked {
                outstanding,
                asked_at,
                answered,
            } = *schedule
            else {
                continue; // a list arrived meanwhile: its refresh deadline stands
            };
            let answered = answered || success;
            *schedule = match outstanding.saturating_sub(1) {
                0 if answered => Schedule::Due(asked_at + retry),
                0 => Schedule::Due(now),
                outstanding => Schedule::Asked {
                    outstanding,
                    asked_at,
                    answered,
                },
            };
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
        let Some(schedule) = self.schedule.get_mut(&event.pubkey) else {
            return Err(RelayListError::NotAParticipant);
        };
        *schedule = Schedule::Due(now + self.refresh);
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
        self.schedule.values().map(|s| s.due_at(self.retry)).min()
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
