//! Participants with NIP-65 outbox relays. A seeded share of the contributors (authors of
//! roots, replies and comments, maintainers among them) publish a kind-10002 relay list
//! naming one or two *outbox relays* as write relays: relays of the network, after the listed
//! ones, that no announcement lists. The list is published on the listed relays of every
//! repository they take part in (where a sync connected there finds it) and on their outbox
//! relays. A seeded share of their roots, replies and repository comments is published only
//! on their outbox relays, where they take part in the repository or thread on its listed
//! relays through another event (see [`Part`]): a sync can only know whose outbox to ask for
//! a repository from the people it has seen there, so an event by someone the repository's
//! relays never show, published only to that person's own relays, is out of any sync's reach.
//! Which drawn events qualify is decided once the whole network is generated
//! ([`OutboxPlan::finish`]), in generation order, from the events that stay on listed relays.
//!
//! Every draw here comes from its own ChaCha stream, and an event routed to outbox relays has
//! already taken the draws of its usual placement, so switching outbox participants on moves
//! events and adds relay lists but leaves every event ID, and every other placement, as it
//! was.

use std::collections::{BTreeSet, HashMap, HashSet};

use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventId, Keys, PublicKey, RelayUrl, Timestamp};
use rand::seq::index;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{GeneratedNetwork, NetworkSpec};
use crate::TestkitError;
use crate::nip65;

/// How many contributors have outbox relays and how much of their work is only there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutboxSpec {
    /// Outbox relays: relays after the listed ones that no announcement lists.
    pub relays: usize,
    /// Share of contributors who publish a kind-10002 list naming one or two outbox relays
    /// as write relays (rounded to an exact count).
    pub share_of_authors: f64,
    /// Share of those contributors' roots, replies and repository comments drawn to go only
    /// to their outbox relays, not to their repository's relays (a draw per event). A drawn
    /// event goes there only where its author takes part in its repository or thread through
    /// an event on the listed relays; the others stay where they are.
    pub share_of_events: f64,
}

impl OutboxSpec {
    /// No outbox relays and no relay lists.
    pub const NONE: OutboxSpec = OutboxSpec {
        relays: 0,
        share_of_authors: 0.0,
        share_of_events: 0.0,
    };
    /// Outbox relays of [`OutboxSpec::with_relays`].
    pub const DEFAULT_RELAYS: usize = 2;
    /// Share of contributors with a relay list, in [`OutboxSpec::with_relays`].
    pub const DEFAULT_SHARE_OF_AUTHORS: f64 = 0.25;
    /// Share of their roots, replies and comments only on outbox relays, in
    /// [`OutboxSpec::with_relays`].
    pub const DEFAULT_SHARE_OF_EVENTS: f64 = 0.1;

    /// `relays` outbox relays with the default shares: a quarter of the contributors, and a
    /// tenth of their roots, replies and comments.
    pub fn with_relays(relays: usize) -> Self {
        Self {
            relays,
            share_of_authors: Self::DEFAULT_SHARE_OF_AUTHORS,
            share_of_events: Self::DEFAULT_SHARE_OF_EVENTS,
        }
    }
}

impl Default for OutboxSpec {
    fn default() -> Self {
        Self::NONE
    }
}

/// The outbox side of a generated network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneratedOutbox {
    /// Relay indices of the outbox relays (after the listed relays).
    pub relay_indices: Vec<usize>,
    /// One kind-10002 list per contributor with outbox relays, in author order.
    pub relay_lists: Vec<GeneratedRelayList>,
    /// Roots, replies and comments held only by their author's outbox relays.
    pub only_on_outbox: BTreeSet<EventId>,
    /// Expected events among `only_on_outbox`.
    pub expected_only_on_outbox: BTreeSet<EventId>,
    /// Expected events on listed relays that tag an outbox-only event, directly or through
    /// their parent: a sync finds them by thread filters only once it holds that event.
    pub expected_behind_outbox: BTreeSet<EventId>,
}

/// One contributor's kind-10002 relay list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedRelayList {
    /// Its author.
    pub author: PublicKey,
    /// The list (kind 10002).
    pub event: EventId,
    /// Outbox relays it names for writing (marked `write`, or unmarked), by index.
    pub write_relays: Vec<usize>,
    /// Listed relays it names for reading only (marked `read`), by index.
    pub read_relays: Vec<usize>,
    /// Relays the list is published on: the listed relays of every repository its author
    /// took part in, and its write relays.
    pub published_on: Vec<usize>,
}

