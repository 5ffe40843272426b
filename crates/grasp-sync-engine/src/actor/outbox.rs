//! The actor's side of participant relays: keeps `Participants`, `RelayLists` and the
//! `MailboxInventory` (the pure rules in `crate::outbox`) up to date, turns due identity
//! queries and mailbox probes into REQ+EOSE batches through the ordinary historic queue (so the
//! ledger, the pacing gates and the byte budgets apply), and routes each batch's end to the
//! relay's identity or mailbox pause.
//!
//! Identity discovery asks the index relays, the bootstrap relays and the connected repository
//! relays for the kind-10002 lists of due participants (a repository relay only for the
//! participants of the repositories it serves). A source whose identity query failed is
//! paused source-wide (`PauseKind::Identity`, 5 min doubling to 1 h, reset only by a
//! successful query), which also holds back authors added during the pause. A mailbox relay
//! is probed for the repositories its participants take part in, history only; mailbox-only
//! relays get no live subscription, are dialled only when a probe is due and their mailbox
//! pause is over, and are closed again once nothing is pending or due.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use grasp_sync_filters::{FilterBudget, Window, repo_tag_filters, root_event_tag_filters};
use grasp_sync_health::{DiscoveryKind, PauseKind, RefusalAction};
use grasp_sync_model::{BatchId, PendingItems, RelayUrl, RepoCoordinate};
use nostr::{Event, Filter, Kind, PublicKey};

use super::Actor;
use crate::outbox::{
    IDENTITY_AUTHORS_PER_FILTER, IdentityScope, MailboxCoverage, MailboxInventory, OutboxConfig,
    Participants, RelayLists, discovery_dial_due, identity_source_admits,
};

/// Which discovery a batch belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OutboxBatch {
    /// An identity query naming these authors.
    Identity(Vec<PublicKey>),
    /// A mailbox probe.
    Mailbox,
}

/// Participants, their relay lists and the mailbox relays, with the batches in flight.
#[derive(Debug)]
pub(super) struct Outbox {
    pub(super) participants: Participants,
    pub(super) lists: RelayLists,
    pub(super) mailboxes: MailboxInventory,
    index_relays: BTreeSet<RelayUrl>,
    batches: BTreeMap<(RelayUrl, BatchId), OutboxBatch>,
    /// Batches refused for a limit of the connection (filter ceiling, byte cap, rate limit),
    /// which the relay's learned limits or its rate-limit pause now take care of: their
    /// failure costs no discovery pause.
    limit_refused: BTreeSet<(RelayUrl, BatchId)>,
    /// Sources that took part in identity discovery, to retire the backoff of those that
    /// leave its scope.
    identity_scope: IdentityScope,
    /// Participants, relay lists or the repository index changed since the inventory was last derived.
    pub(super) dirty: bool,
    /// Discovery-only sessions with nothing pending or due, since when (at most one per
    /// tracked relay).
    idle_since: BTreeMap<RelayUrl, Instant>,
    /// How long a discovery-only session stays idle before it is closed.
    idle_close_after: Duration,
    /// Counters for the status snapshot.
    pub(super) stats: OutboxStats,
}

/// Longest a discovery-only session stays open with nothing to do.
const MAX_IDLE_DISCOVERY_SESSION: Duration = Duration::from_secs(30);

/// Totals of identity discovery and mailbox probes.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct OutboxStats {
    pub(super) identity_queries: u64,
    pub(super) identity_failures: u64,
    pub(super) relay_lists_received: u64,
    pub(super) mailbox_probes: u64,
    pub(super) mailbox_failures: u64,
}

