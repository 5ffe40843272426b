//! Unit tests of the learned limits: the filter-count ladder, the byte cap and its parser.

use std::time::Instant;

use super::*;

/// Feeds refusals of the given group sizes to fresh limits; returns each outcome.
fn check(rejected: &[Option<usize>], expected: &[FilterCountOutcome]) {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    let outcomes: Vec<_> = rejected
        .iter()
        .map(|size| limits.handle_filter_count_refusal(now, *size))
        .collect();
    assert_eq!(outcomes, expected);
}

fn regroup(ceiling: usize) -> FilterCountOutcome {
    FilterCountOutcome::Regroup { ceiling }
}

#[test]
fn filter_ceiling_steps_ten_five_two_one() {
    check(&[None, None, None], &[regroup(5), regroup(2), regroup(1)]);
    check(
        &[Some(10), Some(5), Some(2)],
        &[regroup(5), regroup(2), regroup(1)],
    );
}

#[test]
fn filter_ceiling_jumps_to_rejected_size_minus_one_when_lower() {
    check(&[Some(4)], &[regroup(3)]);
    check(&[Some(3), Some(2)], &[regroup(2), regroup(1)]);
}

#[test]
fn filter_ceiling_never_rises_within_a_session() {
    check(
        &[Some(2), Some(9), None],
        &[
            regroup(1),
            FilterCountOutcome::Policy,
            FilterCountOutcome::Policy,
        ],
    );
    check(&[Some(3), Some(10)], &[regroup(2), regroup(1)]);
}

#[test]
fn one_filter_refusal_is_a_policy_category_not_a_regroup() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert_eq!(
        limits.handle_filter_count_refusal(now, Some(1)),
        FilterCountOutcome::Policy
    );
    assert_eq!(limits.filter_ceiling(), INITIAL_FILTER_CEILING, "unchanged");
}

#[test]
fn filter_ceiling_resets_on_reconnect_but_byte_cap_survives() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    limits.handle_filter_count_refusal(now, Some(3));
    limits.handle_retained_bytes_refusal(now, 200_000);
    limits.new_session(now);
    assert_eq!(limits.filter_ceiling(), INITIAL_FILTER_CEILING);
    assert_eq!(limits.retained_byte_cap(), Some(200_000));
    assert!(limits.serialises_transients());
}

#[test]
fn byte_cap_keeps_the_smallest_value_seen() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    limits.handle_retained_bytes_refusal(now, 300_000);
    limits.handle_retained_bytes_refusal(now, 500_000);
    assert_eq!(limits.retained_byte_cap(), Some(300_000));
}

#[test]
fn persistent_groups_fit_in_cap_minus_one_transient_req() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert_eq!(limits.persistent_byte_budget(98_304), None);
    limits.handle_retained_bytes_refusal(now, 262_144);
    assert_eq!(
        limits.persistent_byte_budget(98_304),
        Some(262_144 - 98_304)
    );
    limits.handle_retained_bytes_refusal(now, 50_000);
    assert_eq!(limits.persistent_byte_budget(98_304), Some(0));
}

#[test]
fn byte_capped_connection_serialises_transient_reqs() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert_eq!(limits.transient_req_cap(), 5);
    limits.handle_retained_bytes_refusal(now, 100_000);
    assert_eq!(limits.transient_req_cap(), 1);
}

#[test]
fn retained_bytes_refusal_text_is_parsed() {
    for (text, expected) in [
        (
            "active subscriptions exceed max size 262144 bytes",
            Some(262_144),
        ),
        (
            "error: active subscriptions exceed max size 1000 bytes",
            Some(1000),
        ),
        ("active subscriptions exceed max size bytes", None),
        ("active subscriptions exceed max size 12 kilobytes", None),
        ("rate-limited: too many queries", None),
        ("", None),
        (
            "active subscriptions exceed max size 99999999999999999999999999 bytes",
            None,
        ),
    ] {
        assert_eq!(parse_retained_bytes_refusal(text), expected, "{text:?}");
    }
}

#[test]
fn an_advertised_filter_limit_lowers_the_session_ceiling_and_never_raises_it() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    limits.handle_advertised_filter_limit(3);
    assert_eq!(limits.filter_ceiling(), 3);
    limits.handle_advertised_filter_limit(50);
    assert_eq!(limits.filter_ceiling(), 3);
    limits.handle_advertised_filter_limit(0);
    assert_eq!(limits.filter_ceiling(), 1);
    limits.new_session(now);
    assert_eq!(limits.filter_ceiling(), INITIAL_FILTER_CEILING);
}

#[test]
fn remembered_limits_keep_the_lowest_refused_ceiling_and_the_byte_cap() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert!(limits.to_remember().is_empty());
    // An advertised limit is read again by every session: not remembered.
    limits.handle_advertised_filter_limit(4);
    assert!(limits.to_remember().is_empty());
    limits.new_session(now);
    limits.handle_filter_count_refusal(now, Some(4));
    assert_eq!(limits.filter_ceiling(), 3);
    limits.new_session(now);
    limits.handle_filter_count_refusal(now, Some(10));
    assert_eq!(limits.filter_ceiling(), 5);
    limits.handle_retained_bytes_refusal(now, 9_000);
    assert_eq!(
        limits.to_remember(),
        RememberedLimits {
            filter_ceiling: Some(3),
            retained_byte_cap: Some(9_000),
        }
    );
}

#[test]
fn limits_restored_from_memory_start_every_session_where_the_refusals_left_them() {
    let now = Instant::now();
    let remembered = RememberedLimits {
        filter_ceiling: Some(3),
        retained_byte_cap: Some(9_000),
    };
    let mut limits = LearnedLimits::remembered(remembered);
    assert_eq!(limits.filter_ceiling(), 3);
    assert_eq!(limits.retained_byte_cap(), Some(9_000));
    assert!(limits.serialises_transients());
    limits.new_session(now);
    assert_eq!(limits.filter_ceiling(), 3);
    assert_eq!(limits.to_remember(), remembered);
    // A further refusal still lowers it, and that is what is kept.
    assert_eq!(
        limits.handle_filter_count_refusal(now, Some(3)),
        FilterCountOutcome::Regroup { ceiling: 2 }
    );
    assert_eq!(limits.to_remember().filter_ceiling, Some(2));
    // Nonsense from a damaged record stays within the ladder.
    let odd = LearnedLimits::remembered(RememberedLimits {
        filter_ceiling: Some(0),
        retained_byte_cap: None,
    });
    assert_eq!(odd.filter_ceiling(), 1);
    let high = LearnedLimits::remembered(RememberedLimits {
        filter_ceiling: Some(50),
        retained_byte_cap: None,
    });
    assert_eq!(high.filter_ceiling(), INITIAL_FILTER_CEILING);
    assert_eq!(
        LearnedLimits::remembered(RememberedLimits::default()),
        LearnedLimits::new()
    );
}

#[test]
fn the_ceiling_is_known_once_advertised_in_the_session_or_taught_by_a_refusal() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert!(!limits.ceiling_known(), "the initial ceiling is a guess");
    limits.handle_advertised_filter_limit(50);
    assert!(limits.ceiling_known());
    limits.new_session(now);
    assert!(!limits.ceiling_known(), "every session reads NIP-11 again");
    let _ = limits.handle_filter_count_refusal(now, Some(4));
    limits.new_session(now);
    assert!(
        limits.ceiling_known(),
        "a refusal's lesson outlives the session"
    );
    let restored = LearnedLimits::remembered(limits.to_remember());
    assert!(restored.ceiling_known(), "and the process");
}
