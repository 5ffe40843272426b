//! Starting a session's queued NIP-77 rounds, on injected time: reads first, one probe while
//! support is unknown, the history slots, the background gate, and the fallbacks.

use std::time::{Duration, Instant};

use grasp_sync_model::BatchId;
use nostr::{EventId, Filter, Kind, SubscriptionId, Timestamp};

use super::*;
use crate::machine::holdings_round::OverHoldings;
use crate::machine::nip77::{NegentropyError, NipListing};
use crate::machine::relay::testing;
use crate::machine::transmit::SessionKey;

type Machine = RelayMachine<NegRound, ()>;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A relay connected at `now`, whose document says `nip77` of NIP-77.
fn connected(now: Instant, nip77: NipListing) -> Machine {
    testing::connected(now, 20, nip77)
}

fn round(n: u64, batch: u64) -> NegRound {
    NegRound::new(
        SubscriptionId::new(format!("neg-{n}")),
        BatchId(batch),
        Filter::new()
            .kind(Kind::from(1617))
            .identifier(format!("d{n}")),
    )
}

fn have() -> HaveSet {
    vec![(EventId::all_zeros(), Timestamp::from(1))]
}

/// Queues `rounds`, each with its "have" set already read.
fn queue_read(machine: &mut Machine, rounds: impl IntoIterator<Item = NegRound>) {
    let session = machine.session.as_mut().expect("connected");
    for mut round in rounds {
        round.have = Preparation::Read(have());
        session.neg_queue.push_back(round);
    }
}

fn ids(drive: &NegDrive) -> Vec<String> {
    drive
        .started
        .iter()
        .map(|r| r.subscription_id.to_string())
        .collect()
}

fn all_jobs(jobs: &mut Jobs) -> Vec<Job> {
    std::iter::from_fn(|| jobs.poll_job().map(|(_, job)| job)).collect()
}

/// The jobs `machine` decided, oldest first.
fn machine_jobs(machine: &mut Machine) -> Vec<Job> {
    std::iter::from_fn(|| machine.poll_job().map(|(_, job)| job)).collect()
}

/// `machine`'s NIP-77 support learns the relay speaks it, through an answered probe.
fn speaks(machine: &mut Machine) {
    let probe = SubscriptionId::new("probe");
    machine.nip77.handle_probe_started(probe.clone());
    let answered: Result<(), NegentropyError> = Ok(());
    machine
        .nip77
        .handle_round_ended(Instant::now(), &probe, &answered);
}

#[test]
fn reads_are_asked_for_the_two_rounds_at_the_head_only() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    let session = machine.session.as_mut().expect("connected");
    session
        .neg_queue
        .extend([round(1, 1), round(2, 1), round(3, 1)]);
    let mut jobs = Jobs::default();
    prepare_ahead(session, &mut jobs);
    prepare_ahead(session, &mut jobs);

    let asked: Vec<_> = all_jobs(&mut jobs)
        .into_iter()
        .map(|job| match job {
            Job::ReadHaveSet {
                subscription_id, ..
            } => subscription_id.to_string(),
            other => panic!("not a read: {other:?}"),
        })
        .collect();
    assert_eq!(asked, ["neg-1", "neg-2"], "each asked once");

    let drive = machine.drive_negentropy(now, &mut HistorySlots::new(4));
    assert_eq!(drive.stop, NegStop::Waiting, "the head is still being read");
    assert!(drive.started.is_empty());
}

#[test]
fn while_support_is_unknown_one_round_probes_and_the_rest_wait_for_it() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Unknown);
    queue_read(&mut machine, [round(1, 1), round(2, 1)]);
    let mut slots = HistorySlots::new(4);

    let drive = machine.drive_negentropy(now, &mut slots);
    assert_eq!(ids(&drive), ["neg-1"]);
    assert!(drive.started[0].probe);
    assert!(matches!(
        machine_jobs(&mut machine).last(),
        Some(Job::RunRound { probe: true, .. })
    ));

    let later = now + secs(5);
    let drive = machine.drive_negentropy(later, &mut slots);
    assert!(
        drive.started.is_empty(),
        "the gate allows, the probe does not"
    );

    let answered: Result<(), NegentropyError> = Ok(());
    machine
        .nip77
        .handle_round_ended(later, &SubscriptionId::new("neg-1"), &answered);
    let drive = machine.drive_negentropy(later, &mut slots);
    assert_eq!(ids(&drive), ["neg-2"]);
    assert!(!drive.started[0].probe);
}

#[test]
fn a_relay_known_not_to_speak_nip77_falls_back_every_queued_batch() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::NotListed);
    queue_read(&mut machine, [round(1, 1), round(2, 2), round(3, 2)]);
    let drive = machine.drive_negentropy(now, &mut HistorySlots::new(4));
    assert!(drive.started.is_empty());
    assert_eq!(
        drive.stop,
        NegStop::Off {
            reason: NoNip77::NotListed,
            batches: [BatchId(1), BatchId(2)].into()
        }
    );
}

