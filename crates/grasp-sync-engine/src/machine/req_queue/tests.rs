//! Starting a session's queued REQs, on injected time: live groups first, historic starts a
//! second apart, slots, and the batches dropped for a cooldown or coverage paused meanwhile.

use std::time::{Duration, Instant};

use grasp_sync_filters::{CoverageTier, FilterGroup, GroupedPagination, TieredFilter};
use grasp_sync_ledger::{PermitClass, StartKind};
use grasp_sync_model::BatchId;
use nostr::{Alphabet, EventId, Filter, SingleLetterTag, SubscriptionId};

use super::*;
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;
use crate::machine::session::{LiveGroup, QueuedStart, UNSENT};

type Machine = RelayMachine<(), ()>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A relay connected at `now` with a budget of `slots` subscriptions.
fn connected(now: Instant, slots: u32) -> Machine {
    testing::connected(now, slots, NipListing::Unknown)
}

/// A filter for the replies to root `n`.
fn replies(n: u8) -> Filter {
    Filter::new().custom_tag(
        SingleLetterTag::lowercase(Alphabet::E),
        EventId::from_byte_array([n; 32]).to_hex(),
    )
}

/// Queues a historic page `n` of `batch` over `filter`.
fn queue(machine: &mut Machine, n: u64, batch: u64, filter: Filter) {
    let session = machine.session.as_mut().expect("connected");
    let pagination = GroupedPagination::new(vec![filter], &session.pages);
    session.queue.push_back(QueuedStart {
        subscription_id: SubscriptionId::new(format!("h{n}")),
        batch: BatchId(batch),
        class: PermitClass::HistoricPage,
        kind: StartKind::Historic,
        pagination,
        exact: false,
    });
}

fn sent_reqs(machine: &mut Machine) -> Vec<String> {
    std::iter::from_fn(|| machine.poll_transmit())
        .map(|message| match message {
            Outbound::Req {
                subscription_id, ..
            } => subscription_id.to_string(),
            other => panic!("not a REQ: {other:?}"),
        })
        .collect()
}

#[test]
fn historic_starts_go_out_a_second_apart_each_holding_a_slot() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    queue(&mut machine, 1, 1, replies(1));
    queue(&mut machine, 2, 1, replies(2));

    let drive = machine.drive_history(now);
    assert_eq!(
        drive.started,
        [StartedReq {
            subscription_id: SubscriptionId::new("h1"),
            batch: BatchId(1),
            filters: 1,
        }]
    );
    let QueueStop::WaitUntil(at) = drive.stop else {
        panic!("the second waits for the background gate: {:?}", drive.stop);
    };
    assert!(at >= now + secs(1));
    assert_eq!(sent_reqs(&mut machine), ["h1"]);
    assert_eq!(machine.stats.req_starts_historic, 1);
    assert_eq!(machine.held_subscriptions(), 1, "h1 holds its slot");
    let session = machine.session.as_ref().expect("connected");
    assert!(session.timers.is_waiting(SessionTimer::GateWait, now));

    let drive = machine.drive_history(at);
    assert_eq!(drive.started.len(), 1);
    assert_eq!(drive.stop, QueueStop::Empty);
    assert_eq!(sent_reqs(&mut machine), ["h2"]);
    assert_eq!(machine.stats.peak_subscriptions, 2);
}

#[test]
fn queued_live_groups_are_sent_before_history() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    queue(&mut machine, 1, 1, replies(1));
    let ledger = machine.ledger.as_mut().expect("connected");
    let id = SubscriptionId::new("l1");
    let permit = ledger
        .admit_live(now, ledger.generation(), vec![id.clone()])
        .expect("admitted")
        .remove(0);
    let session = machine.session.as_mut().expect("connected");
    session.live.insert(
        id.clone(),
        LiveGroup {
            group: FilterGroup {
                filters: vec![TieredFilter::new(replies(9), CoverageTier::Essential)],
                payload_bytes: 40,
            }
            .into(),
            permit,
            sent: UNSENT,
            history: None,
        },
    );
    session.live_queue.push_back(id);

    let drive = machine.drive_history(now);
    assert_eq!(drive.live.sent, 1);
    assert_eq!(machine.stats.req_starts_live, 1);
    assert_eq!(sent_reqs(&mut machine), ["l1", "h1"]);
}

#[test]
fn a_start_without_a_free_slot_waits_for_a_release() {
    let now = Instant::now();
    let mut machine = connected(now, 1);
    queue(&mut machine, 1, 1, replies(1));
    queue(&mut machine, 2, 1, replies(2));
    machine.drive_history(now);

    let drive = machine.drive_history(now + secs(5));
    assert!(drive.started.is_empty());
    assert!(
        matches!(drive.stop, QueueStop::WaitForSlot { residual: 0, .. }),
        "{:?}",
        drive.stop
    );
}

#[test]
fn coverage_paused_while_queued_drops_its_batch_unless_it_is_the_probe() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    queue(&mut machine, 1, 1, replies(1));
    queue(&mut machine, 2, 1, replies(2));
    queue(&mut machine, 3, 2, replies(3));
    machine
        .refused
        .handle_refusal(&[replies(1)], now + secs(3600));

    let drive = machine.drive_history(now);
    assert_eq!(
        drive.dropped,
        [DroppedBatch {
            batch: BatchId(1),
            why: Dropped::PausedCoverage,
        }],
        "batch 1 goes whole, h2 included"
    );
    // The gates counted h1 before its coverage was found paused: h3 waits for the next start.
    let QueueStop::WaitUntil(at) = drive.stop else {
        panic!("h3 waits for the background gate: {:?}", drive.stop);
    };
    assert!(sent_reqs(&mut machine).is_empty());
    let drive = machine.drive_history(at);
    assert!(drive.dropped.is_empty());
    assert_eq!(sent_reqs(&mut machine), ["h3"]);

    let mut probing = connected(now, 20);
    queue(&mut probing, 4, 7, replies(1));
    probing
        .refused
        .handle_refusal(&[replies(1)], now + secs(3600));
    probing.refused.handle_probe_opened(BatchId(7), replies(1));
    let drive = probing.drive_history(now);
    assert!(drive.dropped.is_empty(), "a probe may send paused coverage");
    assert_eq!(sent_reqs(&mut probing), ["h4"]);
}

#[test]
fn a_query_rate_cooldown_drops_the_queued_batches() {
    let now = Instant::now();
    let mut machine = connected(now, 20);
    queue(&mut machine, 1, 1, replies(1));
    queue(&mut machine, 2, 2, replies(2));
    let session = machine.session.as_mut().expect("connected");
    session.reactive.handle_query_rate_refusal(now);

    let drive = machine.drive_history(now);
    assert!(drive.started.is_empty());
    assert_eq!(
        drive.dropped,
        [DroppedBatch {
            batch: BatchId(1),
            why: Dropped::Rejected,
        }]
    );
    // The background gate counted h1's start before the reactive gate refused it.
    let QueueStop::WaitUntil(at) = drive.stop else {
        panic!("h2 waits for the background gate: {:?}", drive.stop);
    };
    let drive = machine.drive_history(at);
    assert!(drive.started.is_empty(), "the cooldown still runs");
    assert_eq!(
        drive.dropped,
        [DroppedBatch {
            batch: BatchId(2),
            why: Dropped::Rejected,
        }]
    );
    let session = machine.session.as_ref().expect("connected");
    assert!(session.queue.is_empty());
    assert!(sent_reqs(&mut machine).is_empty());
}
