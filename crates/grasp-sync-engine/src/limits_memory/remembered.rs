//! [`RememberedRelays`]: the rules of kept limits, on explicit Unix time.

use std::collections::BTreeMap;
use std::time::Duration;

use grasp_sync_ledger::RememberedLimits;
use grasp_sync_model::RelayUrl;
use serde::{Deserialize, Serialize};

/// Relays whose learned limits are kept at most (the newest records win).
pub const MAX_REMEMBERED_RELAYS: usize = 4096;

/// What one relay taught, as kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayLimitsRecord {
    /// Subscription slots a refusal taught (below the advertised or default budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_slots: Option<usize>,
    /// Filters per REQ a refusal brought the ceiling down to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_ceiling: Option<usize>,
    /// Whether `filter_ceiling` is known to be within the relay's cap (the refusal named the
    /// size one above it, or a REQ that large was accepted later); otherwise it is a rung of
    /// the ceiling ladder, which later runs start at but treat as a guess until a REQ that
    /// large is accepted. Absent in records written before it was kept: a guess.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub filter_ceiling_known: bool,
    /// Bytes of REQs the relay lets open subscriptions retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained_byte_cap: Option<usize>,
    /// When the record last changed, in Unix seconds.
    pub learned_at: u64,
}

impl RelayLimitsRecord {
    /// The ledger's part of the record.
    pub fn ledger_limits(&self) -> RememberedLimits {
        RememberedLimits {
            filter_ceiling: self.filter_ceiling,
            filter_ceiling_known: self.filter_ceiling_known,
            retained_byte_cap: self.retained_byte_cap,
        }
    }

    fn same_limits(&self, other: &RelayLimitsRecord) -> bool {
        (
            self.subscription_slots,
            self.filter_ceiling,
            self.filter_ceiling_known,
            self.retained_byte_cap,
        ) == (
            other.subscription_slots,
            other.filter_ceiling,
            other.filter_ceiling_known,
            other.retained_byte_cap,
        )
    }

    fn is_empty(&self) -> bool {
        self.subscription_slots.is_none()
            && self.filter_ceiling.is_none()
            && self.retained_byte_cap.is_none()
    }
}

/// Kept limits by relay, with the age and count rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RememberedRelays {
    records: BTreeMap<RelayUrl, RelayLimitsRecord>,
    changed: bool,
}

impl RememberedRelays {
    /// The records worth restoring at `now_unix`: those learned within `max_age`, with
    /// something in them, at most [`MAX_REMEMBERED_RELAYS`] (the newest).
    pub fn restore(
        records: impl IntoIterator<Item = (RelayUrl, RelayLimitsRecord)>,
        now_unix: u64,
        max_age: Duration,
    ) -> Self {
        let oldest = now_unix.saturating_sub(max_age.as_secs());
        let mut kept = Self::default();
        for (relay, record) in records {
            if record.learned_at >= oldest && !record.is_empty() {
                kept.insert(relay, record);
            }
        }
        kept.changed = false;
        kept
    }

    /// What `relay` taught an earlier run, if it is kept.
    pub fn get(&self, relay: &RelayUrl) -> Option<&RelayLimitsRecord> {
        self.records.get(relay)
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// What `relay` has taught by `now_unix`: a record that differs from the kept one replaces
    /// it, learned now. Nothing learned leaves the kept record as it is.
    pub fn observe(
        &mut self,
        relay: &RelayUrl,
        subscription_slots: Option<usize>,
        ledger: RememberedLimits,
        now_unix: u64,
    ) {
        let record = RelayLimitsRecord {
            subscription_slots,
            filter_ceiling: ledger.filter_ceiling,
            filter_ceiling_known: ledger.filter_ceiling_known,
            retained_byte_cap: ledger.retained_byte_cap,
            learned_at: now_unix,
        };
        if record.is_empty()
            || self
                .records
                .get(relay)
                .is_some_and(|kept| kept.same_limits(&record))
        {
            return;
        }
        self.insert(relay.clone(), record);
    }

    /// Marks the records changed, so the next [`Self::take_changes`] returns them (a write
    /// of them failed).
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }

    /// Every record, when one changed since the last call; `None` when nothing did.
    pub fn take_changes(&mut self) -> Option<Vec<(RelayUrl, RelayLimitsRecord)>> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        Some(
            self.records
                .iter()
                .map(|(relay, record)| (relay.clone(), *record))
                .collect(),
        )
    }

    fn insert(&mut self, relay: RelayUrl, record: RelayLimitsRecord) {
        self.records.insert(relay, record);
        while self.records.len() > MAX_REMEMBERED_RELAYS {
            let oldest = self
                .records
                .iter()
                .min_by_key(|(relay, record)| (record.learned_at, (*relay).clone()))
                .map(|(relay, _)| relay.clone());
            match oldest {
                Some(relay) => self.records.remove(&relay),
                None => break,
            };
        }
        self.changed = true;
    }
}