#[test]
fn rounds_wait_for_a_history_slot_before_the_gates_count_them() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    speaks(&mut machine);
    queue_read(&mut machine, [round(1, 1)]);
    let mut slots = HistorySlots::new(1);
    assert!(slots.try_take(), "another relay's round runs");

    let drive = machine.drive_negentropy(now, &mut slots);
    assert_eq!(drive.stop, NegStop::NoHistorySlot);
    assert!(machine_jobs(&mut machine).is_empty());

    slots.release();
    let drive = machine.drive_negentropy(now, &mut slots);
    assert_eq!(
        ids(&drive),
        ["neg-1"],
        "the gate did not count the start that waited"
    );
    assert!(!slots.is_free(), "the round holds the slot");
}

#[test]
fn background_rounds_are_a_second_apart_and_the_wait_is_armed() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    speaks(&mut machine);
    queue_read(&mut machine, [round(1, 1), round(2, 1)]);
    let mut slots = HistorySlots::new(4);

    let drive = machine.drive_negentropy(now, &mut slots);
    assert_eq!(ids(&drive), ["neg-1"]);
    assert_eq!(drive.stop, NegStop::Waiting);
    let session = machine.session.as_ref().expect("connected");
    assert!(
        session
            .neg_in_flight
            .contains_key(&SubscriptionId::new("neg-1"))
    );
    let wait = session
        .timers
        .poll_timeout()
        .expect("the gate's wait is armed");
    assert!(wait >= now + secs(1), "at least a second after the first");

    let drive = machine.drive_negentropy(wait, &mut slots);
    assert_eq!(ids(&drive), ["neg-2"]);
}

fn held_rounds(machine: &Machine) -> usize {
    machine
        .ledger
        .as_ref()
        .expect("connected")
        .counts()
        .negentropy_rounds()
}

#[test]
fn an_ended_round_teaches_support_and_gives_its_permit_back_once() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Unknown);
    queue_read(&mut machine, [round(1, 4)]);
    machine.drive_negentropy(now, &mut HistorySlots::new(4));
    assert_eq!(held_rounds(&machine), 1);
    let key = machine.session.as_ref().expect("connected").key.clone();
    let stale = SessionKey {
        generation: key.generation - 1,
        ..key.clone()
    };
    let probe = SubscriptionId::new("neg-1");
    let answered: Result<(), NegentropyError> = Ok(());

    assert_eq!(
        machine.handle_round_ended(now, &stale, &probe, &answered),
        None,
        "a report of an ended session"
    );
    assert_eq!(machine.nip77.poll_round(), RoundStart::AfterProbe);
    assert_eq!(held_rounds(&machine), 1);

    assert_eq!(
        machine.handle_round_ended(now, &key, &probe, &answered),
        Some(RoundEnded {
            batch: BatchId(4),
            before_auth: true,
        })
    );
    assert_eq!(machine.nip77.poll_round(), RoundStart::Normal);
    assert_eq!(held_rounds(&machine), 0);
    assert_eq!(
        machine.handle_round_ended(now, &key, &probe, &answered),
        None,
        "already ended"
    );
}

#[test]
fn abandoning_drops_every_round_and_gives_the_permits_back() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    speaks(&mut machine);
    queue_read(&mut machine, [round(1, 1), round(2, 2)]);
    machine.drive_negentropy(now, &mut HistorySlots::new(4));
    assert_eq!(held_rounds(&machine), 1);

    machine.abandon_negentropy(now);
    let session = machine.session.as_ref().expect("connected");
    assert!(session.neg_queue.is_empty());
    assert!(session.neg_in_flight.is_empty());
    assert!(session.rounds_before_auth.is_empty());
    assert_eq!(held_rounds(&machine), 0);
}

#[test]
fn forgetting_a_batch_drops_only_its_queued_rounds() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    queue_read(&mut machine, [round(1, 1), round(2, 2), round(3, 1)]);
    machine.forget_negentropy_batch(BatchId(1));
    let left: Vec<_> = machine
        .session
        .as_ref()
        .expect("connected")
        .neg_queue
        .iter()
        .map(|r| r.subscription_id.to_string())
        .collect();
    assert_eq!(left, ["neg-2"]);
}

