//! One test per health transition and timing rule, driven by explicit instants.

use std::time::{Duration, Instant};

use crate::{
    DiscoveryKind, HealthConfig, HealthError, HealthState, PauseKind, RecoveryProbe, Refusal,
    RefusalAction, RefusalCategory, RefusalScope, RelayHealth, classify,
};

const MIN: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The design's numbers with jitter off, so the backoff formula is exact.
fn exact() -> HealthConfig {
    HealthConfig {
        jitter_percent: 0,
        ..HealthConfig::default()
    }
}

fn relay_with(config: HealthConfig) -> (RelayHealth, Instant) {
    let t0 = Instant::now();
    (RelayHealth::new(config, false, 1, t0).unwrap(), t0)
}

fn relay() -> (RelayHealth, Instant) {
    relay_with(exact())
}

fn fail(h: &mut RelayHealth, at: Instant) {
    h.handle_connect_started(at);
    h.handle_connect_failed(at);
}

fn connect(h: &mut RelayHealth, at: Instant) {
    h.handle_connect_started(at);
    h.handle_connected(at);
}

/// Connects at `at` and lets the stability period pass, returning the instant after it.
fn connect_stable(h: &mut RelayHealth, at: Instant) -> Instant {
    connect(h, at);
    let stable = at + secs(5 * MIN);
    h.handle_timeout(stable);
    stable
}

fn refuse(h: &mut RelayHealth, at: Instant, text: &str) -> RefusalAction {
    h.handle_refusal(at, &classify(text), RefusalScope::Request { filters: 3 })
}

fn rate_limit(h: &mut RelayHealth, at: Instant) -> RefusalAction {
    refuse(h, at, "rate-limited: too many queries")
}

fn pause_length(action: RefusalAction, at: Instant) -> Duration {
    match action {
        RefusalAction::Paused { until, .. } => until - at,
        other => panic!("expected a new pause, got {other:?}"),
    }
}

/// The backoff after each of `n` consecutive failures, each attempted as soon as allowed.
fn failure_backoffs(h: &mut RelayHealth, t0: Instant, n: usize) -> Vec<u64> {
    let mut at = t0;
    let mut out = Vec::new();
    for _ in 0..n {
        fail(h, at);
        let next = h.next_dial_at().unwrap();
        out.push((next - at).as_secs());
        at = next;
    }
    out
}

#[test]
fn new_relay_is_disconnected_and_dialable_at_once() {
    let (h, t0) = relay();
    assert_eq!(h.state(t0), HealthState::Disconnected);
    assert!(h.can_dial(t0));
    assert_eq!(h.poll_timeout(), None);
}

#[test]
fn connection_failure_moves_disconnected_to_degraded() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    assert_eq!(h.state(t0), HealthState::Degraded);
    assert_eq!(h.consecutive_failures(), 1);
}

#[test]
fn connection_failure_backoff_is_base_times_two_to_failures_minus_one() {
    let (mut h, t0) = relay();
    assert_eq!(
        failure_backoffs(&mut h, t0, 6),
        vec![5, 10, 20, 40, 80, 160]
    );
}

#[test]
fn connection_failure_backoff_is_capped_at_one_hour() {
    let (mut h, t0) = relay();
    let backoffs = failure_backoffs(&mut h, t0, 14);
    assert_eq!(&backoffs[9..], &[2560, HOUR, HOUR, HOUR, HOUR]);
}

#[test]
fn connection_failure_backoff_base_and_cap_are_configurable() {
    let (mut h, t0) = relay_with(HealthConfig {
        connect_backoff_base: secs(2),
        connect_backoff_max: secs(10),
        ..exact()
    });
    assert_eq!(failure_backoffs(&mut h, t0, 5), vec![2, 4, 8, 10, 10]);
}

