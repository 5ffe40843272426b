//! Tests of the measurements.

use super::*;

#[test]
fn memory_lines_are_read_in_kib() {
    let status =
        "Name:\tgrasp-sync\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   51200 kB\n";
    assert_eq!(
        parse_memory(status),
        Memory {
            rss_kib: 102_400,
            hwm_kib: 204_800,
            anon_kib: 51_200,
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
