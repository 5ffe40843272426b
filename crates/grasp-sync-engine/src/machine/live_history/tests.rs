//! The rules of a live group that carries its batch's first historic page, on injected time:
//! which plans may carry it, the REQ it sends, its EOSE (a page that ends or walks on, the group
//! kept open), and what ends it early (a closed or retired group hands it to history; a failed
//! batch, the watchdog and an event the store could not save end it with its batch).

use std::time::{Duration, Instant};

use grasp_sync_filters::{CoverageTier, FilterGroup, TieredFilter};
use grasp_sync_ledger::{DeferReason, Deferred, LivePlan, PermitClass, WATCHDOG_TIMEOUT};
use grasp_sync_model::BatchId;
use nostr::{Event, EventBuilder, Filter, Keys, Kind, SubscriptionId, Tag, Timestamp};

use super::*;
use crate::machine::eose::EoseAnswer;
use crate::machine::live_plan::PlanOutcome;
use crate::machine::relay::{Unsaved, testing};
use crate::machine::transmit::Outbound;

type Machine = RelayMachine<(), ()>;

const BATCH: BatchId = BatchId(7);

fn id(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

/// A relay machine whose relay returns at most `max_limit` events per page.
fn connected(now: Instant, max_limit: usize) -> Machine {
    testing::connected_paging(now, max_limit)
}

fn group(ns: &[u64]) -> FilterGroup {
    FilterGroup {
        filters: ns.iter().map(|n| testing::live_core(*n)).collect(),
        payload_bytes: 40 * ns.len(),
    }
}

fn opening(groups: Vec<FilterGroup>) -> LivePlan {
    LivePlan {
        open: groups,
        ..LivePlan::default()
    }
}

fn incoming(ns: &[u64]) -> Vec<TieredFilter> {
    ns.iter().map(|n| testing::live_core(*n)).collect()
}

/// The REQs `machine` transmits now, with their filters.
fn reqs(machine: &mut Machine) -> Vec<(String, Vec<Filter>)> {
    std::iter::from_fn(|| machine.poll_transmit())
        .filter_map(|message| match message {
            Outbound::Req {
                subscription_id,
                filters,
            } => Some((subscription_id.to_string(), filters)),
            _ => None,
        })
        .collect()
}

fn patch(d: u64, at: u64) -> Event {
    EventBuilder::new(Kind::from(1617), "patch")
        .tag(Tag::identifier(format!("d{d}")))
        .custom_created_at(Timestamp::from(at))
        .sign_with_keys(&Keys::generate())
        .expect("signed")
}

fn unnamed() -> SubscriptionId {
    panic!("no next page was expected")
}

/// A machine holding live group `l1` over `d1`, `d2`, carrying the first page of [`BATCH`].
fn carrying(now: Instant, max_limit: usize) -> Machine {
    let mut machine = connected(now, max_limit);
    let (applied, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1, 2])]),
        vec![id("l1")],
        BATCH,
        &incoming(&[1, 2]),
    );
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    assert_eq!(pages.carried.len(), 1);
    machine
}

#[test]
fn a_plan_carries_the_page_only_when_it_opens_all_of_the_coverage() {
    let plan = opening(vec![group(&[1, 2]), group(&[3])]);
    assert!(plan_carries_page(&incoming(&[1, 2, 3]), &plan, &[], None));

    // A filter the planner dropped as already held would have no history fetched.
    assert!(!plan_carries_page(
        &incoming(&[1, 2, 3, 4]),
        &plan,
        &[],
        None
    ));
    // A repack that moves a held filter (9) in with the new ones still opens all of them.
    let repack = LivePlan {
        open: vec![group(&[1, 2, 9]), group(&[3])],
        close: vec![id("held")],
        ..LivePlan::default()
    };
    assert!(plan_carries_page(&incoming(&[1, 2, 3]), &repack, &[], None));
    // Coverage left out, or sent to the extra connections.
    let deferred = LivePlan {
        deferred: vec![Deferred {
            tier: CoverageTier::Essential,
            filters: vec![testing::live_core(4)],
            reason: DeferReason::SlotBudget,
        }],
        ..plan.clone()
    };
    assert!(!plan_carries_page(
        &incoming(&[1, 2, 3]),
        &deferred,
        &[],
        None
    ));
    assert!(!plan_carries_page(
        &incoming(&[1, 2, 3]),
        &plan,
        &incoming(&[4]),
        None
    ));
    // A relay whose pages cap whole REQs: at most that many of the page's filters a group;
    // held filters beside them do not count.
    assert!(!plan_carries_page(
        &incoming(&[1, 2, 3]),
        &plan,
        &[],
        Some(1)
    ));
    assert!(plan_carries_page(
        &incoming(&[1, 2, 3]),
        &plan,
        &[],
        Some(2)
    ));
    assert!(plan_carries_page(&incoming(&[1, 3]), &repack, &[], Some(1)));
    // Nothing opened.
    assert!(!plan_carries_page(&[], &LivePlan::default(), &[], None));
}

