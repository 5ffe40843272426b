//! One batch reconciled by NIP-77 ([`NegBatch`]), as a phase machine:
//!
//! - **Rounds.** Each round's diff adds to the batch's missing IDs. A round that failed (NIP-77
//!   unavailable, rate limited) marks the batch for the REQ+EOSE fallback; one refused by policy
//!   marks it refused. While the store is asked whether it holds the batch's coverage
//!   (`checking_held`), its rounds wait: a batch the store barely holds may still trade its
//!   rounds for REQ+EOSE ([`NegBatch::may_trade_for_req`], [`first_sync_max_held`]).
//! - **Every round ended** ([`NegBatch::handle_rounds_done`]): a refused batch fails (what was
//!   refused stays paused); one marked falls back; one missing nothing confirms; otherwise its
//!   missing IDs are hydrated by exact-ID fetches.
//! - **Hydrating.** Delivered IDs count towards the pass; when its fetches drained, the pass
//!   decides ([`HydrationPass::decide`]): done, a semantic fallback, a retry of the residual, or
//!   a failure whose residual goes to missing-event recovery.
//! - **Recovery.** A batch of its own that fetches IDs recovery asked for; when drained, what
//!   was delivered is reported to recovery.
//!
//! Pure state: the actor queues the fetches and the fallback, and acts on the answers.

use std::collections::BTreeSet;

use grasp_sync_model::PendingItems;
use nostr::{EventId, Filter};

use crate::machine::delivered::DeliveredIds;
use crate::machine::hydration::{HydrationOutcome, HydrationPass};

#[cfg(test)]
mod tests;

/// During the first sync of a store that was empty when the engine started, a batch of several
/// filters whose coverage the store holds fewer events of than this, or than the batch has
/// items (repositories and roots) if that is more ([`first_sync_max_held`]), goes by REQ+EOSE
/// instead of NIP-77 on a relay that has not completed a historic sync yet (with the engine's
/// `first_sync_by_req` setting).
pub const FIRST_SYNC_MAX_HELD: usize = 100;

/// How many held events still make a batch of `items` repositories and roots a first sync of
/// its coverage: fewer than one per item (a store that holds a repository's coverage holds its
/// state and roots, a root's its replies), and never fewer than [`FIRST_SYNC_MAX_HELD`]. A batch
/// that merges many index updates (learned while the relay worked through a backlog) is
/// judged by its size, as its parts would have been one by one.
pub fn first_sync_max_held(items: &PendingItems) -> usize {
    FIRST_SYNC_MAX_HELD.max(items.repos.len() + items.root_events.len())
}

/// What the engine knows of the relay when the store says how much of a batch it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayFacts {
    /// The relay is known to take several filters per REQ (it said so, or accepted such a REQ
    /// in this session), so one REQ+EOSE start can carry several of the batch's filters.
    pub several_per_req: bool,
    /// The store was not new when the engine started, or the relay completed a historic sync:
    /// its batches reconcile coverage the store mostly holds.
    pub reconciling: bool,
}

/// How a batch's history is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryRoute {
    /// NIP-77 rounds, which send nothing the store holds.
    Nip77,
    /// REQ+EOSE pages: a first sync of coverage the store barely holds.
    ReqEose,
}

/// The negentropy side of a pending batch.
#[derive(Debug)]
pub struct NegBatch {
    /// The batch's semantic filters, for the REQ+EOSE fallback.
    pub filters: Vec<Filter>,
    /// While the store is asked whether it holds any of the batch's coverage, its rounds wait.
    pub checking_held: bool,
    /// Fewer held events than this make the batch a first sync ([`first_sync_max_held`]).
    pub max_held: usize,
    missing: BTreeSet<EventId>,
    fell_back: bool,
    /// A round stayed refused by policy (its filter is paused): once every round ended the
    /// batch fails instead of confirming or hydrating.
    refused: bool,
    phase: NegPhase,
}

#[derive(Debug)]
enum NegPhase {
    Rounds,
    Hydrating {
        pass: HydrationPass,
        first_pass: bool,
    },
    Recovery {
        pass: HydrationPass,
    },
}

/// What a batch does once every round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoundsDone {
    /// A round stayed refused by policy: the batch fails, and the rest is derived again.
    Fail,
    /// A round failed: the batch goes to REQ+EOSE over its semantic filters.
    FallBack,
    /// No round found anything missing.
    Confirm,
    /// Fetch these IDs (sorted) by exact ID: the batch is hydrating.
    Hydrate(Vec<EventId>),
}

/// What a batch does once the REQs it queued drained.
#[derive(Debug)]
pub enum Drained {
    /// Its REQ+EOSE fallback groups finished, or hydration delivered everything.
    Confirm,
    /// A recovery batch ended: report to recovery what `pass` delivered (the caller leaves out
    /// what was delivered but not saved), then confirm.
    RecoveryDone {
        /// The recovery pass, delivered IDs counted.
        pass: HydrationPass,
    },
    /// The relay advertises events it does not serve by ID: `next` replaces the batch, and it
    /// falls back to REQ+EOSE over its semantic filters.
    SemanticFallback {
        /// The batch, marked fallen back.
        next: NegBatch,
        /// IDs the pass asked for.
        advertised: usize,
        /// IDs it got.
        delivered: usize,
    },
    /// A pass of its own over the residual, `ids` (sorted): `next` replaces the batch.
    Retry {
        /// The batch, hydrating the residual as a later pass.
        next: NegBatch,
        /// The residual to fetch.
        ids: Vec<EventId>,
    },
    /// A retry delivered nothing: the batch failed, and `residual` goes to recovery.
    Failed {
        /// The IDs never delivered (sorted).
        residual: Vec<EventId>,
    },
}

