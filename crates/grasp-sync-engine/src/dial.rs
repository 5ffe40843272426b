//! Connection workers: at most eight handshakes at once, started at least 250 ms apart (measured
//! from actual starts, so a delayed executor does not emit a catch-up burst), each followed by a
//! bounded NIP-11 fetch. Only the actor applies the results; dropping the dialer cancels queued
//! and active attempts.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_model::RelayUrl;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::TransportError;
use crate::machine::dials::{Dial, DialPurpose};
use crate::transport::{RelayConnection, RelayConnector, RelayInfo};

/// Limits of the connection workers.
#[derive(Debug, Clone, Copy)]
pub struct DialLimits {
    /// Handshakes in flight at once.
    pub workers: usize,
    /// Minimum spacing between handshake starts.
    pub spacing: Duration,
    /// Handshake deadline.
    pub connect_timeout: Duration,
    /// NIP-11 fetch deadline.
    pub info_timeout: Duration,
}

impl Default for DialLimits {
    fn default() -> Self {
        Self {
            workers: 8,
            spacing: Duration::from_millis(250),
            connect_timeout: Duration::from_secs(5),
            info_timeout: Duration::from_secs(5),
        }
    }
}

/// What a connection worker reports to the actor.
#[derive(Debug)]
pub(crate) enum DialReport {
    /// A worker slot was free and the handshake started now (health backoff counts from here).
    Started { relay: RelayUrl, attempt: u64 },
    /// The handshake and the NIP-11 fetch finished.
    Finished {
        relay: RelayUrl,
        attempt: u64,
        result: Result<(RelayConnection, Option<RelayInfo>), TransportError>,
    },
}

/// Queues dial requests for the workers.
pub(crate) struct Dialer {
    requests: mpsc::UnboundedSender<(RelayUrl, Dial)>,
    _driver: tokio::task::JoinHandle<()>,
}

impl Drop for Dialer {
    fn drop(&mut self) {
        self._driver.abort();
    }
}

impl Dialer {
    /// Starts the worker pool; reports go to `reports`.
    pub(crate) fn start(
        connector: Arc<dyn RelayConnector>,
        limits: DialLimits,
        reports: mpsc::Sender<DialReport>,
    ) -> Self {
        let (requests, rx) = mpsc::unbounded_channel();
        let driver = tokio::spawn(drive(connector, limits, rx, reports));
        Self {
            requests,
            _driver: driver,
        }
    }

    /// Queues one attempt; its number is echoed in the reports.
    pub(crate) fn dial(&self, relay: RelayUrl, dial: Dial) {
        // The driver lives as long as the dialer; a send can only fail during shutdown.
        let _ = self.requests.send((relay, dial));
    }
}

async fn drive(
    connector: Arc<dyn RelayConnector>,
    limits: DialLimits,
    mut requests: mpsc::UnboundedReceiver<(RelayUrl, Dial)>,
    reports: mpsc::Sender<DialReport>,
) {
    let slots = Arc::new(Semaphore::new(limits.workers.max(1)));
    let mut workers = JoinSet::new();
    let mut last_start: Option<Instant> = None;
    while let Some((relay, Dial { attempt, purpose })) = requests.recv().await {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        if let Some(last) = last_start {
            tokio::time::sleep_until(last + limits.spacing).await;
        }
        last_start = Some(Instant::now());
        while workers.try_join_next().is_some() {}
        if reports
            .send(DialReport::Started {
                relay: relay.clone(),
                attempt,
            })
            .await
            .is_err()
        {
            return;
        }
        let connector = Arc::clone(&connector);
        let reports = reports.clone();
        workers.spawn(async move {
            let result = attempt_once(connector.as_ref(), &relay, purpose, limits).await;
            // The actor may be shutting down; then nobody needs the result.
            let _ = reports
                .send(DialReport::Finished {
                    relay,
                    attempt,
                    result,
                })
                .await;
            drop(slot);
        });
    }
}

async fn attempt_once(
    connector: &dyn RelayConnector,
    relay: &RelayUrl,
    purpose: DialPurpose,
    limits: DialLimits,
) -> Result<(RelayConnection, Option<RelayInfo>), TransportError> {
    let connection = match purpose {
        DialPurpose::Session => connector.connect(relay, limits.connect_timeout).await?,
        DialPurpose::LiveOnly => {
            connector
                .connect_live_only(relay, limits.connect_timeout)
                .await?
        }
    };
    let info = match connector.fetch_info(relay, limits.info_timeout).await {
        Ok(info) => Some(info),
        Err(error) => {
            tracing::debug!(%relay, %error, "no NIP-11 limits; using the floors");
            None
        }
    };
    Ok((connection, info))
}