#[test]
fn no_page_rides_on_refused_held_or_paused_coverage() {
    let now = Instant::now();
    let plan = opening(vec![group(&[1])]);
    let machine = connected(now, 500);
    assert!(machine.live_page_allowed(now, &incoming(&[1]), &plan, &[]));

    // Coverage the relay refused by policy.
    let mut refused = connected(now, 500);
    let other = Filter::new().kind(Kind::from(1621)).identifier("other");
    assert!(
        refused
            .refused
            .handle_refusal(&[other], now + Duration::from_secs(86_400))
    );
    assert!(!refused.live_page_allowed(now, &incoming(&[1]), &plan, &[]));

    // Coverage the session holds live already: its history would go unfetched.
    let mut held = connected(now, 500);
    held.apply_live_plan(now, opening(vec![group(&[1])]), vec![id("held")]);
    let repack = LivePlan {
        open: vec![group(&[1, 2])],
        close: vec![id("held")],
        ..LivePlan::default()
    };
    assert!(!held.live_page_allowed(now, &incoming(&[1, 2]), &repack, &[]));
    assert!(held.live_page_allowed(now, &incoming(&[2]), &repack, &[]));

    // A health pause holds history back.
    let mut paused = connected(now, 500);
    paused
        .health
        .handle_failure(grasp_sync_health::PauseKind::Request, now);
    assert!(paused.health.sync_paused_until(now).is_some());
    assert!(!paused.live_page_allowed(now, &incoming(&[1]), &plan, &[]));
}

#[test]
fn the_groups_req_carries_the_page_limit_then_its_eose_ends_the_page_and_keeps_it_live() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);

    let sent = reqs(&mut machine);
    assert_eq!(sent.len(), 1, "one REQ for history and the live tail");
    assert!(
        sent[0].1.iter().all(|f| f.limit == Some(500)),
        "the page limit, not limit 0: {:?}",
        sent[0].1
    );
    machine.handle_event(&id("l1"), &patch(1, 100), false);

    let answer = machine.handle_eose(now, &id("l1"), unnamed);

    let Some(EoseAnswer::Page(page)) = answer else {
        panic!("the page did not end: {answer:?}");
    };
    assert_eq!(page.batch, BATCH);
    assert!(page.next.is_empty() && page.truncated.is_empty());
    assert_eq!(machine.held_subscriptions(), 1, "the group stays open");
    assert!(testing::transmitted(&mut machine).is_empty(), "no CLOSE");
    let group = &machine.session.as_ref().expect("connected").live[&id("l1")];
    assert!(group.history.is_none());
    assert!(group.req_filters().iter().all(|f| f.limit == Some(0)));
    // A later EOSE (a REQ sent again) is a live group's.
    assert!(matches!(
        machine.handle_eose(now, &id("l1"), unnamed),
        Some(EoseAnswer::Live { .. })
    ));
}

#[test]
fn a_full_live_page_walks_on_in_paced_pages_of_its_batch() {
    let now = Instant::now();
    let mut machine = carrying(now, 2);
    let _ = reqs(&mut machine);
    for at in [300, 200] {
        machine.handle_event(&id("l1"), &patch(1, at), false);
    }

    let mut named = 0;
    let answer = machine.handle_eose(now, &id("l1"), || {
        named += 1;
        id(&format!("p{named}"))
    });

    let Some(EoseAnswer::Page(page)) = answer else {
        panic!("the page did not end: {answer:?}");
    };
    assert!(!page.next.is_empty(), "a full page has a next page");
    let session = machine.session.as_ref().expect("connected");
    let queued: Vec<(String, BatchId)> = session
        .queue
        .iter()
        .map(|s| (s.subscription_id.to_string(), s.batch))
        .collect();
    assert_eq!(queued.first(), Some(&("p1".to_owned(), BATCH)));
    let next: Vec<&Filter> = page.next.iter().flat_map(|(_, f)| f).collect();
    assert!(
        next.iter().all(|f| f.limit == Some(2)),
        "next pages are historic pages: {next:?}"
    );
    assert!(
        next.iter().any(|f| f.until.is_some()),
        "the full filter walks back: {next:?}"
    );
    assert!(
        session
            .queue
            .iter()
            .all(|s| s.batch == BATCH && s.class == PermitClass::PaginationPage),
        "paced pages of the batch"
    );
    assert!(session.live.contains_key(&id("l1")), "the group stays live");
    assert!(!session.transients.contains_key(&id("l1")));
}

