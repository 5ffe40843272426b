//! The sync actor: the one owner of the sync indices, the per-relay ledgers and health.
//!
//! It is a driver loop in the style of a sans-IO core's shell: it feeds inputs (self-feed
//! events, dial reports, session messages, job reports, commands) into its state, then performs
//! what each relay's machine decided as data (its `poll_dial`, `poll_job` and `poll_transmit`:
//! dial attempts to the dial workers, store reads and NIP-77 rounds as background jobs, REQs,
//! CLOSEs and disconnects to each session's sender task) and sleeps
//! until the earliest deadline, deciding expiry by reading the clock rather than trusting the
//! timer. It never waits on the network or on a pacing gate: gates answer with an instant to
//! come back at.

mod auth;
mod catch_up;
mod descendants;
mod discovery;
mod history;
mod holdings;
mod lanes;
mod lifecycle;
pub(crate) mod limits_keeper;
mod live;
mod negentropy;
mod outbox;
mod packing;
mod refusal;
mod runtime;
mod status;
mod unsaved;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use grasp_sync_model::{
    AnnouncementLimits, PendingSyncIndex, RelaySyncIndex, RelayTargets, RelayUrl, RepoSyncIndex,
};
use nostr::Event;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, oneshot};

use crate::address::AddressRefusals;
use crate::boundary::PurgatorySource;
use crate::clock::Clock;
use crate::config::EngineConfig;
use crate::dial::{DialReport, Dialer};
use crate::ingest::Ingestor;
use crate::machine::jobs::HistorySlots;
use crate::metrics::SyncMetrics;
use crate::session::{SessionEvent, SessionKey};
use crate::status::EngineStatus;

pub(crate) use self::negentropy::JobReport;
use self::runtime::RelayRuntime;
pub use crate::machine::lanes::MAX_CONNECTIONS_PER_RELAY;
use crate::negentropy::{MissingEventRecovery, NegentropyFallbacks};

/// Background history jobs (negentropy rounds) running at once across every relay.
const HISTORY_JOBS: usize = 8;

/// The shortest time between two self-feed batches when a batch is applied before its window
/// ends ([`Actor::discovery_settled_at`]).
const SETTLED_BATCH_GAP: Duration = Duration::from_millis(250);

/// How long the self feed must have been quiet before a settled batch is applied early.
const SETTLED_FEED_QUIET: Duration = Duration::from_millis(100);

/// What the engine handle asks of the actor.
#[derive(Debug)]
pub(crate) enum Command {
    /// Reply with a fresh status snapshot.
    Status(oneshot::Sender<EngineStatus>),
    /// Reply with every relay's confirmed coverage.
    Confirmed(oneshot::Sender<BTreeMap<RelayUrl, grasp_sync_model::RelayState>>),
    /// Run the daily reconciliation now on every connected relay; reply with how many.
    ReconcileNow(oneshot::Sender<usize>),
    /// Stop dialing, close every session, and reply when done.
    Shutdown(oneshot::Sender<()>),
}

/// The channels the actor reads.
pub(crate) struct ActorInputs {
    pub(crate) commands: mpsc::Receiver<Command>,
    pub(crate) sessions: mpsc::Receiver<(SessionKey, SessionEvent)>,
    pub(crate) dials: mpsc::Receiver<DialReport>,
    pub(crate) feed: mpsc::Receiver<Event>,
    pub(crate) jobs: mpsc::Receiver<JobReport>,
}

/// The actor's state.
pub(crate) struct Actor {
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    purgatory: Arc<dyn PurgatorySource>,
    ingestor: Ingestor,
    dialer: Dialer,
    session_tx: mpsc::Sender<(SessionKey, SessionEvent)>,
    metrics: Option<SyncMetrics>,
    jobs_tx: mpsc::Sender<JobReport>,
    /// NIP-77 rounds running at once across every relay ([`HISTORY_JOBS`] at most).
    history_slots: HistorySlots,
    recovery: MissingEventRecovery,
    fallbacks: NegentropyFallbacks,
    next_recovery_at: Instant,

    repos: RepoSyncIndex,
    relays: RelaySyncIndex,
    pending: PendingSyncIndex,
    runtimes: BTreeMap<RelayUrl, RelayRuntime>,
    /// Per-relay targets derived from `repos` and every root event of it (to recognise direct
    /// members), updated by the delta of each change to `repos`.
    targets: RelayTargets,
    /// Direct members seen on any relay, with their roots.
    members: crate::machine::descendant_coverage::DirectMembers,
    /// Participants, their relay lists and the mailbox relays probed for them.
    outbox: outbox::Outbox,

    /// Self-feed events waiting for the next batch window.
    feed_buffer: Vec<Event>,
    feed_open: bool,
    next_batch_at: Instant,
    /// When the last self-feed batch was applied, and when the last self-feed event arrived.
    last_batch_at: Instant,
    last_feed_at: Instant,
    next_purgatory_at: Instant,
    next_tick_at: Instant,

