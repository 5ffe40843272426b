//! Tests of fallback bookkeeping: one warning per relay, the per-session NIP-77 switch, counts.

use std::time::Instant;

use grasp_sync_model::RelayUrl;
use nostr::EventId;

use super::{FallbackReason, NegentropyCounts, NegentropyFallbacks};
use crate::negentropy::MissingEventRecovery;
use crate::transport::NegentropyError;

fn relay(name: &str) -> RelayUrl {
    RelayUrl::parse(&format!("wss://{name}.test")).expect("relay url")
}

fn check_reason(error: NegentropyError, expected: Option<FallbackReason>) {
    assert_eq!(FallbackReason::from_error(&error), expected, "{error:?}");
}

#[test]
fn every_round_failure_but_a_lost_session_or_an_auth_refusal_has_a_fallback_reason() {
    check_reason(
        NegentropyError::Unsupported,
        Some(FallbackReason::Unsupported),
    );
    check_reason(NegentropyError::Timeout, Some(FallbackReason::Timeout));
    check_reason(NegentropyError::NoAnswer, Some(FallbackReason::Timeout));
    check_reason(
        NegentropyError::RateLimited("rate-limited: too many queries".to_owned()),
        Some(FallbackReason::RateLimited),
    );
    check_reason(
        NegentropyError::Refused("blocked: no".to_owned()),
        Some(FallbackReason::Refused),
    );
    check_reason(
        NegentropyError::Protocol("bad hex".to_owned()),
        Some(FallbackReason::Protocol),
    );
    check_reason(NegentropyError::NotConnected, None);
    // Sent again by NIP-77 after AUTH, or paused: a REQ would be refused the same way.
    check_reason(
        NegentropyError::AuthRequired("auth-required: members only".to_owned()),
        None,
    );
}

#[test]
fn a_relay_is_warned_about_once_whatever_the_reasons() {
    let mut fallbacks = NegentropyFallbacks::new();
    assert!(fallbacks.handle_fallback(&relay("a"), FallbackReason::Timeout));
    assert!(!fallbacks.handle_fallback(&relay("a"), FallbackReason::Timeout));
    assert!(!fallbacks.handle_fallback(&relay("a"), FallbackReason::Protocol));
    assert!(fallbacks.handle_fallback(&relay("b"), FallbackReason::Protocol));
    // A new session does not repeat the warning.
    fallbacks.handle_session_started(&relay("a"));
    assert!(!fallbacks.handle_fallback(&relay("a"), FallbackReason::Refused));
}

#[test]
fn a_query_rate_refusal_disables_nip77_for_the_rest_of_the_session() {
    let mut fallbacks = NegentropyFallbacks::new();
    fallbacks.handle_fallback(&relay("a"), FallbackReason::RateLimited);
    assert!(!fallbacks.nip77_enabled(&relay("a")));
    assert!(fallbacks.nip77_enabled(&relay("b")));
    // From any REQ, not only a negentropy round.
    fallbacks.handle_query_rate_refusal(&relay("b"));
    assert!(!fallbacks.nip77_enabled(&relay("b")));
    // A new connection session turns it back on.
    fallbacks.handle_session_started(&relay("a"));
    assert!(fallbacks.nip77_enabled(&relay("a")));
}

#[test]
fn an_unsupported_relay_is_not_asked_again_this_session() {
    let mut fallbacks = NegentropyFallbacks::new();
    fallbacks.handle_fallback(&relay("a"), FallbackReason::Unsupported);
    assert!(!fallbacks.nip77_enabled(&relay("a")));
}

#[test]
fn transient_failures_keep_nip77_enabled() {
    let mut fallbacks = NegentropyFallbacks::new();
    for reason in [
        FallbackReason::Timeout,
        FallbackReason::Protocol,
        FallbackReason::Refused,
    ] {
        fallbacks.handle_fallback(&relay("a"), reason);
    }
    assert!(fallbacks.nip77_enabled(&relay("a")));
}

#[test]
fn counts_report_rounds_fallbacks_by_reason_and_recovery() {
    let mut fallbacks = NegentropyFallbacks::new();
    fallbacks.handle_round_started();
    fallbacks.handle_round_started();
    fallbacks.handle_round_started();
    fallbacks.handle_round_completed();
    fallbacks.handle_fallback(&relay("a"), FallbackReason::Timeout);
    fallbacks.handle_fallback(&relay("b"), FallbackReason::Timeout);
    fallbacks.handle_fallback(&relay("b"), FallbackReason::RateLimited);

    let mut recovery = MissingEventRecovery::default();
    let ids: Vec<EventId> = (0u8..5)
        .map(|n| EventId::from_byte_array([n; 32]))
        .collect();
    recovery.handle_failed_batch(&relay("a"), ids.clone(), Instant::now());
    recovery.handle_known(ids[..2].iter().copied());

    let counts = fallbacks.counts(&recovery);
    assert_eq!(
        counts,
        NegentropyCounts {
            rounds_started: 3,
            rounds_completed: 1,
            fallbacks: [0, 2, 0, 1, 0],
            recovery_pending_ids: 3,
            recovered_ids: 2,
            expired_ids: 0,
        }
    );
    assert_eq!(counts.fallbacks_for(FallbackReason::Timeout), 2);
    let labels: Vec<&str> = FallbackReason::ALL
        .iter()
        .map(|r| r.metric_label())
        .collect();
    assert_eq!(
        labels,
        [
            "unsupported",
            "timeout",
            "protocol",
            "rate_limited",
            "refused"
        ]
    );
}
