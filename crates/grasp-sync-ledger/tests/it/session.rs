//! One connection session through the public API: plan the live set, admit it into the ledger,
//! pace background work, learn limits from refusals and reconnect.

use std::time::{Duration, Instant};

use grasp_sync_filters::{CoverageTier, PackLimits, TieredFilter};
use grasp_sync_ledger::{
    BackgroundGate, LearnedLimits, LedgerError, LiveBudget, PermitClass, ReactiveGate, Release,
    ReleaseReason, SessionBudget, StartDecision, StartKind, SubscriptionLedger,
    parse_retained_bytes_refusal, plan_live,
};
use nostr::{Filter, SubscriptionId};

fn essential(i: usize) -> TieredFilter {
    TieredFilter::new(
        Filter::new().limit(0).identifier(format!("repo-{i}")),
        CoverageTier::Essential,
    )
}

#[test]
fn a_planned_live_set_is_admitted_into_the_ledger_atomically() {
    let start = Instant::now();
    let session = SessionBudget::from_nip11(Some(10));
    let mut learned = LearnedLimits::new();
    learned.handle_filter_count_refusal(start, Some(2));
    let budget = LiveBudget::new(&session, &learned, PackLimits::default());
    let plan = plan_live(&[], (0..7).map(essential).collect(), &budget).expect("7 groups fit");
    assert_eq!(plan.open.len(), 7);

    let mut ledger = SubscriptionLedger::new(start, session.with_learned(&learned));
    let generation = ledger.generation();
    let ids = (0..plan.open.len())
        .map(|i| SubscriptionId::new(format!("live-{i}")))
        .collect();
    let permits = ledger.admit_live(start, generation, ids).expect("admitted");
    assert_eq!(ledger.residual(), 1, "one transient slot remains");

    let page = ledger
        .acquire(
            start,
            generation,
            PermitClass::HistoricPage,
            SubscriptionId::new("page"),
        )
        .expect("the transient slot");
    assert_eq!(
        ledger.acquire(
            start,
            generation,
            PermitClass::Retry,
            SubscriptionId::new("retry")
        ),
        Err(LedgerError::NoResidualSlot {
            class: PermitClass::Retry
        })
    );
    assert_eq!(
        ledger.handle_release(start, &page, ReleaseReason::EoseCloseEnqueued),
        Ok(Release::Released)
    );

    let next = ledger.handle_reconnect(start, session);
    assert_eq!(ledger.counts().total(), 0);
    assert_eq!(
        ledger.handle_release(start, &permits[0], ReleaseReason::LiveRetired),
        Ok(Release::Stale)
    );
    assert_ne!(next, generation);
}

#[test]
fn a_byte_capped_connection_serialises_transients_across_reconnects() {
    let start = Instant::now();
    let mut learned = LearnedLimits::new();
    let n =
        parse_retained_bytes_refusal("error: active subscriptions exceed max size 131072 bytes")
            .expect("the retained-byte form");
    learned.handle_retained_bytes_refusal(start, n);
    learned.new_session(start);
    let session = SessionBudget::from_nip11(None).with_learned(&learned);
    let mut ledger = SubscriptionLedger::new(start, session);
    let generation = ledger.generation();
    ledger
        .acquire(
            start,
            generation,
            PermitClass::HistoricPage,
            SubscriptionId::new("a"),
        )
        .expect("first");
    assert_eq!(
        ledger.acquire(
            start,
            generation,
            PermitClass::HistoricPage,
            SubscriptionId::new("b")
        ),
        Err(LedgerError::ClassCapReached {
            class: PermitClass::HistoricPage,
            cap: 1
        })
    );
    let budget = LiveBudget::new(&session, &learned, PackLimits::default());
    assert_eq!(budget.persistent_bytes, Some(131_072 - 96 * 1024));
}

#[test]
fn background_work_asks_both_gates_and_live_work_only_the_reactive_one() {
    let start = Instant::now();
    let mut background = BackgroundGate::new(start);
    let mut reactive = ReactiveGate::new(start);
    // Background work asks the background gate first: if the reactive gate then defers it,
    // the spent token delays only background work, never a live start.
    let mut may_start = |now, kind| match background.poll_start(now, kind) {
        StartDecision::Ready => reactive.poll_start(now, kind),
        other => other,
    };
    assert_eq!(may_start(start, StartKind::Historic), StartDecision::Ready);
    assert_eq!(
        may_start(start, StartKind::Retry),
        StartDecision::NotBefore(start + Duration::from_secs(1))
    );
    assert_eq!(may_start(start, StartKind::Live), StartDecision::Ready);
}
