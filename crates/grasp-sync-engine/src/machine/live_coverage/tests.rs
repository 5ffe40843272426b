//! Live coverage planned by the relay's machine, on injected time: refused coverage left out,
//! a rebuild that replaces every group held and can restore them, the consolidation check
//! against the set packed from scratch, auxiliary groups retired, and a rebuild that waits.

use std::time::Instant;

use grasp_sync_filters::{CoverageTier, FilterGroup, TieredFilter};
use grasp_sync_ledger::LivePlan;
use nostr::{Filter, Kind, SubscriptionId};

use super::*;
use crate::machine::live_plan::PlanOutcome;
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;
use crate::machine::relay::testing::live_core as core;

type Machine = RelayMachine<(), ()>;

fn connected(now: Instant) -> Machine {
    testing::connected(now, 20, NipListing::Unknown)
}

/// Holds `n` live groups of one filter each, `live-0` … (core coverage `core(0)` …).
fn hold_one_filter_groups(machine: &mut Machine, now: Instant, n: u64) {
    hold_groups(machine, now, (0..n).map(|i| (format!("live-{i}"), core(i))));
}

/// Holds one live group of one filter per `(name, filter)`.
fn hold_groups(
    machine: &mut Machine,
    now: Instant,
    groups: impl IntoIterator<Item = (String, TieredFilter)>,
) {
    let (ids, open): (Vec<_>, Vec<_>) = groups
        .into_iter()
        .map(|(name, filter)| {
            let group = FilterGroup {
                filters: vec![filter],
                payload_bytes: 40,
            };
            (SubscriptionId::new(name), group)
        })
        .unzip();
    let plan = LivePlan {
        open,
        ..LivePlan::default()
    };
    assert_eq!(
        machine.apply_live_plan(now, plan, ids).outcome,
        PlanOutcome::Applied
    );
    testing::transmitted(machine);
}

#[test]
fn refused_coverage_is_left_out_of_live_plans_keeping_its_tier() {
    let now = Instant::now();
    let mut machine = connected(now);
    let everything = vec![core(1), core(2)];
    assert_eq!(machine.live_admitted(everything.clone()), everything);
    let until = now + std::time::Duration::from_secs(600);
    assert!(machine.refused.handle_refusal(&[core(1).filter], until));
    assert_eq!(machine.live_admitted(everything), vec![core(2)]);
}

#[test]
fn new_coverage_is_planned_next_to_the_groups_held() {
    let now = Instant::now();
    let mut machine = connected(now);
    hold_one_filter_groups(&mut machine, now, 2);
    let split = machine
        .plan_live(vec![core(5)])
        .expect("a session")
        .expect("it fits");
    assert!(split.overflow.is_empty());
    // What stays held plus what opens is the held coverage and the new one, each once.
    let mut live: Vec<String> = (0..2)
        .filter(|i| {
            !split
                .plan
                .close
                .contains(&SubscriptionId::new(format!("live-{i}")))
        })
        .map(|i| format!("{:?}", core(i).filter))
        .chain(
            split
                .plan
                .open
                .iter()
                .flat_map(|g| g.filters.iter().map(|f| format!("{:?}", f.filter))),
        )
        .collect();
    live.sort();
    let mut expected: Vec<String> = [0, 1, 5]
        .into_iter()
        .map(|i| format!("{:?}", core(i).filter))
        .collect();
    expected.sort();
    assert_eq!(live, expected);
    assert_eq!(
        split.plan.rollback.reopen.len(),
        split.plan.close.len(),
        "whatever it retires it can restore"
    );

    // Coverage a held group already carries changes nothing.
    let split = machine
        .plan_live(vec![core(0)])
        .expect("a session")
        .expect("it fits");
    assert!(split.plan.is_noop(), "{:?}", split.plan);
}

#[test]
fn a_rebuild_replaces_every_group_held_and_would_restore_them() {
    let now = Instant::now();
    let mut machine = connected(now);
    hold_one_filter_groups(&mut machine, now, 3);
    let complete = (0..3).map(core).collect();
    let split = machine
        .plan_live_rebuild(complete)
        .expect("a session")
        .expect("it fits");
    let held: Vec<SubscriptionId> = (0..3)
        .map(|i| SubscriptionId::new(format!("live-{i}")))
        .collect();
    assert_eq!(split.plan.close, held);
    assert_eq!(
        split
            .plan
            .rollback
            .reopen
            .iter()
            .map(|h| h.subscription_id.clone())
            .collect::<Vec<_>>(),
        held
    );
    assert_eq!(split.plan.open.len(), 1, "packed from scratch: one group");
}