impl Outbox {
    pub(super) fn new(config: &OutboxConfig) -> Self {
        Self {
            participants: Participants::new(config.max_participants),
            lists: RelayLists::new(
                config.max_relays_per_participant,
                config.relay_list_refresh,
                config.relay_list_retry,
            ),
            mailboxes: MailboxInventory::new(
                config.mailbox_probe_interval,
                config.mailbox_probe_items,
            ),
            index_relays: config.index_relays.iter().cloned().collect(),
            batches: BTreeMap::new(),
            limit_refused: BTreeSet::new(),
            identity_scope: IdentityScope::default(),
            dirty: false,
            idle_since: BTreeMap::new(),
            // Half the probe interval, so a relay probed often is not redialled for each probe.
            idle_close_after: (config.mailbox_probe_interval / 2).min(MAX_IDLE_DISCOVERY_SESSION),
            stats: OutboxStats::default(),
        }
    }

    /// A discovery batch was refused for a limit of the connection, which is now learned (or
    /// paused relay-wide): its failure is retried under it, with no discovery pause.
    pub(super) fn handle_limit_refusal(&mut self, relay: &RelayUrl, batch: BatchId) {
        if self.batches.contains_key(&(relay.clone(), batch)) {
            self.limit_refused.insert((relay.clone(), batch));
        }
    }

    /// The refusal scope of a batch's CLOSED, if it is an identity query or mailbox probe.
    pub(super) fn refusal_scope(
        &self,
        relay: &RelayUrl,
        batch: BatchId,
    ) -> Option<grasp_sync_health::RefusalScope> {
        match self.batches.get(&(relay.clone(), batch))? {
            OutboxBatch::Identity(_) => Some(grasp_sync_health::RefusalScope::Identity),
            OutboxBatch::Mailbox => Some(grasp_sync_health::RefusalScope::Mailbox),
        }
    }
}

impl Actor {
    /// `author` maintains `repo` (the announcement's author or its `maintainers` tag).
    pub(super) fn note_maintainer(&mut self, author: PublicKey, repo: &RepoCoordinate) {
        self.outbox.participants.handle_maintainer(author, repo);
        self.outbox.dirty = true;
    }

    /// `author` posted an accepted root event to `repo`.
    pub(super) fn note_root_author(&mut self, author: PublicKey, repo: &RepoCoordinate) {
        self.outbox.participants.handle_root_author(author, repo);
        self.outbox.dirty = true;
    }

    /// `author` replied directly to `root`.
    pub(super) fn note_reply_author(&mut self, author: PublicKey, root: nostr::EventId) {
        if self.outbox.participants.handle_reply_author(author, root) {
            self.outbox.dirty = true;
        }
    }

    /// A kind-10002 event arrived (verified by the session reader; never offered to the
    /// store): the newest list of a participant replaces theirs.
    pub(super) fn handle_relay_list_event(&mut self, event: &Event) {
        let now = self.now();
        match self.outbox.lists.handle_relay_list(event, now) {
            Ok(true) => {
                self.outbox.stats.relay_lists_received += 1;
                self.outbox.dirty = true;
                tracing::debug!(author = %event.pubkey, "participant relay list updated");
            }
            Ok(false) => {}
            Err(error) => tracing::debug!(id = %event.id, %error, "relay list ignored"),
        }
    }

    /// The batch-window tick: re-derive the inventory if anything changed, then start the
    /// identity queries and mailbox probes that are due.
    pub(super) fn drive_outbox(&mut self) {
        let now = self.now();
        if std::mem::take(&mut self.outbox.dirty) {
            self.derive_mailboxes(now);
        }
        self.run_identity_queries(now);
        let relays: Vec<RelayUrl> = self
            .runtimes
            .iter()
            .filter(|(url, r)| r.machine.session.is_some() && self.outbox.mailboxes.contains(url))
            .map(|(url, _)| url.clone())
            .collect();
        for relay in relays {
            self.run_mailbox_probe(&relay, now);
        }
    }

    /// Whether the relay is wanted for participant discovery (kept tracked while it is).
    pub(super) fn wants_outbox_connection(&self, relay: &RelayUrl) -> bool {
        self.outbox.mailboxes.contains(relay)
            || (self.outbox.index_relays.contains(relay) && self.outbox.participants.len() > 0)
    }

