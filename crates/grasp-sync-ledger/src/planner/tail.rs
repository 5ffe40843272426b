//! The per-tier change: which held groups of one tier to retire and which groups to open so the
//! incoming filters of that tier become live at the lowest slot cost and churn.

use grasp_sync_filters::{
    CompactGroup, FilterGroup, PackLimits, TieredFilter, filter_payload_bytes, pack_requests,
};

use super::HeldGroup;
use crate::error::PlanRefusal;

/// The change within one tier.
#[derive(Debug)]
pub(crate) struct TierChange<'a> {
    /// Groups to open.
    pub(crate) open: Vec<FilterGroup>,
    /// Held groups to retire.
    pub(crate) close: Vec<&'a HeldGroup>,
}

/// Chooses the change for one tier, or `None` when nothing changes.
///
/// Held groups that break `limits` are always regrouped. Of the rest, the mutable tail is every
/// group that could still take one of the filters to place (room under both the filter-count
/// and byte limits); groups without room are never rebuilt.
pub(crate) fn tier_change<'a>(
    held: &[&'a HeldGroup],
    new: &[TieredFilter],
    limits: &PackLimits,
) -> Result<Option<TierChange<'a>>, PlanRefusal> {
    let (forced, conforming): (Vec<&HeldGroup>, Vec<&HeldGroup>) = held
        .iter()
        .copied()
        .partition(|h| breaks_limits(&h.group, limits));
    let mut base: Vec<TieredFilter> = new.to_vec();
    base.extend(forced.iter().flat_map(|h| h.group.to_tiered()));
    if base.is_empty() {
        return Ok(None);
    }
    let smallest = base
        .iter()
        .map(|f| filter_payload_bytes(&f.filter) + 1)
        .min()
        .unwrap_or(0);
    let mut tail: Vec<&HeldGroup> = conforming
        .into_iter()
        .filter(|h| {
            h.group.len() < limits.max_filters_per_req
                && h.group.payload_bytes() + smallest <= limits.max_req_bytes
        })
        .collect();
    tail.sort_by_key(|h| h.group.payload_bytes());

    let append = TierChange {
        open: pack_requests(base.clone(), limits)?,
        close: forced.clone(),
    };
    let change = |retire: &[&'a HeldGroup]| -> Result<TierChange<'a>, PlanRefusal> {
        let mut filters = base.clone();
        filters.extend(retire.iter().flat_map(|h| h.group.to_tiered()));
        let mut close = forced.clone();
        close.extend_from_slice(retire);
        Ok(TierChange {
            open: pack_requests(filters, limits)?,
            close,
        })
    };
    if !tail.is_empty() {
        let complete = change(&tail)?;
        if complete.frees_a_slot() {
            return Ok(Some(complete));
        }
        for size in 1..=tail.len() {
            let subset = change(&tail[..size])?;
            if subset.is_cheaper_than(&append) {
                return Ok(Some(subset));
            }
        }
    }
    Ok(Some(append))
}

impl TierChange<'_> {
    /// Whether the change leaves fewer groups than it retires.
    fn frees_a_slot(&self) -> bool {
        self.open.len() < self.close.len()
    }

    /// Whether the change's net slot cost is below `other`'s.
    fn is_cheaper_than(&self, other: &TierChange<'_>) -> bool {
        self.open.len() + other.close.len() < other.open.len() + self.close.len()
    }
}

/// Whether a held group no longer fits the limits (e.g. after the ceiling was lowered).
fn breaks_limits(group: &CompactGroup, limits: &PackLimits) -> bool {
    group.len() > limits.max_filters_per_req || group.payload_bytes() > limits.max_req_bytes
}