#[test]
fn connection_failure_jitter_is_seeded_and_never_exceeds_the_formula() {
    let t0 = Instant::now();
    let jittered = HealthConfig::default();
    let run = |seed| {
        let mut h = RelayHealth::new(jittered, false, seed, t0).unwrap();
        let mut at = t0;
        let mut out = Vec::new();
        for _ in 0..12 {
            fail(&mut h, at);
            let next = h.next_dial_at().unwrap();
            out.push(next - at);
            at = next;
        }
        out
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
    for (n, delay) in run(42).into_iter().enumerate() {
        let nominal = secs((5u64 << n).min(HOUR));
        assert!(delay <= nominal, "attempt {n}: {delay:?} > {nominal:?}");
        assert!(
            delay >= nominal * 9 / 10,
            "attempt {n}: {delay:?} below 90%"
        );
    }
}

#[test]
fn dead_after_24_hours_of_continuous_failure() {
    let (mut h, t0) = relay();
    let mut at = t0;
    while at < t0 + secs(DAY) {
        fail(&mut h, at);
        assert_ne!(
            h.state(at),
            HealthState::Dead,
            "dead too early at {:?}",
            at - t0
        );
        at = h.next_dial_at().unwrap();
    }
    fail(&mut h, at);
    assert_eq!(h.state(at), HealthState::Dead);
    assert_eq!(h.snapshot(at).status, 4);
}

#[test]
fn dead_relay_retries_once_per_24_hours() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    let mut at = t0 + secs(DAY);
    fail(&mut h, at);
    assert_eq!(h.state(at), HealthState::Dead);
    assert_eq!(h.next_dial_at(), Some(at + secs(DAY)));
    assert!(!h.can_dial(at + secs(DAY - 1)));
    at += secs(DAY);
    fail(&mut h, at);
    assert_eq!(h.state(at), HealthState::Dead);
    assert_eq!(h.next_dial_at(), Some(at + secs(DAY)));
}

#[test]
fn handshake_after_failures_starts_a_five_minute_stability_period() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    let at = t0 + secs(5);
    connect(&mut h, at);
    assert_eq!(h.state(at), HealthState::Degraded);
    assert_eq!(h.consecutive_failures(), 1);
    assert_eq!(h.poll_timeout(), Some(at + secs(5 * MIN)));
    assert_eq!(h.state(at + secs(5 * MIN - 1)), HealthState::Degraded);
}

#[test]
fn surviving_the_stability_period_makes_healthy_and_clears_the_failure_streak() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    fail(&mut h, t0 + secs(5));
    let stable = connect_stable(&mut h, t0 + secs(15));
    assert_eq!(h.state(stable), HealthState::Healthy);
    assert_eq!(h.consecutive_failures(), 0);
    h.handle_disconnected(stable + secs(1));
    fail(&mut h, stable + secs(1));
    assert_eq!(h.next_dial_at(), Some(stable + secs(1) + secs(5)));
}

#[test]
fn short_lived_handshake_does_not_reset_backoff() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    fail(&mut h, t0 + secs(5));
    let at = t0 + secs(15);
    connect(&mut h, at);
    h.handle_disconnected(at + secs(4 * MIN));
    assert_eq!(h.consecutive_failures(), 3);
    assert_eq!(h.next_dial_at(), Some(at + secs(4 * MIN) + secs(20)));
    assert_eq!(h.state(at + secs(4 * MIN)), HealthState::Degraded);
}

#[test]
fn short_lived_handshake_does_not_restart_the_dead_clock() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    let at = t0 + secs(DAY - 60);
    connect(&mut h, at);
    h.handle_disconnected(at + secs(120));
    assert_eq!(h.state(at + secs(120)), HealthState::Dead);
}

#[test]
fn dead_relay_that_reconnects_and_stays_up_becomes_healthy() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    let at = t0 + secs(DAY);
    fail(&mut h, at);
    let retry = h.next_dial_at().unwrap();
    connect(&mut h, retry);
    assert_eq!(h.state(retry), HealthState::Degraded);
    let stable = retry + secs(5 * MIN);
    h.handle_timeout(stable);
    assert_eq!(h.state(stable), HealthState::Healthy);
    assert_eq!(h.consecutive_failures(), 0);
}