    /// Whether a relay wanted only for participant discovery may be dialled at `now`
    /// (`crate::outbox::discovery_dial_due`).
    pub(super) fn outbox_dial_due(&self, relay: &RelayUrl, now: Instant) -> bool {
        self.runtimes.get(relay).is_some_and(|runtime| {
            discovery_dial_due(
                relay,
                &runtime.machine.health,
                &self.outbox.mailboxes,
                &self.outbox.lists,
                self.outbox.index_relays.contains(relay),
                now,
            )
        })
    }

    /// Records since when a connected relay used only for participant discovery has had
    /// nothing to do (no batch pending, no discovery due; any work clears the record), and
    /// returns whether that has lasted a while: half the probe interval, at most
    /// [`MAX_IDLE_DISCOVERY_SESSION`], so participants arriving one by one do not make it
    /// reconnect for each.
    pub(super) fn observe_discovery_session_idle(
        &mut self,
        relay: &RelayUrl,
        now: Instant,
    ) -> bool {
        let idle = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.session.is_some() && r.machine.dialing.is_none())
            && !self.pending.has_pending(relay)
            && !self.outbox.batches.keys().any(|(url, _)| url == relay)
            && !self.outbox_dial_due(relay, now);
        if !idle {
            self.outbox.idle_since.remove(relay);
            return false;
        }
        let since = *self.outbox.idle_since.entry(relay.clone()).or_insert(now);
        now.saturating_duration_since(since) >= self.outbox.idle_close_after
    }

    /// Closes an idle discovery-only session until its next probe or due author, as no
    /// failure (`RelayHealth::handle_closed_idle`), so the next dial needs no backoff.
    pub(super) fn close_idle_discovery_session(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        let Some(session) = runtime.machine.session.as_mut() else {
            return;
        };
        let key = session.key.clone();
        session.transmit.push(crate::session::Outbound::Disconnect);
        runtime.machine.health.handle_closed_idle(now);
        let last_error = runtime.machine.stats.last_error.clone();
        tracing::info!(%relay, "closing a participant-discovery connection until its next probe or due author");
        self.handle_session_ended(&key, "closed until the next participant discovery");
        if let Some(runtime) = self.runtimes.get_mut(relay) {
            runtime.machine.stats.last_error = last_error;
        }
    }

    /// A session opened on a relay wanted only for participant discovery: no live
    /// subscription, no Layer 1; just the discovery work that is due.
    pub(super) fn start_outbox_session(&mut self, relay: &RelayUrl) {
        let now = self.now();
        self.abandon_transients(relay);
        self.forget_pending(relay);
        tracing::info!(%relay, "connected for participant discovery only");
        self.run_identity_queries(now);
        self.run_mailbox_probe(relay, now);
    }

    /// The relay's pending batches were dropped: its identity queries and probe are lost.
    pub(super) fn forget_outbox_batches(&mut self, relay: &RelayUrl) {
        let now = self.now();
        let lost: Vec<(RelayUrl, BatchId)> = self
            .outbox
            .batches
            .keys()
            .filter(|(url, _)| url == relay)
            .cloned()
            .collect();
        for key in lost {
            self.outbox.limit_refused.remove(&key);
            if let Some(OutboxBatch::Identity(authors)) = self.outbox.batches.remove(&key) {
                self.outbox.lists.handle_query_done(&authors, false, now);
            }
        }
        self.outbox.mailboxes.handle_probe_lost(relay);
    }

    /// A batch ended: an identity query or mailbox probe learns its outcome, and the source's
    /// pause of that kind escalates on failure or resets on success.
    pub(super) fn handle_outbox_batch_done(
        &mut self,
        relay: &RelayUrl,
        batch: BatchId,
        success: bool,
    ) {
        let now = self.now();
        let Some(kind) = self.outbox.batches.remove(&(relay.clone(), batch)) else {
            return;
        };
        // Work just ended: a discovery-only session's idle time starts again from here.
        self.outbox.idle_since.remove(relay);
        let limit_refused = self.outbox.limit_refused.remove(&(relay.clone(), batch));
        if limit_refused && !success {
            // Asked again under what the refusal taught: the authors are due at once, the
            // probe's items not yet probed successfully are new again.
            match &kind {
                OutboxBatch::Identity(authors) => {
                    self.outbox.lists.handle_query_done(authors, false, now);
                }
                OutboxBatch::Mailbox => self.outbox.mailboxes.handle_probe_retry(relay, batch),
            }
            tracing::info!(%relay, "participant discovery refused for a connection limit; asking again within it");
            return;
        }
        let (pause, discovery) = match &kind {
            OutboxBatch::Identity(authors) => {
                self.outbox.lists.handle_query_done(authors, success, now);
                (PauseKind::Identity, DiscoveryKind::Identity)
            }
            OutboxBatch::Mailbox => {
                self.outbox
                    .mailboxes
                    .handle_batch_done(relay, batch, success);
                (PauseKind::Mailbox, DiscoveryKind::Mailbox)
            }
        };
        if !success {
            if let OutboxBatch::Identity(_) = &kind {
                self.outbox.stats.identity_failures += 1;
            } else {
                self.outbox.stats.mailbox_failures += 1;
            }
        }
        let Some(runtime) = self.runtimes.get_mut(relay) else {
            return;
        };
        if success {
            runtime.machine.health.handle_success(discovery, now);
            return;
        }
        let until = match runtime.machine.health.handle_failure(pause, now) {
            RefusalAction::Paused { until, .. } | RefusalAction::AlreadyPaused { until, .. } => {
                Some(until)
            }
            _ => None,
        };
        let delay_s = until.map(|u| u.saturating_duration_since(now).as_secs());
        tracing::info!(%relay, kind = pause.metric_label(), ?delay_s,
            "participant discovery failed; retrying this relay after the delay");
    }

    /// Rebuilds the mailbox inventory from the participants and their relay lists.
    fn derive_mailboxes(&mut self, now: Instant) {
        let runtimes = &self.runtimes;
        self.outbox
            .idle_since
            .retain(|relay, _| runtimes.contains_key(relay));
        if self.outbox.participants.len() > 0 {
            let index: Vec<RelayUrl> = self.outbox.index_relays.iter().cloned().collect();
            for relay in index {
                self.register_relay(&relay, false);
            }
        }
        let tracked: BTreeSet<RepoCoordinate> = self.repos.iter().map(|(c, _)| c.clone()).collect();
        self.outbox
            .participants
            .retain(&tracked, self.targets.root_ids());
        let authors: Vec<PublicKey> = self.outbox.participants.iter().map(|(a, _)| *a).collect();
        self.outbox.lists.handle_authors(&authors, now);

        let mut inventory: BTreeMap<RelayUrl, (usize, MailboxCoverage)> = BTreeMap::new();
        for (author, participation) in self.outbox.participants.iter() {
            let Some(list) = self.outbox.lists.get(author) else {
                continue; // no list: their events are found on the repositories' relays
            };
            let reads = participation.maintainer.then_some(&list.read);
            let relays: BTreeSet<&RelayUrl> = list
                .write
                .iter()
                .chain(reads.into_iter().flatten())
                .collect();
            for relay in relays {
                let target = self.targets.get(relay);
                let entry = inventory.entry(relay.clone()).or_default();
                entry.0 += 1;
                for repo in &participation.repos {
                    if target.is_some_and(|t| t.repos.contains_key(repo)) {
                        continue; // a listed relay keeps its own coverage of the repository
                    }
                    entry.1.repos.insert(repo.clone());
                    if let Some(needs) = self.repos.get(repo) {
                        entry.1.roots.extend(needs.root_events.iter().copied());
                    }
                }
                entry.1.roots.extend(
                    participation
                        .roots
                        .iter()
                        .filter(|root| target.is_none_or(|t| !t.root_events.contains(root))),
                );
            }
        }
        let own = self.config.own_relay.clone();
        inventory.retain(|relay, (_, coverage)| {
            let empty = coverage.repos.is_empty() && coverage.roots.is_empty();
            let ours = own.as_ref().is_some_and(|own| own.same_endpoint(relay));
            !empty && !ours
        });
        // The tracking bound covers mailbox relays too: the ones most participants use first,
        // in the room the repositories' relays (targets, bootstrap relays and relays kept for
        // their confirmed coverage) and the index relays leave.
        let taken: BTreeSet<&RelayUrl> = self
            .targets
            .relays()
            .chain(&self.config.bootstrap_relays)
            .chain(&self.outbox.index_relays)
            .chain(
                self.runtimes
                    .keys()
                    .filter(|relay| self.wants_repo_connection(relay)),
            )
            .collect();
        let room = self.config.tracking.max_relays.saturating_sub(taken.len());
        let mut ranked: Vec<(RelayUrl, (usize, MailboxCoverage))> = inventory.into_iter().collect();
        ranked.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(&b.0)));
        let mut kept = BTreeMap::new();
        for (relay, (_, coverage)) in ranked {
            if kept.len() >= room {
                break;
            }
            if !self.runtimes.contains_key(&relay) {
                self.register_relay(&relay, false);
            }
            if self.runtimes.contains_key(&relay) {
                kept.insert(relay, coverage);
            }
        }
        for relay in self.outbox.mailboxes.handle_inventory(kept, now) {
            // Its mailbox backoff goes with it; an unwanted relay is retired on the next tick.
            if let Some(runtime) = self.runtimes.get_mut(&relay) {
                runtime
                    .machine
                    .health
                    .handle_discovery_retired(DiscoveryKind::Mailbox);
            }
            tracing::info!(%relay, "no longer a participant mailbox");
        }
    }

    /// Asks every available source for the relay lists of the participants that are due.
    fn run_identity_queries(&mut self, now: Instant) {
        let sources = self.identity_sources(now);
        // Sources that left identity scope forget their identity backoff.
        let scope = self.identity_scope_now();
        for relay in self.outbox.identity_scope.handle_scope(scope) {
            if let Some(runtime) = self.runtimes.get_mut(&relay) {
                runtime
                    .machine
                    .health
                    .handle_discovery_retired(DiscoveryKind::Identity);
            }
        }
        if sources.is_empty() {
            return;
        }
        // Only the authors a query names leave the due set: one whose sources are all busy or
        // paused is asked as soon as one of them is free.
        let due = self.outbox.lists.due(now);
        if due.is_empty() {
            return;
        }
        for source in sources {
            let asks_everyone = self.outbox.index_relays.contains(&source)
                || self.config.bootstrap_relays.contains(&source);
            let authors: Vec<PublicKey> = if asks_everyone {
                due.clone()
            } else {
                let served = self.targets.get(&source);
                due.iter()
                    .filter(|author| {
                        self.outbox.participants.get(author).is_some_and(|p| {
                            p.repos
                                .iter()
                                .any(|repo| served.is_some_and(|t| t.repos.contains_key(repo)))
                        })
                    })
                    .copied()
                    .collect()
            };
            if authors.is_empty() {
                continue;
            }
            let filters: Vec<Filter> = authors
                .chunks(IDENTITY_AUTHORS_PER_FILTER)
                .map(|chunk| {
                    Filter::new()
                        .kind(Kind::RelayList)
                        .authors(chunk.iter().copied())
                })
                .collect();
            self.outbox.stats.identity_queries += 1;
            if let Some(batch) = self.open_historic_batch(&source, PendingItems::default(), filters)
                && self
                    .pending
                    .batches(&source)
                    .iter()
                    .any(|b| b.batch_id == batch)
            {
                self.outbox.lists.handle_asked(&authors, now);
                self.outbox
                    .batches
                    .insert((source.clone(), batch), OutboxBatch::Identity(authors));
            }
            self.drive_queue(&source);
        }
    }

    /// Connected sources whose identity discovery is not paused and that have no batch pending
    /// (participant discovery yields to repository history).
    fn identity_sources(&self, now: Instant) -> Vec<RelayUrl> {
        self.identity_scope_now()
            .into_iter()
            .filter(|relay| {
                self.runtimes.get(relay).is_some_and(|r| {
                    identity_source_admits(
                        &r.machine.health,
                        r.machine.session.is_some(),
                        !self.pending.has_pending(relay),
                        now,
                    )
                })
            })
            .collect()
    }

    /// Relays in identity-discovery scope: the index relays, the bootstrap relays and the
    /// repository relays, while there are participants.
    fn identity_scope_now(&self) -> BTreeSet<RelayUrl> {
        if self.outbox.participants.len() == 0 {
            return BTreeSet::new();
        }
        self.outbox
            .index_relays
            .iter()
            .chain(&self.config.bootstrap_relays)
            .chain(self.targets.relays())
            .filter(|relay| self.runtimes.contains_key(*relay))
            .cloned()
            .collect()
    }

    /// Starts the relay's mailbox probe if one is due.
    fn run_mailbox_probe(&mut self, relay: &RelayUrl, now: Instant) {
        let unix = self.clock.unix_now();
        let Some(runtime) = self.runtimes.get(relay) else {
            return;
        };
        // Participant discovery yields to repository history.
        if runtime.machine.session.is_none() || self.pending.has_pending(relay) {
            return;
        }
        let pause = runtime.machine.health.paused_until(PauseKind::Mailbox, now);
        let Some(chunk) = self.outbox.mailboxes.poll_probe(relay, now, unix, pause) else {
            return;
        };
        let budget = FilterBudget::default();
        let window = Window::since(chunk.since);
        let filters = repo_tag_filters(&chunk.repos, window, &budget).and_then(|mut filters| {
            filters.extend(root_event_tag_filters(&chunk.roots, window, &budget)?);
            Ok(filters)
        });
        let filters: Vec<Filter> = match filters {
            Ok(filters) => filters.into_iter().map(|f| f.filter).collect(),
            Err(error) => {
                tracing::warn!(%relay, %error, "mailbox probe filters could not be built");
                self.outbox.mailboxes.handle_probe_lost(relay);
                return;
            }
        };
        self.outbox.stats.mailbox_probes += 1;
        match self.open_historic_batch(relay, PendingItems::default(), filters) {
            Some(batch)
                if self
                    .pending
                    .batches(relay)
                    .iter()
                    .any(|b| b.batch_id == batch) =>
            {
                self.outbox.mailboxes.handle_probe_started(relay, batch);
                self.outbox
                    .batches
                    .insert((relay.clone(), batch), OutboxBatch::Mailbox);
            }
            Some(_) => {
                // Nothing to send: complete at once.
                self.outbox.mailboxes.handle_probe_lost(relay);
            }
            None => self.outbox.mailboxes.handle_probe_lost(relay),
        }
        self.drive_queue(relay);
    }
}

