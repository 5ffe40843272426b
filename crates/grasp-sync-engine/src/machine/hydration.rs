//! [`HydrationPass`]: what to do after one exact-ID pass over the IDs a negentropy diff
//! advertised: done, semantic REQ+EOSE fallback, retry the residual, or give the batch up.
//!
//! The rules: when a first pass was materially incompatible (at least
//! [`SEMANTIC_FALLBACK_MIN_ADVERTISED`] IDs advertised and no more than
//! [`SEMANTIC_FALLBACK_MAX_DELIVERED_PERCENT`] % delivered) the batch falls back to semantic
//! REQ+EOSE. Any other incomplete pass retries its residual; a retry that delivers nothing
//! fails the batch, its residual going to missing-event recovery, and NIP-77 stays enabled.
//! Each further retry must shrink the residual, so the sequence of passes always ends.

use std::collections::BTreeSet;

use grasp_sync_filters::{FilterBudget, FilterError, TieredFilter, exact_id_filters};
use nostr::EventId;

/// A first pass needs at least this many advertised IDs before a poor delivery counts as a
/// hydration incompatibility rather than ordinary loss (expiry, indexing lag, deletion).
pub const SEMANTIC_FALLBACK_MIN_ADVERTISED: usize = 20;

/// A first pass delivering at most this percentage of the advertised IDs (and at least
/// [`SEMANTIC_FALLBACK_MIN_ADVERTISED`] advertised) falls back to semantic REQ+EOSE.
pub const SEMANTIC_FALLBACK_MAX_DELIVERED_PERCENT: usize = 10;

/// The decision at the end of an exact-ID pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HydrationOutcome {
    /// Every advertised ID was delivered.
    Complete,
    /// The relay advertises inventory it cannot serve by ID: fetch the batch with semantic
    /// REQ+EOSE filters instead (NIP-77 stays enabled for other batches).
    SemanticFallback,
    /// Fetch these IDs again in a new pass (sorted).
    RetryResidual(Vec<EventId>),
    /// A retry delivered nothing: the batch failed. Register `residual` for missing-event
    /// recovery; NIP-77 stays enabled.
    Failed {
        /// The IDs never delivered (sorted).
        residual: Vec<EventId>,
    },
}

/// One exact-ID pass over a set of advertised IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HydrationPass {
    advertised: BTreeSet<EventId>,
    delivered: BTreeSet<EventId>,
}

impl HydrationPass {
    /// A pass over `advertised`: for a first pass, the diff's missing IDs; for a retry, the
    /// previous pass's residual.
    pub fn new(advertised: BTreeSet<EventId>) -> Self {
        Self {
            advertised,
            delivered: BTreeSet::new(),
        }
    }

    /// Records a delivered event. Returns whether it was advertised and not yet delivered;
    /// anything else (duplicates, IDs outside the pass) changes nothing.
    pub fn handle_delivered(&mut self, id: EventId) -> bool {
        self.advertised.contains(&id) && self.delivered.insert(id)
    }

    /// The exact-ID filters that fetch the pass's IDs: at most
    /// [`grasp_sync_filters::MAX_IDS_PER_FILTER`] per filter, fewer if `budget` is tighter.
    pub fn filters(&self, budget: &FilterBudget) -> Result<Vec<TieredFilter>, FilterError> {
        let ids: Vec<EventId> = self.advertised.iter().copied().collect();
        exact_id_filters(&ids, budget)
    }

    /// The IDs the pass covers.
    pub fn advertised(&self) -> &BTreeSet<EventId> {
        &self.advertised
    }

    /// How many advertised IDs were delivered so far.
    pub fn delivered(&self) -> usize {
        self.delivered.len()
    }

    /// The advertised IDs not delivered so far, sorted.
    pub fn residual(&self) -> Vec<EventId> {
        self.advertised
            .difference(&self.delivered)
            .copied()
            .collect()
    }

    /// The decision once the pass ended (every filter reached EOSE or was closed).
    /// `first_pass` is whether this pass was the first over the diff's IDs.
    pub fn decide(&self, first_pass: bool) -> HydrationOutcome {
        let residual = self.residual();
        if residual.is_empty() {
            return HydrationOutcome::Complete;
        }
        if first_pass {
            if self.materially_incompatible() {
                return HydrationOutcome::SemanticFallback;
            }
            return HydrationOutcome::RetryResidual(residual);
        }
        if self.delivered.is_empty() {
            HydrationOutcome::Failed { residual }
        } else {
            HydrationOutcome::RetryResidual(residual)
        }
    }

    /// At least the minimum advertised and no more than the maximum share delivered.
    fn materially_incompatible(&self) -> bool {
        let advertised = self.advertised.len();
        advertised >= SEMANTIC_FALLBACK_MIN_ADVERTISED
            && self.delivered.len().saturating_mul(100)
                <= advertised.saturating_mul(SEMANTIC_FALLBACK_MAX_DELIVERED_PERCENT)
    }
}

#[cfg(test)]
mod tests;