#[test]
fn first_connection_without_failures_is_healthy() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    assert_eq!(h.state(t0), HealthState::Healthy);
}

#[test]
fn healthy_disconnect_is_disconnected_and_redials_at_once() {
    let (mut h, t0) = relay();
    let stable = connect_stable(&mut h, t0);
    let at = stable + secs(HOUR);
    h.handle_disconnected(at);
    assert_eq!(h.state(at), HealthState::Disconnected);
    assert_eq!(h.consecutive_failures(), 0);
    assert!(h.can_dial(at));
}

#[test]
fn rate_limit_cooldown_is_fixed_at_65_seconds() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let at = t0 + secs(1);
    assert_eq!(pause_length(rate_limit(&mut h, at), at), secs(65));
    assert_eq!(h.state(at), HealthState::RateLimited);
    assert!(h.is_paused(PauseKind::RateLimit, at + secs(64)));
    assert!(!h.is_paused(PauseKind::RateLimit, at + secs(65)));
}

#[test]
fn repeated_rate_limit_notices_during_a_cooldown_do_not_extend_it() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let again = h.handle_refusal(
        t0 + secs(60),
        &classify("rate-limited: slow down"),
        RefusalScope::Notice,
    );
    assert_eq!(
        again,
        RefusalAction::AlreadyPaused {
            kind: PauseKind::RateLimit,
            until: t0 + secs(65)
        }
    );
    assert_eq!(
        h.paused_until(PauseKind::RateLimit, t0 + secs(61)),
        Some(t0 + secs(65))
    );
}

#[test]
fn rate_limit_refusal_after_the_deadline_starts_a_new_cooldown() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let after = t0 + secs(70);
    assert!(matches!(
        rate_limit(&mut h, after),
        RefusalAction::Paused {
            kind: PauseKind::RateLimit,
            ..
        }
    ));
    assert!(h.is_paused(PauseKind::RateLimit, after + secs(1)));
}

#[test]
fn failed_rate_limit_recovery_probes_double_the_pause_up_to_one_hour() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let mut at = t0;
    let mut lengths = Vec::new();
    for _ in 0..8 {
        let length = pause_length(rate_limit(&mut h, at), at);
        lengths.push(length.as_secs());
        at += length;
        assert_eq!(h.poll_probe(at).map(|p| p.rate_limit), Some(true));
        at += secs(1);
    }
    assert_eq!(lengths, vec![65, 130, 260, 520, 1040, 2080, HOUR, HOUR]);
}

#[test]
fn five_unpaused_minutes_without_a_refusal_reset_the_rate_limit_delay() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let almost = t0 + secs(65 + 5 * MIN - 1);
    let mut twin = h.clone();
    assert_eq!(
        pause_length(rate_limit(&mut twin, almost), almost),
        secs(130)
    );
    let recovered = t0 + secs(65 + 5 * MIN);
    assert_eq!(
        pause_length(rate_limit(&mut h, recovered), recovered),
        secs(65)
    );
}

#[test]
fn time_spent_paused_does_not_count_as_rate_limit_recovery() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    // A request pause from t0+60 to t0+125 overlaps the cooldown and delays recovery.
    h.handle_failure(PauseKind::Request, t0 + secs(60));
    let at = t0 + secs(65 + 5 * MIN);
    assert_eq!(pause_length(rate_limit(&mut h, at), at), secs(130));
}

#[test]
fn successful_handshake_does_not_count_as_rate_limit_recovery() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    h.handle_disconnected(t0 + secs(10));
    let back = t0 + secs(HOUR);
    connect(&mut h, back);
    let at = back + secs(10);
    assert_eq!(pause_length(rate_limit(&mut h, at), at), secs(130));
}

#[test]
fn rate_limit_is_not_cleared_by_a_successful_handshake() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    h.handle_disconnected(t0 + secs(1));
    connect(&mut h, t0 + secs(2));
    assert!(h.is_paused(PauseKind::RateLimit, t0 + secs(2)));
    assert_eq!(h.state(t0 + secs(2)), HealthState::RateLimited);
}

