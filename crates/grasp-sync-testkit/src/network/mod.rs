//! The deterministic NIP-34 network generator: a `NetworkSpec` and the relay URLs become the
//! events to seed on each relay and the exact set a correct sync into the service must
//! store.

mod generate;
mod outbox;
mod start;

use std::collections::BTreeSet;

use nostr::{Event, EventId};

use crate::nip34::RepoRef;

pub use generate::generate;
pub use outbox::{GeneratedOutbox, GeneratedRelayList, OutboxSpec};
pub use start::TestNetwork;

/// How many root events (patches, pull requests, issues) the network has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootCount {
    /// Exactly this many per repository.
    PerRepo(usize),
    /// This many in total, spread unevenly over the repositories (some get many, some none).
    Total(usize),
}

/// The shape of a generated network. Same spec and relay URLs, same event IDs.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkSpec {
    /// Seeds every key, choice and timestamp.
    pub seed: u64,
    /// Number of relays that announcements may list (the first `relays` URLs given to
    /// [`generate`]).
    pub relays: usize,
    /// Number of repository announcements.
    pub repos: usize,
    /// Root events.
    pub roots: RootCount,
    /// Replies and comments per root, tagging it with `e`, `E` or `q` in turn.
    pub replies_per_root: usize,
    /// Comments per repository, tagging it with `a`, `A` or `q` in turn.
    pub comments_per_repo: usize,
    /// Second-generation events per reply, tagging only that reply with `e`, `E` or `q`.
    pub descendants_per_reply: usize,
    /// Relays each announcement lists (and that hold its events), at most `relays`.
    pub relays_per_repo: usize,
    /// Share of events (other than announcements and state, which are on every listed relay)
    /// stored on all of their repository's relays rather than on one of them.
    pub share_on_several_relays: f64,
    /// Share of repositories whose announcement does not list the service.
    pub share_not_listing_service: f64,
    /// Share of repositories whose announcement lists the service in `relays` but has no
    /// `clone` URL on the service's domain.
    pub share_without_service_clone: f64,
    /// The service's relay URL, listed by accepted announcements.
    pub service_url: String,
    /// Contributor keys that author roots, replies and comments.
    pub authors: usize,
    /// Earliest `created_at`, in seconds.
    pub base_created_at: u64,
    /// Span of `created_at` values, in seconds.
    pub time_span_secs: u64,
    /// Participants with NIP-65 outbox relays, on relays no announcement lists (none by
    /// default: a spec without them generates exactly what it did before they existed).
    pub outbox: OutboxSpec,
}

impl NetworkSpec {
    /// A small network: 3 relays, 6 repositories (1 not listing the service), 2 roots each,
    /// 2 replies per root, 1 comment per repository.
    pub fn small(seed: u64, service_url: impl Into<String>) -> Self {
        Self {
            seed,
            relays: 3,
            repos: 6,
            roots: RootCount::PerRepo(2),
            replies_per_root: 2,
            comments_per_repo: 1,
            descendants_per_reply: 0,
            relays_per_repo: 2,
            share_on_several_relays: 0.25,
            share_not_listing_service: 1.0 / 6.0,
            share_without_service_clone: 0.0,
            service_url: service_url.into(),
            authors: 8,
            base_created_at: 1_700_000_000,
            time_span_secs: 30 * 24 * 3600,
            outbox: OutboxSpec::NONE,
        }
    }

    /// The shape of the gitnostr network: 8 relays, 869 repositories, 3,632 roots.
    pub fn gitnostr(seed: u64, service_url: impl Into<String>) -> Self {
        Self {
            relays: 8,
            repos: 869,
            roots: RootCount::Total(3_632),
            replies_per_root: 1,
            comments_per_repo: 0,
            relays_per_repo: 3,
            share_on_several_relays: 0.3,
            share_not_listing_service: 0.1,
            authors: 200,
            ..Self::small(seed, service_url)
        }
    }

    /// Every relay of the network: the `relays` announcements may list, then the
    /// `outbox.relays` outbox relays (the length of the URL list given to [`generate`]).
    pub fn relay_count(&self) -> usize {
        self.relays + self.outbox.relays
    }
}

/// One generated repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedRepo {
    /// Owner and `d` identifier.
    pub repo: RepoRef,
    /// Indices of the relays the announcement lists and that hold its events.
    pub relay_indices: Vec<usize>,
    /// Whether the announcement's `relays` tag lists the service URL.
    pub lists_service: bool,
    /// Whether the announcement has a `clone` URL on the service's domain.
    pub clone_on_service: bool,
    /// The announcement (kind 30617).
    pub announcement: EventId,
    /// The state event (kind 30618).
    pub state: EventId,
    /// Roots tagging this repository.
    pub roots: Vec<EventId>,
}

impl GeneratedRepo {
    /// Whether the service accepts this repository: it lists the service and has a clone
    /// URL on the service's domain.
    pub fn accepted(&self) -> bool {
        self.lists_service && self.clone_on_service
    }
}

/// The events of a generated network and what a correct sync must end up with.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedNetwork {
    /// Events to seed, by relay index (outbox relays last). An event can be on several
    /// relays.
    pub relay_events: Vec<Vec<Event>>,
    /// Every repository, in generation order.
    pub repos: Vec<GeneratedRepo>,
    /// IDs a correct sync stores: accepted announcements, their state, roots tagging them,
    /// replies and comments tagging those or the repository, and second-generation
    /// descendants of those replies.
    pub expected: BTreeSet<EventId>,
    /// The second-generation descendants among `expected` (recovered by the engine's
    /// one-extra-generation rule rather than by root or repository filters).
    pub expected_descendants: BTreeSet<EventId>,
    /// IDs on the relays that a correct sync does not store (the participants' kind-10002
    /// relay lists among them).
    pub excluded: BTreeSet<EventId>,
    /// Participants with outbox relays and the events only those relays hold (empty when the
    /// spec has none).
    pub outbox: GeneratedOutbox,
}

impl GeneratedNetwork {
    /// Distinct events across all relays.
    pub fn event_count(&self) -> usize {
        self.expected.len() + self.excluded.len()
    }

    /// Events seeded across all relays, counting copies.
    pub fn placement_count(&self) -> usize {
        self.relay_events.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests;