/// Key stream of outbox draws.
const OUTBOX_STREAM: u64 = 3 << 32;
/// Longest parent chain followed when looking for an outbox-only ancestor.
const MAX_THREAD_DEPTH: usize = 8;

/// Outbox participants while the network is generated.
/// What an author takes part in on a repository's listed relays, the way a sync learns it: a
/// repository they maintain or posted a root to, or a root they replied to directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Part {
    /// The repository of this index in generation order.
    Repo(usize),
    /// A root event.
    Root(EventId),
}

pub(super) struct OutboxPlan {
    rng: ChaCha8Rng,
    share_of_events: f64,
    participants: Vec<Participant>,
    by_author: HashMap<PublicKey, usize>,
    /// What participants with outbox relays take part in through events on listed relays.
    parts: HashSet<(usize, Part)>,
    /// Events drawn to go only to their author's outbox relays, in generation order.
    drawn: Vec<Drawn>,
    only: BTreeSet<EventId>,
    expected_only: BTreeSet<EventId>,
}

/// An event drawn to go only to its author's outbox relays.
struct Drawn {
    participant: usize,
    event: Event,
    expected: bool,
    /// Listed relays it was placed on.
    usual: Vec<usize>,
    routes: Vec<Part>,
    takes: Option<Part>,
}

/// One contributor with outbox relays.
struct Participant {
    keys: Keys,
    writes: Vec<(usize, Option<RelayMetadata>)>,
    read: Option<usize>,
    joined: BTreeSet<usize>,
}

