//! The daily round over a relay's holdings: what a finished or failed round leaves to keep.

use grasp_sync_model::BatchId;
use nostr::{EventBuilder, EventId, Keys, SubscriptionId, Timestamp};

use super::{
    HoldingsLearning, HoldingsOutcome, HoldingsPlacement, HoldingsRound, MAX_HELD_EVENTS,
    OverHoldings,
};

fn round() -> HoldingsRound {
    HoldingsRound::new(BatchId(1), SubscriptionId::new("held"))
}

fn id(n: u8) -> EventId {
    EventId::from_byte_array([n; 32])
}

#[test]
fn a_finished_round_keeps_what_the_diff_and_the_fetches_showed() {
    let keys = Keys::generate();
    let fetched = EventBuilder::text_note("new")
        .custom_created_at(Timestamp::from_secs(77))
        .sign_with_keys(&keys)
        .expect("sign");
    let never_sent = id(9);
    let mut round = round();
    round.handle_diff(
        vec![(id(1), Timestamp::from_secs(5))],
        &[fetched.id, never_sent],
    );
    round.handle_delivered(&fetched);
    // Delivered twice, or not asked for: counted once, or not at all.
    round.handle_delivered(&fetched);
    let other = EventBuilder::text_note("other")
        .sign_with_keys(&keys)
        .expect("sign");
    round.handle_delivered(&other);
    assert_eq!(
        round.finish(),
        HoldingsOutcome::Held(vec![
            (id(1), Timestamp::from_secs(5)),
            (fetched.id, Timestamp::from_secs(77)),
        ])
    );
}

#[test]
fn a_failed_round_keeps_nothing_unless_the_relay_was_too_large() {
    let mut failed = round();
    failed.handle_diff(vec![(id(1), Timestamp::from_secs(5))], &[]);
    failed.handle_failed(false);
    assert!(failed.failed());
    assert_eq!(failed.finish(), HoldingsOutcome::Nothing);
    let mut too_large = round();
    too_large.handle_failed(true);
    assert_eq!(too_large.finish(), HoldingsOutcome::TooLarge);
    assert_eq!(round().finish(), HoldingsOutcome::Nothing);
}

#[test]
fn learning_keeps_what_the_relay_showed_until_it_shows_too_much() {
    let mut learning = HoldingsLearning::default();
    learning.handle_held([(id(1), Timestamp::from_secs(1))]);
    learning.handle_held([
        (id(2), Timestamp::from_secs(2)),
        (id(1), Timestamp::from_secs(1)),
    ]);
    let mut held = learning.clone().finish().expect("learned");
    held.sort_unstable();
    held.dedup();
    assert_eq!(
        held,
        vec![
            (id(1), Timestamp::from_secs(1)),
            (id(2), Timestamp::from_secs(2))
        ]
    );
    // With the two above, exactly the cap.
    let many = (0..MAX_HELD_EVENTS as u64 - 2).map(|n| {
        let mut bytes = [0; 32];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        (EventId::from_byte_array(bytes), Timestamp::from_secs(n))
    });
    learning.handle_held(many.clone());
    // Duplicates alone never overflow it.
    assert!(!learning.overflowed());
    learning.handle_held(many.clone());
    learning.handle_held(many.take(2));
    assert!(!learning.overflowed());
    let more = (0..=MAX_HELD_EVENTS as u64).map(|n| {
        let mut bytes = [1; 32];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        (EventId::from_byte_array(bytes), Timestamp::from_secs(n))
    });
    learning.handle_held(more);
    assert!(learning.overflowed());
    learning.handle_held([(id(3), Timestamp::from_secs(3))]);
    assert_eq!(learning.finish(), None);
}

#[test]
fn coverage_added_over_holdings_joins_a_queued_round_and_the_next_one_once_it_runs() {
    let mut over = OverHoldings::default();
    let round = round();
    assert_eq!(
        over.handle_added(Some((&round, false))),
        HoldingsPlacement::Join(BatchId(1)),
        "the queued round's batch takes it"
    );
    assert_eq!(
        over.handle_added(Some((&round, true))),
        HoldingsPlacement::OpenNext,
        "a running round: a batch for the next one"
    );
    over.handle_next_opened(BatchId(2));
    assert_eq!(
        over.handle_added(Some((&round, true))),
        HoldingsPlacement::Join(BatchId(2)),
        "the next round's batch takes what comes while the round runs"
    );
    assert_eq!(over.take_next(), Some(BatchId(2)), "its round is due");
    assert_eq!(over.take_next(), None, "once");
    assert_eq!(
        over.handle_added(None),
        HoldingsPlacement::Open,
        "no round: a new one"
    );
}
