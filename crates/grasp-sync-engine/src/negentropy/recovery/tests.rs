//! Tests of missing-event recovery, one per rule, with explicit instants, and a property test
//! of its two invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use grasp_sync_model::RelayUrl;
use nostr::EventId;
use proptest::prelude::*;

use super::{MissingEventRecovery, RecoveryAttempt, RecoveryConfig, RecoveryExpiry};

fn id(n: u32) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..4].copy_from_slice(&n.to_be_bytes());
    EventId::from_byte_array(bytes)
}

fn ids(range: std::ops::Range<u32>) -> Vec<EventId> {
    range.map(id).collect()
}

fn relay(name: &str) -> RelayUrl {
    RelayUrl::parse(&format!("wss://{name}.test")).expect("relay url")
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// An index with `ids` pending at relay `a`, registered at `t0`.
fn with_pending(t0: Instant, pending: Vec<EventId>) -> MissingEventRecovery {
    let mut recovery = MissingEventRecovery::default();
    recovery.handle_failed_batch(&relay("a"), pending, t0);
    recovery
}

/// Polls at `now` and checks which attempt (if any) comes out.
fn check_attempt(
    recovery: &mut MissingEventRecovery,
    now: Instant,
    expected: Option<(&str, Vec<EventId>)>,
) {
    let expected = expected.map(|(name, ids)| RecoveryAttempt {
        relay: relay(name),
        ids,
    });
    assert_eq!(recovery.poll_attempt(now), expected);
}

/// Runs `n` zero-progress attempts starting at `now`, each as soon as due; returns the instant
/// of the last result.
fn fail_attempts(recovery: &mut MissingEventRecovery, mut now: Instant, n: u32) -> Instant {
    for _ in 0..n {
        now = recovery.poll_timeout().expect("an attempt is scheduled");
        let attempt = recovery.poll_attempt(now).expect("attempt due");
        recovery.handle_attempt_result(&attempt.relay, [], now);
    }
    now
}

#[test]
fn first_attempt_waits_the_30_second_base_backoff() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..3));
    assert_eq!(recovery.poll_timeout(), Some(t0 + secs(30)));
    check_attempt(&mut recovery, t0 + secs(29), None);
    check_attempt(&mut recovery, t0 + secs(30), Some(("a", ids(0..3))));
}

#[test]
fn zero_progress_attempts_double_the_backoff_up_to_15_minutes() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..3));
    let mut now = t0 + secs(30);
    let mut waits = Vec::new();
    for _ in 0..8 {
        let attempt = recovery.poll_attempt(now).expect("attempt due");
        recovery.handle_attempt_result(&attempt.relay, [], now);
        let next = recovery.poll_timeout().expect("next attempt");
        waits.push((next - now).as_secs());
        now = next;
    }
    assert_eq!(waits, [60, 120, 240, 480, 900, 900, 900, 900]);
}

#[test]
fn one_attempt_in_flight_per_relay() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..600));
    let now = t0 + secs(30);
    assert!(recovery.poll_attempt(now).is_some());
    assert!(recovery.in_flight(&relay("a")));
    // Due or not, nothing more for this relay until the result is in; no timer either.
    check_attempt(&mut recovery, now + secs(3_600), None);
    assert_eq!(recovery.poll_timeout(), None);
}

#[test]
fn attempts_carry_at_most_300_ids_and_take_turns_over_the_pending_set() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..700));
    let mut now = t0 + secs(30);
    let mut asked = BTreeSet::new();
    for _ in 0..3 {
        let attempt = recovery.poll_attempt(now).expect("attempt due");
        assert!(attempt.ids.len() <= 300);
        asked.extend(attempt.ids.iter().copied());
        recovery.handle_attempt_result(&attempt.relay, [], now);
        now = recovery.poll_timeout().expect("next");
    }
    // Three attempts without progress still asked for every pending ID.
    assert_eq!(asked.len(), 700);
}

#[test]
fn an_attempt_of_300_ids_is_one_exact_id_filter() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..300));
    let attempt = recovery.poll_attempt(t0 + secs(30)).expect("attempt");
    let filters = attempt
        .filters(&grasp_sync_filters::FilterBudget::default())
        .expect("filters");
    assert_eq!(filters.len(), 1);
    let in_filter: Vec<EventId> = filters[0]
        .filter
        .ids
        .as_ref()
        .expect("ids filter")
        .iter()
        .copied()
        .collect();
    assert_eq!(in_filter, ids(0..300));
}