    /// Relays the address policy refused, by stage and reason.
    address_refusals: AddressRefusals,
    /// What the tracking bounds left out of the last derivation of `targets`.
    tracking_report: grasp_sync_model::TrackingReport,
    /// What relays taught, kept for the next run (none without a limits memory).
    limits: Option<limits_keeper::LimitsKeeper>,
    /// How large the indices were when last packed.
    packing: packing::Packing,

    next_attempt: u64,
    next_generation: u64,
    next_subscription: u64,
    /// Seeded randomness: each relay's backoff jitter seed and the daily reconciliation's
    /// offset, reproducible from `EngineConfig::rng_seed`.
    rng: ChaCha8Rng,
    /// The store held no event when the engine started: its first sync may trade events sent
    /// again for fewer starts (`EngineConfig::first_sync_by_req`).
    new_store: bool,
    /// Where each relay's holdings are kept for the daily run over `{}` (none: every daily
    /// run reconciles by named rounds).
    holdings: Option<Arc<dyn crate::holdings::HoldingsMemory>>,
    /// Held by each write of holdings (on a blocking thread), so a merge of learned holdings
    /// never races another write of the same file.
    holdings_writes: Arc<std::sync::Mutex<()>>,
}

impl Actor {
    /// Keeps relays' holdings in `memory` (see `holdings`).
    pub(crate) fn with_holdings(
        mut self,
        memory: Option<Arc<dyn crate::holdings::HoldingsMemory>>,
    ) -> Self {
        self.holdings = memory;
        self
    }

    /// Marks the store as empty when the engine started (see `new_store`).
    pub(crate) fn with_new_store(mut self, new_store: bool) -> Self {
        self.new_store = new_store;
        self
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        config: EngineConfig,
        clock: Arc<dyn Clock>,
        purgatory: Arc<dyn PurgatorySource>,
        ingestor: Ingestor,
        dialer: Dialer,
        session_tx: mpsc::Sender<(SessionKey, SessionEvent)>,
        jobs_tx: mpsc::Sender<JobReport>,
        metrics: Option<SyncMetrics>,
        limits: Option<limits_keeper::LimitsKeeper>,
        seed: u64,
    ) -> Self {
        let now = clock.now().into_std();
        let recovery = MissingEventRecovery::new(config.recovery);
        let repos = RepoSyncIndex::new(AnnouncementLimits::default())
            .with_max_waiting_roots(config.max_waiting_roots);
        let outbox = outbox::Outbox::new(&config.outbox);
        let targets = RelayTargets::new(
            config.own_relay.clone(),
            config.tracking,
            config.bootstrap_relays.iter().cloned().collect(),
        );
        let mut actor = Self {
            next_batch_at: now + config.batch_window,
            last_batch_at: now,
            last_feed_at: now,
            next_purgatory_at: now,
            next_tick_at: now,
            config,
            clock,
            purgatory,
            ingestor,
            dialer,
            session_tx,
            metrics,
            jobs_tx,
            history_slots: HistorySlots::new(HISTORY_JOBS),
            recovery,
            fallbacks: NegentropyFallbacks::new(),
            next_recovery_at: now,
            repos,
            relays: RelaySyncIndex::new(),
            pending: PendingSyncIndex::new(),
            runtimes: BTreeMap::new(),
            targets,
            members: Default::default(),
            outbox,
            feed_buffer: Vec::new(),
            feed_open: true,
            address_refusals: AddressRefusals::default(),
            tracking_report: grasp_sync_model::TrackingReport::default(),
            limits,
            packing: packing::Packing::default(),
            next_attempt: 0,
            next_generation: 0,
            next_subscription: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            new_store: false,
            holdings: None,
            holdings_writes: Arc::default(),
        };
        for relay in actor.config.bootstrap_relays.clone() {
            actor.register_relay(&relay, true);
        }
        actor
    }

    /// Runs until shut down.
    pub(crate) async fn run(mut self, mut inputs: ActorInputs) {
        loop {
            let wake = tokio::time::Instant::from_std(self.next_deadline());
            tokio::select! {
                biased;
                command = inputs.commands.recv() => match command {
                    Some(Command::Status(reply)) => {
                        let _ = reply.send(self.status());
                    }
                    Some(Command::Confirmed(reply)) => {
                        let confirmed = self.relays.iter().map(|(url, state)| (url.clone(), state.clone()));
                        let _ = reply.send(confirmed.collect());
                    }
                    Some(Command::ReconcileNow(reply)) => {
                        let _ = reply.send(self.reconcile_now());
                    }
                    Some(Command::Shutdown(done)) => {
                        self.shutdown().await;
                        let _ = done.send(());
                        return;
                    }
                    None => {
                        self.shutdown().await;
                        return;
                    }
                },
                Some((key, event)) = inputs.sessions.recv() => self.handle_session_event(key, event),
                Some(report) = inputs.dials.recv() => self.handle_dial_report(report),
                Some(report) = inputs.jobs.recv() => self.handle_job_report(report),
                event = inputs.feed.recv(), if self.feed_open => match event {
                    Some(event) => {
                        self.last_feed_at = self.now();
                        self.feed_buffer.push(event);
                    }
                    None => {
                        tracing::warn!("the self feed ended; no new repositories will be discovered");
                        self.feed_open = false;
                    }
                },
                () = tokio::time::sleep_until(wake) => {}
            }
            self.handle_timeouts();
            self.requeue_ended_live_pages();
            self.perform_dials();
            self.perform_jobs();
            self.perform_transmits();
        }
    }

