//! Unit tests of the subscription ledger: budget, margin, atomic live admission, class caps,
//! generations, release rules, the watchdog, and property tests of its invariants.

use std::time::{Duration, Instant};

use nostr::SubscriptionId;
use proptest::prelude::*;

use super::*;

fn sub(name: &str) -> SubscriptionId {
    SubscriptionId::new(name)
}

fn subs(prefix: &str, n: usize) -> Vec<SubscriptionId> {
    (0..n).map(|i| sub(&format!("{prefix}{i}"))).collect()
}

fn ledger(advertised: Option<u32>) -> (Instant, SubscriptionLedger) {
    let now = Instant::now();
    (
        now,
        SubscriptionLedger::new(now, SessionBudget::from_nip11(advertised)),
    )
}

/// Admits live groups one by one until refused; returns how many fit.
fn live_capacity(advertised: Option<u32>) -> usize {
    let (now, mut ledger) = ledger(advertised);
    let generation = ledger.generation();
    let mut admitted = 0;
    while ledger
        .admit_live(now, generation, vec![sub(&format!("l{admitted}"))])
        .is_ok()
    {
        admitted += 1;
    }
    admitted
}

#[test]
fn budget_defaults_to_twenty_without_nip11() {
    assert_eq!(SessionBudget::from_nip11(None).slots(), 20);
    assert_eq!(live_capacity(None), 20 - RESERVED_MARGIN - 1);
}

#[test]
fn budget_honours_advertised_values_below_twenty() {
    assert_eq!(SessionBudget::from_nip11(Some(10)).slots(), 10);
    assert_eq!(live_capacity(Some(10)), 7);
    assert_eq!(live_capacity(Some(200)), 197);
}

#[test]
fn margin_of_two_is_never_lent_to_transients() {
    let (now, mut ledger) = ledger(Some(5));
    let generation = ledger.generation();
    // 5 slots - 2 margin = 3 usable; negentropy rounds may take all of them.
    for i in 0..3 {
        ledger
            .acquire(
                now,
                generation,
                PermitClass::NegentropyRound,
                sub(&format!("n{i}")),
            )
            .expect("within residual");
    }
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::NegentropyRound, sub("n3")),
        Err(LedgerError::NoResidualSlot {
            class: PermitClass::NegentropyRound
        })
    );
    assert_eq!(ledger.counts().total(), 3);
}

#[test]
fn live_admission_is_atomic() {
    let (now, mut ledger) = ledger(Some(10));
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("a", 5))
        .expect("5 of 7 fit");
    let refused = ledger.admit_live(now, generation, subs("b", 3));
    assert_eq!(
        refused,
        Err(LedgerError::NoTransientSlotLeft {
            requested: 3,
            held_live: 5,
            usable: 8
        })
    );
    assert_eq!(
        ledger.counts().live(),
        5,
        "nothing of the refused admission is held"
    );
    ledger
        .admit_live(now, generation, subs("b", 2))
        .expect("2 more fit");
}

#[test]
fn live_admission_keeps_one_transient_slot() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 17))
        .expect("17 live fit in 20");
    assert_eq!(ledger.residual(), 1);
    ledger
        .acquire(now, generation, PermitClass::HistoricPage, sub("h"))
        .expect("the transient slot remains");
}

#[test]
fn live_admission_waits_for_slots_held_by_transients() {
    let (now, mut ledger) = ledger(Some(8));
    let generation = ledger.generation();
    for i in 0..4 {
        ledger
            .acquire(
                now,
                generation,
                PermitClass::HistoricPage,
                sub(&format!("h{i}")),
            )
            .expect("transient");
    }
    assert_eq!(
        ledger.admit_live(now, generation, subs("l", 3)),
        Err(LedgerError::SlotsHeldByTransients {
            requested: 3,
            held_transient: 4
        })
    );
}

#[test]
fn a_live_admission_checked_ahead_counts_the_permits_to_be_released_and_changes_nothing() {
    // 8 advertised: 6 usable, at most 5 live.
    let (now, mut ledger) = ledger(Some(8));
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 3))
        .expect("3 live fit");
    for name in ["h1", "h2"] {
        ledger
            .acquire(now, generation, PermitClass::HistoricPage, sub(name))
            .expect("transient");
    }
    // Replacing the 3 live groups with 4 fits once the 3 are released.
    assert_eq!(ledger.check_live_admission(3, 4), Ok(()));
    assert_eq!(
        ledger.check_live_admission(0, 2),
        Err(LedgerError::SlotsHeldByTransients {
            requested: 2,
            held_transient: 2
        })
    );
    assert_eq!(ledger.residual(), 1, "a check acquires nothing");
    // The check and the admission agree.
    assert_eq!(
        ledger.admit_live(now, generation, subs("m", 2)).map(|_| ()),
        ledger.check_live_admission(0, 2)
    );
    assert_eq!(ledger.check_live_admission(0, 1), Ok(()));
    ledger
        .admit_live(now, generation, subs("m", 1))
        .expect("one more fits");
}

