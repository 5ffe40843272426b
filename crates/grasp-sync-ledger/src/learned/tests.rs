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
            filter_ceiling_known: true,
            retained_byte_cap: Some(9_000),
        }
    );
}

#[test]
fn limits_restored_from_memory_start_every_session_where_the_refusals_left_them() {
    let now = Instant::now();
    let remembered = RememberedLimits {
        filter_ceiling: Some(3),
        filter_ceiling_known: true,
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
        ..RememberedLimits::default()
    });
    assert_eq!(odd.filter_ceiling(), 1);
    let high = LearnedLimits::remembered(RememberedLimits {
        filter_ceiling: Some(50),
        ..RememberedLimits::default()
    });
    assert_eq!(high.filter_ceiling(), INITIAL_FILTER_CEILING);
    assert_eq!(
        LearnedLimits::remembered(RememberedLimits::default()),
        LearnedLimits::new()
    );
}

#[test]
fn the_ceiling_is_known_once_advertised_in_the_session_or_stated_by_a_refusal() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    assert!(!limits.ceiling_known(), "the initial ceiling is a guess");
    limits.handle_advertised_filter_limit(50);
    assert!(limits.ceiling_known());
    limits.new_session(now);
    assert!(!limits.ceiling_known(), "every session reads NIP-11 again");
    let _ = limits.handle_filter_count_refusal(now, Some(4));
    assert_eq!(limits.filter_ceiling(), 3);
    assert!(
        limits.ceiling_known(),
        "one below the size the refusal named"
    );
    limits.new_session(now);
    assert!(
        !limits.ceiling_known(),
        "the session starts at the initial ceiling again, a guess"
    );
    let restored = LearnedLimits::remembered(limits.to_remember());
    assert_eq!(restored.filter_ceiling(), 3);
    assert!(
        restored.ceiling_known(),
        "a later process starts at it, known"
    );
}

/// What one step does to fresh limits, in order.
enum Step {
    Refused(Option<usize>),
    Accepted(usize),
    NewSession,
}

/// Feeds `steps` to fresh limits; after each, the ceiling, whether it is known, and the
/// trusted ceiling.
fn check_known(steps: &[Step], expected: &[(usize, bool, Option<usize>)]) {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    let seen: Vec<_> = steps
        .iter()
        .map(|step| {
            match step {
                Step::Refused(size) => {
                    let _ = limits.handle_filter_count_refusal(now, *size);
                }
                Step::Accepted(filters) => limits.handle_accepted_req(*filters),
                Step::NewSession => limits.new_session(now),
            }
            (
                limits.filter_ceiling(),
                limits.ceiling_known(),
                limits.trusted_filter_ceiling(),
            )
        })
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn an_accepted_req_proves_its_filter_count_for_the_session() {
    use Step::*;
    check_known(
        &[
            Accepted(1),
            Accepted(4),
            Accepted(3),
            NewSession,
            Accepted(2),
        ],
        &[
            (10, false, Some(1)),
            (10, false, Some(4)),
            (10, false, Some(4)),
            (10, false, None),
            (10, false, Some(2)),
        ],
    );
    check_known(&[Accepted(10)], &[(10, true, Some(10))]);
}

#[test]
fn a_ladder_step_is_a_guess_until_a_req_that_large_is_accepted() {
    use Step::*;
    // A NOTICE that names no size: 10 → 5, which may be above a hidden cap of 2.
    check_known(
        &[Refused(None), Accepted(2), Accepted(5)],
        &[(5, false, None), (5, false, Some(2)), (5, true, Some(5))],
    );
    // A named size below the next rung sets the ceiling from it; a rung below it is a guess.
    check_known(&[Refused(Some(4))], &[(3, true, Some(3))]);
    check_known(
        &[Refused(Some(10)), Refused(Some(5))],
        &[(5, false, None), (2, false, None)],
    );
    check_known(&[Refused(Some(6))], &[(5, true, Some(5))]);
}

#[test]
fn the_trusted_ceiling_never_exceeds_the_ceiling() {
    use Step::*;
    // A REQ of 8 was accepted before one was refused for its count: the ceiling is below
    // what was accepted, so it is known, and the trusted ceiling is the ceiling.
    check_known(
        &[Accepted(8), Refused(None)],
        &[(10, false, Some(8)), (5, true, Some(5))],
    );
}

#[test]
fn trusted_pack_limits_pack_at_most_the_trusted_ceiling() {
    let base = PackLimits::default();
    let mut limits = LearnedLimits::new();
    assert_eq!(limits.trusted_pack_limits(base).max_filters_per_req, 1);
    limits.handle_accepted_req(3);
    assert_eq!(limits.trusted_pack_limits(base).max_filters_per_req, 3);
    assert_eq!(
        limits.pack_limits(base).max_filters_per_req,
        INITIAL_FILTER_CEILING.min(base.max_filters_per_req)
    );
    limits.handle_advertised_filter_limit(6);
    assert_eq!(limits.trusted_pack_limits(base).max_filters_per_req, 6);
}

#[test]
fn a_remembered_guess_stays_a_guess_until_proven_and_a_known_ceiling_is_kept_known() {
    let now = Instant::now();
    let mut limits = LearnedLimits::new();
    let _ = limits.handle_filter_count_refusal(now, None);
    assert_eq!(
        limits.to_remember(),
        RememberedLimits {
            filter_ceiling: Some(5),
            filter_ceiling_known: false,
            retained_byte_cap: None,
        }
    );
    let mut restored = LearnedLimits::remembered(limits.to_remember());
    assert_eq!(restored.filter_ceiling(), 5);
    assert!(
        !restored.ceiling_known(),
        "a remembered rung is still a guess"
    );
    assert_eq!(restored.trusted_filter_ceiling(), None);
    restored.handle_accepted_req(5);
    assert!(restored.ceiling_known());
    assert!(restored.to_remember().filter_ceiling_known);
    let mut again = LearnedLimits::remembered(restored.to_remember());
    assert!(
        again.ceiling_known(),
        "proven once, known in later processes"
    );
    again.new_session(now);
    assert!(again.ceiling_known(), "and in each of their sessions");

    // A proof in a later session of the same process makes the lesson known, too.
    limits.new_session(now);
    limits.handle_accepted_req(5);
    assert!(limits.to_remember().filter_ceiling_known);
    // A lower guess, in a session that proved nothing, replaces a known ceiling, and is a guess.
    limits.new_session(now);
    let _ = limits.handle_filter_count_refusal(now, None);
    let _ = limits.handle_filter_count_refusal(now, None);
    assert_eq!(limits.filter_ceiling(), 2);
    assert_eq!(
        limits.to_remember(),
        RememberedLimits {
            filter_ceiling: Some(2),
            filter_ceiling_known: false,
            retained_byte_cap: None,
        }
    );
}
