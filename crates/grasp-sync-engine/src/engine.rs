//! The public face of the engine: wire its boundaries together, start the actor, and talk to it
//! through an [`EngineHandle`]; learn how its task ended through an [`EngineExit`].

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use grasp_sync_model::{RelayState, RelayUrl};
use opentelemetry::metrics::Meter;
use tokio::sync::{mpsc, oneshot, watch};

use crate::actor::limits_keeper::LimitsKeeper;
use crate::actor::{Actor, ActorInputs, Command};
use crate::boundary::{EventStore, NoPurgatory, PurgatorySource, SelfFeed, SyncedEventHook};
use crate::clock::{Clock, TokioClock};
use crate::config::EngineConfig;
use crate::dial::Dialer;
use crate::error::StoreError;
use crate::holdings::HoldingsMemory;
use crate::ingest::Ingestor;
use crate::limits_memory::{LimitsMemory, RememberedRelays};
use crate::metrics::SyncMetrics;
use crate::status::EngineStatus;
use crate::transport::RelayConnector;

/// The engine's boundaries. Only the connector, the store and the self feed are required.
pub struct EngineParts {
    connector: Arc<dyn RelayConnector>,
    store: Arc<dyn EventStore>,
    feed: Arc<dyn SelfFeed>,
    purgatory: Arc<dyn PurgatorySource>,
    hook: Option<Arc<dyn SyncedEventHook>>,
    clock: Arc<dyn Clock>,
    meter: Option<Meter>,
    limits_memory: Option<Arc<dyn LimitsMemory>>,
    holdings_memory: Option<Arc<dyn HoldingsMemory>>,
}

impl EngineParts {
    /// The required boundaries, with an empty purgatory, no hook, tokio's clock and no metrics.
    pub fn new(
        connector: Arc<dyn RelayConnector>,
        store: Arc<dyn EventStore>,
        feed: Arc<dyn SelfFeed>,
    ) -> Self {
        Self {
            connector,
            store,
            feed,
            purgatory: Arc::new(NoPurgatory),
            hook: None,
            clock: Arc::new(TokioClock::from_system()),
            meter: None,
            limits_memory: None,
            holdings_memory: None,
        }
    }

    /// Uses a purgatory source for `StateOnly` sync.
    pub fn purgatory(mut self, purgatory: Arc<dyn PurgatorySource>) -> Self {
        self.purgatory = purgatory;
        self
    }

    /// Calls `hook` with newly saved synced events.
    pub fn hook(mut self, hook: Arc<dyn SyncedEventHook>) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Reads time from `clock`.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Keeps the limits relays teach in `memory`, and restores them at start.
    pub fn limits_memory(mut self, memory: Arc<dyn LimitsMemory>) -> Self {
        self.limits_memory = Some(memory);
        self
    }

    /// Keeps what each relay held at its daily reconciliation in `memory`, so the next daily
    /// run asks the relay one NIP-77 question over `{}` (see [`crate::holdings`]). Without
    /// one, every daily run reconciles the relay's coverage by named rounds.
    pub fn holdings_memory(mut self, memory: Arc<dyn HoldingsMemory>) -> Self {
        self.holdings_memory = Some(memory);
        self
    }

    /// Records metrics on `meter`.
    pub fn meter(mut self, meter: Meter) -> Self {
        self.meter = Some(meter);
        self
    }
}

impl std::fmt::Debug for EngineParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineParts").finish_non_exhaustive()
    }
}

/// Starts and runs proactive sync.
#[derive(Debug)]
pub struct SyncEngine;

impl SyncEngine {
    /// Starts the self feed and the actor on the current tokio runtime.
    pub async fn start(
        config: EngineConfig,
        parts: EngineParts,
    ) -> Result<EngineHandle, StoreError> {
        let feed = parts.feed.start().await?;
        // A failed read counts as a store that holds events: the cautious side.
        let new_store = parts
            .store
            .negentropy_items(nostr::Filter::new().limit(1))
            .await
            .is_ok_and(|items| items.is_empty());
        let (commands_tx, commands) = mpsc::channel(16);
        let (session_tx, sessions) = mpsc::channel(config.session_inbox.max(1));
        let (dial_tx, dials) = mpsc::channel(64);
        let (jobs_tx, jobs) = mpsc::channel(64);
        let metrics = parts.meter.as_ref().map(SyncMetrics::new);
        let ingestor = Ingestor::new(
            parts.store,
            config.ingest_in_flight,
            parts.hook,
            metrics.clone(),
        );
        let dialer = Dialer::start(parts.connector, config.dial, dial_tx);
        let seed = config
            .rng_seed
            .unwrap_or_else(|| parts.clock.unix_now().as_secs() ^ 0x9e37_79b9_7f4a_7c15);
        let limits = match parts.limits_memory {
            Some(memory) => {
                Some(restore_limits(memory, parts.clock.unix_now().as_secs(), &config).await)
            }
            None => None,
        };
        let actor = Actor::new(
            config,
            parts.clock,
            parts.purgatory,
            ingestor,
            dialer,
            session_tx,
            jobs_tx,
            metrics,
            limits,
            seed,
        )
        .with_new_store(new_store)
        .with_holdings(parts.holdings_memory);
        let task = tokio::spawn(actor.run(ActorInputs {
            commands,
            sessions,
            dials,
            feed,
            jobs,
        }));
        let (ended, exit) = watch::channel(None);
        tokio::spawn(async move {
            let end = match task.await {
                Ok(()) => EngineEnd::Stopped,
                Err(error) if error.is_panic() => {
                    EngineEnd::Panicked(panic_message(error.into_panic()))
                }
                Err(_) => EngineEnd::Cancelled,
            };
            ended.send_replace(Some(end));
        });
        Ok(EngineHandle {
            commands: commands_tx,
            exit: EngineExit(exit),
        })
    }
}