#[test]
fn a_batch_queues_one_round_per_filter_its_held_read_first_then_the_head_reads() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Unknown);
    assert!(machine.nip77_rounds_allowed());
    let filters: Vec<Filter> = (0..3).map(|n| round(n, 5).filter).collect();
    let mut next = 0;
    let queued = machine
        .queue_negentropy_batch(BatchId(5), filters.clone(), true, 40, || {
            next += 1;
            SubscriptionId::new(format!("neg-{next}"))
        })
        .expect("a session");
    let names: Vec<String> = queued.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(names, ["neg-1", "neg-2", "neg-3"]);
    assert_eq!(
        queued.iter().map(|(_, f)| f.clone()).collect::<Vec<_>>(),
        filters
    );
    let jobs = machine_jobs(&mut machine);
    assert!(
        matches!(
            &jobs[0],
            Job::ReadHeld {
                batch: BatchId(5),
                max_held: 40,
                ..
            }
        ),
        "{jobs:?}"
    );
    let reads = jobs
        .iter()
        .filter(|job| matches!(job, Job::ReadHaveSet { .. }))
        .count();
    assert_eq!((jobs.len(), reads), (3, PREPARED_AHEAD));
    assert!(machine.neg_batches.contains_key(&BatchId(5)));

    // Without the held check, only the head's reads.
    let mut machine = connected(now, NipListing::Unknown);
    machine
        .queue_negentropy_batch(BatchId(6), filters, false, 40, || {
            SubscriptionId::new("neg-x")
        })
        .expect("a session");
    let jobs = machine_jobs(&mut machine);
    assert_eq!(jobs.len(), PREPARED_AHEAD);
    assert!(
        jobs.iter()
            .all(|job| matches!(job, Job::ReadHaveSet { .. }))
    );
}

#[test]
fn rounds_that_will_not_start_leave_the_queue_and_their_batch_falls_back() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Unknown);
    let filters: Vec<Filter> = (0..2).map(|n| round(n, 1).filter).collect();
    let mut next = 0;
    let mut ids = || {
        next += 1;
        SubscriptionId::new(format!("neg-{next}"))
    };
    machine
        .queue_negentropy_batch(BatchId(1), filters.clone(), false, 40, &mut ids)
        .expect("a session");
    machine
        .queue_negentropy_batch(BatchId(2), filters, false, 40, &mut ids)
        .expect("a session");
    let dropped: Vec<String> = machine
        .drop_queued_rounds(BatchId(1))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(dropped, ["neg-1", "neg-2"]);
    let session = machine.session.as_ref().expect("connected");
    assert!(session.neg_queue.iter().all(|r| r.batch == BatchId(2)));
    assert_eq!(session.neg_queue.len(), 2, "the other batch's rounds stay");
    assert!(
        !machine.neg_batches[&BatchId(1)].may_trade_for_req(),
        "the batch falls back once its rounds ended"
    );
    assert!(machine.neg_batches[&BatchId(2)].may_trade_for_req());
}

#[test]
fn no_rounds_without_a_session_or_once_the_relay_does_not_speak_nip77() {
    let now = Instant::now();
    let machine = connected(now, NipListing::NotListed);
    assert!(!machine.nip77_rounds_allowed());
    let mut machine = connected(now, NipListing::Unknown);
    machine.session = None;
    assert!(!machine.nip77_rounds_allowed());
    assert!(
        machine
            .queue_negentropy_batch(BatchId(1), vec![round(0, 1).filter], false, 40, || {
                SubscriptionId::new("neg-1")
            })
            .is_none()
    );
}

#[test]
fn coverage_added_over_kept_holdings_joins_the_queued_round_then_waits_for_the_next_one() {
    let now = Instant::now();
    let mut machine = connected(now, NipListing::Listed);
    speaks(&mut machine);
    assert_eq!(
        machine.place_over_holdings(),
        None,
        "a session that did not start over kept holdings"
    );
    machine.over_holdings = Some(OverHoldings::default());
    assert_eq!(machine.place_over_holdings(), Some(HoldingsPlacement::Open));
    machine
        .queue_holdings_round(BatchId(1), SubscriptionId::new("held-1"), None)
        .expect("connected");
    assert_eq!(
        machine.place_over_holdings(),
        Some(HoldingsPlacement::Join(BatchId(1))),
        "the round has not started: its batch takes the coverage"
    );
    let session = machine.session.as_mut().expect("connected");
    session.neg_queue[0].have = Preparation::Read(have());
    let drive = machine.drive_negentropy(now, &mut HistorySlots::new(4));
    assert_eq!(ids(&drive), vec!["held-1".to_owned()]);
    assert_eq!(
        machine.place_over_holdings(),
        Some(HoldingsPlacement::OpenNext),
        "the round started: the next one takes it"
    );
    machine
        .over_holdings
        .as_mut()
        .expect("over holdings")
        .handle_next_opened(BatchId(2));
    assert_eq!(
        machine.place_over_holdings(),
        Some(HoldingsPlacement::Join(BatchId(2)))
    );
    // A fresh start's or a teardown's abandon drops the waiting batch with the round: the
    // next round to run does not hand coverage to it.
    machine.abandon_negentropy(now);
    assert_eq!(machine.place_over_holdings(), Some(HoldingsPlacement::Open));
    machine
        .queue_holdings_round(BatchId(3), SubscriptionId::new("held-3"), None)
        .expect("connected");
    let session = machine.session.as_mut().expect("connected");
    session.neg_queue[0].have = Preparation::Read(have());
    let later = now + secs(5);
    let drive = machine.drive_negentropy(later, &mut HistorySlots::new(4));
    assert_eq!(ids(&drive), vec!["held-3".to_owned()]);
    assert_eq!(
        machine.place_over_holdings(),
        Some(HoldingsPlacement::OpenNext)
    );
}