#[test]
fn rate_limit_expiry_enters_probing_and_probe_success_restores_the_previous_state() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let expiry = t0 + secs(65);
    h.handle_timeout(expiry);
    assert_eq!(h.state(expiry), HealthState::Probing);
    assert_eq!(h.snapshot(expiry).status, 5);
    assert!(h.poll_probe(expiry).is_some());
    h.handle_probe_succeeded(expiry + secs(1));
    assert_eq!(h.state(expiry + secs(1)), HealthState::Healthy);
}

#[test]
fn rate_limited_probe_returns_to_rate_limited_with_a_doubled_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let expiry = t0 + secs(65);
    assert!(h.poll_probe(expiry).is_some());
    let at = expiry + secs(1);
    assert_eq!(pause_length(rate_limit(&mut h, at), at), secs(130));
    assert_eq!(h.state(at), HealthState::RateLimited);
}

#[test]
fn policy_refusal_pauses_coverage_for_24_hours() {
    for text in [
        "blocked: you are banned",
        "restricted: members only",
        "auth-required: you must auth",
        "ERROR: bad req: filter item too large",
    ] {
        let (mut h, t0) = relay();
        connect(&mut h, t0);
        let action = refuse(&mut h, t0, text);
        assert_eq!(
            action,
            RefusalAction::Paused {
                kind: PauseKind::Policy,
                until: t0 + secs(DAY)
            },
            "{text}"
        );
        assert!(h.is_paused(PauseKind::Policy, t0 + secs(DAY - 1)));
        assert!(!h.is_paused(PauseKind::Policy, t0 + secs(DAY)));
    }
}

#[test]
fn policy_pause_expiry_yields_exactly_one_recovery_probe() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    refuse(&mut h, t0, "blocked: not allowed");
    assert_eq!(h.poll_probe(t0 + secs(DAY - 1)), None);
    let expiry = t0 + secs(DAY);
    assert_eq!(
        h.poll_probe(expiry),
        Some(RecoveryProbe {
            policy: true,
            ..RecoveryProbe::default()
        })
    );
    assert_eq!(h.poll_probe(expiry), None);
    assert_eq!(h.poll_probe(expiry + secs(HOUR)), None);
}

#[test]
fn refused_policy_probe_pauses_another_24_hours() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    refuse(&mut h, t0, "restricted: no");
    let expiry = t0 + secs(DAY);
    assert!(h.poll_probe(expiry).is_some());
    let at = expiry + secs(1);
    assert_eq!(
        pause_length(refuse(&mut h, at, "restricted: no"), at),
        secs(DAY)
    );
}

#[test]
fn incomplete_request_pause_escalates_from_65_seconds_to_one_hour() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let mut at = t0;
    let mut lengths = Vec::new();
    for _ in 0..8 {
        let length = pause_length(h.handle_failure(PauseKind::Request, at), at);
        lengths.push(length.as_secs());
        at += length + secs(1);
    }
    assert_eq!(lengths, vec![65, 130, 260, 520, 1040, 2080, HOUR, HOUR]);
}

#[test]
fn incomplete_request_pause_resets_after_five_unpaused_minutes() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    h.handle_failure(PauseKind::Request, t0);
    let at = t0 + secs(65 + 5 * MIN);
    let action = h.handle_failure(PauseKind::Request, at);
    assert_eq!(pause_length(action, at), secs(65));
}

#[test]
fn unexpected_closed_before_eose_uses_the_request_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    for text in ["", "error: shutting down", "something odd"] {
        let action = refuse(&mut h, t0, text);
        assert!(
            matches!(
                action,
                RefusalAction::Paused {
                    kind: PauseKind::Request,
                    ..
                } | RefusalAction::AlreadyPaused {
                    kind: PauseKind::Request,
                    ..
                }
            ),
            "{text:?}: {action:?}"
        );
    }
}

#[test]
fn rate_and_request_escalations_are_independent() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    let at = t0 + secs(66);
    rate_limit(&mut h, at);
    let req = t0 + secs(67);
    assert_eq!(
        pause_length(h.handle_failure(PauseKind::Request, req), req),
        secs(65)
    );
}

