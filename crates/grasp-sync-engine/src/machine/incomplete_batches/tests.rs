//! The incomplete-batch rules: truncation beats failed saves, each backoff doubles to its cap,
//! a confirmed batch resets the failed-save streak only, and dropped batches are forgotten.

use super::*;

fn id(n: u8) -> EventId {
    EventId::from_byte_array([n; 32])
}

fn retry_in(finish: Finish, now: Instant) -> Duration {
    match finish {
        Finish::Abandon { retry_at, .. } => retry_at - now,
        Finish::Confirm => panic!("confirmed, expected abandoned"),
    }
}

#[test]
fn a_batch_with_nothing_marked_confirms() {
    let mut batches = IncompleteBatches::default();
    batches.handle_truncated(BatchId(2));
    assert_eq!(
        batches.handle_finished(BatchId(1), Instant::now()),
        Finish::Confirm
    );
}

#[test]
fn a_truncated_batch_is_abandoned_each_time_with_a_doubling_wait_up_to_six_hours() {
    let mut batches = IncompleteBatches::default();
    let now = Instant::now();
    let mut waits = Vec::new();
    for n in 0..12 {
        batches.handle_truncated(BatchId(n));
        // A confirmed batch in between does not reset the truncation backoff.
        assert_eq!(
            batches.handle_finished(BatchId(100 + n), now),
            Finish::Confirm
        );
        waits.push(retry_in(batches.handle_finished(BatchId(n), now), now));
    }
    let minutes: Vec<u64> = waits.iter().map(|w| w.as_secs() / 60).collect();
    assert_eq!(minutes, [1, 2, 4, 8, 16, 32, 64, 128, 256, 360, 360, 360]);
}

#[test]
fn a_truncated_batch_with_failed_saves_is_abandoned_as_truncated_and_forgotten() {
    let mut batches = IncompleteBatches::default();
    let now = Instant::now();
    batches.handle_unsaved(BatchId(1), id(1));
    batches.handle_truncated(BatchId(1));
    assert!(matches!(
        batches.handle_finished(BatchId(1), now),
        Finish::Abandon {
            why: Incompleteness::Truncated,
            ..
        }
    ));
    assert_eq!(batches.unsaved_ids(BatchId(1)), None);
    assert_eq!(batches.handle_finished(BatchId(1), now), Finish::Confirm);
}

#[test]
fn failed_saves_back_off_in_a_row_and_a_confirmed_batch_resets_the_streak() {
    let mut batches = IncompleteBatches::default();
    let now = Instant::now();
    let unsaved_then_finished = |batches: &mut IncompleteBatches, n: u64| {
        batches.handle_unsaved(BatchId(n), id(n as u8));
        batches.handle_finished(BatchId(n), now)
    };
    assert_eq!(
        unsaved_then_finished(&mut batches, 1),
        Finish::Abandon {
            why: Incompleteness::Unsaved { events: 1 },
            retry_at: now + UNSAVED_RETRY,
        }
    );
    assert_eq!(
        retry_in(unsaved_then_finished(&mut batches, 2), now),
        UNSAVED_RETRY * 2
    );
    assert_eq!(batches.handle_finished(BatchId(3), now), Finish::Confirm);
    assert_eq!(
        retry_in(unsaved_then_finished(&mut batches, 4), now),
        UNSAVED_RETRY
    );
    for n in 5..20 {
        unsaved_then_finished(&mut batches, n);
    }
    assert_eq!(
        retry_in(unsaved_then_finished(&mut batches, 20), now),
        UNSAVED_RETRY_CAP
    );
}

#[test]
fn the_failed_ids_kept_per_batch_are_bounded() {
    let mut batches = IncompleteBatches::default();
    for n in 0..UNSAVED_IDS_KEPT + 10 {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&(n as u64).to_le_bytes());
        batches.handle_unsaved(BatchId(1), EventId::from_byte_array(bytes));
    }
    assert_eq!(
        batches.unsaved_ids(BatchId(1)).map(BTreeSet::len),
        Some(UNSAVED_IDS_KEPT)
    );
}

#[test]
fn a_failed_or_cleared_batch_is_forgotten_and_costs_no_backoff() {
    let mut batches = IncompleteBatches::default();
    let now = Instant::now();
    batches.handle_truncated(BatchId(1));
    batches.handle_unsaved(BatchId(2), id(2));
    batches.handle_failed(BatchId(1));
    assert_eq!(batches.handle_finished(BatchId(1), now), Finish::Confirm);
    batches.handle_truncated(BatchId(3));
    batches.handle_pending_cleared();
    assert_eq!(batches.unsaved_ids(BatchId(2)), None);
    assert_eq!(batches.handle_finished(BatchId(3), now), Finish::Confirm);
    // The first truncation after all this still waits the first backoff.
    batches.handle_truncated(BatchId(4));
    assert_eq!(
        retry_in(batches.handle_finished(BatchId(4), now), now),
        TRUNCATION_RETRY
    );
}
