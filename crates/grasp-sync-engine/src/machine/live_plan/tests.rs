//! Applying live plans to a session, on injected time: groups opened and retired at once, a
//! cooldown that changes nothing, and a plan the ledger would refuse that keeps what is held.

use std::time::Instant;

use grasp_sync_filters::{CoverageTier, FilterGroup, GroupedPagination, TieredFilter};
use grasp_sync_ledger::{HeldGroup, PermitClass, Rollback};
use grasp_sync_model::BatchId;
use nostr::{Filter, Kind};

use super::*;
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;
use crate::machine::session::Transient;
use crate::machine::timers::SessionTimer;

type Machine = RelayMachine<(), ()>;

fn connected(now: Instant, slots: u32) -> Machine {
    testing::connected(now, slots, NipListing::Unknown)
}

fn group(n: u64) -> FilterGroup {
    FilterGroup {
        filters: vec![TieredFilter::new(
            Filter::new()
                .kind(Kind::from(1617))
                .identifier(format!("d{n}")),
            CoverageTier::Essential,
        )],
        payload_bytes: 40,
    }
}

fn id(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

fn opening(groups: Vec<FilterGroup>) -> LivePlan {
    LivePlan {
        open: groups,
        ..LivePlan::default()
    }
}

#[test]
fn a_plan_retires_and_opens_groups_at_once() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    let applied = machine.apply_live_plan(now, opening(vec![group(1)]), vec![id("l1")]);
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    assert_eq!(applied.driven.sent, 1);
    assert_eq!(testing::transmitted(&mut machine), ["REQ l1"]);

    let replace = LivePlan {
        open: vec![group(2), group(3)],
        close: vec![id("l1")],
        rollback: Rollback {
            reopen: vec![HeldGroup {
                subscription_id: id("l1"),
                group: group(1).into(),
            }],
        },
        ..LivePlan::default()
    };
    let applied = machine.apply_live_plan(now, replace, vec![id("l2"), id("l3")]);
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    assert_eq!(
        testing::transmitted(&mut machine),
        ["CLOSE l1", "REQ l2", "REQ l3"]
    );
    assert_eq!(machine.held_subscriptions(), 2);
    assert_eq!(machine.stats.req_starts_live, 3);
}

#[test]
fn nothing_changes_during_a_query_rate_cooldown() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    let session = machine.session.as_mut().expect("connected");
    session.reactive.handle_query_rate_refusal(now);

    let applied = machine.apply_live_plan(now, opening(vec![group(1)]), vec![id("l1")]);
    assert_eq!(applied.outcome, PlanOutcome::Deferred);
    assert_eq!(applied.held_back, Some(PlanHeldBack::Cooldown));
    assert!(testing::transmitted(&mut machine).is_empty());
    let session = machine.session.as_ref().expect("connected");
    assert!(session.live.is_empty());
    assert!(
        session.timers.poll_timeout().is_some(),
        "planning is repaired when the cooldown ends"
    );
    assert!(session.timers.is_waiting(SessionTimer::LiveRepair, now));
}

#[test]
fn a_plan_the_ledger_would_refuse_keeps_the_groups_held() {
    let now = Instant::now();
    let mut machine = connected(now, 4);
    machine.apply_live_plan(now, opening(vec![group(1)]), vec![id("l1")]);
    testing::transmitted(&mut machine);
    // A historic page holds a slot.
    let ledger = machine.ledger.as_mut().expect("connected");
    let permit = ledger
        .acquire(
            now,
            ledger.generation(),
            PermitClass::HistoricPage,
            id("h1"),
        )
        .expect("a slot");
    let session = machine.session.as_mut().expect("connected");
    let pagination = GroupedPagination::new(vec![Filter::new()], &session.pages);
    session.transients.insert(
        id("h1"),
        Transient {
            batch: BatchId(1),
            permit: Some(permit),
            pagination,
            watchdog_closing: false,
            sent: 1,
            exact: false,
        },
    );

    let replace = LivePlan {
        open: vec![group(2), group(3), group(4), group(5)],
        close: vec![id("l1")],
        ..LivePlan::default()
    };
    let ids = vec![id("l2"), id("l3"), id("l4"), id("l5")];
    let applied = machine.apply_live_plan(now, replace, ids);
    assert_eq!(applied.outcome, PlanOutcome::RolledBack);
    assert!(matches!(
        applied.held_back,
        Some(PlanHeldBack::WouldBeRefused(_))
    ));
    assert!(
        testing::transmitted(&mut machine).is_empty(),
        "no CLOSE, no REQ"
    );
    let session = machine.session.as_ref().expect("connected");
    assert!(session.live.contains_key(&id("l1")));
}

#[test]
fn a_plan_that_changes_nothing_is_applied() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    let applied = machine.apply_live_plan(now, LivePlan::default(), Vec::new());
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    assert_eq!(applied.held_back, None);
}
