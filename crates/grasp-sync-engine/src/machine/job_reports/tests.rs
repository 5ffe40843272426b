//! Job reports as machine inputs: a have-set read lets its round start or fails it, a store
//! that barely holds a batch's coverage sends it by REQ+EOSE with its rounds dropped, and a
//! replaced session's reports change nothing.

use std::time::Instant;

use nostr::{Filter, Kind, Timestamp};

use super::*;
use crate::machine::neg_batch::NegBatch;
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;

type Machine = RelayMachine<NegRound, ()>;

fn filter(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

fn round(n: u64, batch: u64) -> NegRound {
    NegRound::new(
        SubscriptionId::new(format!("neg-{n}")),
        BatchId(batch),
        filter(n),
    )
}

/// A connected machine with `rounds` queued, their reads asked for.
fn with_rounds(rounds: impl IntoIterator<Item = NegRound>) -> (Machine, SessionKey) {
    let mut machine: Machine = testing::connected(Instant::now(), 20, NipListing::Listed);
    let session = machine.session.as_mut().expect("connected");
    for mut round in rounds {
        round.have = Preparation::Reading;
        session.neg_queue.push_back(round);
    }
    let key = session.key.clone();
    (machine, key)
}

fn replaced(key: &SessionKey) -> SessionKey {
    SessionKey {
        relay: key.relay.clone(),
        generation: key.generation + 1,
    }
}

fn have() -> HaveSet {
    vec![(EventId::all_zeros(), Timestamp::from(1))]
}

#[test]
fn a_read_have_set_lets_its_round_start_and_a_failed_read_fails_the_round() {
    let (mut machine, key) = with_rounds([round(1, 7), round(2, 7)]);
    let neg1 = SubscriptionId::new("neg-1");
    let neg2 = SubscriptionId::new("neg-2");

    assert_eq!(
        machine.handle_have_set(&key, &neg1, Ok(have())),
        HaveSetRead::Read
    );
    let error = NegentropyError::Protocol("store: unavailable".to_owned());
    assert_eq!(
        machine.handle_have_set(&key, &neg2, Err(error.clone())),
        HaveSetRead::Failed {
            batch: BatchId(7),
            error
        }
    );

    let queue = &machine.session.as_ref().expect("connected").neg_queue;
    assert_eq!(queue.len(), 1, "the failed round left the queue");
    assert_eq!(queue[0].have, Preparation::Read(have()));
    assert_eq!(
        machine.handle_have_set(&key, &neg2, Ok(have())),
        HaveSetRead::Stale,
        "a round no longer queued"
    );
}

#[test]
fn a_replaced_sessions_reports_change_nothing() {
    let (mut machine, key) = with_rounds([round(1, 7)]);
    machine
        .neg_batches
        .insert(BatchId(7), NegBatch::rounds(vec![filter(1)], true, 100));
    let old = SessionKey {
        relay: key.relay.clone(),
        generation: key.generation - 1,
    };
    assert_eq!(
        machine.handle_have_set(&old, &SubscriptionId::new("neg-1"), Ok(have())),
        HaveSetRead::Stale
    );
    assert_eq!(
        machine.handle_held(&replaced(&key), BatchId(7), Some(&[]), facts(true)),
        None
    );
    assert_eq!(
        machine.session.as_ref().expect("connected").neg_queue[0].have,
        Preparation::Reading
    );
}

fn facts(several_per_req: bool) -> RelayFacts {
    RelayFacts {
        several_per_req,
        reconciling: false,
    }
}

#[test]
fn coverage_the_store_does_not_hold_goes_by_req_eose_without_its_rounds() {
    let (mut machine, key) = with_rounds([round(1, 7), round(2, 8), round(3, 7)]);
    machine.neg_batches.insert(
        BatchId(7),
        NegBatch::rounds(vec![filter(1), filter(3)], true, 100),
    );

    let held = machine.handle_held(&key, BatchId(7), Some(&[]), facts(true));

    assert_eq!(
        held,
        Some(HeldRoute {
            route: HistoryRoute::ReqEose,
            dropped: vec![SubscriptionId::new("neg-1"), SubscriptionId::new("neg-3")],
        })
    );
    let queue = &machine.session.as_ref().expect("connected").neg_queue;
    assert_eq!(queue.len(), 1, "another batch's round stays");
    assert_eq!(queue[0].batch, BatchId(8));
    assert_eq!(
        machine.handle_held(&key, BatchId(9), Some(&[]), facts(true)),
        None,
        "a batch that is gone"
    );
}

#[test]
fn a_failed_read_or_a_relay_taking_one_filter_per_req_keeps_nip77() {
    let (mut machine, key) = with_rounds([round(1, 7), round(2, 7)]);
    machine.neg_batches.insert(
        BatchId(7),
        NegBatch::rounds(vec![filter(1), filter(2)], true, 100),
    );

    let held = machine.handle_held(&key, BatchId(7), Some(&[]), facts(false));

    assert_eq!(
        held,
        Some(HeldRoute {
            route: HistoryRoute::Nip77,
            dropped: Vec::new(),
        })
    );
    assert_eq!(
        machine.session.as_ref().expect("connected").neg_queue.len(),
        2
    );
    let failed = machine.handle_held(&key, BatchId(7), None, facts(true));
    assert_eq!(failed.map(|h| h.route), Some(HistoryRoute::Nip77));
}

#[test]
fn a_rounds_result_is_kept_for_its_batch_and_a_rate_refusal_cools_the_relay_down() {
    let (mut machine, _) = with_rounds([]);
    machine.neg_batches.insert(
        BatchId(7),
        NegBatch::rounds(vec![filter(1), filter(2)], false, 100),
    );
    let now = Instant::now();

    let missing = EventId::all_zeros();
    assert_eq!(
        machine.handle_round_result(now, BatchId(7), Ok(vec![missing])),
        None
    );
    let refused = NegentropyError::RateLimited("rate-limited: slow down".to_owned());
    let (refusal, _) = machine
        .handle_round_result(now, BatchId(7), Err(refused))
        .expect("a rate refusal");

    assert_eq!(
        refusal.category,
        grasp_sync_health::RefusalCategory::RateLimited
    );
    assert_eq!(machine.stats.refusals.get("rate_limited"), Some(&1));
    assert!(machine.health.sync_paused_until(now).is_some());
    let neg = machine.neg_batches.get_mut(&BatchId(7)).expect("the batch");
    assert_eq!(
        neg.handle_rounds_done(),
        crate::machine::neg_batch::RoundsDone::FallBack,
        "a failed round falls its batch back"
    );
    assert_eq!(
        machine.handle_round_result(
            now,
            BatchId(7),
            Err(NegentropyError::Protocol("closed".to_owned()))
        ),
        None,
        "only a rate refusal is a refusal"
    );
}