#[test]
fn overlapping_pauses_must_all_expire_before_recovery() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    refuse(&mut h, t0 + secs(10), "blocked: nope");
    h.handle_failure(PauseKind::Request, t0 + secs(20));
    let rate_over = t0 + secs(65);
    assert_eq!(h.poll_probe(rate_over), None);
    assert_eq!(h.state(rate_over), HealthState::RateLimited);
    assert_eq!(h.sync_paused_until(rate_over), Some(t0 + secs(10 + DAY)));
    let all_over = t0 + secs(10 + DAY);
    assert_eq!(
        h.poll_probe(all_over),
        Some(RecoveryProbe {
            rate_limit: true,
            policy: true,
            request: true
        })
    );
}

#[test]
fn dialing_after_disconnect_waits_for_every_active_pause() {
    let (mut h, t0) = relay();
    let stable = connect_stable(&mut h, t0);
    rate_limit(&mut h, stable);
    h.handle_failure(PauseKind::Request, stable + secs(30));
    h.handle_disconnected(stable + secs(40));
    assert_eq!(h.next_dial_at(), Some(stable + secs(95)));
    assert!(!h.can_dial(stable + secs(94)));
    assert!(h.can_dial(stable + secs(95)));
}

#[test]
fn dialing_waits_for_transport_backoff_when_it_outlasts_the_pauses() {
    let (mut h, t0) = relay_with(HealthConfig {
        connect_backoff_base: secs(100),
        ..exact()
    });
    connect(&mut h, t0);
    rate_limit(&mut h, t0);
    h.handle_disconnected(t0 + secs(1));
    assert_eq!(h.next_dial_at(), Some(t0 + secs(101)));
    assert_eq!(h.state(t0 + secs(70)), HealthState::Degraded);
    assert!(!h.can_dial(t0 + secs(70)));
}

#[test]
fn mailbox_pause_is_five_minutes_doubling_to_one_hour() {
    let (mut h, t0) = relay();
    let mut at = t0;
    let mut lengths = Vec::new();
    for _ in 0..6 {
        let length = pause_length(h.handle_failure(PauseKind::Mailbox, at), at);
        lengths.push(length.as_secs());
        at += length;
    }
    assert_eq!(lengths, vec![300, 600, 1200, 2400, HOUR, HOUR]);
}

#[test]
fn mailbox_pause_is_reset_only_by_success() {
    let (mut h, t0) = relay();
    h.handle_failure(PauseKind::Mailbox, t0);
    connect_stable(&mut h, t0 + secs(MIN));
    let at = t0 + secs(HOUR);
    let mut twin = h.clone();
    assert_eq!(
        pause_length(twin.handle_failure(PauseKind::Mailbox, at), at),
        secs(600)
    );
    h.handle_success(DiscoveryKind::Mailbox, at);
    assert_eq!(
        pause_length(h.handle_failure(PauseKind::Mailbox, at), at),
        secs(300)
    );
}

#[test]
fn identity_pause_is_independent_of_mailbox_and_sync() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let refused = h.handle_refusal(
        t0,
        &classify("auth-required: you must auth"),
        RefusalScope::Identity,
    );
    assert_eq!(pause_length(refused, t0), secs(5 * MIN));
    assert!(h.is_paused(PauseKind::Identity, t0));
    assert!(!h.is_paused(PauseKind::Mailbox, t0));
    assert!(!h.is_paused(PauseKind::Policy, t0));
    assert_eq!(h.state(t0), HealthState::Healthy);
    h.handle_success(DiscoveryKind::Identity, t0 + secs(HOUR));
    let at = t0 + secs(HOUR);
    assert_eq!(
        pause_length(h.handle_failure(PauseKind::Identity, at), at),
        secs(300)
    );
}