impl NegBatch {
    /// A batch about to send its rounds over `filters`; `checking_held` while the store is
    /// asked how much of it it holds.
    pub fn rounds(filters: Vec<Filter>, checking_held: bool, max_held: usize) -> NegBatch {
        NegBatch {
            filters,
            checking_held,
            max_held,
            missing: BTreeSet::new(),
            fell_back: false,
            refused: false,
            phase: NegPhase::Rounds,
        }
    }

    /// A recovery batch fetching `ids`.
    pub fn recovery(ids: BTreeSet<EventId>) -> NegBatch {
        NegBatch {
            phase: NegPhase::Recovery {
                pass: HydrationPass::new(ids),
            },
            ..NegBatch::rounds(Vec::new(), false, FIRST_SYNC_MAX_HELD)
        }
    }

    /// A round's diff: the relay holds these events that the store lacks.
    pub fn handle_round_diff(&mut self, missing: impl IntoIterator<Item = EventId>) {
        self.missing.extend(missing);
    }

    /// A round failed, or the rounds still queued will not start: the batch falls back to
    /// REQ+EOSE once every round ended.
    pub fn handle_round_failed(&mut self) {
        self.fell_back = true;
    }

    /// A round stays refused by policy: the batch fails once every round ended.
    pub fn handle_round_refused(&mut self) {
        self.refused = true;
    }

    /// Whether the batch may still trade its rounds for REQ+EOSE as a first sync: none of
    /// them failed and it is not hydrating.
    pub fn may_trade_for_req(&self) -> bool {
        matches!(self.phase, NegPhase::Rounds) && !self.fell_back
    }

    /// The store answered which of the batch's events it holds (`None`: the read failed):
    /// whether the batch goes on by NIP-77 or becomes a first sync by REQ+EOSE. Its rounds no
    /// longer wait either way.
    ///
    /// One filter is one start either way, so only a batch that REQ+EOSE saves starts on (a
    /// relay known to take several filters per REQ) trades its rounds for events sent again:
    /// - a store that holds none of the coverage sends nothing again: REQ+EOSE, for a single
    ///   filter too;
    /// - one that holds some: REQ+EOSE only during a first sync (not `reconciling`), for a
    ///   batch of several filters, with fewer held events than `max_held`, none of which this
    ///   relay delivered itself (`delivered`: it would send them again);
    /// - a failed read, or a batch whose rounds already failed or hydrate: NIP-77.
    pub fn handle_held(
        &mut self,
        held: Option<&[EventId]>,
        relay: RelayFacts,
        delivered: &DeliveredIds,
    ) -> HistoryRoute {
        self.checking_held = false;
        let barely = match held {
            Some([]) => relay.several_per_req || self.filters.len() == 1,
            Some(ids) => {
                !relay.reconciling
                    && self.filters.len() > 1
                    && relay.several_per_req
                    && ids.len() < self.max_held
                    && delivered.delivered_none_of(ids)
            }
            None => false,
        };
        if barely && self.may_trade_for_req() {
            HistoryRoute::ReqEose
        } else {
            HistoryRoute::Nip77
        }
    }

    /// Every round ended: what the batch does next. [`RoundsDone::Hydrate`] starts the first
    /// pass.
    pub fn handle_rounds_done(&mut self) -> RoundsDone {
        if self.refused {
            return RoundsDone::Fail;
        }
        if self.fell_back {
            return RoundsDone::FallBack;
        }
        if self.missing.is_empty() {
            return RoundsDone::Confirm;
        }
        let pass = HydrationPass::new(self.missing.clone());
        let ids = pass.advertised().iter().copied().collect();
        self.phase = NegPhase::Hydrating {
            pass,
            first_pass: true,
        };
        RoundsDone::Hydrate(ids)
    }

    /// An exact-ID fetch of the batch delivered `id`.
    pub fn handle_exact_delivery(&mut self, id: EventId) {
        match &mut self.phase {
            NegPhase::Hydrating { pass, .. } | NegPhase::Recovery { pass } => {
                pass.handle_delivered(id);
            }
            NegPhase::Rounds => {}
        }
    }

    /// The hydrating pass's advertised and delivered counts, and whether it is the first.
    pub fn hydration_progress(&self) -> Option<(usize, usize, bool)> {
        match &self.phase {
            NegPhase::Hydrating { pass, first_pass } => {
                Some((pass.advertised().len(), pass.delivered(), *first_pass))
            }
            _ => None,
        }
    }

    /// Every REQ the batch queued drained: what it does next.
    pub fn handle_drained(self) -> Drained {
        match self.phase {
            NegPhase::Rounds => Drained::Confirm,
            NegPhase::Recovery { pass } => Drained::RecoveryDone { pass },
            NegPhase::Hydrating { pass, first_pass } => match pass.decide(first_pass) {
                HydrationOutcome::Complete => Drained::Confirm,
                HydrationOutcome::SemanticFallback => Drained::SemanticFallback {
                    advertised: pass.advertised().len(),
                    delivered: pass.delivered(),
                    next: NegBatch {
                        fell_back: true,
                        ..NegBatch::rounds(self.filters, false, FIRST_SYNC_MAX_HELD)
                    },
                },
                HydrationOutcome::RetryResidual(ids) => Drained::Retry {
                    next: NegBatch {
                        phase: NegPhase::Hydrating {
                            pass: HydrationPass::new(ids.iter().copied().collect()),
                            first_pass: false,
                        },
                        ..NegBatch::rounds(self.filters, false, FIRST_SYNC_MAX_HELD)
                    },
                    ids,
                },
                HydrationOutcome::Failed { residual } => Drained::Failed { residual },
            },
        }
    }
}
