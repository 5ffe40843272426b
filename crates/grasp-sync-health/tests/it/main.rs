//! Integration tests through the public API: a full relay lifecycle, and the property that no
//! sequence of events lets a dial start before every active pause and backoff deadline, or lets
//! any backoff exceed its cap.

use std::time::{Duration, Instant};

use grasp_sync_health::{
    DiscoveryKind, HealthConfig, HealthState, PauseKind, RefusalAction, RefusalCategory,
    RefusalScope, RelayHealth, classify,
};
use proptest::prelude::*;

const TEXTS: &[&str] = &[
    "rate-limited: too many queries",
    "rate limited",
    "blocked: nope",
    "auth-required: you must auth",
    "blocked: too many filters",
    "ERROR: bad req: filter validation failed: invalid number of filters: 8",
    "rate-limited: too many REQs",
    "ERROR: too many concurrent NEG requests",
    "rate-limited: active subscriptions exceed max size 1000 bytes",
    "error: shutting down",
    "",
    "duplicate: have this event",
];

#[derive(Debug, Clone)]
enum Event {
    Advance(u64),
    ConnectFailed,
    Connected,
    Disconnected,
    Refusal(usize, u8),
    Failure(u8),
    Success(bool),
    ProbeSucceeded,
    Timeout,
    PollProbe,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0u64..7200).prop_map(Event::Advance),
        2 => Just(Event::ConnectFailed),
        2 => Just(Event::Connected),
        1 => Just(Event::Disconnected),
        3 => (0..TEXTS.len(), 0u8..6).prop_map(|(t, s)| Event::Refusal(t, s)),
        1 => (0u8..5).prop_map(Event::Failure),
        1 => any::<bool>().prop_map(Event::Success),
        1 => Just(Event::ProbeSucceeded),
        1 => Just(Event::Timeout),
        1 => Just(Event::PollProbe),
    ]
}

fn scope(n: u8) -> RefusalScope {
    match n {
        0 => RefusalScope::Notice,
        1 => RefusalScope::Request { filters: 1 },
        2 => RefusalScope::Request { filters: 6 },
        3 => RefusalScope::Mailbox,
        4 => RefusalScope::Coverage { filters: 3 },
        _ => RefusalScope::Retired,
    }
}

fn cap(config: &HealthConfig, kind: PauseKind) -> Duration {
    match kind {
        PauseKind::RateLimit => config.rate_limit_max,
        PauseKind::Policy => config.policy_pause,
        PauseKind::Request => config.request_pause_max,
        PauseKind::Mailbox | PauseKind::Identity => config.discovery_pause_max,
    }
}

fn check_action(config: &HealthConfig, action: RefusalAction, now: Instant) {
    if let RefusalAction::CoveragePaused { until } = action {
        assert!(until > now, "coverage pause ends in the past");
        assert!(
            until - now <= config.policy_pause,
            "coverage pause above its cap"
        );
    }
    if let RefusalAction::Paused { kind, until } = action {
        assert!(until > now, "{kind:?} pause ends in the past");
        assert!(
            until - now <= cap(config, kind),
            "{kind:?} pause above its cap"
        );
    }
}

