//! The capped exponential formula and the jitter bounds of [`BackoffPolicy`].

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::{BackoffPolicy, HealthError};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn delay_is_base_times_two_to_attempt_minus_one_capped() {
    let policy = BackoffPolicy::new(secs(5), secs(3600)).unwrap();
    let now = Instant::now();
    let delays: Vec<u64> = (1..=12).map(|n| policy.delay(n, now).as_secs()).collect();
    assert_eq!(
        delays,
        vec![5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
    );
    assert_eq!(policy.delay(0, now), secs(5));
    assert_eq!(policy.delay(u32::MAX, now), secs(3600));
}

#[test]
fn sub_second_bases_are_exact() {
    let policy = BackoffPolicy::new(Duration::from_millis(250), secs(2)).unwrap();
    let now = Instant::now();
    let delays: Vec<u128> = (1..=5).map(|n| policy.delay(n, now).as_millis()).collect();
    assert_eq!(delays, vec![250, 500, 1000, 2000, 2000]);
}

#[test]
fn invalid_policies_are_errors() {
    assert_eq!(
        BackoffPolicy::new(Duration::ZERO, secs(1)),
        Err(HealthError::ZeroDuration {
            field: "backoff base"
        })
    );
    assert_eq!(
        BackoffPolicy::new(secs(2), secs(1)),
        Err(HealthError::BaseExceedsCap { field: "backoff" })
    );
}

#[test]
fn zero_jitter_is_the_exact_formula() {
    let policy = BackoffPolicy::new(secs(5), secs(3600)).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let now = Instant::now();
    assert_eq!(policy.jittered(3, 0, &mut rng, now), secs(20));
}

proptest! {
    #[test]
    fn delay_never_exceeds_the_cap_and_never_shrinks(
        base_ms in 1u64..100_000,
        extra_ms in 0u64..10_000_000,
        attempt in 1u32..200,
    ) {
        let cap = Duration::from_millis(base_ms + extra_ms);
        let policy = BackoffPolicy::new(Duration::from_millis(base_ms), cap).unwrap();
        let now = Instant::now();
        let this = policy.delay(attempt, now);
        let next = policy.delay(attempt + 1, now);
        prop_assert!(this <= cap);
        prop_assert!(next >= this);
        prop_assert!(this >= Duration::from_millis(base_ms));
    }

    #[test]
    fn jitter_stays_within_its_share_below_the_formula(
        seed in any::<u64>(),
        percent in 0u8..=100,
        attempt in 1u32..30,
    ) {
        let policy = BackoffPolicy::new(secs(5), secs(3600)).unwrap();
        let now = Instant::now();
        let nominal = policy.delay(attempt, now);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let jittered = policy.jittered(attempt, percent, &mut rng, now);
        prop_assert!(jittered <= nominal);
        prop_assert!(jittered >= nominal - nominal * u32::from(percent) / 100);
    }
}