/// The ended pages `machine` queues again now, as (batch, ended subscription, new pages).
fn requeued(machine: &mut Machine, now: Instant) -> Vec<(BatchId, String, Vec<String>)> {
    let mut named = 0;
    machine
        .requeue_ended_live_pages(
            now,
            |_| true,
            || {
                named += 1;
                id(&format!("h{named}"))
            },
        )
        .into_iter()
        .map(|(page, queued)| {
            let pages = queued
                .map(|q| q.pages.iter().map(|(id, _)| id.to_string()).collect())
                .unwrap_or_default();
            (page.batch, page.subscription_id.to_string(), pages)
        })
        .collect()
}

#[test]
fn a_group_closed_or_retired_before_its_eose_hands_its_page_to_history() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");
    assert!(session.close_live(ledger, &id("l1"), now));

    assert_eq!(
        requeued(&mut machine, now),
        vec![(BATCH, "l1".to_owned(), vec!["h1".to_owned()])]
    );
    let session = machine.session.as_ref().expect("connected");
    let start = session.queue.front().expect("queued");
    assert_eq!(start.batch, BATCH);
    let filters = start.pagination.current_filters();
    assert_eq!(filters.len(), 2, "the page's filters: {filters:?}");
    assert!(
        filters
            .iter()
            .all(|f| f.limit == Some(500) && f.until.is_none())
    );
    assert!(requeued(&mut machine, now).is_empty(), "reported once");

    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");
    session.retire_live(ledger, &id("l1"), now);
    assert_eq!(requeued(&mut machine, now).len(), 1);

    // A group that carries no page ends nothing.
    let mut machine = connected(now, 500);
    machine.apply_live_plan(now, opening(vec![group(&[1])]), vec![id("l1")]);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");
    assert!(session.close_live(ledger, &id("l1"), now));
    assert!(requeued(&mut machine, now).is_empty());
}

#[test]
fn a_failed_batch_drops_the_page_but_not_the_live_group() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");

    session.close_pages(ledger, Some(BATCH), now);

    assert!(testing::transmitted(&mut machine).is_empty(), "no CLOSE");
    let session = machine.session.as_ref().expect("connected");
    assert!(session.live[&id("l1")].history.is_none());
    assert!(matches!(
        machine.handle_eose(now, &id("l1"), unnamed),
        Some(EoseAnswer::Live { .. })
    ));
    assert!(requeued(&mut machine, now).is_empty());
}

#[test]
fn the_watchdog_fails_a_page_left_without_eose_and_keeps_the_group() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    assert!(
        machine
            .poll_timeout()
            .is_some_and(|at| at <= now + WATCHDOG_TIMEOUT),
        "the page's deadline wakes the driver"
    );
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");
    let early = now + WATCHDOG_TIMEOUT - Duration::from_secs(1);
    assert!(session.handle_watchdog(ledger, early).is_empty());

    let expired = session.handle_watchdog(ledger, now + WATCHDOG_TIMEOUT);

    assert_eq!(expired, vec![BATCH]);
    assert!(session.live[&id("l1")].history.is_none());
    assert!(session.live.contains_key(&id("l1")));
    assert!(testing::transmitted(&mut machine).is_empty(), "no CLOSE");
}

#[test]
fn an_event_the_store_could_not_save_on_the_page_marks_its_batch() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    let event = patch(1, 100);

    let unsaved = machine.handle_unsaved(&id("l1"), event.id, |b| b == BATCH);

    assert!(matches!(unsaved, Unsaved::Batch(b) if b == BATCH));
    // After the page ended, the group's events are live coverage.
    let _ = machine.handle_eose(now, &id("l1"), unnamed);
    let unsaved = machine.handle_unsaved(&id("l1"), event.id, |_| true);
    assert!(matches!(unsaved, Unsaved::Recover));
}

#[test]
fn a_plan_rolled_back_carries_no_page() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    // More groups than the session has slots for.
    let groups: Vec<FilterGroup> = (1..=30).map(|n| group(&[n])).collect();
    let ids = (1..=30).map(|n| id(&format!("l{n}"))).collect();

    let (applied, pages) =
        machine.apply_live_plan_with_history(now, opening(groups), ids, BATCH, &incoming(&[1]));

    assert_ne!(applied.outcome, PlanOutcome::Applied);
    assert!(pages.is_empty());
    let session = machine.session.as_ref().expect("connected");
    assert!(session.live.values().all(|g| g.history.is_none()));
}