    /// Hands the dial attempts this step decided to the dial workers, each relay's in order.
    fn perform_dials(&mut self) {
        for (relay, runtime) in &mut self.runtimes {
            while let Some(dial) = runtime.machine.poll_dial() {
                self.dialer.dial(relay.clone(), dial);
            }
        }
    }

    /// Hands every connection what this step queued for it, in the order decided.
    fn perform_transmits(&mut self) {
        for runtime in self.runtimes.values_mut() {
            runtime.perform_transmits();
            runtime.perform_lane_transmits();
        }
    }

    fn now(&self) -> Instant {
        self.clock.now().into_std()
    }

    /// Runs everything whose deadline has passed, by reading the clock.
    fn handle_timeouts(&mut self) {
        let now = self.now();
        if now >= self.next_batch_at || self.discovery_settled_at().is_some_and(|at| now >= at) {
            self.last_batch_at = now;
            self.next_batch_at = now + self.config.batch_window;
            self.process_feed_batch();
            self.sync_descendants();
            self.drive_outbox();
            let relays: Vec<RelayUrl> = self.runtimes.keys().cloned().collect();
            for relay in relays {
                self.run_catch_up(&relay);
            }
        }
        if now >= self.next_purgatory_at {
            self.next_purgatory_at = now + self.config.purgatory_interval;
            self.reconcile_purgatory();
        }
        if now >= self.next_recovery_at {
            self.next_recovery_at = now + self.config.purgatory_interval;
            self.drive_recovery();
        }
        if now >= self.next_tick_at {
            self.next_tick_at = now + self.config.health_tick;
            self.health_tick();
        }
        let relays: Vec<RelayUrl> = self.runtimes.keys().cloned().collect();
        for relay in relays {
            self.handle_relay_timeouts(&relay, now);
        }
    }

    /// When the buffered self-feed events may be applied before the batch window ends: they
    /// wait for the window only to be applied together, so once nothing can add to this
    /// discovery generation (no relay has a batch pending, no save is in flight and the feed
    /// has been quiet for [`SETTLED_FEED_QUIET`]) the next layer starts at once, at most every
    /// [`SETTLED_BATCH_GAP`]. `None` while the buffer is empty or work is in flight.
    fn discovery_settled_at(&self) -> Option<Instant> {
        if self.feed_buffer.is_empty()
            || self.ingestor.saving() > 0
            || self
                .runtimes
                .keys()
                .any(|relay| self.pending.has_pending(relay))
        {
            return None;
        }
        Some((self.last_batch_at + SETTLED_BATCH_GAP).max(self.last_feed_at + SETTLED_FEED_QUIET))
    }

    /// The earliest instant anything is due.
    fn next_deadline(&self) -> Instant {
        let mut earliest = self
            .next_batch_at
            .min(self.discovery_settled_at().unwrap_or(self.next_batch_at))
            .min(self.next_purgatory_at)
            .min(self.next_tick_at)
            .min(self.next_recovery_at);
        for runtime in self.runtimes.values() {
            if let Some(deadline) = runtime.machine.poll_timeout() {
                earliest = earliest.min(deadline);
            }
        }
        earliest
    }

    fn next_subscription_id(&mut self, kind: &str) -> nostr::SubscriptionId {
        new_subscription_id(&mut self.next_subscription, kind)
    }

    async fn shutdown(&mut self) {
        let relays: Vec<RelayUrl> = self.runtimes.keys().cloned().collect();
        for relay in &relays {
            self.close_lanes(relay);
        }
        for runtime in self.runtimes.values_mut() {
            if let Some(session) = runtime.machine.session.as_mut() {
                let sent_live = session
                    .live
                    .iter()
                    .filter(|(_, g)| g.was_sent())
                    .map(|(id, _)| id);
                let open: Vec<nostr::SubscriptionId> = sent_live
                    .chain(session.transients.keys())
                    .cloned()
                    .collect();
                for id in open {
                    session.transmit.push(crate::session::Outbound::Close(id));
                }
                session.transmit.push(crate::session::Outbound::Disconnect);
            }
            runtime.end_session(None);
        }
        self.ingestor.drain(self.config.ingest_in_flight).await;
        self.flush_learned().await;
    }
}

/// The next subscription ID of `kind` (`gs-<kind>-<n>`), numbered by `counter`, which is
/// unique over the actor's lifetime.
pub(super) fn new_subscription_id(counter: &mut u64, kind: &str) -> nostr::SubscriptionId {
    *counter += 1;
    nostr::SubscriptionId::new(format!("gs-{kind}-{counter}"))
}