#[test]
fn progress_clears_only_recovered_ids_and_resets_the_backoff() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..10));
    let now = fail_attempts(&mut recovery, t0, 3);
    let attempt = recovery.poll_attempt(now + secs(480)).expect("attempt due");
    let at = now + secs(480);
    recovery.handle_attempt_result(&attempt.relay, ids(0..4), at);
    assert_eq!(recovery.pending_ids(&relay("a")), ids(4..10));
    assert_eq!(recovery.recovered_total(), 4);
    // Back to the base wait, and the zero-progress count starts over.
    assert_eq!(recovery.poll_timeout(), Some(at + secs(30)));
    let later = fail_attempts(&mut recovery, at, 11);
    assert_eq!(recovery.pending(&relay("a")), 6);
    assert!(later > at);
}

#[test]
fn an_attempt_that_recovers_all_it_asked_for_lets_the_next_start_at_once() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..450));
    let now = t0 + secs(30);
    let attempt = recovery.poll_attempt(now).expect("attempt due");
    assert_eq!(attempt.ids, ids(0..300));
    recovery.handle_attempt_result(&attempt.relay, attempt.ids.clone(), now);
    assert_eq!(recovery.poll_timeout(), Some(now));
    check_attempt(&mut recovery, now, Some(("a", ids(300..450))));
}

#[test]
fn duplicate_incomplete_responses_merge_into_the_pending_set() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..5));
    recovery.handle_failed_batch(&relay("a"), ids(3..8), t0 + secs(10));
    assert_eq!(recovery.pending_ids(&relay("a")), ids(0..8));
    // Merging keeps the schedule already set.
    assert_eq!(recovery.poll_timeout(), Some(t0 + secs(30)));
}

#[test]
fn ids_known_by_other_means_are_cleared_without_an_attempt() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..5));
    recovery.handle_failed_batch(&relay("b"), ids(3..6), t0);
    recovery.handle_known(ids(2..4));
    assert_eq!(recovery.pending_ids(&relay("a")), [id(0), id(1), id(4)]);
    assert_eq!(recovery.pending_ids(&relay("b")), ids(4..6));
    assert_eq!(recovery.poll_timeout(), Some(t0 + secs(30)));
    assert!(!recovery.in_flight(&relay("a")));
}

#[test]
fn twelve_zero_progress_attempts_drop_the_relays_pending_ids_with_an_expiry() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..5));
    fail_attempts(&mut recovery, t0, 11);
    assert_eq!(recovery.pending(&relay("a")), 5);
    assert_eq!(recovery.poll_expiry(), None);
    fail_attempts(&mut recovery, t0, 1);
    assert_eq!(recovery.pending(&relay("a")), 0);
    assert_eq!(
        recovery.poll_expiry(),
        Some(RecoveryExpiry {
            relay: relay("a"),
            ids: ids(0..5),
        })
    );
    assert_eq!(recovery.expired_total(), 5);
    // An expiry is not a recovery.
    assert_eq!(recovery.poll_promotion(), None);
    assert_eq!(recovery.poll_timeout(), None);
}

#[test]
fn attempts_against_a_disconnected_relay_are_deferred_and_not_counted() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..5));
    // Eleven failures: one more counted attempt would expire the relay.
    let now = fail_attempts(&mut recovery, t0, 11);
    let attempt = recovery
        .poll_attempt(recovery.poll_timeout().expect("due"))
        .expect("attempt");
    // The connection drops with the attempt in flight: lost, not counted.
    recovery.handle_disconnected(&attempt.relay);
    assert!(!recovery.in_flight(&relay("a")));
    // Nothing is due while disconnected, and no timer spins.
    let far = now + secs(86_400);
    check_attempt(&mut recovery, far, None);
    assert_eq!(recovery.poll_timeout(), None);
    // Back up: the deferred attempt runs at once, and the relay has not expired.
    recovery.handle_connected(&relay("a"));
    assert_eq!(recovery.pending(&relay("a")), 5);
    let attempt = recovery.poll_attempt(far).expect("deferred attempt");
    recovery.handle_attempt_result(&attempt.relay, [id(0)], far);
    assert_eq!(recovery.pending(&relay("a")), 4);
    assert_eq!(recovery.poll_expiry(), None);
}

#[test]
fn a_failed_batch_of_a_disconnected_relay_waits_for_the_connection() {
    let t0 = Instant::now();
    let mut recovery = MissingEventRecovery::default();
    recovery.handle_disconnected(&relay("a"));
    recovery.handle_failed_batch(&relay("a"), ids(0..2), t0);
    check_attempt(&mut recovery, t0 + secs(60), None);
    recovery.handle_connected(&relay("a"));
    check_attempt(&mut recovery, t0 + secs(60), Some(("a", ids(0..2))));
}

