//! Exact-ID fetch filters, for negentropy hydration and missing-event recovery.

use nostr::{EventId, Filter};

use crate::budget::{FilterBudget, chunk_by_bytes};
use crate::build::sorted_unique;
use crate::error::FilterError;
use crate::pack::filter_payload_bytes;
use crate::tier::{CoverageTier, TieredFilter};

/// Most IDs one exact-ID filter carries, unless the byte budget allows fewer.
pub const MAX_IDS_PER_FILTER: usize = 300;

/// `ids` filters covering every given event ID once: at most [`MAX_IDS_PER_FILTER`] IDs per
/// filter, fewer if the byte budget is smaller.
///
/// Exact-ID fetches are transient, so the filters carry [`CoverageTier::HistoricOnly`]; pack
/// them with [`crate::pack_requests`].
pub fn exact_id_filters(
    ids: &[EventId],
    budget: &FilterBudget,
) -> Result<Vec<TieredFilter>, FilterError> {
    let values = sorted_unique(ids.iter().copied());
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let empty = Filter::new().ids(Vec::<EventId>::new());
    // An `ids` filter is never paginated by `until`: its size is its result count.
    let array_budget = budget.value_bytes(filter_payload_bytes(&empty), false)? + 2;
    let mut filters = Vec::new();
    for chunk in chunk_by_bytes(&values, array_budget, MAX_IDS_PER_FILTER, 'i')? {
        filters.push(TieredFilter::new(
            Filter::new().ids(chunk.iter().copied()),
            CoverageTier::HistoricOnly,
        ));
    }
    Ok(filters)
}

#[cfg(test)]
mod tests;
