//! The crate's error and refusal types: why the ledger refused a permit and why the live planner
//! refused a change.

use grasp_sync_filters::FilterError;
use nostr::SubscriptionId;

use crate::permit::{Generation, PermitClass};

/// Why the [`SubscriptionLedger`](crate::SubscriptionLedger) refused an admission or a release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The borrower belongs to a generation the ledger has already retired.
    #[error("generation {requested} is retired, the current generation is {current}")]
    StaleGeneration {
        /// The generation the borrower asked for.
        requested: Generation,
        /// The ledger's current generation.
        current: Generation,
    },
    /// The session was torn down and no new session has started yet.
    #[error("the connection session is torn down")]
    SessionClosed,
    /// Admitting these live groups would leave no transient slot after the margin.
    #[error(
        "admitting {requested} live group(s) next to {held_live} would leave no transient slot \
         within {usable} usable slot(s)"
    )]
    NoTransientSlotLeft {
        /// Live groups in the refused admission.
        requested: usize,
        /// Live groups already held.
        held_live: usize,
        /// Slots usable by permits: the budget minus the reserved margin.
        usable: usize,
    },
    /// Transient permits currently hold the slots these live groups would need.
    #[error("{requested} live group(s) need slots held by {held_transient} transient permit(s)")]
    SlotsHeldByTransients {
        /// Live groups in the refused admission.
        requested: usize,
        /// Transient permits currently held.
        held_transient: usize,
    },
    /// A live admission named no subscription.
    #[error("a live admission must name at least one subscription")]
    EmptyAdmission,
    /// No slot remains in the shared residual for a transient permit.
    #[error("no residual slot for a {class} permit")]
    NoResidualSlot {
        /// The class that was refused.
        class: PermitClass,
    },
    /// The class cap (four negentropy rounds, five transient REQs, one when serialised) is reached.
    #[error("the {class} class cap of {cap} is reached")]
    ClassCapReached {
        /// The class that was refused.
        class: PermitClass,
        /// The cap in force.
        cap: usize,
    },
    /// `acquire` was asked for a live permit; live groups go through `admit_live`.
    #[error("live permits are admitted as a group, not acquired one by one")]
    LiveIsNotTransient,
    /// The subscription id already holds a permit in this generation.
    #[error("subscription {0} already holds a permit")]
    DuplicateSubscription(SubscriptionId),
    /// A watchdog release was asked for before the permit's watchdog expired.
    #[error("the watchdog of subscription {0} has not expired")]
    WatchdogNotExpired(SubscriptionId),
    /// A transient permit was released as a retired live group, or the reverse.
    #[error("release reason {reason} does not apply to a {class} permit")]
    ReasonDoesNotApply {
        /// The class of the permit.
        class: PermitClass,
        /// The reason given.
        reason: &'static str,
    },
}

/// Why [`plan_live`](crate::plan_live) refused a change; a refused change opens nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanRefusal {
    /// Essential coverage needs more live slots than the budget leaves after the margin and one
    /// transient slot.
    #[error("essential coverage needs {needed} live slot(s), the budget leaves {available}")]
    EssentialDoesNotFit {
        /// Live slots the essential groups would occupy after the change.
        needed: usize,
        /// Live slots available: budget minus margin minus one transient slot.
        available: usize,
    },
    /// The filter packer refused the input.
    #[error("filter packing failed: {0}")]
    Packing(#[from] FilterError),
}