#[test]
fn a_discovery_refusal_teaches_the_connections_limits_and_pauses_only_its_discovery() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    for scope in [RefusalScope::Mailbox, RefusalScope::Identity] {
        let filters = h.handle_refusal(t0, &classify("error: too many filters"), scope);
        assert!(
            matches!(filters, RefusalAction::Regroup { .. }),
            "{scope:?}: {filters:?}"
        );
        let bytes = h.handle_refusal(
            t0,
            &classify("error: active subscriptions exceed max size 65536 bytes"),
            scope,
        );
        assert!(
            matches!(bytes, RefusalAction::ByteCap { bytes: Some(65536) }),
            "{scope:?}: {bytes:?}"
        );
    }
    assert!(!h.is_paused(PauseKind::Mailbox, t0) && !h.is_paused(PauseKind::Identity, t0));
    // A rate limit is the connection's, whoever ran into it.
    h.handle_refusal(
        t0,
        &classify("rate-limited: slow down"),
        RefusalScope::Mailbox,
    );
    assert!(h.is_paused(PauseKind::RateLimit, t0));
    // A policy refusal pauses only that discovery.
    h.handle_refusal(t0, &classify("blocked: not here"), RefusalScope::Mailbox);
    assert!(h.is_paused(PauseKind::Mailbox, t0));
    assert!(!h.is_paused(PauseKind::Policy, t0) && !h.is_paused(PauseKind::Identity, t0));
}

#[test]
fn closing_an_idle_connection_is_no_failure_and_allows_an_immediate_dial() {
    let (mut h, t0) = relay();
    let mut twin = h.clone();
    connect(&mut h, t0);
    connect(&mut twin, t0);
    // Both close inside the stability period: a drop continues the failure streak, our own
    // close of an idle connection does not.
    let at = t0 + secs(1);
    twin.handle_disconnected(at);
    h.handle_closed_idle(at);
    assert!(
        !twin.can_dial(at),
        "a short-lived drop waits for its backoff"
    );
    assert!(h.can_dial(at), "an idle close may dial again at once");
    // The session's own end, reported afterwards, changes nothing.
    h.handle_disconnected(at + secs(1));
    assert!(h.can_dial(at + secs(1)));
}

#[test]
fn retiring_a_discovery_kind_forgets_its_pause_and_escalation_only() {
    let (mut h, t0) = relay();
    h.handle_failure(PauseKind::Mailbox, t0);
    let at = t0 + secs(300);
    h.handle_failure(PauseKind::Mailbox, at);
    h.handle_failure(PauseKind::Identity, at);
    h.handle_discovery_retired(DiscoveryKind::Mailbox);
    assert!(!h.is_paused(PauseKind::Mailbox, at));
    assert!(h.is_paused(PauseKind::Identity, at));
    assert_eq!(
        pause_length(h.handle_failure(PauseKind::Mailbox, at), at),
        secs(300)
    );
}

#[test]
fn discovery_failures_during_a_pause_do_not_extend_it() {
    let (mut h, t0) = relay();
    h.handle_failure(PauseKind::Mailbox, t0);
    let again = h.handle_failure(PauseKind::Mailbox, t0 + secs(10));
    assert_eq!(
        again,
        RefusalAction::AlreadyPaused {
            kind: PauseKind::Mailbox,
            until: t0 + secs(300)
        }
    );
    let later = t0 + secs(300);
    assert_eq!(
        pause_length(h.handle_failure(PauseKind::Mailbox, later), later),
        secs(600)
    );
}

#[test]
fn bootstrap_relays_are_never_retired() {
    let t0 = Instant::now();
    let bootstrap = RelayHealth::new(exact(), true, 1, t0).unwrap();
    let ordinary = RelayHealth::new(exact(), false, 1, t0).unwrap();
    assert!(bootstrap.is_bootstrap() && !bootstrap.may_retire());
    assert!(ordinary.may_retire());
    assert!(bootstrap.snapshot(t0).is_bootstrap);
}