#[test]
fn core_groups_more_than_the_margin_above_the_set_packed_from_scratch_are_fragmented() {
    let now = Instant::now();
    let mut machine = connected(now);
    hold_one_filter_groups(&mut machine, now, 6);
    let complete = (0..6).map(core).collect();
    let baseline = machine
        .plan_live_from_scratch(complete)
        .expect("a session")
        .expect("it fits")
        .plan
        .open
        .len();
    assert_eq!(baseline, 1, "packed from scratch: one group");
    assert_eq!(
        machine.live_fragmented(baseline, 2),
        Some(Fragmented {
            core: 6,
            baseline: 1
        })
    );
    assert_eq!(
        machine.live_fragmented(baseline, 5),
        None,
        "6 is not above 1 + 5"
    );

    machine.handle_live_changed(6);
    assert!(
        !machine.consolidation.take_due(false),
        "not past the margin"
    );
    machine.handle_live_changed(5);
    assert!(
        !machine.consolidation.take_due(true),
        "queued, but not while a batch is pending"
    );
    assert!(machine.consolidation.take_due(false));
}

#[test]
fn auxiliary_groups_are_retired_into_the_descendant_fallback() {
    let now = Instant::now();
    let mut machine = connected(now);
    let descendant = TieredFilter::new(
        Filter::new().kind(Kind::from(1111)).limit(0),
        CoverageTier::DescendantCanonical,
    );
    hold_groups(
        &mut machine,
        now,
        [("core".to_owned(), core(1)), ("aux".to_owned(), descendant)],
    );
    assert!(!machine.descendants.is_constrained());
    assert_eq!(
        machine.retire_auxiliary(now),
        Some(1),
        "the auxiliary group"
    );
    assert!(machine.descendants.is_constrained());
    assert_eq!(testing::transmitted(&mut machine), ["CLOSE aux"]);
    let session = machine.session.as_ref().expect("connected");
    assert_eq!(session.live.len(), 1, "the core group stays");
    assert_eq!(machine.retire_auxiliary(now), None, "nothing new");

    // The fallback starting is news even with nothing to close.
    let mut machine = connected(now);
    assert_eq!(machine.retire_auxiliary(now), Some(0));
    let mut machine = connected(now);
    machine.session = None;
    assert_eq!(machine.retire_auxiliary(now), None, "no session");
}

#[test]
fn a_rebuild_waits_for_the_query_rate_cooldown_and_after_a_rollback() {
    let now = Instant::now();
    let mut machine = connected(now);
    assert!(!machine.defer_rebuild(now));

    let (_, _) = machine.handle_rate_refusal(now, "rate-limited: slow down");
    let session = machine.session.as_ref().expect("connected");
    let cooldown = session.reactive.poll_timeout().expect("a cooldown");
    assert!(machine.defer_rebuild(now));
    let session = machine.session.as_ref().expect("connected");
    assert!(session.rebuild_pending);
    assert_eq!(
        session.timers.poll_timeout(),
        Some(cooldown),
        "planned again when the cooldown ends"
    );
    assert!(!machine.defer_rebuild(cooldown), "over at its end");

    let mut machine = connected(now);
    machine.handle_rebuild_rolled_back(now);
    let session = machine.session.as_ref().expect("connected");
    assert!(session.rebuild_pending);
    assert!(
        session
            .timers
            .is_due(SessionTimer::LiveRepair, now + REBUILD_RETRY)
    );
    assert!(
        !session
            .timers
            .is_due(SessionTimer::LiveRepair, now + REBUILD_RETRY / 2)
    );
}

#[test]
fn coverage_an_extra_connection_holds_is_not_planned_on_the_session_again() {
    use crate::machine::lanes::{Dialled, LaneSession, LaneStep};
    use crate::machine::transmit::SessionKey;
    use grasp_sync_ledger::SessionBudget;
    use grasp_sync_model::RelayUrl;

    let now = Instant::now();
    let mut machine = connected(now);
    machine.lanes.handle_overflow(vec![core(1), core(2)]);
    assert!(matches!(machine.lanes.next_step(true), LaneStep::Dial));
    machine.lanes.handle_dial_started(1);
    let key = SessionKey {
        relay: RelayUrl::parse("wss://relay.example.com").expect("valid url"),
        generation: 7,
    };
    let opened = machine.lanes.handle_dialled(
        now,
        1,
        Some(LaneSession {
            key,
            budget: SessionBudget::from_slots(20),
            answers_auth: false,
        }),
    );
    assert!(matches!(opened, Dialled::Opened { .. }), "{opened:?}");
    let learned = machine.learned.clone();
    let mut next = 0;
    machine.lanes.fill(now, &learned, || {
        next += 1;
        SubscriptionId::new(format!("lane-{next}"))
    });
    assert!(
        !machine.lanes.has_waiting(),
        "the extra connection holds both"
    );

    // One filter over three repositories, packed unlike the two the extra connection holds.
    let over = |ns: &[u64]| {
        TieredFilter::new(
            Filter::new()
                .kind(Kind::from(1617))
                .identifiers(ns.iter().map(|n| format!("d{n}")))
                .limit(0),
            CoverageTier::Essential,
        )
    };
    let split = machine
        .plan_live(vec![over(&[3, 1, 2])])
        .expect("a session")
        .expect("fits");
    let opened: Vec<TieredFilter> = split
        .plan
        .open
        .iter()
        .flat_map(|g| g.filters.clone())
        .collect();
    assert_eq!(
        opened,
        vec![over(&[3])],
        "the extra connection holds d1 and d2"
    );
    assert!(split.overflow.is_empty());
}
