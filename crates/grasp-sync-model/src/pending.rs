//! `PendingSyncIndex`: batches of historic sync in flight on each relay, awaiting EOSE (REQ+EOSE)
//! or completion (negentropy), and `confirm_batch`, which moves a finished batch's items into
//! the relay's confirmed state.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use nostr::{Event, SubscriptionId, Timestamp};

use crate::diff::RelaySyncNeeds;
use crate::error::ModelError;
use crate::pagination::PaginationState;
use crate::relay_index::RelaySyncIndex;
use crate::relay_url::RelayUrl;

/// The items a batch syncs: the same shape as a relay's needs.
pub type PendingItems = RelaySyncNeeds;

/// Identifies a batch. Allocated by [`PendingSyncIndex`], increasing from 1, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId(pub u64);

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// How a batch is synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncMethod {
    /// REQ+EOSE: the batch completes when every subscription has seen EOSE.
    ReqEose,
    /// NIP-77 negentropy: the batch completes when the reconciliation does.
    Negentropy,
}

/// One in-flight batch of historic sync on one relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingBatch {
    /// The batch's id.
    pub batch_id: BatchId,
    /// The items being synced.
    pub items: PendingItems,
    /// Subscriptions that must all see EOSE before the batch completes (REQ+EOSE only).
    pub outstanding_subs: BTreeSet<SubscriptionId>,
    /// How the batch is synced.
    pub sync_method: SyncMethod,
    /// Pagination progress per open subscription (REQ+EOSE only).
    pub pagination_state: BTreeMap<SubscriptionId, PaginationState>,
    /// Whether the batch failed (it still confirms its items: live sync covers them).
    pub failed: bool,
}

/// What resolving a subscription left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSubscription {
    /// The batch the subscription belonged to.
    pub batch_id: BatchId,
    /// The subscription's pagination progress, for the planner to decide on a next page.
    pub pagination: Option<PaginationState>,
    /// Whether the batch has no outstanding subscription left.
    pub batch_complete: bool,
}

/// What confirming a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfirmOutcome {
    /// Whether the batch had failed (the failure is recorded on the relay's state).
    pub failed: bool,
    /// Whether the relay has no pending batch left: the caller may complete historic sync.
    pub relay_idle: bool,
}

/// Batches in flight, per relay, in the order they were opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingSyncIndex {
    relays: BTreeMap<RelayUrl, Vec<PendingBatch>>,
    last_batch_id: u64,
}