#[test]
fn live_admission_rejects_duplicate_and_empty_sets() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    assert_eq!(
        ledger.admit_live(now, generation, vec![]),
        Err(LedgerError::EmptyAdmission)
    );
    assert_eq!(
        ledger.admit_live(now, generation, vec![sub("x"), sub("x")]),
        Err(LedgerError::DuplicateSubscription(sub("x")))
    );
    assert_eq!(ledger.counts().total(), 0);
}

#[test]
fn negentropy_rounds_are_capped_at_four() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    for i in 0..4 {
        ledger
            .acquire(
                now,
                generation,
                PermitClass::NegentropyRound,
                sub(&format!("n{i}")),
            )
            .expect("round");
    }
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::NegentropyRound, sub("n4")),
        Err(LedgerError::ClassCapReached {
            class: PermitClass::NegentropyRound,
            cap: 4
        })
    );
}

#[test]
fn transient_reqs_are_capped_at_five_across_classes() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    let classes = [
        PermitClass::HistoricPage,
        PermitClass::PaginationPage,
        PermitClass::HintVerification,
        PermitClass::NegentropyHydration,
        PermitClass::ExactIdFetch,
    ];
    for (i, class) in classes.into_iter().enumerate() {
        ledger
            .acquire(now, generation, class, sub(&format!("t{i}")))
            .expect("transient");
    }
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::Retry, sub("t5")),
        Err(LedgerError::ClassCapReached {
            class: PermitClass::Retry,
            cap: 5
        })
    );
    ledger
        .acquire(now, generation, PermitClass::NegentropyRound, sub("n"))
        .expect("rounds have their own cap");
}

#[test]
fn class_caps_stay_inside_the_shared_residual() {
    let (now, mut ledger) = ledger(Some(10));
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 6))
        .expect("live");
    // residual = 10 - 2 - 6 = 2, below both class caps.
    ledger
        .acquire(now, generation, PermitClass::NegentropyRound, sub("n0"))
        .expect("first");
    ledger
        .acquire(now, generation, PermitClass::SemanticFallback, sub("f0"))
        .expect("second");
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::NegentropyRound, sub("n1")),
        Err(LedgerError::NoResidualSlot {
            class: PermitClass::NegentropyRound
        })
    );
}

#[test]
fn serialised_connection_allows_one_transient_req() {
    let now = Instant::now();
    let mut ledger = SubscriptionLedger::new(now, SessionBudget::from_nip11(None).serialised());
    let generation = ledger.generation();
    ledger
        .acquire(now, generation, PermitClass::HistoricPage, sub("a"))
        .expect("one");
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::HistoricPage, sub("b")),
        Err(LedgerError::ClassCapReached {
            class: PermitClass::HistoricPage,
            cap: 1
        })
    );
}

#[test]
fn acquire_refuses_live_class_and_duplicate_ids() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::Live, sub("l")),
        Err(LedgerError::LiveIsNotTransient)
    );
    ledger
        .acquire(now, generation, PermitClass::Retry, sub("r"))
        .expect("first");
    assert_eq!(
        ledger.acquire(now, generation, PermitClass::Retry, sub("r")),
        Err(LedgerError::DuplicateSubscription(sub("r")))
    );
}

#[test]
fn reconnect_starts_a_new_generation_and_late_borrowers_fail() {
    let (now, mut ledger) = ledger(None);
    let old = ledger.generation();
    ledger
        .acquire(now, old, PermitClass::HistoricPage, sub("h"))
        .expect("held");
    let new = ledger.handle_reconnect(now, SessionBudget::from_nip11(Some(10)));
    assert_eq!(new, old.next());
    assert_eq!(
        ledger.counts().total(),
        0,
        "the retired ledger holds nothing"
    );
    assert_eq!(
        ledger.budget().slots(),
        10,
        "the new session reads its own budget"
    );
    assert_eq!(
        ledger.acquire(now, old, PermitClass::HistoricPage, sub("late")),
        Err(LedgerError::StaleGeneration {
            requested: old,
            current: new
        })
    );
    assert_eq!(
        ledger.admit_live(now, old, vec![sub("late-live")]),
        Err(LedgerError::StaleGeneration {
            requested: old,
            current: new
        })
    );
}

