//! `SyncHook`: the operator's `on_sync_hook` command, run once per burst of synced state
//! events with a [`SyncBatch`] as JSON on its standard input. Batches run one at a time, in
//! order; a command that fails (non-zero exit, no start, past its timeout) is retried after a
//! doubling wait, up to [`HookConfig::attempts`] runs. At most [`HOOK_QUEUE`] batches wait; a
//! batch past it is dropped and counted. Every run is counted on
//! `grasp_sync_sync_hook_runs_total`.

use std::process::Stdio;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter};
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::mpsc;

/// Most batches waiting for the command.
pub const HOOK_QUEUE: usize = 64;

/// One burst of synced state events, by repository: what the hook reads on standard input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncBatch {
    /// The repositories whose state events arrived.
    pub repositories: Vec<RepoUpdate>,
}

/// One repository in a [`SyncBatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepoUpdate {
    /// `30617:<owner hex>:<identifier>`.
    pub coordinate: String,
    /// The owner's npub.
    pub owner: String,
    /// The `d` identifier.
    pub identifier: String,
    /// Whether the announcement is in purgatory (waiting for its git data).
    pub purgatory: bool,
    /// The clone URLs its announcement lists.
    pub clone_urls: Vec<String>,
    /// Where the built-in fetcher mirrors it, with `git_root`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The state events of the burst for it.
    pub states: Vec<StateRefs>,
}

/// One state event (kind 30618): its refs as `[name, value]` pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateRefs {
    /// The event ID (hex).
    pub id: String,
    /// Its author (hex).
    pub author: String,
    /// Its `created_at`.
    pub created_at: u64,
    /// `refs/...` and `HEAD` tags.
    pub refs: Vec<[String; 2]>,
}

/// How the command is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// The command, run by `sh -c`.
    pub command: String,
    /// Runs per batch at most (the first and its retries).
    pub attempts: u32,
    /// The wait before the first retry; each further retry waits twice as long.
    pub retry_base: Duration,
    /// The longest one run may take.
    pub timeout: Duration,
}

impl HookConfig {
    /// Three runs at most, retried after 1 s and 2 s, each within 60 s.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            attempts: 3,
            retry_base: Duration::from_secs(1),
            timeout: Duration::from_secs(60),
        }
    }
}

/// The running hook: a queue in front of one task that runs the command.
#[derive(Debug, Clone)]
pub struct SyncHook {
    tx: mpsc::Sender<SyncBatch>,
    runs: Counter<u64>,
}

impl SyncHook {
    /// Starts the task; counts on `meter`.
    pub fn start(config: HookConfig, meter: &Meter) -> Self {
        let runs = meter
            .u64_counter("grasp_sync_sync_hook_runs_total")
            .with_description("Runs of the on_sync_hook command, by result")
            .build();
        let (tx, rx) = mpsc::channel(HOOK_QUEUE);
        tokio::spawn(run_queue(rx, config, runs.clone()));
        Self { tx, runs }
    }

    /// Queues a batch; drops it (counted as `dropped`) when [`HOOK_QUEUE`] are waiting.
    pub fn submit(&self, batch: SyncBatch) {
        if batch.repositories.is_empty() {
            return;
        }
        if self.tx.try_send(batch).is_err() {
            self.runs.add(1, &[KeyValue::new("result", "dropped")]);
            tracing::warn!("on_sync_hook is behind: a batch was dropped");
        }
    }
}

async fn run_queue(mut rx: mpsc::Receiver<SyncBatch>, config: HookConfig, runs: Counter<u64>) {
    while let Some(batch) = rx.recv().await {
        let input = match serde_json::to_vec(&batch) {
            Ok(input) => input,
            Err(error) => {
                tracing::warn!(%error, "encoding a hook batch failed");
                continue;
            }
        };
        let mut wait = config.retry_base;
        for attempt in 1..=config.attempts.max(1) {
            match run_once(&config, &input).await {
                Ok(()) => {
                    runs.add(1, &[KeyValue::new("result", "ok")]);
                    break;
                }
                Err(error) if attempt < config.attempts => {
                    runs.add(1, &[KeyValue::new("result", "retried")]);
                    tracing::warn!(attempt, %error, "on_sync_hook failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2);
                }
                Err(error) => {
                    runs.add(1, &[KeyValue::new("result", "failed")]);
                    tracing::error!(attempt, %error, "on_sync_hook failed; batch given up");
                }
            }
        }
    }
}

/// One run of the command with `input` on standard input.
async fn run_once(config: &HookConfig, input: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&config.command)
        // The NIP-42 signing key stays with the daemon.
        .env_remove(crate::config::AUTH_KEY_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the command")?;
    let mut stdin = child.stdin.take().context("the command's standard input")?;
    let run = async {
        // A command that does not read its input is not an error.
        let _ = stdin.write_all(input).await;
        drop(stdin);
        child.wait().await.context("waiting for the command")
    };
    let status = tokio::time::timeout(config.timeout, run)
        .await
        .map_err(|_| anyhow::anyhow!("took longer than {:?}", config.timeout))??;
    anyhow::ensure!(status.success(), "exited with {status}");
    Ok(())
}

#[cfg(test)]
mod tests;
