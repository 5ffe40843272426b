//! Tests of NIP-77 support knowledge: NIP-11 first, one probe, verdicts kept across sessions
//! for a day (an hour for a probe the relay did not answer) or until the daily reconciliation.

use std::time::{Duration, Instant};

use nostr::SubscriptionId;

use super::{
    NIP77_NO_ANSWER_TTL, NIP77_VERDICT_TTL, NegentropyError, Nip77Support, NipListing, NoNip77,
    RoundStart,
};

/// One input, at a time in seconds after the start.
enum Step {
    Session(u64, NipListing),
    Probe(&'static str),
    Ended(u64, &'static str, Result<(), NegentropyError>),
    Daily,
    Time(u64),
}

use Step::{Daily, Ended, Probe, Session, Time};

/// Feeds `steps` into fresh knowledge and checks how the next round may start.
fn check(steps: &[Step], expected: RoundStart) {
    let start = Instant::now();
    let at = |secs: u64| start + Duration::from_secs(secs);
    let mut support = Nip77Support::new();
    for step in steps {
        match step {
            Session(secs, listing) => support.handle_session_started(at(*secs), *listing),
            Probe(id) => support.handle_probe_started(SubscriptionId::new(*id)),
            Ended(secs, id, result) => {
                support.handle_round_ended(at(*secs), &SubscriptionId::new(*id), result);
            }
            Daily => support.handle_daily_reconciliation(),
            Time(secs) => support.handle_time(at(*secs)),
        }
    }
    assert_eq!(support.poll_round(), expected);
    assert_eq!(
        support.allows_rounds(),
        !matches!(expected, RoundStart::Off(_))
    );
}

const DAY: u64 = NIP77_VERDICT_TTL.as_secs();
const HOUR: u64 = NIP77_NO_ANSWER_TTL.as_secs();

#[test]
fn nip11_decides_first() {
    check(
        &[Session(0, NipListing::NotListed)],
        RoundStart::Off(NoNip77::NotListed),
    );
    check(&[Session(0, NipListing::Listed)], RoundStart::Probe);
    check(&[Session(0, NipListing::Unknown)], RoundStart::Probe);
    // A relay that answered before still is not asked when its document leaves 77 out.
    check(
        &[
            Session(0, NipListing::Unknown),
            Probe("p"),
            Ended(1, "p", Ok(())),
            Session(10, NipListing::NotListed),
        ],
        RoundStart::Off(NoNip77::NotListed),
    );
}

#[test]
fn one_probe_at_a_time_until_it_ends() {
    let probing = [Session(0, NipListing::Listed), Probe("p")];
    check(&probing, RoundStart::AfterProbe);
    // Another round's end does not end the probe.
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(1, "q", Err(NegentropyError::NoAnswer)),
        ],
        RoundStart::AfterProbe,
    );
}

#[test]
fn an_answered_probe_means_normal_rounds() {
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(1, "p", Ok(())),
        ],
        RoundStart::Normal,
    );
    // It answered, then stalled: it still speaks NIP-77.
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(15, "p", Err(NegentropyError::Timeout)),
        ],
        RoundStart::Normal,
    );
}

#[test]
fn an_unanswered_or_refused_probe_turns_nip77_off() {
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(3, "p", Err(NegentropyError::NoAnswer)),
        ],
        RoundStart::Off(NoNip77::NoAnswer),
    );
    check(
        &[
            Session(0, NipListing::Unknown),
            Probe("p"),
            Ended(1, "p", Err(NegentropyError::Unsupported)),
        ],
        RoundStart::Off(NoNip77::Refused),
    );
    // "Unsupported" from a later round too.
    check(
        &[
            Session(0, NipListing::Unknown),
            Probe("p"),
            Ended(1, "p", Ok(())),
            Ended(2, "q", Err(NegentropyError::Unsupported)),
        ],
        RoundStart::Off(NoNip77::Refused),
    );
}

#[test]
fn a_probe_failing_otherwise_teaches_nothing() {
    for error in [
        NegentropyError::RateLimited("rate-limited: too many queries".to_owned()),
        NegentropyError::Refused("blocked: no".to_owned()),
        NegentropyError::Protocol("bad hex".to_owned()),
        NegentropyError::NotConnected,
    ] {
        check(
            &[
                Session(0, NipListing::Listed),
                Probe("p"),
                Ended(1, "p", Err(error)),
            ],
            RoundStart::Probe,
        );
    }
    // A slow answer to a round of a relay known to speak NIP-77 changes nothing.
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(1, "p", Ok(())),
            Ended(20, "q", Err(NegentropyError::NoAnswer)),
        ],
        RoundStart::Normal,
    );
}

#[test]
fn verdicts_are_kept_across_sessions_for_a_day() {
    let refused = || {
        vec![
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(1, "p", Err(NegentropyError::Unsupported)),
        ]
    };
    let mut steps = refused();
    steps.push(Session(1 + HOUR, NipListing::Listed));
    check(&steps, RoundStart::Off(NoNip77::Refused));
    // Time alone does not end an answer's verdict on the session.
    let mut steps = refused();
    steps.push(Time(1 + DAY));
    check(&steps, RoundStart::Off(NoNip77::Refused));
    let mut steps = refused();
    steps.push(Session(1 + DAY, NipListing::Listed));
    check(&steps, RoundStart::Probe);
    // A relay that answered is not probed again on a new connection.
    check(
        &[
            Session(0, NipListing::Unknown),
            Probe("p"),
            Ended(1, "p", Ok(())),
            Session(60, NipListing::Unknown),
        ],
        RoundStart::Normal,
    );
}

#[test]
fn an_unanswered_probe_is_asked_again_after_an_hour_on_the_same_session_or_a_new_one() {
    let unanswered = || {
        vec![
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(3, "p", Err(NegentropyError::NoAnswer)),
        ]
    };
    let mut steps = unanswered();
    steps.push(Session(60, NipListing::Listed));
    check(&steps, RoundStart::Off(NoNip77::NoAnswer));
    let mut steps = unanswered();
    steps.push(Time(2 + HOUR));
    check(&steps, RoundStart::Off(NoNip77::NoAnswer));
    let mut steps = unanswered();
    steps.push(Time(3 + HOUR));
    check(&steps, RoundStart::Probe);
    let mut steps = unanswered();
    steps.push(Session(3 + HOUR, NipListing::Listed));
    check(&steps, RoundStart::Probe);
    // A second silent probe: another hour.
    let mut steps = unanswered();
    steps.extend([
        Time(3 + HOUR),
        Probe("q"),
        Ended(6 + HOUR, "q", Err(NegentropyError::NoAnswer)),
        Time(5 + 2 * HOUR),
    ]);
    check(&steps, RoundStart::Off(NoNip77::NoAnswer));
    // An answer to the new probe restores normal rounds.
    let mut steps = unanswered();
    steps.extend([Time(3 + HOUR), Probe("q"), Ended(4 + HOUR, "q", Ok(()))]);
    check(&steps, RoundStart::Normal);
}

#[test]
fn the_daily_reconciliation_probes_again() {
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(3, "p", Err(NegentropyError::NoAnswer)),
            Daily,
        ],
        RoundStart::Probe,
    );
    // Not against the relay's own document.
    check(
        &[Session(0, NipListing::NotListed), Daily],
        RoundStart::Off(NoNip77::NotListed),
    );
    // And a relay that speaks NIP-77 keeps speaking it.
    check(
        &[
            Session(0, NipListing::Listed),
            Probe("p"),
            Ended(1, "p", Ok(())),
            Daily,
        ],
        RoundStart::Normal,
    );
}