#[test]
fn releasing_a_stale_permit_is_a_no_op() {
    let (now, mut ledger) = ledger(None);
    let old = ledger.generation();
    let stale = ledger
        .acquire(now, old, PermitClass::HistoricPage, sub("h"))
        .expect("held");
    let new = ledger.handle_reconnect(now, SessionBudget::default());
    let fresh = ledger
        .acquire(now, new, PermitClass::HistoricPage, sub("h"))
        .expect("same id");
    assert_eq!(
        ledger.handle_release(now, &stale, ReleaseReason::EoseCloseEnqueued),
        Ok(Release::Stale)
    );
    assert_eq!(
        ledger.counts().transient(),
        1,
        "the new generation's permit is untouched"
    );
    assert_eq!(
        ledger.handle_release(now, &fresh, ReleaseReason::Closed),
        Ok(Release::Released)
    );
}

#[test]
fn teardown_releases_everything_and_closes_the_session() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 3))
        .expect("live");
    ledger
        .acquire(now, generation, PermitClass::Retry, sub("r"))
        .expect("transient");
    ledger.handle_teardown(now);
    assert_eq!(ledger.counts().total(), 0);
    assert!(!ledger.is_open());
    let current = ledger.generation();
    assert_eq!(
        ledger.acquire(now, current, PermitClass::Retry, sub("x")),
        Err(LedgerError::SessionClosed)
    );
    let reopened = ledger.handle_reconnect(now, SessionBudget::default());
    assert_eq!(
        reopened, current,
        "teardown already retired the old generation"
    );
    ledger
        .acquire(now, reopened, PermitClass::Retry, sub("x"))
        .expect("open again");
}

#[test]
fn permit_is_released_on_eose_with_close_enqueued() {
    check_release(
        PermitClass::HistoricPage,
        ReleaseReason::EoseCloseEnqueued,
        Ok(Release::Released),
    );
}

#[test]
fn permit_is_released_on_closed() {
    check_release(
        PermitClass::PaginationPage,
        ReleaseReason::Closed,
        Ok(Release::Released),
    );
    check_release(
        PermitClass::Live,
        ReleaseReason::Closed,
        Ok(Release::Released),
    );
}

#[test]
fn live_permit_is_released_on_retirement_only_by_its_owner() {
    check_release(
        PermitClass::Live,
        ReleaseReason::LiveRetired,
        Ok(Release::Released),
    );
    check_release(
        PermitClass::Live,
        ReleaseReason::EoseCloseEnqueued,
        Err(LedgerError::ReasonDoesNotApply {
            class: PermitClass::Live,
            reason: "eose_close_enqueued",
        }),
    );
    check_release(
        PermitClass::Retry,
        ReleaseReason::LiveRetired,
        Err(LedgerError::ReasonDoesNotApply {
            class: PermitClass::Retry,
            reason: "live_retired",
        }),
    );
}

#[test]
fn watchdog_release_before_expiry_is_refused() {
    check_release(
        PermitClass::HistoricPage,
        ReleaseReason::WatchdogCloseAccepted,
        Err(LedgerError::WatchdogNotExpired(sub("s"))),
    );
}

/// Acquires one permit of `class` as "s", releases it with `reason` and checks the outcome and
/// that the count dropped exactly when the release succeeded.
fn check_release(
    class: PermitClass,
    reason: ReleaseReason,
    expected: Result<Release, LedgerError>,
) {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    let permit = if class == PermitClass::Live {
        ledger
            .admit_live(now, generation, vec![sub("s")])
            .expect("live")
            .remove(0)
    } else {
        ledger
            .acquire(now, generation, class, sub("s"))
            .expect("transient")
    };
    let outcome = ledger.handle_release(now, &permit, reason);
    let held_after = usize::from(outcome != Ok(Release::Released));
    assert_eq!(outcome, expected);
    assert_eq!(ledger.counts().get(class), held_after);
}

#[test]
fn watchdog_releases_only_the_timed_out_subscription_after_close_accepted() {
    let (start, mut ledger) = ledger(None);
    let generation = ledger.generation();
    let slow = ledger
        .acquire(start, generation, PermitClass::HistoricPage, sub("slow"))
        .expect("a");
    let later = start + Duration::from_secs(30);
    let _young = ledger
        .acquire(later, generation, PermitClass::Retry, sub("young"))
        .expect("b");
    assert_eq!(ledger.poll_timeout(), Some(start + WATCHDOG_TIMEOUT));
    assert_eq!(ledger.poll_watchdog(start + Duration::from_secs(119)), None);
    let expired_at = start + WATCHDOG_TIMEOUT;
    let expiry = ledger.poll_watchdog(expired_at).expect("slow expired");
    assert_eq!(expiry.subscription_id, sub("slow"));
    assert_eq!(expiry.class, PermitClass::HistoricPage);
    assert_eq!(
        ledger.poll_watchdog(expired_at),
        None,
        "reported once; young is not due"
    );
    assert_eq!(
        ledger.counts().transient(),
        2,
        "held until the CLOSE is accepted"
    );
    assert_eq!(
        ledger.handle_release(expired_at, &slow, ReleaseReason::WatchdogCloseAccepted),
        Ok(Release::Released)
    );
    assert_eq!(ledger.counts().transient(), 1);
    assert_eq!(ledger.counts().get(PermitClass::Retry), 1);
    assert_eq!(ledger.poll_timeout(), Some(later + WATCHDOG_TIMEOUT));
}

