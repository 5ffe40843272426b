//! The timer table's rules: one deadline per name, the three ways to arm one, firing only when
//! due, and the earliest deadline as the table's timeout.

use std::time::{Duration, Instant};

use super::{RelayTimer, SessionTimer, Timers};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn an_empty_table_has_no_timeout_and_nothing_due() {
    let timers: Timers<RelayTimer> = Timers::default();
    let now = Instant::now();
    assert_eq!(timers.poll_timeout(), None);
    assert!(!timers.is_due(RelayTimer::CoverageRetry, now + secs(3_600)));
    assert!(!timers.is_waiting(RelayTimer::CoverageRetry, now));
}

#[test]
fn set_replaces_set_earliest_keeps_the_earlier_and_set_unless_armed_keeps_the_first() {
    let t0 = Instant::now();
    let mut timers = Timers::default();

    timers.set(RelayTimer::DailyReconciliation, t0 + secs(10));
    timers.set(RelayTimer::DailyReconciliation, t0 + secs(30));
    assert_eq!(timers.poll_timeout(), Some(t0 + secs(30)));

    timers.set_earliest(RelayTimer::CoverageRetry, t0 + secs(20));
    timers.set_earliest(RelayTimer::CoverageRetry, t0 + secs(40));
    assert!(timers.is_due(RelayTimer::CoverageRetry, t0 + secs(20)));
    timers.set_earliest(RelayTimer::CoverageRetry, t0 + secs(5));
    assert_eq!(timers.poll_timeout(), Some(t0 + secs(5)));

    timers.set_unless_armed(RelayTimer::CompletionCheck, t0 + secs(8));
    timers.set_unless_armed(RelayTimer::CompletionCheck, t0 + secs(2));
    assert!(!timers.is_due(RelayTimer::CompletionCheck, t0 + secs(7)));
    assert!(timers.is_due(RelayTimer::CompletionCheck, t0 + secs(8)));
}

#[test]
fn a_timer_fires_once_when_due_and_the_timeout_moves_to_the_next() {
    let t0 = Instant::now();
    let mut timers = Timers::default();
    timers.set(SessionTimer::GateWait, t0 + secs(1));
    timers.set(SessionTimer::LiveRepair, t0 + secs(3));

    assert!(timers.is_waiting(SessionTimer::GateWait, t0));
    assert!(!timers.take_due(SessionTimer::GateWait, t0));
    assert!(timers.is_waiting(SessionTimer::GateWait, t0));

    // Due exactly at its deadline, not waiting any more.
    assert!(!timers.is_waiting(SessionTimer::GateWait, t0 + secs(1)));
    assert!(timers.take_due(SessionTimer::GateWait, t0 + secs(1)));
    assert!(!timers.take_due(SessionTimer::GateWait, t0 + secs(2)));
    assert_eq!(timers.poll_timeout(), Some(t0 + secs(3)));

    timers.cancel(SessionTimer::LiveRepair);
    assert_eq!(timers.poll_timeout(), None);
    assert!(!timers.take_due(SessionTimer::LiveRepair, t0 + secs(60)));
}