#[test]
fn full_recovery_without_unrelated_failures_promotes_the_relay() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..4));
    let now = t0 + secs(30);
    let attempt = recovery.poll_attempt(now).expect("attempt");
    recovery.handle_attempt_result(&attempt.relay, ids(0..2), now);
    assert_eq!(recovery.poll_promotion(), None);
    recovery.handle_known(ids(2..4));
    assert_eq!(recovery.poll_promotion(), Some(relay("a")));
    assert_eq!(recovery.poll_promotion(), None);
    assert_eq!(recovery.recovered_total(), 4);
}

#[test]
fn full_recovery_with_an_attempt_in_flight_promotes_once_the_attempt_ends() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..4));
    let now = t0 + secs(30);
    let attempt = recovery.poll_attempt(now).expect("attempt");
    recovery.handle_known(ids(0..4));
    assert_eq!(recovery.poll_promotion(), None);
    // A new failed batch may not start a second attempt while the first is out.
    recovery.handle_failed_batch(&relay("a"), [id(9)], now);
    check_attempt(&mut recovery, now + secs(60), None);
    recovery.handle_attempt_result(&attempt.relay, [], now + secs(1));
    assert_eq!(recovery.pending_ids(&relay("a")), [id(9)]);
    recovery.handle_known([id(9)]);
    assert_eq!(recovery.poll_promotion(), Some(relay("a")));
}

#[test]
fn an_unrelated_failure_blocks_promotion_until_historic_sync_restarts() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..2));
    recovery.handle_unrelated_failure(&relay("a"));
    recovery.handle_known(ids(0..2));
    assert_eq!(recovery.poll_promotion(), None);

    recovery.handle_historic_sync_restarted(&relay("a"));
    recovery.handle_failed_batch(&relay("a"), ids(5..6), t0);
    recovery.handle_known(ids(5..6));
    assert_eq!(recovery.poll_promotion(), Some(relay("a")));
}

#[test]
fn one_relay_does_not_hold_up_another() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..2));
    recovery.handle_failed_batch(&relay("b"), ids(2..4), t0);
    let now = t0 + secs(30);
    let first = recovery.poll_attempt(now).expect("first relay");
    let second = recovery.poll_attempt(now).expect("second relay");
    assert_ne!(first.relay, second.relay);
    assert_eq!(recovery.poll_attempt(now), None);
}

#[test]
fn a_stale_result_clears_what_it_delivered_without_counting_as_an_attempt() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..3));
    fail_attempts(&mut recovery, t0, 11);
    let attempt = recovery
        .poll_attempt(recovery.poll_timeout().expect("due"))
        .expect("attempt");
    recovery.handle_disconnected(&attempt.relay);
    recovery.handle_connected(&attempt.relay);
    recovery.handle_attempt_result(&attempt.relay, [id(0)], t0);
    assert_eq!(recovery.pending_ids(&relay("a")), ids(1..3));
    assert_eq!(recovery.poll_expiry(), None);
}

#[test]
fn sub_second_tuning_applies() {
    let t0 = Instant::now();
    let mut recovery = MissingEventRecovery::new(RecoveryConfig {
        base_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(400),
        max_ids_per_attempt: 2,
        max_zero_progress_attempts: 3,
        ..RecoveryConfig::default()
    });
    recovery.handle_failed_batch(&relay("a"), ids(0..5), t0);
    assert_eq!(
        recovery.poll_timeout(),
        Some(t0 + Duration::from_millis(100))
    );
    let attempt = recovery
        .poll_attempt(t0 + Duration::from_millis(100))
        .expect("attempt");
    assert_eq!(attempt.ids.len(), 2);
    recovery.handle_attempt_result(&attempt.relay, [], t0);
    fail_attempts(&mut recovery, t0, 2);
    assert_eq!(recovery.poll_expiry().map(|e| e.ids.len()), Some(5));
}

/// One input to the index in the property test.
#[derive(Debug, Clone)]
enum Op {
    FailedBatch(u8, Vec<u32>),
    Poll,
    Result(u8, Vec<u32>),
    Known(Vec<u32>),
    Connected(u8),
    Disconnected(u8),
    Unrelated(u8),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let relay = 0u8..3;
    let some_ids = || proptest::collection::vec(0u32..400, 0..40);
    prop_oneof![
        (relay.clone(), some_ids()).prop_map(|(r, i)| Op::FailedBatch(r, i)),
        Just(Op::Poll),
        Just(Op::Poll),
        (relay.clone(), some_ids()).prop_map(|(r, i)| Op::Result(r, i)),
        some_ids().prop_map(Op::Known),
        relay.clone().prop_map(Op::Connected),
        relay.clone().prop_map(Op::Disconnected),
        relay.prop_map(Op::Unrelated),
        (0u64..2_000).prop_map(Op::Advance),
    ]
}

