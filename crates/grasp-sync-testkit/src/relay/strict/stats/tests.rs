//! Unit tests for the strict relay's counters: the sliding start window and the totals.

use std::time::Duration;

use tokio::time::Instant;

use super::{ConnectionStats, QueryStart, RefusalKind, StartKind, StrictStats, frame_verb};

/// Stats with starts at `millis` after a common instant, on the given connections.
fn stats(starts: &[(usize, u64, &str)]) -> StrictStats {
    let base = Instant::now();
    let connections = starts.iter().map(|s| s.0 + 1).max().unwrap_or(0);
    StrictStats {
        starts: starts
            .iter()
            .map(|&(connection, millis, id)| QueryStart {
                connection,
                kind: StartKind::Req,
                subscription_id: id.to_owned(),
                filters: Vec::new(),
                at: base + Duration::from_millis(millis),
                refused: None,
            })
            .collect(),
        per_connection: vec![ConnectionStats::default(); connections],
        ..StrictStats::default()
    }
}

fn check(starts: &[(usize, u64, &str)], window_ms: u64, expected: usize) {
    assert_eq!(
        stats(starts).most_starts_within(Duration::from_millis(window_ms)),
        expected,
        "{starts:?} within {window_ms} ms"
    );
}

#[test]
fn starts_one_second_apart_never_share_a_window_shorter_than_a_second() {
    check(&[(0, 0, "a"), (0, 1_000, "b"), (0, 2_000, "c")], 999, 1);
    check(&[(0, 0, "a"), (0, 1_000, "b"), (0, 2_000, "c")], 1_000, 2);
    check(&[(0, 0, "a"), (0, 1_000, "b"), (0, 2_000, "c")], 2_000, 3);
}

#[test]
fn a_burst_is_found_wherever_it_is() {
    check(
        &[
            (0, 0, "a"),
            (0, 5_000, "b"),
            (0, 5_100, "c"),
            (0, 5_200, "d"),
            (0, 9_000, "e"),
        ],
        999,
        3,
    );
    check(&[(0, 7, "a"), (0, 7, "b")], 0, 2);
    check(&[], 1_000, 0);
}

#[test]
fn windows_are_per_connection() {
    check(
        &[(0, 0, "a"), (1, 100, "b"), (0, 1_500, "c"), (1, 1_600, "d")],
        999,
        1,
    );
}

#[test]
fn a_filter_keeps_only_the_chosen_starts() {
    let stats = stats(&[
        (0, 0, "live-1"),
        (0, 10, "bg-1"),
        (0, 20, "live-2"),
        (0, 1_010, "bg-2"),
    ]);
    let background = |s: &QueryStart| s.subscription_id.starts_with("bg-");
    assert_eq!(
        stats.most_starts_within_by(Duration::from_millis(999), background),
        1
    );
    assert_eq!(stats.most_starts_within(Duration::from_millis(999)), 3);
}

#[test]
fn totals_add_up_over_kinds_and_connections() {
    let mut stats = stats(&[(0, 0, "a"), (1, 0, "b")]);
    stats.starts[1].kind = StartKind::NegOpen;
    stats.refusals.insert(RefusalKind::Policy, 2);
    stats.refusals.insert(RefusalKind::TooManyQueries, 1);
    stats.per_connection[0].events_sent = 3;
    stats.per_connection[1].events_sent = 4;
    stats.per_connection[1].peak_subscriptions = 5;
    assert_eq!(stats.connections(), 2);
    assert_eq!(stats.req_starts().count(), 1);
    assert_eq!(stats.neg_opens(), 1);
    assert_eq!(stats.refusals_of(RefusalKind::Policy), 2);
    assert_eq!(stats.refusals_of(RefusalKind::TooManyFilters), 0);
    assert_eq!(stats.total_refusals(), 3);
    assert_eq!(stats.events_sent(), 7);
    assert_eq!(stats.peak_open_subscriptions(), 5);
}

#[test]
fn an_event_sent_twice_on_one_connection_is_a_duplicate_but_not_across_connections() {
    let recorder = super::Recorder::default();
    let first = recorder.open_connection();
    let second = recorder.open_connection();
    recorder.event_sent(first, Some("a".to_owned()));
    recorder.event_sent(first, Some("b".to_owned()));
    recorder.event_sent(first, Some("a".to_owned()));
    recorder.event_sent(second, Some("a".to_owned()));
    recorder.event_sent(second, None);
    let stats = recorder.snapshot();
    assert_eq!(stats.events_sent(), 5);
    assert_eq!(stats.duplicate_events(), 1);
    assert_eq!(stats.per_connection[0].duplicate_events, 1);
}

#[test]
fn a_frame_is_counted_under_its_verb_and_anything_else_under_other() {
    for (frame, verb) in [
        (r#"["REQ","a",{}]"#, "REQ"),
        (r#" [ "NEG-OPEN","n",{},"61"]"#, "NEG-OPEN"),
        (r#"["EOSE","a"]"#, "EOSE"),
        (r#"["NEG-MSG","n","61"]"#, "NEG-MSG"),
        (r#"["HELLO"]"#, "other"),
        ("not json", "other"),
        ("", "other"),
        (r#"[1,"REQ"]"#, "other"),
    ] {
        assert_eq!(frame_verb(frame), verb, "{frame}");
    }
}