#[test]
fn poll_timeout_is_the_earliest_pending_deadline() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    assert_eq!(h.poll_timeout(), Some(t0 + secs(5)));
    let at = t0 + secs(5);
    connect(&mut h, at);
    assert_eq!(h.poll_timeout(), Some(at + secs(5 * MIN)));
    rate_limit(&mut h, at);
    h.handle_failure(PauseKind::Mailbox, at + secs(1));
    assert_eq!(h.poll_timeout(), Some(at + secs(65)));
    h.handle_timeout(at + secs(65));
    assert_eq!(h.poll_timeout(), Some(at + secs(5 * MIN)));
    h.handle_timeout(at + secs(5 * MIN));
    assert_eq!(h.poll_timeout(), Some(at + secs(1 + 5 * MIN)));
    h.handle_timeout(at + secs(1 + 5 * MIN));
    assert_eq!(h.poll_timeout(), None);
}

#[test]
fn retired_subscription_refusal_is_counted_but_never_pauses() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(
        t0,
        &classify("blocked: too many filters"),
        RefusalScope::Retired,
    );
    assert_eq!(action, RefusalAction::Ignored);
    assert_eq!(h.snapshot(t0).pauses, vec![]);
    assert_eq!(
        h.snapshot(t0).refusals.get(RefusalCategory::TooManyFilters),
        1
    );
}

#[test]
fn filter_count_refusal_for_a_multi_filter_request_regroups_without_a_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let refusal =
        classify("ERROR: bad req: filter validation failed: invalid number of filters: 8");
    let action = h.handle_refusal(t0, &refusal, RefusalScope::Request { filters: 8 });
    assert_eq!(
        action,
        RefusalAction::Regroup {
            submitted_filters: Some(8)
        }
    );
    assert_eq!(h.sync_paused_until(t0), None);
}

#[test]
fn filter_count_refusal_for_a_single_filter_request_is_a_policy_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(
        t0,
        &classify("blocked: too many filters"),
        RefusalScope::Request { filters: 1 },
    );
    assert_eq!(pause_length(action, t0), secs(DAY));
}

#[test]
fn invalid_filter_refusal_is_a_policy_pause_even_for_a_multi_filter_request() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(
        t0,
        &classify("blocked: requested too many event IDs"),
        RefusalScope::Request { filters: 5 },
    );
    assert!(matches!(
        action,
        RefusalAction::Paused {
            kind: PauseKind::Policy,
            ..
        }
    ));
}

#[test]
fn retained_bytes_refusal_reports_the_cap_without_a_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let refusal = classify("rate-limited: active subscriptions exceed max size 262144 bytes");
    let action = h.handle_refusal(t0, &refusal, RefusalScope::Request { filters: 2 });
    assert_eq!(
        action,
        RefusalAction::ByteCap {
            bytes: Some(262_144)
        }
    );
    assert_eq!(h.state(t0), HealthState::Healthy);
}

#[test]
fn too_many_subscriptions_uses_the_request_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = refuse(&mut h, t0, "rate-limited: too many REQs");
    assert!(matches!(
        action,
        RefusalAction::Paused {
            kind: PauseKind::Request,
            ..
        }
    ));
    assert!(!h.is_paused(PauseKind::RateLimit, t0));
}

#[test]
fn unknown_notice_is_counted_but_does_not_pause() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(t0, &classify("hello there"), RefusalScope::Notice);
    assert_eq!(action, RefusalAction::Ignored);
    assert_eq!(h.snapshot(t0).refusals.get(RefusalCategory::Unknown), 1);
}

#[test]
fn rate_limit_notice_pauses_the_relay() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(t0, &classify("rate limited"), RefusalScope::Notice);
    assert_eq!(pause_length(action, t0), secs(65));
}