#[test]
fn live_permits_have_no_watchdog() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 2))
        .expect("live");
    assert_eq!(ledger.poll_timeout(), None);
    assert_eq!(ledger.poll_watchdog(now + Duration::from_secs(3600)), None);
}

#[test]
fn counts_are_exported_per_class() {
    let (now, mut ledger) = ledger(None);
    let generation = ledger.generation();
    ledger
        .admit_live(now, generation, subs("l", 3))
        .expect("live");
    ledger
        .acquire(now, generation, PermitClass::ExactIdFetch, sub("e"))
        .expect("fetch");
    ledger
        .acquire(now, generation, PermitClass::NegentropyRound, sub("n"))
        .expect("round");
    let counts = ledger.counts();
    let labelled: Vec<(&str, usize)> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (c.as_str(), n))
        .collect();
    assert_eq!(
        labelled,
        vec![("live", 3), ("exact_id_fetch", 1), ("negentropy_round", 1)]
    );
    assert_eq!(
        (counts.live(), counts.transient(), counts.transient_reqs()),
        (3, 2, 1)
    );
}

#[derive(Debug, Clone)]
enum Op {
    Live(usize),
    Acquire(usize),
    Release(usize, usize),
    Reconnect(u32),
    Teardown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..5).prop_map(Op::Live),
        (0usize..9).prop_map(Op::Acquire),
        (0usize..64, 0usize..4).prop_map(|(i, r)| Op::Release(i, r)),
        (0u32..30).prop_map(Op::Reconnect),
        Just(Op::Teardown),
    ]
}

proptest! {
    #[test]
    fn ledger_never_exceeds_its_budget_and_conserves_permits(
        advertised in proptest::option::of(0u32..30),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let start = Instant::now();
        let mut ledger = SubscriptionLedger::new(start, SessionBudget::from_nip11(advertised));
        let mut outstanding: Vec<Permit> = Vec::new();
        let mut serial = 0usize;
        for (step, op) in ops.into_iter().enumerate() {
            let now = start + Duration::from_secs(step as u64 * 7);
            let generation = ledger.generation();
            match op {
                Op::Live(n) => {
                    let ids = (0..n).map(|i| sub(&format!("live-{serial}-{i}"))).collect();
                    serial += 1;
                    if let Ok(permits) = ledger.admit_live(now, generation, ids) {
                        prop_assert_eq!(permits.len(), n);
                        outstanding.extend(permits);
                    }
                }
                Op::Acquire(class) => {
                    let class = PermitClass::ALL[class];
                    serial += 1;
                    if let Ok(permit) = ledger.acquire(now, generation, class, sub(&format!("t-{serial}"))) {
                        outstanding.push(permit);
                    }
                }
                Op::Release(index, reason) => {
                    if !outstanding.is_empty() {
                        let permit = outstanding.swap_remove(index % outstanding.len());
                        let current = permit.generation() == ledger.generation();
                        let reason = [
                            ReleaseReason::EoseCloseEnqueued,
                            ReleaseReason::Closed,
                            ReleaseReason::LiveRetired,
                            ReleaseReason::WatchdogCloseAccepted,
                        ][reason];
                        let before = ledger.counts().total();
                        match ledger.handle_release(now, &permit, reason) {
                            Ok(Release::Released) => {
                                prop_assert!(current);
                                prop_assert_eq!(ledger.counts().total(), before - 1);
                            }
                            Ok(Release::Stale) => {
                                prop_assert!(!current || !ledger.is_open());
                                prop_assert_eq!(ledger.counts().total(), before);
                            }
                            Err(_) => {
                                prop_assert_eq!(ledger.counts().total(), before);
                                outstanding.push(permit);
                            }
                        }
                    }
                }
                Op::Reconnect(b) => {
                    ledger.handle_reconnect(now, SessionBudget::from_nip11(Some(b)));
                }
                Op::Teardown => ledger.handle_teardown(now),
            }
            while ledger.poll_watchdog(now).is_some() {}
            let counts = ledger.counts();
            let budget = ledger.budget();
            prop_assert!(counts.total() <= budget.usable());
            prop_assert!(counts.negentropy_rounds() <= NEGENTROPY_ROUND_CAP);
            prop_assert!(counts.transient_reqs() <= TRANSIENT_REQ_CAP);
            let held_now = outstanding
                .iter()
                .filter(|p| p.generation() == ledger.generation())
                .count();
            prop_assert_eq!(held_now, counts.total(), "permits conserved");
        }
    }
}
