//! The AUTH's outcome as machine inputs, on injected time: parked work sent again once after
//! an accepted AUTH, refused by policy after a failed or unanswered one, and a NIP-77 round's
//! `auth-required:` refusal parked or paused.

use std::time::Instant;

use grasp_sync_health::RefusalScope;
use nostr::Kind;

use super::*;
use crate::machine::nip77::NipListing;
use crate::machine::relay::testing;
use crate::machine::session_auth::{AUTH_WAIT, SessionAuth};

type Machine = RelayMachine<(), ParkedWork>;

/// A connected relay machine whose session holds a key.
fn connected(now: Instant) -> Machine {
    let mut machine = testing::connected(now, 20, NipListing::Unknown);
    machine.session.as_mut().expect("connected").auth = SessionAuth::new(true);
    machine
}

fn filter(n: u64) -> Filter {
    Filter::new()
        .kind(Kind::from(1617))
        .identifier(format!("d{n}"))
}

fn park(machine: &mut Machine, now: Instant, work: ParkedWork) {
    let session = machine.session.as_mut().expect("connected");
    assert_eq!(session.auth.handle_refusal(now, work), AuthVerdict::Park);
}

fn discovery(batch: u64) -> ParkedWork {
    ParkedWork::Discovery {
        batch: BatchId(batch),
        subscription_id: SubscriptionId::new(format!("id{batch}")),
        filters: vec![filter(batch)],
    }
}

fn identity(_: BatchId) -> Option<RefusalScope> {
    Some(RefusalScope::Identity)
}

#[test]
fn an_accepted_auth_sends_the_parked_work_again_once() {
    let now = Instant::now();
    let mut machine = connected(now);
    machine.handle_auth_challenge();
    park(&mut machine, now, ParkedWork::Coverage(vec![filter(1)]));
    park(&mut machine, now, discovery(3));

    let authenticated = machine.handle_authenticated(now).expect("a session");

    assert_eq!(authenticated.parked, 2);
    assert_eq!(
        authenticated.resend,
        [ParkedDiscovery {
            batch: BatchId(3),
            subscription_id: SubscriptionId::new("id3"),
            filters: vec![filter(3)],
        }]
    );
    assert!(authenticated.derive_again);
    assert!(
        machine.take_coverage_retry(now),
        "coverage is derived again at once"
    );
    let again = machine.handle_authenticated(now).expect("a session");
    assert_eq!(again.parked, 0, "nothing is sent twice");
    assert!(!again.derive_again);
}

#[test]
fn a_failed_auth_refuses_the_parked_work_by_policy() {
    let now = Instant::now();
    let mut machine = connected(now);
    park(&mut machine, now, ParkedWork::Coverage(vec![filter(1)]));
    park(&mut machine, now, ParkedWork::Round(filter(2)));
    park(&mut machine, now, discovery(3));

    let refused = machine.handle_auth_failed(now, identity);

    assert_eq!(
        refused.refused,
        [
            RefusedParked::Coverage(Some(CoverageRefused::Paused)),
            RefusedParked::Round { paused: true },
            RefusedParked::Discovery { batch: BatchId(3) },
        ]
    );
    assert!(refused.derive_again);
    assert!(machine.refused.is_paused(now, &filter(1)));
    assert!(machine.refused.is_paused(now, &filter(2)));
    assert_eq!(
        machine.health.sync_paused_until(now),
        None,
        "only what was refused pauses"
    );
    assert!(machine.take_coverage_retry(now));
    assert!(
        machine.handle_auth_failed(now, identity).refused.is_empty(),
        "each piece is refused once"
    );
}

#[test]
fn a_failed_auth_that_parked_only_a_discovery_derives_no_coverage() {
    let now = Instant::now();
    let mut machine = connected(now);
    park(&mut machine, now, discovery(3));

    let refused = machine.handle_auth_failed(now, identity);

    assert_eq!(
        refused.refused,
        [RefusedParked::Discovery { batch: BatchId(3) }]
    );
    assert!(
        !refused.derive_again,
        "a relay's discovery keeps its own deadlines"
    );
    assert!(!machine.take_coverage_retry(now));
}

#[test]
fn parked_work_without_an_outcome_is_refused_at_its_deadline() {
    let now = Instant::now();
    let mut machine = connected(now);
    park(&mut machine, now, ParkedWork::Coverage(vec![filter(1)]));

    let early = machine.handle_auth_timeout(now + AUTH_WAIT / 2, identity);
    assert!(early.refused.is_empty(), "not before the deadline");

    let due = machine.handle_auth_timeout(now + AUTH_WAIT, identity);
    assert_eq!(
        due.refused,
        [RefusedParked::Coverage(Some(CoverageRefused::Paused))]
    );
}

#[test]
fn a_round_refused_for_auth_is_derived_again_or_paused() {
    let now = Instant::now();
    let mut machine = connected(now);
    let text = "auth-required: members only";

    assert_eq!(
        machine.handle_round_auth_refusal(now, &filter(1), text, false),
        RoundAuth::DeriveAgain,
        "parked while the AUTH may succeed"
    );
    assert_eq!(machine.stats.refusals.get("auth_required"), Some(&1));

    machine.handle_authenticated(now);
    assert_eq!(
        machine.handle_round_auth_refusal(now, &filter(2), text, true),
        RoundAuth::DeriveAgain,
        "a round sent before the AUTH succeeded is sent again"
    );
    assert_eq!(
        machine.handle_round_auth_refusal(now, &filter(3), text, false),
        RoundAuth::Refused { paused: true },
        "after the AUTH, a refusal is a policy refusal"
    );
    assert!(machine.refused.is_paused(now, &filter(3)));
    assert!(!machine.refused.is_paused(now, &filter(2)));
}
