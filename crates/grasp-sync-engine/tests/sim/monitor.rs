//! The invariants checked on every client message a simulated relay reads, and the record of
//! the first one broken.
//!
//! - `budget`: a REQ opening a new subscription, or a NEG-OPEN, never finds the relay's
//!   advertised subscription budget already in use.
//! - `spacing`: background starts (every REQ but a live one, every NEG-OPEN) on one connection
//!   are at least one second apart.
//! - `refused-resent`: a filter list a relay refused by policy is never sent to that relay
//!   again unchanged (`since`, `until` and `limit` aside), and one refused for its filter count
//!   never again on that connection: it is regrouped or paused. (The learned filter-count
//!   ceiling is session-local by design and resets on reconnect.)
//!
//! The confirmed-coverage and convergence invariants are checked by the run itself
//! (`run.rs`), against the store.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nostr::{Filter, JsonUtil};
use tokio::time::Instant;

/// Background starts on one connection are at least this far apart.
const BACKGROUND_SPACING: Duration = Duration::from_secs(1);

/// The prefix of the engine's live subscription IDs; every other REQ is a background start.
const LIVE_PREFIX: &str = "gs-live-";

/// What one connection has done, for the spacing rule.
#[derive(Debug, Default)]
pub(crate) struct ConnectionRecord {
    last_background_start: Option<Instant>,
}

/// Invariant state over a whole run.
#[derive(Debug, Default)]
pub(crate) struct Monitor {
    /// Per relay and connection (`None`: every connection), the canonical filter lists it
    /// refused.
    refused: BTreeMap<(String, Option<usize>), BTreeSet<String>>,
    /// The first broken invariant, with when and where.
    pub(crate) violation: Option<String>,
}

/// One client start as the relay reads it.
pub(crate) struct Start<'a> {
    pub(crate) relay: &'a str,
    pub(crate) connection: usize,
    pub(crate) at: Duration,
    pub(crate) now: Instant,
    /// The REQ's subscription ID; `None` for a NEG-OPEN.
    pub(crate) subscription: Option<&'a str>,
    pub(crate) filters: &'a [Filter],
    /// Whether it opens a slot (a new REQ ID or a NEG-OPEN) rather than replacing one.
    pub(crate) opens_slot: bool,
    /// Slots in use before it, and the advertised budget, if any.
    pub(crate) in_use: usize,
    pub(crate) advertised: Option<usize>,
}

impl Monitor {
    fn break_rule(&mut self, rule: &str, start: &Start<'_>, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(format!(
                "{rule} broken at {:.3} s on {} (connection {}): {detail}",
                start.at.as_secs_f64(),
                start.relay,
                start.connection
            ));
        }
    }

    /// Checks one start before the relay answers it.
    pub(crate) fn check_start(&mut self, record: &mut ConnectionRecord, start: &Start<'_>) {
        if start.opens_slot
            && let Some(budget) = start.advertised
            && start.in_use >= budget
        {
            let detail = format!("{} slots of {budget} already in use", start.in_use);
            self.break_rule("budget", start, detail);
        }
        let background = start
            .subscription
            .is_none_or(|id| !id.starts_with(LIVE_PREFIX));
        if background {
            if let Some(last) = record.last_background_start {
                let gap = start.now.saturating_duration_since(last);
                if gap < BACKGROUND_SPACING {
                    let detail = format!("{} ms after the previous one", gap.as_millis());
                    self.break_rule("spacing", start, detail);
                }
            }
            record.last_background_start = Some(start.now);
        }
        if start.subscription.is_some() {
            let key = canonical(start.filters);
            let refused = |connection| {
                self.refused
                    .get(&(start.relay.to_owned(), connection))
                    .is_some_and(|refused| refused.contains(&key))
            };
            if refused(None) || refused(Some(start.connection)) {
                let detail = format!("sent again: {key}");
                self.break_rule("refused-resent", start, detail);
            }
        }
    }

    /// Records a REQ the relay refused, on `connection` only or (`None`) for good.
    pub(crate) fn record_refusal(
        &mut self,
        relay: &str,
        connection: Option<usize>,
        filters: &[Filter],
    ) {
        self.refused
            .entry((relay.to_owned(), connection))
            .or_default()
            .insert(canonical(filters));
    }
}

/// A filter list without `since`, `until` and `limit`, sorted: what a refusal is about.
fn canonical(filters: &[Filter]) -> String {
    let mut parts: Vec<String> = filters
        .iter()
        .map(|filter| {
            let mut filter = filter.clone();
            filter.since = None;
            filter.until = None;
            filter.limit = None;
            filter.as_json()
        })
        .collect();
    parts.sort();
    parts.join(",")
}