fn check_invariants(h: &RelayHealth, now: Instant) {
    let snapshot = h.snapshot(now);
    if let Some(next) = h.next_dial_at() {
        for kind in PauseKind::SYNC {
            if let Some(until) = h.paused_until(kind, now) {
                assert!(
                    next >= until,
                    "dial at {next:?} before {kind:?} ends at {until:?}"
                );
            }
        }
        let backoff = snapshot
            .dial_backoff_until
            .expect("idle relays report a backoff");
        assert!(next >= backoff, "dial before the transport backoff");
    }
    if h.can_dial(now) {
        assert!(h.sync_paused_until(now).is_none(), "dialable while paused");
        assert!(snapshot.dial_backoff_until.is_some_and(|at| at <= now));
    }
    assert_eq!(snapshot.status, snapshot.state.metric_value());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn next_attempt_is_never_earlier_than_any_pause_or_backoff_and_backoff_never_exceeds_its_cap(
        seed in any::<u64>(),
        bootstrap in any::<bool>(),
        events in proptest::collection::vec(event(), 1..120),
    ) {
        let config = HealthConfig::default();
        let start = Instant::now();
        let mut now = start;
        let mut h = RelayHealth::new(config, bootstrap, seed, now).unwrap();
        let mut connected = false;
        for event in events {
            match event {
                Event::Advance(secs) => now += Duration::from_secs(secs),
                Event::ConnectFailed if !connected => {
                    h.handle_connect_started(now);
                    h.handle_connect_failed(now);
                    let backoff = h.snapshot(now).dial_backoff_until.unwrap() - now;
                    if h.state(now) == HealthState::Dead {
                        prop_assert_eq!(backoff, config.dead_retry_interval);
                    } else {
                        prop_assert!(backoff <= config.connect_backoff_max);
                    }
                }
                Event::Connected if !connected => {
                    h.handle_connect_started(now);
                    h.handle_connected(now);
                    connected = true;
                }
                Event::Disconnected if connected => {
                    h.handle_disconnected(now);
                    connected = false;
                }
                Event::Refusal(text, n) => {
                    let action = h.handle_refusal(now, &classify(TEXTS[text]), scope(n));
                    check_action(&config, action, now);
                }
                Event::Failure(n) => {
                    let action = h.handle_failure(PauseKind::ALL[usize::from(n)], now);
                    check_action(&config, action, now);
                }
                Event::Success(mailbox) => {
                    let kind = if mailbox { DiscoveryKind::Mailbox } else { DiscoveryKind::Identity };
                    h.handle_success(kind, now);
                }
                Event::ProbeSucceeded => h.handle_probe_succeeded(now),
                Event::Timeout => {
                    h.handle_timeout(now);
                    if let Some(timeout) = h.poll_timeout() {
                        prop_assert!(timeout > now, "a handled deadline is still armed");
                    }
                }
                Event::PollProbe => {
                    let probe = h.poll_probe(now);
                    if probe.is_some() {
                        prop_assert!(connected);
                        prop_assert!(h.sync_paused_until(now).is_none());
                    }
                }
                _ => {}
            }
            check_invariants(&h, now);
            prop_assert_eq!(h.is_bootstrap(), bootstrap);
            prop_assert_eq!(h.may_retire(), !bootstrap);
        }
    }
}

#[test]
fn a_relay_recovers_from_failures_rate_limits_and_a_policy_refusal() {
    let config = HealthConfig {
        jitter_percent: 0,
        ..HealthConfig::default()
    };
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut h = RelayHealth::new(config, false, 3, t0).unwrap();

    h.handle_connect_started(t0);
    h.handle_connect_failed(t0);
    assert_eq!(h.poll_timeout(), Some(t0 + s(5)));
    h.handle_timeout(t0 + s(5));
    assert!(h.can_dial(t0 + s(5)));

    h.handle_connect_started(t0 + s(5));
    h.handle_connected(t0 + s(5));
    assert_eq!(h.state(t0 + s(5)), HealthState::Degraded);

    let refusal = classify("rate-limited: too many queries");
    let action = h.handle_refusal(t0 + s(6), &refusal, RefusalScope::Request { filters: 2 });
    assert_eq!(
        action,
        RefusalAction::Paused {
            kind: PauseKind::RateLimit,
            until: t0 + s(71)
        }
    );
    assert_eq!(h.poll_timeout(), Some(t0 + s(71)));
    h.handle_timeout(t0 + s(71));
    assert_eq!(h.state(t0 + s(71)), HealthState::Probing);
    assert!(h.poll_probe(t0 + s(71)).is_some_and(|p| p.rate_limit));
    h.handle_probe_succeeded(t0 + s(72));
    assert_eq!(h.state(t0 + s(72)), HealthState::Degraded);

    h.handle_timeout(t0 + s(305));
    assert_eq!(h.state(t0 + s(305)), HealthState::Healthy);
    assert_eq!(h.consecutive_failures(), 0);

    let policy = classify("restricted: members only");
    h.handle_refusal(t0 + s(400), &policy, RefusalScope::Request { filters: 1 });
    h.handle_disconnected(t0 + s(500));
    assert_eq!(h.next_dial_at(), Some(t0 + s(400 + 24 * 3600)));
    let snapshot = h.snapshot(t0 + s(500));
    assert_eq!(snapshot.status, 5);
    assert_eq!(snapshot.refusals.get(RefusalCategory::RateLimited), 1);
    assert_eq!(snapshot.refusals.get(RefusalCategory::Restricted), 1);
}
