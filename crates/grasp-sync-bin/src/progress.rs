//! Progress of long syncs. [`SyncProgress`] is what is shown: events stored against those
//! expected (or discovered), and relays done with their historic sync. [`ProgressLine`] shows
//! it the way terminal programs do, one line rewritten in place, and nothing at all when the
//! output is not a terminal. [`FirstSync`] turns the statuses of `grasp-sync run` into log
//! lines while the first sync runs and one when it is done.

use std::io::Write;
use std::time::Duration;

use grasp_sync_engine::EngineStatus;

/// Width of the bar, in characters.
const BAR_WIDTH: usize = 24;

/// How far a sync has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncProgress {
    /// Time since the sync started.
    pub elapsed: Duration,
    /// Events stored.
    pub stored: u64,
    /// Events expected or discovered, where known.
    pub expected: Option<u64>,
    /// Relays whose historic sync is done.
    pub relays_done: usize,
    /// Relays tracked.
    pub relays: usize,
}

impl SyncProgress {
    /// The progress shown by `status`: `stored` of `expected` events, `elapsed` in.
    pub fn of(
        status: &EngineStatus,
        stored: u64,
        expected: Option<u64>,
        elapsed: Duration,
    ) -> SyncProgress {
        SyncProgress {
            elapsed,
            stored,
            expected,
            relays_done: relays_done(status),
            relays: status.relays.len(),
        }
    }

    /// `[ 12.0s] [#########.......] 41/45 events stored, 2/3 relays done`.
    pub fn render(&self) -> String {
        let events = match self.expected {
            Some(expected) => {
                let share = if expected == 0 {
                    1.0
                } else {
                    (self.stored as f64 / expected as f64).min(1.0)
                };
                let filled = (share * BAR_WIDTH as f64).round() as usize;
                format!(
                    "[{}{}] {}/{expected} events stored",
                    "#".repeat(filled),
                    ".".repeat(BAR_WIDTH - filled),
                    self.stored
                )
            }
            None => format!("{} events stored", self.stored),
        };
        format!(
            "[{:>6.1}s] {events}, {}/{} relays done",
            self.elapsed.as_secs_f64(),
            self.relays_done,
            self.relays
        )
    }
}

/// Relays connected with their historic sync finished (with or without failures).
pub fn relays_done(status: &EngineStatus) -> usize {
    status
        .relays
        .values()
        .filter(|relay| relay.connection.starts_with("connected"))
        .count()
}

/// A progress line: rewritten in place on a terminal, silent elsewhere.
#[derive(Debug)]
pub struct ProgressLine {
    terminal: bool,
    shown: bool,
}

impl ProgressLine {
    /// A line for an output that is a terminal (`terminal`) or not.
    pub fn new(terminal: bool) -> ProgressLine {
        ProgressLine {
            terminal,
            shown: false,
        }
    }

    /// Replaces the line with `progress`.
    pub fn show(
        &mut self,
        out: &mut (dyn Write + Send),
        progress: &SyncProgress,
    ) -> std::io::Result<()> {
        if !self.terminal {
            return Ok(());
        }
        // Carriage return, then erase the line.
        write!(out, "\r\x1b[2K{}", progress.render())?;
        self.shown = true;
        out.flush()
    }

    /// Ends the line, so what follows starts on a line of its own.
    pub fn finish(&mut self, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
        if std::mem::take(&mut self.shown) {
            writeln!(out)?;
        }
        Ok(())
    }
}

/// The first sync of `grasp-sync run`, followed through the engine's statuses.
#[derive(Debug, Default)]
pub struct FirstSync {
    done: bool,
}

impl FirstSync {
    /// The log line for `status` and whether it is the last (`None` once the first sync was
    /// reported done): progress while a relay is connecting or syncing, then `done`.
    pub fn handle_status(
        &mut self,
        status: &EngineStatus,
        elapsed: Duration,
    ) -> Option<(bool, String)> {
        if self.done || status.relays.is_empty() {
            return None;
        }
        let stored = status.relays.values().map(|r| r.events_saved).sum();
        let progress = SyncProgress::of(status, stored, None, elapsed);
        // Done once no relay is connecting or syncing and one is connected: a relay that
        // is down does not hold the report back.
        let working = status
            .relays
            .values()
            .any(|r| r.connection == "connecting" || r.connection == "syncing");
        let finished = !working && progress.relays_done > 0;
        self.done = finished;
        let line = if finished {
            format!(
                "first sync done in {:.0}s: {} events stored, {}/{} relays done",
                elapsed.as_secs_f64(),
                progress.stored,
                progress.relays_done,
                progress.relays
            )
        } else {
            format!(
                "first sync: {} events stored, {}/{} relays done",
                progress.stored, progress.relays_done, progress.relays
            )
        };
        Some((finished, line))
    }
}

#[cfg(test)]
mod tests;
