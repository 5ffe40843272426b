//! Mailbox probes: a participant's write relays (and a maintainer's read relays) are asked,
//! by REQ+EOSE only, for events tagging the repositories and root events the participant takes
//! part in. Each mailbox relay keeps a rotating cursor over its inventory: a probe covers the
//! next `mailbox_probe_items` items from each item's last successful probe (minus an overlap),
//! and the cursor moves past them whether the probe succeeds, fails or is lost, so one failing
//! filter cannot monopolise the mailbox. Items no probe has covered yet (a new participant's
//! repositories, a root found since) go at once, from full history, unless the periodic probe
//! is due, which goes first; covered items are probed again one probe interval after the last
//! periodic probe (or the first). One probe is in flight per relay. The pause after a failure
//! is the relay's `PauseKind::Mailbox`, passed in by the caller, and holds back both.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use grasp_sync_model::{BatchId, RelayUrl, RepoCoordinate};
use nostr::{EventId, Timestamp};

/// Overlap of a probe with the previous successful one of the same items.
pub(crate) const PROBE_OVERLAP: Duration = Duration::from_secs(60);

/// What one mailbox relay is probed for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MailboxCoverage {
    /// Repositories whose Layer 2 events are asked for.
    pub(crate) repos: BTreeSet<RepoCoordinate>,
    /// Root events whose Layer 3 events are asked for.
    pub(crate) roots: BTreeSet<EventId>,
}

impl MailboxCoverage {
    fn items(&self) -> Vec<Item> {
        self.repos
            .iter()
            .cloned()
            .map(Item::Repo)
            .chain(self.roots.iter().copied().map(Item::Root))
            .collect()
    }
}

/// One probe's query: the items it covers and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeChunk {
    /// Repositories of this probe.
    pub(crate) repos: Vec<RepoCoordinate>,
    /// Root events of this probe.
    pub(crate) roots: Vec<EventId>,
    /// `since` of every filter (`None`: an item never probed successfully, full history).
    pub(crate) since: Option<Timestamp>,
}

/// Every mailbox relay and its probe state.
#[derive(Debug)]
pub(crate) struct MailboxInventory {
    interval: Duration,
    items_per_probe: usize,
    relays: BTreeMap<RelayUrl, MailboxRelay>,
}

impl MailboxInventory {
    /// Empty, probing each relay once per `interval` for at most `items_per_probe` items.
    pub(crate) fn new(interval: Duration, items_per_probe: usize) -> Self {
        Self {
            interval,
            items_per_probe: items_per_probe.max(1),
            relays: BTreeMap::new(),
        }
    }

    /// The mailbox relays are now `inventory`: new relays are due at `now`, kept relays keep
    /// their cursor and deadline. Returns the relays that left the inventory.
    pub(crate) fn handle_inventory(
        &mut self,
        inventory: BTreeMap<RelayUrl, MailboxCoverage>,
        now: Instant,
    ) -> Vec<RelayUrl> {
        let removed: Vec<RelayUrl> = self
            .relays
            .keys()
            .filter(|relay| !inventory.contains_key(*relay))
            .cloned()
            .collect();
        for relay in &removed {
            self.relays.remove(relay);
        }
        for (relay, coverage) in inventory {
            let entry = self
                .relays
                .entry(relay)
                .or_insert_with(|| MailboxRelay::new(now));
            let items: BTreeSet<Item> = coverage.items().into_iter().collect();
            entry.covered.retain(|item, _| items.contains(item));
            entry.coverage = coverage;
        }
        removed
    }

    /// Whether `relay` is a mailbox relay.
    pub(crate) fn contains(&self, relay: &RelayUrl) -> bool {
        self.relays.contains_key(relay)
    }

    /// Mailbox relays.
    pub(crate) fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether a probe of `relay` is due: none is in flight, an item was never probed or the
    /// probe deadline passed, and the relay's mailbox pause (`paused_until`) is over.
    pub(crate) fn dial_due(
        &self,
        relay: &RelayUrl,
        now: Instant,
        paused_until: Option<Instant>,
    ) -> bool {
        self.relays.get(relay).is_some_and(|m| {
            m.in_flight.is_none()
                && (now >= m.next_probe_at || m.has_uncovered())
                && paused_until.is_none_or(|u| now >= u)
        })
    }