fn relay_n(n: u8) -> RelayUrl {
    relay(&format!("r{n}"))
}

fn snapshot(recovery: &MissingEventRecovery) -> BTreeMap<u8, BTreeSet<EventId>> {
    (0..3)
        .map(|n| (n, recovery.pending_ids(&relay_n(n)).into_iter().collect()))
        .collect()
}

proptest! {
    /// Pending IDs grow only through `handle_failed_batch`, and no relay ever has two attempts
    /// out at once (an attempt ends with its result or its connection).
    #[test]
    fn pending_grows_only_by_failed_batches_and_one_attempt_per_relay(
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let t0 = Instant::now();
        let mut now = t0;
        let mut recovery = MissingEventRecovery::default();
        let mut outstanding: BTreeSet<RelayUrl> = BTreeSet::new();
        for op in ops {
            let before = snapshot(&recovery);
            let grows = matches!(op, Op::FailedBatch(..));
            match op {
                Op::FailedBatch(r, i) => {
                    recovery.handle_failed_batch(&relay_n(r), i.into_iter().map(id), now);
                }
                Op::Poll => {
                    while let Some(attempt) = recovery.poll_attempt(now) {
                        prop_assert!(outstanding.insert(attempt.relay.clone()), "second attempt");
                        prop_assert!(!attempt.ids.is_empty() && attempt.ids.len() <= 300);
                        let pending: BTreeSet<EventId> =
                            recovery.pending_ids(&attempt.relay).into_iter().collect();
                        prop_assert!(attempt.ids.iter().all(|id| pending.contains(id)));
                    }
                }
                Op::Result(r, i) => {
                    outstanding.remove(&relay_n(r));
                    recovery.handle_attempt_result(&relay_n(r), i.into_iter().map(id), now);
                }
                Op::Known(i) => recovery.handle_known(i.into_iter().map(id)),
                Op::Connected(r) => recovery.handle_connected(&relay_n(r)),
                Op::Disconnected(r) => {
                    outstanding.remove(&relay_n(r));
                    recovery.handle_disconnected(&relay_n(r));
                }
                Op::Unrelated(r) => recovery.handle_unrelated_failure(&relay_n(r)),
                Op::Advance(s) => now += Duration::from_secs(s),
            }
            let after = snapshot(&recovery);
            if !grows {
                for (relay, ids) in &after {
                    prop_assert!(ids.is_subset(&before[relay]), "pending grew at r{relay}");
                }
            }
            for n in 0..3 {
                let relay = relay_n(n);
                prop_assert_eq!(recovery.in_flight(&relay), outstanding.contains(&relay));
            }
            if let Some(at) = recovery.poll_timeout() {
                // A reported deadline always yields an attempt once reached.
                let mut probe = recovery.clone();
                prop_assert!(probe.poll_attempt(at.max(now)).is_some());
            }
        }
    }
}

#[test]
fn a_relay_holds_at_most_its_cap_of_pending_ids_and_the_rest_expire() {
    let t0 = Instant::now();
    let mut recovery = MissingEventRecovery::new(RecoveryConfig {
        max_pending_per_relay: 100,
        ..RecoveryConfig::default()
    });
    recovery.handle_failed_batch(&relay("a"), ids(0..80), t0);
    recovery.handle_failed_batch(&relay("a"), ids(50..150), t0);
    assert_eq!(recovery.pending(&relay("a")), 100);
    assert_eq!(recovery.pending_ids(&relay("a")), ids(0..100));
    assert_eq!(
        recovery.poll_expiry(),
        Some(RecoveryExpiry {
            relay: relay("a"),
            ids: ids(100..150),
        })
    );
    assert_eq!(recovery.expired_total(), 50);
}

#[test]
fn a_retired_relay_is_forgotten() {
    let t0 = Instant::now();
    let mut recovery = with_pending(t0, ids(0..10));
    recovery.handle_disconnected(&relay("a"));
    recovery.handle_unrelated_failure(&relay("a"));
    recovery.handle_retired(&relay("a"));
    assert_eq!(recovery.total_pending(), 0);
    assert_eq!(recovery.poll_timeout(), None);
    // Coming back, it starts from nothing.
    recovery.handle_connected(&relay("a"));
    assert_eq!(recovery.poll_attempt(t0 + secs(3_600)), None);
}
