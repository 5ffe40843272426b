//! Unit tests of the pacing gates, in simulated time: the test steps the instants itself.

use std::time::{Duration, Instant};

use super::*;

/// Drives `count` starts of `kind` through `poll`, stepping simulated time to every
/// `NotBefore` answer; returns the instants the starts happened at.
fn drive(
    start: Instant,
    count: usize,
    mut poll: impl FnMut(Instant) -> StartDecision,
) -> Vec<Instant> {
    let mut now = start;
    let mut started = Vec::new();
    let mut steps = 0;
    while started.len() < count {
        steps += 1;
        assert!(steps < count * 4 + 10, "gate livelocked");
        match poll(now) {
            StartDecision::Ready => started.push(now),
            StartDecision::NotBefore(at) => {
                assert!(at > now, "NotBefore must lie in the future");
                now = at;
            }
            StartDecision::Rejected(reason) => panic!("unexpected rejection {reason:?}"),
        }
    }
    started
}

fn gaps(starts: &[Instant]) -> Vec<Duration> {
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn sixty_background_starts_take_at_least_fifty_nine_seconds() {
    let start = Instant::now();
    let mut gate = BackgroundGate::new(start);
    let starts = drive(start, 60, |now| gate.poll_start(now, StartKind::Historic));
    assert_eq!(starts[0], start, "the first start is immediate");
    assert!(starts[59] - start >= Duration::from_secs(59));
    assert!(gaps(&starts).iter().all(|gap| *gap >= BACKGROUND_INTERVAL));
}

#[test]
fn background_gate_is_shared_by_every_non_urgent_kind() {
    let start = Instant::now();
    let mut gate = BackgroundGate::new(start);
    assert_eq!(
        gate.poll_start(start, StartKind::Pagination),
        StartDecision::Ready
    );
    for kind in [
        StartKind::Historic,
        StartKind::Dependency,
        StartKind::Hydration,
        StartKind::Retry,
        StartKind::NegentropyRound,
    ] {
        assert_eq!(
            gate.poll_start(start, kind),
            StartDecision::NotBefore(start + BACKGROUND_INTERVAL),
            "{kind:?}"
        );
    }
}

#[test]
fn live_starts_bypass_the_background_gate() {
    let start = Instant::now();
    let mut gate = BackgroundGate::new(start);
    assert_eq!(
        gate.poll_start(start, StartKind::Historic),
        StartDecision::Ready
    );
    for _ in 0..100 {
        assert_eq!(
            gate.poll_start(start, StartKind::Live),
            StartDecision::Ready
        );
    }
    assert_eq!(
        gate.poll_start(start, StartKind::Historic),
        StartDecision::NotBefore(start + BACKGROUND_INTERVAL)
    );
}

#[test]
fn reactive_gate_is_inactive_until_a_query_rate_refusal() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    for kind in [
        StartKind::Live,
        StartKind::Historic,
        StartKind::NegentropyRound,
    ] {
        for _ in 0..50 {
            assert_eq!(gate.poll_start(start, kind), StartDecision::Ready);
        }
    }
    assert_eq!(gate.interval(), None);
    assert!(gate.nip77_allowed());
}

#[test]
fn reactive_cooldown_rejects_queued_starts_for_sixty_five_seconds() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    gate.handle_query_rate_refusal(start);
    let until = start + REACTIVE_COOLDOWN;
    assert_eq!(gate.poll_timeout(), Some(until));
    for (at, kind) in [
        (start, StartKind::Live),
        (until - Duration::from_millis(1), StartKind::Retry),
    ] {
        assert_eq!(
            gate.poll_start(at, kind),
            StartDecision::Rejected(GateRejection::Cooldown { until })
        );
    }
    assert_eq!(
        gate.poll_start(until, StartKind::Live),
        StartDecision::Ready
    );
}

#[test]
fn reactive_gate_spaces_every_start_including_live_by_600_ms() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    gate.handle_query_rate_refusal(start);
    let open = start + REACTIVE_COOLDOWN;
    let starts = drive(open, 10, |now| gate.poll_start(now, StartKind::Live));
    assert_eq!(gaps(&starts), vec![REACTIVE_INITIAL_INTERVAL; 9]);
}

#[test]
fn reactive_spacing_doubles_per_distinct_episode_and_caps_at_ten_seconds() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    let mut now = start;
    let mut observed = Vec::new();
    for _ in 0..7 {
        gate.handle_query_rate_refusal(now);
        now += REACTIVE_COOLDOWN;
        let starts = drive(now, 3, |t| gate.poll_start(t, StartKind::Historic));
        let spacing = gaps(&starts);
        assert_eq!(spacing[0], spacing[1]);
        observed.push(spacing[0]);
        now = *starts.last().expect("three starts");
    }
    let ms = |n| Duration::from_millis(n);
    assert_eq!(
        observed,
        vec![
            ms(600),
            ms(1200),
            ms(2400),
            ms(4800),
            ms(9600),
            ms(10_000),
            ms(10_000)
        ]
    );
    assert_eq!(gate.episodes(), 7);
}

#[test]
fn refusals_during_a_cooldown_are_one_episode() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    gate.handle_query_rate_refusal(start);
    gate.handle_query_rate_refusal(start + Duration::from_secs(10));
    gate.handle_query_rate_refusal(start + Duration::from_secs(64));
    assert_eq!(gate.episodes(), 1);
    assert_eq!(gate.interval(), Some(REACTIVE_INITIAL_INTERVAL));
    assert_eq!(
        gate.poll_timeout(),
        Some(start + REACTIVE_COOLDOWN),
        "not extended"
    );
}

#[test]
fn query_rate_refusal_disables_nip77_for_the_session() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    gate.handle_query_rate_refusal(start);
    let much_later = start + Duration::from_secs(3600);
    assert!(!gate.nip77_allowed());
    assert_eq!(
        gate.poll_start(much_later, StartKind::NegentropyRound),
        StartDecision::Rejected(GateRejection::Nip77Disabled)
    );
    assert_eq!(
        gate.poll_start(much_later, StartKind::Historic),
        StartDecision::Ready
    );
}

#[test]
fn both_gates_reset_with_a_new_session() {
    let start = Instant::now();
    let mut background = BackgroundGate::new(start);
    let mut reactive = ReactiveGate::new(start);
    assert_eq!(
        background.poll_start(start, StartKind::Historic),
        StartDecision::Ready
    );
    reactive.handle_query_rate_refusal(start);
    let reconnect = start + Duration::from_millis(100);
    background.new_session(reconnect);
    reactive.new_session(reconnect);
    assert_eq!(
        background.poll_start(reconnect, StartKind::Historic),
        StartDecision::Ready
    );
    assert_eq!(
        reactive.poll_start(reconnect, StartKind::NegentropyRound),
        StartDecision::Ready
    );
    assert_eq!((reactive.interval(), reactive.episodes()), (None, 0));
}

#[test]
fn reactive_cooldown_can_end_when_the_caller_says() {
    let start = Instant::now();
    let mut gate = ReactiveGate::new(start);
    let until = start + Duration::from_secs(3);
    gate.handle_query_rate_refusal_until(start, until);
    assert_eq!(gate.poll_timeout(), Some(until));
    assert!(!gate.nip77_allowed());
    assert_eq!(
        gate.poll_start(until - Duration::from_millis(1), StartKind::Live),
        StartDecision::Rejected(GateRejection::Cooldown { until })
    );
    assert_eq!(
        gate.poll_start(until, StartKind::Live),
        StartDecision::Ready
    );
    assert_eq!(gate.interval(), Some(REACTIVE_INITIAL_INTERVAL));
}