/// How the engine's task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineEnd {
    /// It stopped as asked: by [`EngineHandle::shutdown`], or because the handle was dropped.
    Stopped,
    /// The task panicked (a boundary or the engine itself); the panic's message.
    Panicked(String),
    /// The task was cancelled, as when its runtime shuts down.
    Cancelled,
}

impl std::fmt::Display for EngineEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineEnd::Stopped => f.write_str("stopped"),
            EngineEnd::Panicked(message) => write!(f, "panicked: {message}"),
            EngineEnd::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// Watches one engine's task end. Cloned from [`EngineHandle::exit`]; it outlives the handle,
/// and every clone sees the same end.
#[derive(Debug, Clone)]
pub struct EngineExit(watch::Receiver<Option<EngineEnd>>);

impl EngineExit {
    /// How the task ended; `None` while it runs.
    pub fn ended(&self) -> Option<EngineEnd> {
        self.0.borrow().clone()
    }

    /// Waits until the task ends, on its own or when shut down; how it ended.
    pub async fn wait(mut self) -> EngineEnd {
        match self.0.wait_for(Option::is_some).await {
            Ok(end) => end.clone().unwrap_or(EngineEnd::Cancelled),
            // The watcher itself was cancelled with the runtime, before it could report.
            Err(_) => EngineEnd::Cancelled,
        }
    }
}

/// A running engine.
#[derive(Debug)]
pub struct EngineHandle {
    commands: mpsc::Sender<Command>,
    exit: EngineExit,
}

impl EngineHandle {
    /// A fresh status snapshot; `None` once the engine stopped.
    pub async fn status(&self) -> Option<EngineStatus> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Status(reply)).await.ok()?;
        answer.await.ok()
    }

    /// Every relay's confirmed state: the repositories and root events whose history the
    /// engine has confirmed syncing from it, and its connection lifecycle. Meant for
    /// diagnostics and for simulations that check nothing is confirmed before it is stored.
    /// `None` once the engine stopped.
    pub async fn confirmed(&self) -> Option<BTreeMap<RelayUrl, RelayState>> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Confirmed(reply)).await.ok()?;
        answer.await.ok()
    }

    /// Runs the daily reconciliation now on every connected relay, as its timer would: a fresh
    /// start on the connection that is up (NIP-77 where the relay speaks it, else REQ+EOSE),
    /// with each relay's timer armed again 23–25 h from now. For an operator who suspects
    /// drift, and for measuring what a daily reconciliation costs. How many relays it started
    /// on; `None` once the engine stopped.
    pub async fn reconcile_now(&self) -> Option<usize> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::ReconcileNow(reply))
            .await
            .ok()?;
        answer.await.ok()
    }

    /// Watches for the end of the engine's task: a supervisor waits on it to notice an engine
    /// that panicked.
    pub fn exit(&self) -> EngineExit {
        self.exit.clone()
    }

    /// Stops dialing, closes every session, waits for in-flight store writes, and stops; how
    /// the task ended ([`EngineEnd::Stopped`] unless it had already died).
    pub async fn shutdown(self) -> EngineEnd {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
        self.exit.wait().await
    }
}

/// Loads the kept limits on a blocking thread; a failure is logged and nothing is restored.
async fn restore_limits(
    memory: Arc<dyn LimitsMemory>,
    unix_now: u64,
    config: &EngineConfig,
) -> LimitsKeeper {
    let reader = Arc::clone(&memory);
    let records = match tokio::task::spawn_blocking(move || reader.load()).await {
        Ok(Ok(records)) => records,
        Ok(Err(error)) => {
            tracing::warn!(%error, "learned relay limits not restored; they are learned again");
            Vec::new()
        }
        Err(error) => {
            tracing::warn!(%error, "reading the learned relay limits failed; they are learned again");
            Vec::new()
        }
    };
    let remembered = RememberedRelays::restore(records, unix_now, config.learned_limits_max_age);
    if !remembered.is_empty() {
        tracing::info!(relays = remembered.len(), "restored learned relay limits");
    }
    LimitsKeeper::new(memory, remembered)
}

/// The text a panic was raised with.
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => payload.downcast_ref::<&str>().map_or_else(
            || "a panic without a message".to_owned(),
            |m| (*m).to_owned(),
        ),
    }
}