impl PendingSyncIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a batch for `items` on `relay` and returns its id.
    pub fn open_batch(
        &mut self,
        relay: &RelayUrl,
        items: PendingItems,
        sync_method: SyncMethod,
    ) -> BatchId {
        self.last_batch_id += 1;
        let batch_id = BatchId(self.last_batch_id);
        self.relays
            .entry(relay.clone())
            .or_default()
            .push(PendingBatch {
                batch_id,
                items,
                outstanding_subs: BTreeSet::new(),
                sync_method,
                pagination_state: BTreeMap::new(),
                failed: false,
            });
        batch_id
    }

    /// Registers a subscription the batch must see EOSE on, with its pagination progress.
    pub fn register_subscription(
        &mut self,
        relay: &RelayUrl,
        batch_id: BatchId,
        subscription: SubscriptionId,
        pagination: PaginationState,
    ) -> Result<(), ModelError> {
        let batch = self.batch_mut(relay, batch_id)?;
        batch.outstanding_subs.insert(subscription.clone());
        batch.pagination_state.insert(subscription, pagination);
        Ok(())
    }

    /// The batch a subscription belongs to.
    pub fn batch_of(&self, relay: &RelayUrl, subscription: &SubscriptionId) -> Option<BatchId> {
        self.batches(relay)
            .iter()
            .find(|batch| batch.outstanding_subs.contains(subscription))
            .map(|batch| batch.batch_id)
    }

    /// Counts one raw delivered event for a subscription's pagination; returns how many of its
    /// filters matched, or `None` if the subscription is not pending.
    pub fn record_event(
        &mut self,
        relay: &RelayUrl,
        subscription: &SubscriptionId,
        event: &Event,
    ) -> Option<usize> {
        self.relays
            .get_mut(relay)?
            .iter_mut()
            .find_map(|batch| batch.pagination_state.get_mut(subscription))
            .map(|pagination| pagination.record_event(event))
    }

    /// A subscription saw EOSE (or was closed): removes it from its batch and hands back its
    /// pagination progress. `None` if the subscription is not pending on the relay.
    ///
    /// `batch_complete` is read at this moment: a caller that opens a next page registers its
    /// subscription first, or checks [`PendingBatch::outstanding_subs`] again afterwards.
    pub fn resolve_subscription(
        &mut self,
        relay: &RelayUrl,
        subscription: &SubscriptionId,
    ) -> Option<ResolvedSubscription> {
        let batch = self
            .relays
            .get_mut(relay)?
            .iter_mut()
            .find(|batch| batch.outstanding_subs.contains(subscription))?;
        batch.outstanding_subs.remove(subscription);
        Some(ResolvedSubscription {
            batch_id: batch.batch_id,
            pagination: batch.pagination_state.remove(subscription),
            batch_complete: batch.outstanding_subs.is_empty(),
        })
    }

    /// Marks a batch failed; it will record the failure when confirmed.
    pub fn mark_failed(&mut self, relay: &RelayUrl, batch_id: BatchId) -> Result<(), ModelError> {
        self.batch_mut(relay, batch_id)?.failed = true;
        Ok(())
    }

    /// Removes a finished batch and moves its items into the relay's confirmed state, at the
    /// level each was synced at; a failed batch also sets the relay's `batch_failed`.
    /// The relay is registered in `confirmed` if it was not.
    pub fn confirm_batch(
        &mut self,
        relay: &RelayUrl,
        batch_id: BatchId,
        confirmed: &mut RelaySyncIndex,
        now: Timestamp,
    ) -> Result<ConfirmOutcome, ModelError> {
        let batches = self
            .relays
            .get_mut(relay)
            .ok_or(ModelError::UnknownBatch(batch_id))?;
        let position = batches
            .iter()
            .position(|batch| batch.batch_id == batch_id)
            .ok_or(ModelError::UnknownBatch(batch_id))?;
        let batch = batches.remove(position);
        let relay_idle = batches.is_empty();
        if relay_idle {
            self.relays.remove(relay);
        }

        let state = confirmed.register(relay);
        for (coordinate, level) in batch.items.repos {
            state.confirm_repo(coordinate, level);
        }
        state.root_events.extend(batch.items.root_events);
        state.batch_failed |= batch.failed;
        state.last_batch_confirmed_at = Some(now);
        Ok(ConfirmOutcome {
            failed: batch.failed,
            relay_idle,
        })
    }

    /// Adds `items` to a pending batch, which confirms them with its own (the strongest level
    /// per repository).
    pub fn extend_batch(
        &mut self,
        relay: &RelayUrl,
        batch_id: BatchId,
        items: &PendingItems,
    ) -> Result<(), ModelError> {
        self.batch_mut(relay, batch_id)?.items.extend(items);
        Ok(())
    }

    /// Removes a batch without confirming anything: its items stay unconfirmed, so the next
    /// three-way diff derives them again. Returns the batch, or `None` if it was not pending.
    pub fn abandon_batch(&mut self, relay: &RelayUrl, batch_id: BatchId) -> Option<PendingBatch> {
        let batches = self.relays.get_mut(relay)?;
        let position = batches
            .iter()
            .position(|batch| batch.batch_id == batch_id)?;
        let batch = batches.remove(position);
        if batches.is_empty() {
            self.relays.remove(relay);
        }
        Some(batch)
    }

    /// Drops every batch of a relay (its subscriptions died with the connection).
    pub fn clear_relay(&mut self, relay: &RelayUrl) -> Vec<PendingBatch> {
        self.relays.remove(relay).unwrap_or_default()
    }

    /// The batches in flight on a relay, oldest first.
    pub fn batches(&self, relay: &RelayUrl) -> &[PendingBatch] {
        self.relays.get(relay).map_or(&[], Vec::as_slice)
    }

    /// The union of every in-flight batch's items on a relay (strongest level per repository).
    pub fn pending_items(&self, relay: &RelayUrl) -> PendingItems {
        let Some((first, rest)) = self.batches(relay).split_first() else {
            return PendingItems::default();
        };
        let mut items = first.items.clone();
        for batch in rest {
            items.extend(&batch.items);
        }
        items
    }

    /// Whether the relay has a batch in flight.
    pub fn has_pending(&self, relay: &RelayUrl) -> bool {
        !self.batches(relay).is_empty()
    }

    /// Every relay with a batch in flight.
    pub fn relays(&self) -> impl Iterator<Item = &RelayUrl> {
        self.relays.keys()
    }

    fn batch_mut(
        &mut self,
        relay: &RelayUrl,
        batch_id: BatchId,
    ) -> Result<&mut PendingBatch, ModelError> {
        self.relays
            .get_mut(relay)
            .and_then(|batches| batches.iter_mut().find(|batch| batch.batch_id == batch_id))
            .ok_or(ModelError::UnknownBatch(batch_id))
    }
}

#[cfg(test)]
mod tests;
