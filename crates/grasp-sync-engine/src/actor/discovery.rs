//! Discovery: self-feed batches and purgatory snapshots update the repository index; new relays
//! are registered; connected relays get the new work through the three-way diff.

use grasp_sync_health::RelayHealth;
use grasp_sync_model::{IndexUpdate, Nip34Event, RelayUrl, compute_actions};
use rand::RngCore;

use super::Actor;
use super::runtime::RelayRuntime;

/// The queued background starts behind which an index update's diff waits for the queue to
/// drain. At one background start per second, a shorter queue is gone within a few seconds, and
/// waiting behind it would only hold the next discovery generation back.
const BACKLOG_STARTS: usize = 5;

impl Actor {
    /// The batch window fired: apply every buffered self-feed event to the index.
    pub(super) fn process_feed_batch(&mut self) {
        if self.feed_buffer.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.feed_buffer);
        let mut update = IndexUpdate::default();
        // Roots this batch may make ours: their stored members are read once it is applied.
        let mut roots = Vec::new();
        let mut announced = Vec::new();
        let mut malformed = 0usize;
        for event in &events {
            match Nip34Event::parse_with_limits(event, self.repos.limits()) {
                Ok(Nip34Event::Announcement(announcement)) => {
                    update.merge(self.repos.handle_announcement(&announcement));
                    announced.push(announcement.coordinate.clone());
                    let repo = &announcement.coordinate;
                    self.note_maintainer(*repo.owner(), repo);
                    for maintainer in &announcement.maintainers {
                        self.note_maintainer(*maintainer, repo);
                    }
                }
                Ok(Nip34Event::Root(root)) => {
                    update.merge(self.repos.handle_root_event(&root));
                    roots.push(root.id);
                    for repo in &root.repos {
                        self.note_root_author(root.author, repo);
                    }
                }
                // State events are not part of the self feed; ignore if one slips in.
                Ok(Nip34Event::State(_)) => {}
                Err(error) => {
                    malformed += 1;
                    tracing::debug!(id = %event.id, %error, "self-feed event is not usable NIP-34");
                }
            }
        }
        if malformed > 0 {
            tracing::info!(malformed, "self-feed events skipped as malformed");
        }
        if update.dropped_relays > 0 {
            tracing::info!(
                dropped = update.dropped_relays,
                "relay URLs dropped from announcements"
            );
        }
        self.apply_index_update(&update);
        for repo in &announced {
            if let Some(needs) = self.repos.get(repo) {
                roots.extend(needs.root_events.iter().copied());
            }
        }
        roots.retain(|id| self.targets.root_ids().contains(id));
        self.read_stored_members(roots);
    }

    /// The purgatory timer fired: reconcile `StateOnly` entries with the snapshot.
    pub(super) fn reconcile_purgatory(&mut self) {
        let snapshot = self.purgatory.announcements_for_sync();
        if snapshot.is_empty()
            && !self
                .repos
                .iter()
                .any(|(_, needs)| needs.sync_level == grasp_sync_model::SyncLevel::StateOnly)
        {
            return;
        }
        let update = self.repos.reconcile_purgatory(&snapshot);
        self.apply_index_update(&update);
    }

    /// Updates the targets by the update's delta, registers new relays, and gives connected
    /// dirty relays their new work.
    fn apply_index_update(&mut self, update: &IndexUpdate) {
        if update.is_empty() {
            return;
        }
        let changed = self.targets.handle_index_update(&self.repos, update);
        let report = self.targets.report();
        if report != self.tracking_report && report.leaves_out_any() {
            tracing::warn!(
                over_cap = report.relays_over_cap,
                max_tracked_relays = self.config.tracking.max_relays,
                author_relays_dropped = report.author_relays_dropped,
                max_relay_hosts_per_author = self.config.tracking.max_hosts_per_author,
                "announcements name more relays than the tracking bounds allow; tracking the relays that serve the most repositories"
            );
        }
        self.tracking_report = report;
        // The mailbox inventory subtracts what the targets cover: derive it again.
        self.outbox.dirty = true;
        let relays: Vec<RelayUrl> = self.targets.relays().cloned().collect();
        for relay in &relays {
            if !self.runtimes.contains_key(relay) {
                self.register_relay(relay, false);
                self.dial_tracked_relay(relay);
            }
        }
        // The update's relays, and those whose targets the bounds changed (ranked back in
        // under the relay cap, admitted by an author's host cap).
        for relay in update
            .dirty_relays
            .iter()
            .chain(changed.difference(&update.dirty_relays))
        {
            self.recompute_once_queue_drains(relay);
        }
    }

    /// The diff of an index update for `relay`, at once, or, behind a backlog of at least
    /// [`BACKLOG_STARTS`] queued background starts, once those have all gone out. Updates that
    /// arrive while a relay works through a backlog then become one batch, packed together,
    /// instead of one small batch each, queued behind it: the self feed brings new roots every
    /// window while a first sync runs (a shard reads the other shards' roots as they are
    /// written). Their coverage would start no sooner queued.
    fn recompute_once_queue_drains(&mut self, relay: &RelayUrl) {
        if let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
            && session.queued_background() >= BACKLOG_STARTS
        {
            session.index_update_waits = true;
            return;
        }
        self.recompute(relay);
    }

    /// Runs the index update's diff that waited for `relay`'s queue
    /// ([`Self::recompute_once_queue_drains`]), once nothing is queued.
    pub(super) fn recompute_if_queue_drained(&mut self, relay: &RelayUrl) {
        let Some(session) = self
            .runtimes
            .get_mut(relay)
            .and_then(|r| r.machine.session.as_mut())
        else {
            return;
        };
        if !session.index_update_waits || session.has_queued_background() {
            return;
        }
        session.index_update_waits = false;
        self.recompute(relay);
    }

    /// Tracks a relay; it is dialled on the health tick, or at once when an index update
    /// tracks it for repository work ([`Self::dial_tracked_relay`]).
    pub(super) fn register_relay(&mut self, relay: &RelayUrl, bootstrap: bool) {
        if self
            .config
            .own_relay
            .as_ref()
            .is_some_and(|own| own.same_endpoint(relay))
        {
            return;
        }
        if let Err(refusal) = self.config.address_policy.check(relay) {
            if self
                .address_refusals
                .record("discovery", refusal.label(), relay)
            {
                tracing::info!(%relay, ?refusal, "not dialing a relay refused by the address policy");
                if let Some(metrics) = &self.metrics {
                    metrics.record_address_refusal("discovery", refusal.label());
                }
            }
            return;
        }
        if !self.config.tracking.shard.owns(relay) {
            if bootstrap {
                tracing::info!(%relay, shard = %self.config.tracking.shard, "bootstrap relay left to another shard");
            }
            return;
        }
        if self.runtimes.contains_key(relay) {
            return;
        }
        let state = self.relays.register(relay);
        state.is_bootstrap |= bootstrap;
        let seed = self.rng.next_u64();
        let now = self.now();
        let health = RelayHealth::new(self.config.health, bootstrap, seed, now).or_else(|error| {
            tracing::warn!(%error, "invalid health configuration; using the defaults");
            RelayHealth::new(
                grasp_sync_health::HealthConfig::default(),
                bootstrap,
                seed,
                now,
            )
        });
        let Ok(health) = health else {
            return;
        };
        tracing::info!(%relay, bootstrap, "tracking relay");
        let mut runtime = RelayRuntime::new(health);
        self.restore_learned(relay, &mut runtime);
        self.runtimes.insert(relay.clone(), runtime);
    }

    /// The three-way diff for one relay: target − pending − confirmed → new live and historic work.
    pub(super) fn recompute(&mut self, relay: &RelayUrl) {
        let connected = self
            .runtimes
            .get(relay)
            .is_some_and(|r| r.machine.session.is_some());
        if !connected {
            return;
        }
        let Some(target) = self.targets.get(relay) else {
            return;
        };
        let single = std::iter::once((relay.clone(), target.clone())).collect();
        for action in compute_actions(&single, &self.pending, &self.relays) {
            self.handle_add_filters(&action.relay, action.needs);
        }
    }

    /// Whether a relay still has a reason to be tracked: repository work or participant
    /// discovery.
    pub(super) fn wants_connection(&self, relay: &RelayUrl) -> bool {
        self.wants_repo_connection(relay) || self.wants_outbox_connection(relay)
    }

    /// Whether a relay has repository work: bootstrap, a target, or confirmed coverage.
    pub(super) fn wants_repo_connection(&self, relay: &RelayUrl) -> bool {
        let bootstrap = self.relays.get(relay).is_some_and(|s| s.is_bootstrap);
        let desired = self.targets.get(relay).is_some_and(|t| !t.is_empty());
        let confirmed = self
            .relays
            .get(relay)
            .is_some_and(|s| !s.repos.is_empty() || !s.root_events.is_empty());
        bootstrap || desired || confirmed
    }
}
