//! EOSEs as machine inputs, on injected time: a live group's proves its filter count and keeps
//! it open, a full page queues its next pages first under the driver's IDs, and an empty page
//! ends its walk and settles refused suspects.

use std::time::{Duration, Instant};

use grasp_sync_filters::{CoverageTier, FilterGroup, TieredFilter};
use grasp_sync_ledger::LivePlan;
use nostr::{EventBuilder, Keys, Kind, Tag, Timestamp};

use super::*;
use crate::machine::live_plan::PlanOutcome;
use crate::machine::relay::testing;

type Machine = RelayMachine<(), ()>;

fn id(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

fn filter(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

/// A relay machine whose relay returns at most `max_limit` events per page.
fn connected(now: Instant, max_limit: usize) -> Machine {
    testing::connected_paging(now, max_limit)
}

fn queued(machine: &Machine) -> Vec<String> {
    machine
        .session
        .as_ref()
        .expect("connected")
        .queue
        .iter()
        .map(|start| start.subscription_id.to_string())
        .collect()
}

fn page(answer: Option<EoseAnswer>) -> PageAnswer {
    match answer {
        Some(EoseAnswer::Page(page)) => page,
        other => panic!("no page ended: {other:?}"),
    }
}

fn unnamed() -> SubscriptionId {
    panic!("no next page was expected")
}

#[test]
fn a_live_groups_eose_proves_its_filter_count_and_keeps_it_open() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    let group = FilterGroup {
        filters: (1..=3)
            .map(|n| TieredFilter::new(filter(n), CoverageTier::Essential))
            .collect(),
        payload_bytes: 120,
    };
    let plan = LivePlan {
        open: vec![group],
        ..LivePlan::default()
    };
    let applied = machine.apply_live_plan(now, plan, vec![id("l1")]);
    assert_eq!(applied.outcome, PlanOutcome::Applied);
    assert_eq!(testing::transmitted(&mut machine), ["REQ l1"]);
    let before = machine.learned.proven_filters();
    assert!(before < 3);

    let answer = machine.handle_eose(now, &id("l1"), unnamed);

    assert!(matches!(answer, Some(EoseAnswer::Live { proved: Some(3) })));
    assert_eq!(machine.learned.proven_filters(), 3);
    assert_eq!(machine.held_subscriptions(), 1, "a live group stays open");
    assert!(testing::transmitted(&mut machine).is_empty(), "no CLOSE");
}

#[test]
fn a_full_page_queues_its_next_pages_first_under_the_drivers_ids() {
    let now = Instant::now();
    let mut machine = connected(now, 2);
    testing::queue_page(&mut machine, "h1", 7, vec![filter(1)]);
    assert_eq!(machine.drive_history(now).started.len(), 1);
    testing::queue_page(&mut machine, "h2", 8, vec![filter(2)]);
    assert_eq!(testing::transmitted(&mut machine), ["REQ h1"]);
    let keys = Keys::generate();
    for at in [200, 100] {
        let event = EventBuilder::new(Kind::from(1617), "patch")
            .tag(Tag::identifier("d1"))
            .custom_created_at(Timestamp::from(at))
            .sign_with_keys(&keys)
            .expect("signed");
        machine.handle_event(&id("h1"), &event, false);
    }

    let mut named = 0;
    let page = page(machine.handle_eose(now, &id("h1"), || {
        named += 1;
        id(&format!("p{named}"))
    }));

    assert_eq!(page.batch, BatchId(7));
    let names: Vec<String> = page.next.iter().map(|(id, _)| id.to_string()).collect();
    assert!(!names.is_empty(), "a full page has a next page");
    assert!(
        page.next.iter().all(|(_, filters)| filters
            .iter()
            .all(|f| f.generic_tags == filter(1).generic_tags)),
        "the walk stays on the page's coverage"
    );
    let mut expected = names.clone();
    expected.push("h2".to_owned());
    assert_eq!(
        queued(&machine),
        expected,
        "the walk goes on first, in order"
    );
    assert!(page.truncated.is_empty());
    assert_eq!(machine.held_subscriptions(), 0, "the page's slot is free");
    assert_eq!(testing::transmitted(&mut machine), ["CLOSE h1"]);
    let next = machine.drive_history(now + Duration::from_secs(1));
    assert_eq!(next.started.len(), 1, "one background start a second");
    assert_eq!(
        testing::transmitted(&mut machine),
        [format!("REQ {}", names[0])]
    );
}

#[test]
fn an_empty_page_ends_its_walk_and_settles_refused_suspects() {
    let now = Instant::now();
    let mut machine = connected(now, 500);
    let until = now + Duration::from_secs(3600);
    assert!(
        !machine
            .refused
            .handle_refusal(&[filter(1), filter(2)], until),
        "two filters refused together become suspects"
    );
    testing::queue_page(&mut machine, "h1", 7, vec![filter(1)]);
    assert_eq!(machine.drive_history(now).started.len(), 1);

    let page = page(machine.handle_eose(now, &id("h1"), unnamed));

    assert!(page.next.is_empty() && page.truncated.is_empty());
    assert!(page.settled, "the suspect sent alone was accepted");
    assert!(
        machine.handle_eose(now, &id("h1"), unnamed).is_none(),
        "a second EOSE is nothing"
    );
}
