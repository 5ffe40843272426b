//! Historic REQs packed and queued by the relay's machine, on injected time: up to the
//! learned or the trusted filter ceiling, without coverage refused by policy, suspects one
//! per REQ, each page under the ID the driver gives and in order, and exact-ID fetches.

use std::time::{Duration, Instant};

use grasp_sync_model::BatchId;
use nostr::{Filter, Kind, SubscriptionId};

use super::*;
use crate::machine::nip77::NipListing;
use crate::machine::refused::without_bounds;
use crate::machine::relay::testing;

type Machine = RelayMachine<(), ()>;

fn filter(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

/// A filter of another shape than [`filter`]'s.
fn other(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1621))
        .hashtag(format!("t{n}"))
}

fn filters(range: std::ops::Range<u64>) -> Vec<Filter> {
    range.map(filter).collect()
}

/// IDs `hist-1`, `hist-2`, … in the order the machine asks for them.
fn ids() -> impl FnMut() -> SubscriptionId {
    let mut next = 0;
    move || {
        next += 1;
        SubscriptionId::new(format!("hist-{next}"))
    }
}

/// How many filters each queued page carries, in queue order.
fn page_sizes(queued: &QueuedHistory) -> Vec<usize> {
    queued.pages.iter().map(|(_, f)| f.len()).collect()
}

fn queued_ids(machine: &Machine) -> Vec<String> {
    let session = machine.session.as_ref().expect("connected");
    session
        .queue
        .iter()
        .map(|start| start.subscription_id.to_string())
        .collect()
}

#[test]
fn filters_share_reqs_up_to_the_learned_ceiling_queued_in_order_under_the_given_ids() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    machine.learned.handle_advertised_filter_limit(3);
    let queued = machine
        .queue_history(
            now,
            BatchId(4),
            filters(0..7),
            FilterCeiling::Learned,
            ids(),
        )
        .expect("a session");
    assert_eq!(page_sizes(&queued), vec![3, 3, 1]);
    assert!(queued.failed.is_none() && queued.suspects_failed.is_empty());
    assert_eq!(queued_ids(&machine), ["hist-1", "hist-2", "hist-3"]);
    let session = machine.session.as_ref().expect("connected");
    assert!(session.queue.iter().all(|start| start.batch == BatchId(4)));
    let mut sent: Vec<String> = queued
        .pages
        .into_iter()
        .flat_map(|(_, f)| f)
        .map(|f| format!("{:?}", without_bounds(&f)))
        .collect();
    sent.sort();
    let mut asked: Vec<String> = filters(0..7).iter().map(|f| format!("{f:?}")).collect();
    asked.sort();
    assert_eq!(
        sent, asked,
        "every filter is in exactly one page (which adds its limit)"
    );
}

#[test]
fn the_trusted_ceiling_is_one_filter_until_the_relay_states_or_proves_more() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    let queued = machine
        .queue_history(
            now,
            BatchId(1),
            filters(0..3),
            FilterCeiling::Trusted,
            ids(),
        )
        .expect("a session");
    assert_eq!(page_sizes(&queued), vec![1, 1, 1]);

    machine.learned.handle_accepted_req(2);
    let queued = machine
        .queue_history(
            now,
            BatchId(2),
            filters(0..3),
            FilterCeiling::Trusted,
            ids(),
        )
        .expect("a session");
    assert_eq!(page_sizes(&queued), vec![2, 1], "two filters were proven");
}

#[test]
fn refused_coverage_waits_for_its_pause_and_suspects_go_one_per_req() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    let until = now + Duration::from_secs(600);
    assert!(machine.refused.handle_refusal(&[filter(0)], until));
    assert!(
        !machine
            .refused
            .handle_refusal(&[filter(1), filter(2)], until)
    );
    let mut asked = filters(0..3);
    asked.extend([other(3), other(4)]);
    let queued = machine
        .queue_history(now, BatchId(1), asked, FilterCeiling::Learned, ids())
        .expect("a session");
    // t3 and t4 together, then each suspect alone; the paused d0 not at all.
    assert_eq!(page_sizes(&queued), vec![2, 1, 1]);
    let all: Vec<Filter> = queued.pages.into_iter().flat_map(|(_, f)| f).collect();
    assert!(
        !all.iter()
            .any(|f| format!("{f:?}") == format!("{:?}", filter(0))),
        "the paused filter is not sent: {all:?}"
    );
}

#[test]
fn a_recovery_probe_is_queued_whatever_the_refused_coverage_says() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    assert!(
        machine
            .refused
            .handle_refusal(&[filter(0)], now + Duration::from_secs(600))
    );
    let queued = machine
        .queue_packed(
            BatchId(1),
            Vec::new(),
            vec![filter(0)],
            FilterCeiling::Learned,
            ids(),
        )
        .expect("a session");
    assert_eq!(page_sizes(&queued), vec![1]);
}

#[test]
fn nothing_is_queued_without_a_session() {
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    machine.session = None;
    assert!(
        machine
            .queue_history(
                now,
                BatchId(1),
                filters(0..2),
                FilterCeiling::Learned,
                ids()
            )
            .is_none()
    );
    assert!(
        machine
            .history_pack_limits(FilterCeiling::Learned)
            .is_none()
    );
}

#[test]
fn exact_ids_are_fetched_in_pages_of_one_full_filter_as_the_given_class_and_kind() {
    use grasp_sync_filters::MAX_IDS_PER_FILTER;
    use grasp_sync_ledger::{PermitClass, StartKind};
    let now = Instant::now();
    let mut machine: Machine = testing::connected(now, 20, NipListing::Unknown);
    let wanted: Vec<nostr::EventId> = (0..=MAX_IDS_PER_FILTER)
        .map(|n| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
            nostr::EventId::from_byte_array(bytes)
        })
        .collect();
    let queued = machine
        .queue_exact_fetch(
            BatchId(9),
            &wanted,
            PermitClass::Retry,
            StartKind::Retry,
            ids(),
        )
        .expect("filters built");
    let names: Vec<String> = queued.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(
        names,
        ["hist-1", "hist-2"],
        "one ID more than a filter holds"
    );
    let mut asked: Vec<nostr::EventId> = queued
        .iter()
        .flat_map(|(_, filters)| {
            assert_eq!(filters.len(), 1, "one filter per page");
            filters[0].ids.iter().flatten().copied().collect::<Vec<_>>()
        })
        .collect();
    asked.sort();
    let mut expected = wanted.clone();
    expected.sort();
    assert_eq!(asked, expected, "every ID once");
    let session = machine.session.as_ref().expect("connected");
    assert_eq!(session.queue.len(), 2);
    for start in &session.queue {
        assert!(start.exact);
        assert_eq!(
            (start.batch, start.class, start.kind),
            (BatchId(9), PermitClass::Retry, StartKind::Retry)
        );
    }

    machine.session = None;
    assert!(
        machine
            .queue_exact_fetch(
                BatchId(9),
                &wanted,
                PermitClass::Retry,
                StartKind::Retry,
                ids()
            )
            .expect("filters built")
            .is_empty(),
        "nothing is queued without a session"
    );
}