impl OutboxPlan {
    /// Picks the contributors with outbox relays and their relays.
    pub(super) fn new(spec: &NetworkSpec, authors: &[Keys]) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        rng.set_stream(OUTBOX_STREAM);
        let outbox = spec.outbox;
        let count = if outbox.relays == 0 {
            0
        } else {
            super::generate::share_count(authors.len(), outbox.share_of_authors).min(authors.len())
        };
        let mut chosen = index::sample(&mut rng, authors.len(), count).into_vec();
        chosen.sort_unstable();
        let mut participants = Vec::with_capacity(count);
        let mut by_author = HashMap::with_capacity(count);
        for author in chosen {
            let named = rng.random_range(1..=2).min(outbox.relays);
            let mut picked = index::sample(&mut rng, outbox.relays, named).into_vec();
            picked.sort_unstable();
            let writes = picked
                .into_iter()
                .map(|k| {
                    let marker = rng.random_bool(0.5).then_some(RelayMetadata::Write);
                    (spec.relays + k, marker)
                })
                .collect();
            let read = if rng.random_bool(0.5) {
                Some(rng.random_range(0..spec.relays.max(1)))
            } else {
                None
            };
            by_author.insert(authors[author].public_key(), participants.len());
            participants.push(Participant {
                keys: authors[author].clone(),
                writes,
                read,
                joined: BTreeSet::new(),
            });
        }
        Self {
            rng,
            share_of_events: outbox.share_of_events,
            participants,
            by_author,
            parts: HashSet::new(),
            drawn: Vec::new(),
            only: BTreeSet::new(),
            expected_only: BTreeSet::new(),
        }
    }

    /// Notes that `author` takes part in a repository whose events are on `relays`.
    pub(super) fn joined(&mut self, author: &PublicKey, relays: &[usize]) {
        if let Some(&p) = self.by_author.get(author) {
            self.participants[p].joined.extend(relays.iter().copied());
        }
    }

    /// `author` maintains the repository of index `repo` (its announcement says so).
    pub(super) fn maintains(&mut self, author: &PublicKey, repo: usize) {
        if let Some(&p) = self.by_author.get(author) {
            self.parts.insert((p, Part::Repo(repo)));
        }
    }

    /// A root, reply or comment was placed on `usual` listed relays. A participant's event
    /// is drawn (at the spec's share) to go only to their outbox relays, if they take part in
    /// one of `routes` through another event; otherwise it makes them take part in `takes`.
    pub(super) fn placed(
        &mut self,
        event: &Event,
        expected: bool,
        usual: &[usize],
        routes: &[Part],
        takes: Option<Part>,
    ) {
        let Some(&p) = self.by_author.get(&event.pubkey) else {
            return;
        };
        if self.rng.random_bool(self.share_of_events) {
            self.drawn.push(Drawn {
                participant: p,
                event: event.clone(),
                expected,
                usual: usual.to_vec(),
                routes: routes.to_vec(),
                takes,
            });
        } else if let Some(part) = takes {
            self.parts.insert((p, part));
        }
    }

    /// Moves each drawn event whose author takes part in one of its routes, through events
    /// that stay on listed relays, from its listed relays to the author's write relays; a
    /// drawn event that does not qualify stays where it is and counts as taking part.
    fn route_drawn(&mut self, out: &mut GeneratedNetwork) {
        for drawn in std::mem::take(&mut self.drawn) {
            let p = drawn.participant;
            let reachable = drawn
                .routes
                .iter()
                .any(|part| self.parts.contains(&(p, *part)));
            if !reachable {
                if let Some(part) = drawn.takes {
                    self.parts.insert((p, part));
                }
                continue;
            }
            let id = drawn.event.id;
            for &r in &drawn.usual {
                out.relay_events[r].retain(|e| e.id != id);
            }
            for &(r, _) in &self.participants[p].writes {
                out.relay_events[r].push(drawn.event.clone());
            }
            self.only.insert(id);
            if drawn.expected {
                self.expected_only.insert(id);
            }
        }
    }

    /// Signs every relay list and places it, records it as excluded (the store does not
    /// accept kind 10002), and fills `out.outbox`.
    pub(super) fn finish(
        mut self,
        spec: &NetworkSpec,
        relay_urls: &[String],
        out: &mut GeneratedNetwork,
    ) -> Result<(), TestkitError> {
        self.route_drawn(out);
        let url = |r: usize| {
            RelayUrl::parse(&relay_urls[r]).map_err(|_| {
                TestkitError::InvalidSpec(format!("not a relay url: {}", relay_urls[r]))
            })
        };
        let mut relay_lists = Vec::with_capacity(self.participants.len());
        for participant in &self.participants {
            let mut entries = Vec::with_capacity(participant.writes.len() + 1);
            for &(r, marker) in &participant.writes {
                entries.push((url(r)?, marker));
            }
            if let Some(r) = participant.read {
                entries.push((url(r)?, Some(RelayMetadata::Read)));
            }
            let at = spec.base_created_at + self.rng.random_range(0..spec.time_span_secs.max(1));
            let event = nip65::relay_list(&participant.keys, &entries, Timestamp::from_secs(at))?;
            let mut published_on = participant.joined.clone();
            published_on.extend(participant.writes.iter().map(|&(r, _)| r));
            for &r in &published_on {
                out.relay_events[r].push(event.clone());
            }
            out.excluded.insert(event.id);
            relay_lists.push(GeneratedRelayList {
                author: participant.keys.public_key(),
                event: event.id,
                write_relays: participant.writes.iter().map(|&(r, _)| r).collect(),
                read_relays: participant.read.into_iter().collect(),
                published_on: published_on.into_iter().collect(),
            });
        }
        let expected_behind_outbox = behind(&out.relay_events, &self.only)
            .intersection(&out.expected)
            .copied()
            .collect();
        out.outbox = GeneratedOutbox {
            relay_indices: (spec.relays..spec.relay_count()).collect(),
            relay_lists,
            only_on_outbox: self.only,
            expected_only_on_outbox: self.expected_only,
            expected_behind_outbox,
        };
        Ok(())
    }
}

/// Events, not themselves in `only`, whose chain of `e`/`E`/`q` parents reaches an event in
/// `only`.
fn behind(relay_events: &[Vec<Event>], only: &BTreeSet<EventId>) -> BTreeSet<EventId> {
    if only.is_empty() {
        return BTreeSet::new();
    }
    let mut parents: HashMap<EventId, EventId> = HashMap::new();
    for event in relay_events.iter().flatten() {
        if let Some(parent) = thread_parent(event) {
            parents.insert(event.id, parent);
        }
    }
    let mut out = BTreeSet::new();
    for (&id, &parent) in &parents {
        if only.contains(&id) {
            continue;
        }
        let mut at = parent;
        for _ in 0..MAX_THREAD_DEPTH {
            if only.contains(&at) {
                out.insert(id);
                break;
            }
            match parents.get(&at) {
                Some(&next) => at = next,
                None => break,
            }
        }
    }
    out
}

/// The event an `e`, `E` or `q` tag names, if any (a `q` naming a coordinate is not one).
fn thread_parent(event: &Event) -> Option<EventId> {
    event
        .tags
        .iter()
        .filter(|tag| matches!(tag.kind().as_str(), "e" | "E" | "q"))
        .filter_map(|tag| tag.content())
        .find_map(|value| EventId::from_hex(value).ok())
}

#[cfg(test)]
mod tests;