#[test]
fn held_filters_repacked_beside_the_page_are_sent_with_limit_0() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    // A repack moved held filter d9 into the group that opens d1 and d2.
    let (_, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1, 2, 9])]),
        vec![id("l1")],
        BATCH,
        &incoming(&[1, 2]),
    );
    assert_eq!(pages.carried.len(), 1);
    assert_eq!(
        pages.carried[0].1.len(),
        2,
        "the page is the batch's filters only"
    );

    let sent = reqs(&mut machine);

    let limit_of = |d: &str| {
        sent[0]
            .1
            .iter()
            .find(|f| f.generic_tags.values().any(|v| v.contains(d)))
            .map(|f| f.limit)
    };
    assert_eq!(limit_of("d1"), Some(Some(500)));
    assert_eq!(limit_of("d2"), Some(Some(500)));
    assert_eq!(
        limit_of("d9"),
        Some(Some(0)),
        "nothing held is fetched again"
    );
    assert_eq!(sent[0].1.len(), 3);
}

#[test]
fn a_group_holding_none_of_the_batchs_filters_carries_no_page() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    let (_, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1]), group(&[9])]),
        vec![id("l1"), id("l9")],
        BATCH,
        &incoming(&[1]),
    );
    let names: Vec<String> = pages.carried.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(names, ["l1"]);
    let session = machine.session.as_ref().expect("connected");
    assert!(session.live[&id("l9")].history.is_none());
}

#[test]
fn an_ended_page_of_a_batch_no_longer_pending_is_dropped() {
    let now = Instant::now();
    let mut machine = carrying(now, 500);
    let _ = reqs(&mut machine);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");
    assert!(session.close_live(ledger, &id("l1"), now));

    let queued = machine.requeue_ended_live_pages(now, |_| false, || id("h1"));

    assert!(queued.is_empty());
    assert!(
        machine
            .session
            .as_ref()
            .expect("connected")
            .queue
            .is_empty()
    );
}

#[test]
fn the_watchdog_fails_a_batch_once_whatever_its_groups() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    let (_, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1]), group(&[2])]),
        vec![id("l1"), id("l2")],
        BATCH,
        &incoming(&[1, 2]),
    );
    assert_eq!(pages.carried.len(), 2);
    let _ = reqs(&mut machine);
    let session = machine.session.as_mut().expect("connected");
    let ledger = machine.ledger.as_mut().expect("ledger");

    assert_eq!(
        session.handle_watchdog(ledger, now + WATCHDOG_TIMEOUT),
        vec![BATCH]
    );
}

#[test]
fn a_page_eose_proves_every_filter_its_req_carried() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    let _ = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1, 2, 9])]),
        vec![id("l1")],
        BATCH,
        &incoming(&[1, 2]),
    );
    let _ = reqs(&mut machine);
    assert!(machine.learned.proven_filters() < 3);

    let answer = machine.handle_eose(now, &id("l1"), unnamed);

    assert!(matches!(answer, Some(EoseAnswer::Page(_))));
    assert_eq!(machine.learned.proven_filters(), 3);
}

#[test]
fn the_pages_in_flight_ask_for_no_more_than_one_historic_page() {
    let now = Instant::now();
    // Ten events a page, one filter a historic REQ: the pages in flight may ask for ten.
    let mut machine = connected(now, 10);
    let _ = machine.learned.handle_filter_count_refusal(now, Some(2));
    assert_eq!(machine.live_page_budget(), 10);

    let (_, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[1]), group(&[2]), group(&[3])]),
        vec![id("l1"), id("l2"), id("l3")],
        BATCH,
        &incoming(&[1, 2, 3]),
    );

    // The first page always rides; the others wait apart, for paced history of the batch.
    let carried: Vec<String> = pages.carried.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(carried, ["l1"]);
    assert_eq!(
        pages.apart,
        vec![testing::live_core(2).filter, testing::live_core(3).filter]
    );
    let sent = reqs(&mut machine);
    let limits: Vec<Option<usize>> = sent.iter().map(|(_, f)| f[0].limit).collect();
    assert_eq!(limits, [Some(10), Some(0), Some(0)]);

    // Once the first page ended, the next batch's page may ride again.
    let _ = machine.handle_eose(now, &id("l1"), unnamed);
    let (_, pages) = machine.apply_live_plan_with_history(
        now,
        opening(vec![group(&[4])]),
        vec![id("l4")],
        BatchId(8),
        &incoming(&[4]),
    );
    assert_eq!(pages.carried.len(), 1);
    assert!(pages.apart.is_empty());
}