impl Actor {
    /// Participant discovery for the status snapshot and the metrics.
    pub(super) fn participant_status(&self) -> crate::status::ParticipantStatus {
        let now = self.now();
        let config = &self.config.outbox;
        let paused = |kind: PauseKind| {
            self.runtimes
                .values()
                .filter(|r| r.machine.health.is_paused(kind, now))
                .count()
        };
        let stats = self.outbox.stats;
        crate::status::ParticipantStatus {
            max_participants: config.max_participants,
            participants: self.outbox.participants.len(),
            participants_dropped: self.outbox.participants.dropped(),
            max_relays_per_participant: config.max_relays_per_participant,
            relay_lists: self.outbox.lists.len(),
            relay_lists_received: stats.relay_lists_received,
            index_relays: self.outbox.index_relays.len(),
            mailbox_relays: self.outbox.mailboxes.len(),
            mailbox_probe_interval_secs: config.mailbox_probe_interval.as_secs(),
            identity_queries: stats.identity_queries,
            identity_failures: stats.identity_failures,
            mailbox_probes: stats.mailbox_probes,
            mailbox_failures: stats.mailbox_failures,
            identity_paused_relays: paused(PauseKind::Identity),
            mailbox_paused_relays: paused(PauseKind::Mailbox),
        }
    }
}