    /// The next probe of `relay` if one is due at `now` (`unix` is the wall clock, the
    /// probe's start; see [`MailboxInventory::dial_due`]): the items never probed if there are
    /// any and the periodic probe is not due, else the next items after the cursor. The
    /// cursor moves past the items taken, which count as covered; the periodic probe is one
    /// interval after the last periodic probe, or after the first probe.
    pub(crate) fn poll_probe(
        &mut self,
        relay: &RelayUrl,
        now: Instant,
        unix: Timestamp,
        paused_until: Option<Instant>,
    ) -> Option<ProbeChunk> {
        if !self.dial_due(relay, now, paused_until) {
            return None;
        }
        let interval = self.interval;
        let items_per_probe = self.items_per_probe;
        let entry = self.relays.get_mut(relay)?;
        let items = entry.coverage.items();
        if items.is_empty() {
            return None;
        }
        // The periodic probe of covered items goes first when due, so new items arriving more
        // often than the interval cannot hold it back; otherwise new items go at once.
        let periodic_due = now >= entry.next_probe_at && !entry.covered.is_empty();
        let uncovered: Vec<(usize, Item)> = items
            .iter()
            .enumerate()
            .filter(|(_, item)| !entry.covered.contains_key(*item))
            .take(items_per_probe)
            .map(|(i, item)| (i, item.clone()))
            .collect();
        let taken = match uncovered.last() {
            Some(&(last, _)) if !periodic_due => {
                if entry.covered.is_empty() {
                    entry.next_probe_at = now + interval;
                }
                entry.position = (last + 1) % items.len();
                uncovered.into_iter().map(|(_, item)| item).collect()
            }
            _ => {
                let start = entry.position % items.len();
                let taken: Vec<Item> = items
                    .iter()
                    .cycle()
                    .skip(start)
                    .take(items_per_probe.min(items.len()))
                    .cloned()
                    .collect();
                entry.position = (start + taken.len()) % items.len();
                entry.next_probe_at = now + interval;
                taken
            }
        };
        let since = taken
            .iter()
            .map(|item| entry.covered.get(item).copied().flatten())
            .try_fold(None::<Timestamp>, |min, at| {
                at.map(|at| Some(min.map_or(at, |m| m.min(at))))
            })
            .flatten()
            .map(|at| Timestamp::from_secs(at.as_secs().saturating_sub(PROBE_OVERLAP.as_secs())));
        for item in &taken {
            entry.covered.entry(item.clone()).or_insert(None);
        }
        let mut chunk = ProbeChunk {
            repos: Vec::new(),
            roots: Vec::new(),
            since,
        };
        for item in &taken {
            match item {
                Item::Repo(repo) => chunk.repos.push(repo.clone()),
                Item::Root(root) => chunk.roots.push(*root),
            }
        }
        entry.in_flight = Some(InFlight {
            batch: None,
            items: taken,
            started: unix,
        });
        Some(chunk)
    }

    /// The probe polled last for `relay` runs as `batch`.
    pub(crate) fn handle_probe_started(&mut self, relay: &RelayUrl, batch: BatchId) {
        if let Some(flight) = self
            .relays
            .get_mut(relay)
            .and_then(|m| m.in_flight.as_mut())
        {
            flight.batch = Some(batch);
        }
    }

    /// `batch` ended. Returns whether it was `relay`'s probe; a success records its start
    /// as the items' next `since`, a failure leaves their `since` where it was.
    pub(crate) fn handle_batch_done(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        success: bool,
    ) -> bool {
        let Some(entry) = self.relays.get_mut(relay) else {
            return false;
        };
        if entry.in_flight.as_ref().and_then(|f| f.batch) != Some(batch) {
            return false;
        }
        let Some(flight) = entry.in_flight.take() else {
            return false;
        };
        if success {
            for item in flight.items {
                if let Some(since) = entry.covered.get_mut(&item) {
                    *since = Some(flight.started);
                }
            }
        }
        true
    }

    /// The probe in flight as `batch` was refused for a limit of the connection that is now
    /// learned: its items that no probe fetched successfully count as new again, so they are
    /// probed at once under the learned limit.
    pub(crate) fn handle_probe_retry(&mut self, relay: &RelayUrl, batch: BatchId) {
        let Some(entry) = self.relays.get_mut(relay) else {
            return;
        };
        if entry.in_flight.as_ref().and_then(|f| f.batch) != Some(batch) {
            return;
        }
        if let Some(flight) = entry.in_flight.take() {
            for item in flight.items {
                if entry.covered.get(&item) == Some(&None) {
                    entry.covered.remove(&item);
                }
            }
        }
    }

    /// `relay`'s probe will never finish (its session ended or nothing could be sent).
    pub(crate) fn handle_probe_lost(&mut self, relay: &RelayUrl) {
        if let Some(entry) = self.relays.get_mut(relay) {
            entry.in_flight = None;
        }
    }
}

/// One item of a mailbox inventory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    Repo(RepoCoordinate),
    Root(EventId),
}

#[derive(Debug)]
struct InFlight {
    batch: Option<BatchId>,
    items: Vec<Item>,
    started: Timestamp,
}

#[derive(Debug)]
struct MailboxRelay {
    coverage: MailboxCoverage,
    position: usize,
    /// Items a probe has covered, with the start of the last successful one (`None`: never
    /// succeeded, so full history).
    covered: BTreeMap<Item, Option<Timestamp>>,
    /// When the covered items are probed again.
    next_probe_at: Instant,
    in_flight: Option<InFlight>,
}

impl MailboxRelay {
    fn new(now: Instant) -> Self {
        Self {
            coverage: MailboxCoverage::default(),
            position: 0,
            covered: BTreeMap::new(),
            next_probe_at: now,
            in_flight: None,
        }
    }

    /// Whether an item of the coverage was never in a probe.
    fn has_uncovered(&self) -> bool {
        // `covered` only ever holds items of the coverage (`handle_inventory` drops the rest),
        // so it lacks one exactly when it is smaller; no list of items is built on each tick.
        self.covered.len() < self.coverage.repos.len() + self.coverage.roots.len()
    }
}
