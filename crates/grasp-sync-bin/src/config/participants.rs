//! The participant-discovery keys: `index_relays` (relays asked for participants' NIP-65
//! relay lists besides the repository relays), `max_participants`,
//! `max_relays_per_participant`, `mailbox_probe_interval` and `mailbox_probe_items`, as
//! [`ParticipantArgs`] flags and `GRASP_SYNC_*` variables, resolved into the engine's
//! `OutboxConfig`.

use clap::Args;
use grasp_sync_engine::OutboxConfig;

use super::bounds::{self, count_in, duration_in};
use super::{RawConfig, url_list_key};
use crate::error::ConfigError;

/// Validates the participant-discovery keys of `raw`.
pub(super) fn resolve(raw: &RawConfig) -> Result<OutboxConfig, ConfigError> {
    let defaults = OutboxConfig::default();
    Ok(OutboxConfig {
        index_relays: url_list_key("index_relays", raw.index_relays.clone())?,
        max_participants: count_in(
            "max_participants",
            raw.max_participants,
            bounds::MAX_PARTICIPANTS,
        )?
        .unwrap_or(defaults.max_participants),
        max_relays_per_participant: count_in(
            "max_relays_per_participant",
            raw.max_relays_per_participant,
            bounds::MAX_RELAYS_PER_PARTICIPANT,
        )?
        .unwrap_or(defaults.max_relays_per_participant),
        mailbox_probe_interval: duration_in(
            "mailbox_probe_interval",
            raw.mailbox_probe_interval.as_deref(),
            bounds::MAILBOX_PROBE_INTERVAL,
        )?
        .unwrap_or(defaults.mailbox_probe_interval),
        mailbox_probe_items: count_in(
            "mailbox_probe_items",
            raw.mailbox_probe_items,
            bounds::MAILBOX_PROBE_ITEMS,
        )?
        .unwrap_or(defaults.mailbox_probe_items),
        ..defaults
    })
}

/// Flags of the participant-discovery keys (flattened into `grasp-sync run`).
#[derive(Debug, Clone, Default, Args)]
pub struct ParticipantArgs {
    /// Relay asked for participants' NIP-65 relay lists (repeatable; comma-separated in the
    /// environment) [default: none].
    #[arg(
        long = "index-relay",
        env = "GRASP_SYNC_INDEX_RELAYS",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub index_relays: Vec<String>,
    /// Participants of tracked repositories remembered at most [default: 10000].
    #[arg(long, env = "GRASP_SYNC_MAX_PARTICIPANTS", value_name = "N")]
    pub max_participants: Option<usize>,
    /// Relays taken from one participant's relay list at most [default: 8].
    #[arg(long, env = "GRASP_SYNC_MAX_RELAYS_PER_PARTICIPANT", value_name = "N")]
    pub max_relays_per_participant: Option<usize>,
    /// Interval between two probes of one participant mailbox relay [default: 15m].
    #[arg(
        long,
        env = "GRASP_SYNC_MAILBOX_PROBE_INTERVAL",
        value_name = "DURATION"
    )]
    pub mailbox_probe_interval: Option<String>,
    /// Repositories and root events one mailbox probe covers at most [default: 256].
    #[arg(long, env = "GRASP_SYNC_MAILBOX_PROBE_ITEMS", value_name = "N")]
    pub mailbox_probe_items: Option<usize>,
}

impl ParticipantArgs {
    /// Sets these flags' keys on `raw`.
    pub fn apply(&self, raw: &mut RawConfig) {
        raw.index_relays = (!self.index_relays.is_empty()).then(|| self.index_relays.clone());
        raw.max_participants = self.max_participants;
        raw.max_relays_per_participant = self.max_relays_per_participant;
        raw.mailbox_probe_interval = self.mailbox_probe_interval.clone();
        raw.mailbox_probe_items = self.mailbox_probe_items;
    }
}
