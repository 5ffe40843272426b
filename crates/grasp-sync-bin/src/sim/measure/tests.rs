//! Tests of the measurements.

use super::*;

#[test]
fn memory_lines_are_read_in_kib() {
    let status = "Name:\tgrasp-sync\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   51200 kB\nRssFile:\t   51000 kB\n";
    assert_eq!(
        parse_memory(status),
        Memory {
            rss_kib: 102_400,
            hwm_kib: 204_800,
            anon_kib: 51_200,
            file_kib: 51_000,
        }
    );
}

#[test]
fn absent_memory_lines_read_as_zero() {
    assert_eq!(parse_memory("Name:\tx\n"), Memory::default());
}

#[test]
fn counts_since_a_mark_leave_out_earlier_starts_and_refusals() {
    let mut stats = StrictStats::default();
    stats.refusals.insert(RefusalKind::TooManySubscriptions, 2);
    let mark = Mark::of(&stats);
    stats.refusals.insert(RefusalKind::TooManySubscriptions, 5);
    let counts = counts_since(&stats, &mark);
    assert_eq!(counts.total_refusals(), 3);
    assert_eq!(counts.refusals["too_many_subscriptions"], 3);
    assert_eq!(counts.starts(), 0);
}

#[test]
fn bytes_since_a_mark_leave_out_what_connections_counted_before_it() {
    let connection = |received: u64, sent: u64| grasp_sync_testkit::ConnectionStats {
        bytes_received: received,
        bytes_sent: sent,
        received_by_verb: [("REQ", received)].into(),
        sent_by_verb: [("EVENT", sent - 10), ("EOSE", 10)].into(),
        ..Default::default()
    };
    let mut stats = StrictStats::default();
    stats.per_connection.push(connection(100, 5_000));
    let mark = Mark::of(&stats);
    stats.per_connection.push(connection(40, 60));
    stats.per_connection.push(connection(60, 20));
    let counts = counts_since(&stats, &mark);
    assert_eq!((counts.bytes_received, counts.bytes_sent), (100, 80));
    assert_eq!(counts.bytes(), 180);
    assert_eq!(counts.received_by_verb, [("REQ".to_owned(), 100)].into());
    assert_eq!(
        counts.sent_by_verb,
        [("EOSE".to_owned(), 20), ("EVENT".to_owned(), 60)].into()
    );
}

#[test]
fn a_connection_open_across_the_mark_counts_what_it_moved_after_it() {
    let connection = |received: u64, sent: u64, events: u64| grasp_sync_testkit::ConnectionStats {
        bytes_received: received,
        bytes_sent: sent,
        received_by_verb: [("REQ", received)].into(),
        sent_by_verb: [("EVENT", sent)].into(),
        events_sent: events,
        peak_subscriptions: 9,
        ..Default::default()
    };
    let mut stats = StrictStats::default();
    stats.per_connection.push(connection(100, 5_000, 50));
    let mark = Mark::of(&stats);
    stats.per_connection[0] = connection(130, 5_200, 52);
    let counts = counts_since(&stats, &mark);
    assert_eq!((counts.bytes_received, counts.bytes_sent), (30, 200));
    assert_eq!(counts.events_sent, 2);
    assert_eq!(counts.received_by_verb, [("REQ".to_owned(), 30)].into());
    assert_eq!(counts.sent_by_verb, [("EVENT".to_owned(), 200)].into());
    assert_eq!(
        (counts.connections, counts.peak_open_subscriptions),
        (0, 0),
        "no connection was opened in the phase"
    );
}
