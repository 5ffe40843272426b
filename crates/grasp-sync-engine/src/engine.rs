//! The public face of the engine: wire its boundaries together, start the actor, and talk to it
//! through an [`EngineHandle`].

use std::sync::Arc;

use opentelemetry::metrics::Meter;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::actor::{Actor, ActorInputs, Command};
use crate::boundary::{EventStore, NoPurgatory, PurgatorySource, SelfFeed, SyncedEventHook};
use crate::clock::{Clock, TokioClock};
use crate::config::EngineConfig;
use crate::dial::Dialer;
use crate::error::StoreError;
use crate::ingest::Ingestor;
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
        let actor = Actor::new(
            config,
            parts.clock,
            parts.purgatory,
            ingestor,
            dialer,
            session_tx,
            jobs_tx,
            metrics,
            seed,
        );
        let join = tokio::spawn(actor.run(ActorInputs {
            commands,
            sessions,
            dials,
            feed,
            jobs,
        }));
        Ok(EngineHandle {
            commands: commands_tx,
            join,
        })
    }
}

/// A running engine.
#[derive(Debug)]
pub struct EngineHandle {
    commands: mpsc::Sender<Command>,
    join: JoinHandle<()>,
}

impl EngineHandle {
    /// A fresh status snapshot; `None` once the engine stopped.
    pub async fn status(&self) -> Option<EngineStatus> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Status(reply)).await.ok()?;
        answer.await.ok()
    }

    /// Stops dialing, closes every session, waits for in-flight store writes, and stops.
    pub async fn shutdown(self) {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
        let _ = self.join.await;
    }
}
