//! Participants with outbox relays in the sim: the `--outbox-*` flags as the generator's
//! `OutboxSpec`, and what a run reports of them — how many expected events are only on
//! outbox relays (or behind one, in its thread), and how many of those each side ended
//! with.

use std::collections::BTreeSet;
use std::io::Write;

use grasp_sync_engine::{LmdbStore, ParticipantStatus};
use grasp_sync_testkit::{GeneratedNetwork, OutboxSpec};
use nostr::EventId;
use nostr_database::{DatabaseEventStatus, NostrDatabase};
use serde::Serialize;

/// The generator's outbox spec for the `--outbox-relays`, `--outbox-authors` and
/// `--outbox-share` values: none unless one is given, the defaults for those not given.
pub(super) fn outbox_spec(
    relays: Option<usize>,
    share_of_authors: Option<f64>,
    share_of_events: Option<f64>,
) -> OutboxSpec {
    if relays.is_none() && share_of_authors.is_none() && share_of_events.is_none() {
        return OutboxSpec::NONE;
    }
    let default = OutboxSpec::with_relays(relays.unwrap_or(OutboxSpec::DEFAULT_RELAYS));
    OutboxSpec {
        share_of_authors: share_of_authors.unwrap_or(default.share_of_authors),
        share_of_events: share_of_events.unwrap_or(default.share_of_events),
        ..default
    }
}

/// Participants with outbox relays in a run, and whether their events arrived.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutboxReport {
    /// Outbox relays (after the listed relays in the relay table).
    pub relays: usize,
    /// Kind-10002 relay lists published (one per participant with outbox relays).
    pub relay_lists: usize,
    /// Expected events only on outbox relays.
    pub expected_only_on_outbox: usize,
    /// Expected events on listed relays whose thread parent is only on outbox relays.
    pub expected_behind_outbox: usize,
    /// The daemon's store: outbox-only expected events held.
    pub own_only_on_outbox: usize,
    /// The daemon's store: behind-outbox expected events held.
    pub own_behind_outbox: usize,
    /// The naive baseline's store: outbox-only expected events held, if it ran.
    pub naive_only_on_outbox: Option<usize>,
    /// The naive baseline's store: behind-outbox expected events held, if it ran.
    pub naive_behind_outbox: Option<usize>,
    /// The daemon's participant discovery at the end of its phase.
    pub discovery: Option<ParticipantStatus>,
}

impl OutboxReport {
    /// The network's outbox side, with what the daemon's store lacks (`own_missing`, of the
    /// expected set); `None` for a network without outbox relays.
    pub(super) fn of(network: &GeneratedNetwork, own_missing: &BTreeSet<EventId>) -> Option<Self> {
        let outbox = &network.outbox;
        if outbox.relay_indices.is_empty() {
            return None;
        }
        let held = |ids: &BTreeSet<EventId>| ids.difference(own_missing).count();
        Some(Self {
            relays: outbox.relay_indices.len(),
            relay_lists: outbox.relay_lists.len(),
            expected_only_on_outbox: outbox.expected_only_on_outbox.len(),
            expected_behind_outbox: outbox.expected_behind_outbox.len(),
            own_only_on_outbox: held(&outbox.expected_only_on_outbox),
            own_behind_outbox: held(&outbox.expected_behind_outbox),
            naive_only_on_outbox: None,
            naive_behind_outbox: None,
            discovery: None,
        })
    }

    /// Counts what the naive baseline's store holds of the outbox-only and behind-outbox
    /// expected events.
    pub(super) async fn count_naive(
        &mut self,
        network: &GeneratedNetwork,
        store: &LmdbStore,
    ) -> anyhow::Result<()> {
        let outbox = &network.outbox;
        self.naive_only_on_outbox = Some(held(store, &outbox.expected_only_on_outbox).await?);
        self.naive_behind_outbox = Some(held(store, &outbox.expected_behind_outbox).await?);
        Ok(())
    }

    /// The line the sim prints about the network before syncing.
    pub(super) fn write_network(&self, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
        writeln!(
            out,
            "outbox: {} outbox relays, {} relay lists, {} expected events only on outbox relays, {} more behind them in their threads",
            self.relays,
            self.relay_lists,
            self.expected_only_on_outbox,
            self.expected_behind_outbox
        )
    }

    /// The report's lines: what each side held of the outbox-only and behind-outbox events.
    pub(super) fn write_held(&self, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
        if let Some(d) = &self.discovery {
            writeln!(
                out,
                "participant discovery: {} participants, {} relay lists, {} mailbox relays; {} identity queries ({} failed), {} mailbox probes ({} failed)",
                d.participants,
                d.relay_lists,
                d.mailbox_relays,
                d.identity_queries,
                d.identity_failures,
                d.mailbox_probes,
                d.mailbox_failures
            )?;
        }
        let naive = |held: Option<usize>, of: usize| {
            held.map_or("-".to_owned(), |held| format!("{held}/{of}"))
        };
        writeln!(
            out,
            "{:<28} {:>14} {:>14}",
            "outbox-only events held",
            format!(
                "{}/{}",
                self.own_only_on_outbox, self.expected_only_on_outbox
            ),
            naive(self.naive_only_on_outbox, self.expected_only_on_outbox),
        )?;
        writeln!(
            out,
            "{:<28} {:>14} {:>14}",
            "behind-outbox events held",
            format!("{}/{}", self.own_behind_outbox, self.expected_behind_outbox),
            naive(self.naive_behind_outbox, self.expected_behind_outbox),
        )
    }
}

/// How many of `ids` a store holds.
async fn held(store: &LmdbStore, ids: &BTreeSet<EventId>) -> anyhow::Result<usize> {
    let database = store.database();
    let mut held = 0;
    for id in ids {
        if database.check_id(id).await? == DatabaseEventStatus::Saved {
            held += 1;
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests;