#[test]
fn metrics_snapshot_reports_status_failures_and_refusal_counts() {
    let (mut h, t0) = relay();
    fail(&mut h, t0);
    fail(&mut h, t0 + secs(5));
    let snap = h.snapshot(t0 + secs(6));
    assert_eq!((snap.status, snap.consecutive_failures), (3, 2));
    connect(&mut h, t0 + secs(15));
    rate_limit(&mut h, t0 + secs(16));
    h.handle_refusal(
        t0 + secs(17),
        &Refusal::new(RefusalCategory::Pow),
        RefusalScope::Notice,
    );
    let snap = h.snapshot(t0 + secs(17));
    assert_eq!(snap.state, HealthState::RateLimited);
    assert_eq!(snap.status, 5);
    assert_eq!(snap.refusals.get(RefusalCategory::RateLimited), 1);
    assert_eq!(snap.refusals.get(RefusalCategory::Pow), 1);
    assert_eq!(snap.refusals.total(), 2);
    assert_eq!(snap.pauses, vec![(PauseKind::RateLimit, t0 + secs(81))]);
}

#[test]
fn status_numbers_match_the_metric_definition() {
    let values: Vec<u8> = [
        HealthState::Healthy,
        HealthState::Disconnected,
        HealthState::Degraded,
        HealthState::Dead,
        HealthState::RateLimited,
        HealthState::Probing,
    ]
    .map(HealthState::metric_value)
    .to_vec();
    assert_eq!(values, vec![1, 2, 3, 4, 5, 5]);
}

#[test]
fn invalid_configuration_is_an_error() {
    let t0 = Instant::now();
    let check = |config: HealthConfig, expected: HealthError| {
        assert_eq!(
            RelayHealth::new(config, false, 0, t0).unwrap_err(),
            expected
        );
    };
    check(
        HealthConfig {
            connect_backoff_base: Duration::ZERO,
            ..exact()
        },
        HealthError::ZeroDuration {
            field: "connect_backoff_base",
        },
    );
    check(
        HealthConfig {
            rate_limit_cooldown: secs(2 * HOUR),
            ..exact()
        },
        HealthError::BaseExceedsCap {
            field: "rate_limit",
        },
    );
    check(
        HealthConfig {
            jitter_percent: 101,
            ..exact()
        },
        HealthError::JitterOutOfRange(101),
    );
    check(
        HealthConfig {
            policy_pause: secs(400 * DAY),
            ..exact()
        },
        HealthError::TooLong {
            field: "policy_pause",
        },
    );
}

#[test]
fn coverage_scoped_policy_refusal_pauses_only_that_coverage() {
    for text in [
        "blocked: no quotes",
        "restricted: members only",
        "ERROR: bad req: filter item too large",
    ] {
        let (mut h, t0) = relay();
        connect(&mut h, t0);
        let action = h.handle_refusal(t0, &classify(text), RefusalScope::Coverage { filters: 3 });
        assert_eq!(
            action,
            RefusalAction::CoveragePaused {
                until: t0 + secs(DAY)
            },
            "{text}"
        );
        assert_eq!(h.sync_paused_until(t0), None, "{text}");
        assert_eq!(h.state(t0), HealthState::Healthy, "{text}");
    }
}

#[test]
fn auth_required_pauses_only_the_coverage_for_coverage_scope() {
    let (mut h, t0) = relay();
    connect(&mut h, t0);
    let action = h.handle_refusal(
        t0,
        &classify("auth-required: you must auth"),
        RefusalScope::Coverage { filters: 1 },
    );
    assert_eq!(
        action,
        RefusalAction::CoveragePaused {
            until: t0 + secs(DAY)
        }
    );
    assert!(!h.is_paused(PauseKind::Policy, t0));
    assert_eq!(h.sync_paused_until(t0), None);
    assert_eq!(h.state(t0), HealthState::Healthy);
}

#[test]
fn coverage_scope_keeps_every_other_decision_of_request_scope() {
    for text in [
        "rate-limited: too many queries",
        "blocked: too many filters",
        "rate-limited: active subscriptions exceed max size 262144 bytes",
        "error: shutting down",
    ] {
        let (mut a, t0) = relay();
        let (mut b, _) = relay();
        connect(&mut a, t0);
        connect(&mut b, t0);
        let request = a.handle_refusal(t0, &classify(text), RefusalScope::Request { filters: 3 });
        let coverage = b.handle_refusal(t0, &classify(text), RefusalScope::Coverage { filters: 3 });
        assert_eq!(request, coverage, "{text}");
    }
}
