//! Per-connection subscription budgets for GRASP-02 proactive sync: the
//! [`SubscriptionLedger`] of subscription slots, the [`BackgroundGate`] and [`ReactiveGate`]
//! that pace query starts, the [`LearnedLimits`] a relay taught the connection, and the pure
//! live planner ([`plan_live`]) that decides which live groups to open and close.
//!
//! This crate deliberately does no I/O: it sends no REQ, reads no clock, waits for nothing and
//! classifies no relay text beyond the one retained-byte refusal form. Every input carries the
//! instant it happened (`now`); every answer is plain data, such as the instant a start may
//! happen. Filter building and REQ packing belong to `grasp-sync-filters`.
#![doc = include_str!("../README.md")]

mod error;
mod gates;
mod learned;
mod ledger;
mod permit;
mod planner;
mod spacing;

pub use error::{LedgerError, PlanRefusal};
pub use gates::{
    BACKGROUND_INTERVAL, BackgroundGate, GateRejection, REACTIVE_COOLDOWN,
    REACTIVE_INITIAL_INTERVAL, REACTIVE_MAX_INTERVAL, ReactiveGate, StartDecision, StartKind,
};
pub use learned::{
    CATCH_UP_INTERVAL, CATCH_UP_OVERLAP, FilterCountOutcome, INITIAL_FILTER_CEILING, LearnedLimits,
    RememberedLimits, parse_retained_bytes_refusal,
};
pub use ledger::{
    DEFAULT_SUBSCRIPTION_BUDGET, NEGENTROPY_ROUND_CAP, RESERVED_MARGIN, Release, ReleaseReason,
    SessionBudget, SubscriptionLedger, TRANSIENT_REQ_CAP, WATCHDOG_TIMEOUT, WatchdogExpiry,
};
pub use permit::{ClassCounts, Generation, Permit, PermitClass};
pub use planner::{
    DeferReason, Deferred, FittedPlan, HeldGroup, LiveBudget, LivePlan, LivePlanner, Rollback,
    plan_live, plan_live_fitting,
};
