//! The catch-up's pacing and cursor, on injected time.

use std::time::{Duration, Instant};

use grasp_sync_model::BatchId;
use nostr::{Filter, Kind, Timestamp};

use super::*;

const INTERVAL: Duration = Duration::from_secs(300);

fn filter(n: u16) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

fn since(filters: &[Filter]) -> Vec<Option<Timestamp>> {
    filters.iter().map(|f| f.since).collect()
}

/// A catch-up handed one filter at `start`, at 1,000 s on the wall clock.
fn handed(start: Instant) -> CatchUp {
    let mut catch_up = CatchUp::default();
    catch_up.handle_coverage(
        start,
        Timestamp::from_secs(1_000),
        INTERVAL,
        vec![filter(1)],
    );
    catch_up
}

#[test]
fn handed_coverage_is_queried_an_interval_later_from_when_it_was_handed_minus_the_overlap() {
    let start = Instant::now();
    let unix = Timestamp::from_secs(1_000_000);
    let mut catch_up = CatchUp::default();
    assert!(catch_up.handle_coverage(start, unix, INTERVAL, vec![filter(1), filter(2)]));
    // The same filter again adds nothing.
    assert!(!catch_up.handle_coverage(start, unix, INTERVAL, vec![filter(1)]));
    assert_eq!(catch_up.len(), 2);

    assert_eq!(
        catch_up.poll_query(start + INTERVAL - Duration::from_secs(1), INTERVAL),
        None
    );
    let query = catch_up
        .poll_query(start + INTERVAL, INTERVAL)
        .expect("due");
    let from = Timestamp::from_secs(1_000_000 - CATCH_UP_OVERLAP.as_secs());
    assert_eq!(since(&query), vec![Some(from); 2]);
}

#[test]
fn one_query_is_in_flight_at_a_time_and_only_a_success_advances_the_cursor() {
    let start = Instant::now();
    let mut catch_up = handed(start);
    let mut now = start + INTERVAL;
    assert!(catch_up.poll_query(now, INTERVAL).is_some());
    catch_up.handle_opened(Some(BatchId(7)), Timestamp::from_secs(2_000));

    // Still in flight an interval later: nothing more is sent.
    now += INTERVAL;
    assert_eq!(catch_up.poll_query(now, INTERVAL), None);
    // Another batch's end is not this query's.
    catch_up.handle_batch_done(BatchId(8), true);
    assert_eq!(catch_up.poll_query(now, INTERVAL), None);

    // A failure keeps the cursor: the next query reaches as far back.
    catch_up.handle_batch_done(BatchId(7), false);
    let query = catch_up.poll_query(now, INTERVAL).expect("due");
    let overlap = CATCH_UP_OVERLAP.as_secs();
    assert_eq!(
        since(&query),
        vec![Some(Timestamp::from_secs(1_000 - overlap))]
    );
    catch_up.handle_opened(Some(BatchId(9)), Timestamp::from_secs(3_000));

    // A success moves it to where that query started.
    catch_up.handle_batch_done(BatchId(9), true);
    now += INTERVAL;
    let query = catch_up.poll_query(now, INTERVAL).expect("due");
    assert_eq!(
        since(&query),
        vec![Some(Timestamp::from_secs(3_000 - overlap))]
    );
}

#[test]
fn a_query_with_nothing_to_send_advances_the_cursor_at_once() {
    let start = Instant::now();
    let mut catch_up = handed(start);
    assert!(catch_up.poll_query(start + INTERVAL, INTERVAL).is_some());
    catch_up.handle_opened(None, Timestamp::from_secs(2_000));
    let query = catch_up
        .poll_query(start + INTERVAL * 2, INTERVAL)
        .expect("due, nothing in flight");
    let overlap = CATCH_UP_OVERLAP.as_secs();
    assert_eq!(
        since(&query),
        vec![Some(Timestamp::from_secs(2_000 - overlap))]
    );
}

#[test]
fn cleared_filters_query_nothing_and_dropped_batches_free_the_query() {
    let start = Instant::now();
    let mut catch_up = handed(start);
    assert!(catch_up.poll_query(start + INTERVAL, INTERVAL).is_some());
    catch_up.handle_opened(Some(BatchId(1)), Timestamp::from_secs(2_000));
    catch_up.handle_pending_cleared();
    catch_up.clear_filters();
    assert_eq!(catch_up.poll_query(start + INTERVAL * 2, INTERVAL), None);
    // Coverage handed again keeps the cursor and the schedule already set.
    assert!(catch_up.handle_coverage(
        start,
        Timestamp::from_secs(5_000),
        INTERVAL,
        vec![filter(2)]
    ));
    let query = catch_up
        .poll_query(start + INTERVAL * 2, INTERVAL)
        .expect("due");
    let overlap = CATCH_UP_OVERLAP.as_secs();
    assert_eq!(
        since(&query),
        vec![Some(Timestamp::from_secs(1_000 - overlap))]
    );
}
