//! The rules of `SessionAuth`: park only with a key and before an outcome, release once.

use std::time::{Duration, Instant};

use nostr::{Filter, Kind};

use super::{AUTH_WAIT, AuthState, AuthVerdict, MAX_PARKED, SessionAuth};

fn filters(kind: u16) -> Vec<Filter> {
    vec![Filter::new().kind(Kind::from(kind))]
}

#[test]
fn without_a_key_every_refusal_is_a_policy_refusal() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(false);
    auth.handle_challenge();
    assert_eq!(auth.state(), AuthState::Unchallenged);
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Refuse);
    assert_eq!(auth.poll_timeout(), None);
}

#[test]
fn parked_coverage_is_released_once_when_the_relay_accepts() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(true);
    auth.handle_challenge();
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Park);
    assert_eq!(auth.handle_refusal(now, filters(2)), AuthVerdict::Park);
    assert_eq!(auth.poll_timeout(), Some(now + AUTH_WAIT));
    assert_eq!(auth.handle_authenticated(), vec![filters(1), filters(2)]);
    assert_eq!(auth.poll_timeout(), None);
    // Refused again after authenticating: a policy refusal, never parked twice.
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Refuse);
    assert!(auth.handle_authenticated().is_empty());
}

#[test]
fn a_failed_auth_refuses_what_was_parked_and_everything_after() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(true);
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Park);
    assert_eq!(auth.handle_failed(), vec![filters(1)]);
    assert_eq!(auth.state(), AuthState::Failed);
    assert_eq!(auth.handle_refusal(now, filters(2)), AuthVerdict::Refuse);
    // A late success does not revive the session.
    assert!(auth.handle_authenticated().is_empty());
    assert_eq!(auth.state(), AuthState::Failed);
}

#[test]
fn no_outcome_by_the_deadline_counts_as_failed() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(true);
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Park);
    let later = now + Duration::from_secs(1);
    assert_eq!(auth.handle_refusal(later, filters(2)), AuthVerdict::Park);
    // The first refusal sets the deadline.
    assert!(
        auth.handle_timeout(now + AUTH_WAIT - Duration::from_millis(1))
            .is_empty()
    );
    assert_eq!(
        auth.handle_timeout(now + AUTH_WAIT),
        vec![filters(1), filters(2)]
    );
    assert_eq!(auth.state(), AuthState::Failed);
    assert_eq!(auth.poll_timeout(), None);
}

#[test]
fn parked_coverage_is_bounded() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(true);
    for _ in 0..MAX_PARKED {
        assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Park);
    }
    assert_eq!(auth.handle_refusal(now, filters(1)), AuthVerdict::Refuse);
}

#[test]
fn a_refusal_read_after_authenticating_of_a_request_sent_before_is_sent_again() {
    let now = Instant::now();
    let mut auth = SessionAuth::new(true);
    auth.handle_challenge();
    // Before the outcome, it is parked like any other.
    assert_eq!(
        auth.handle_refusal_sent_before(now, filters(1)),
        AuthVerdict::Park
    );
    assert_eq!(auth.handle_authenticated(), vec![filters(1)]);
    assert_eq!(
        auth.handle_refusal_sent_before(now, filters(2)),
        AuthVerdict::Resend
    );
    // Sent after authenticating, it stays refused.
    assert_eq!(auth.handle_refusal(now, filters(2)), AuthVerdict::Refuse);
    // Without a key, or after a failed AUTH, a policy refusal.
    let mut keyless = SessionAuth::new(false);
    assert_eq!(
        keyless.handle_refusal_sent_before(now, filters(1)),
        AuthVerdict::Refuse
    );
    let mut failed = SessionAuth::new(true);
    assert!(failed.handle_failed().is_empty());
    assert_eq!(
        failed.handle_refusal_sent_before(now, filters(1)),
        AuthVerdict::Refuse
    );
}
