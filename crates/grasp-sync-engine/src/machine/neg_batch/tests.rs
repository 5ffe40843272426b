//! The NIP-77 batch's phases: what every round's end decides (fail, fall back, confirm or
//! hydrate), what a drained hydration or recovery does next, and when a batch is a first sync.

use std::collections::BTreeSet;

use grasp_sync_model::PendingItems;
use nostr::{EventId, Filter, Kind};

use super::{
    Drained, FIRST_SYNC_MAX_HELD, HistoryRoute, NegBatch, RelayFacts, RoundsDone,
    first_sync_max_held,
};
use crate::machine::delivered::DeliveredIds;
use crate::machine::hydration::SEMANTIC_FALLBACK_MIN_ADVERTISED;

fn id(n: u64) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    EventId::from_byte_array(bytes)
}

fn ids(range: std::ops::Range<u64>) -> Vec<EventId> {
    range.map(id).collect()
}

fn batch() -> NegBatch {
    NegBatch::rounds(
        vec![Filter::new().kind(Kind::GitPatch)],
        false,
        FIRST_SYNC_MAX_HELD,
    )
}

fn items(roots: usize) -> PendingItems {
    PendingItems {
        root_events: ids(0..roots as u64).into_iter().collect(),
        ..PendingItems::default()
    }
}

#[test]
fn a_small_batch_is_a_first_sync_below_the_fixed_floor() {
    assert_eq!(first_sync_max_held(&items(3)), FIRST_SYNC_MAX_HELD);
}

#[test]
fn a_large_batch_is_a_first_sync_below_one_held_event_per_item() {
    let roots = FIRST_SYNC_MAX_HELD * 5;
    assert_eq!(first_sync_max_held(&items(roots)), roots);
}

#[test]
fn rounds_that_found_nothing_confirm() {
    let mut neg = batch();
    neg.handle_round_diff([]);
    assert_eq!(neg.handle_rounds_done(), RoundsDone::Confirm);
}

#[test]
fn a_refused_round_fails_the_batch_before_anything_else() {
    let mut neg = batch();
    neg.handle_round_diff(ids(0..3));
    neg.handle_round_failed();
    neg.handle_round_refused();
    assert_eq!(neg.handle_rounds_done(), RoundsDone::Fail);
}

#[test]
fn a_failed_round_falls_the_batch_back_and_ends_its_first_sync_trade() {
    let mut neg = batch();
    assert!(neg.may_trade_for_req());
    neg.handle_round_diff(ids(0..3));
    neg.handle_round_failed();
    assert!(!neg.may_trade_for_req());
    assert_eq!(neg.handle_rounds_done(), RoundsDone::FallBack);
}

#[test]
fn the_diffs_of_every_round_are_hydrated_together_sorted_and_once() {
    let mut neg = batch();
    neg.handle_round_diff([id(5), id(1)]);
    neg.handle_round_diff([id(3), id(1)]);
    assert_eq!(
        neg.handle_rounds_done(),
        RoundsDone::Hydrate(vec![id(1), id(3), id(5)])
    );
    assert!(
        !neg.may_trade_for_req(),
        "a hydrating batch is past its rounds"
    );
    assert_eq!(neg.hydration_progress(), Some((3, 0, true)));
}

#[test]
fn a_hydration_that_delivered_everything_confirms() {
    let mut neg = batch();
    neg.handle_round_diff(ids(0..3));
    let _ = neg.handle_rounds_done();
    for n in 0..3 {
        neg.handle_exact_delivery(id(n));
    }
    neg.handle_exact_delivery(id(99)); // not advertised: counts for nothing
    assert_eq!(neg.hydration_progress(), Some((3, 3, true)));
    assert!(matches!(neg.handle_drained(), Drained::Confirm));
}

#[test]
fn a_first_pass_short_of_a_few_retries_the_residual_as_a_later_pass() {
    let mut neg = batch();
    neg.handle_round_diff(ids(0..3));
    let _ = neg.handle_rounds_done();
    neg.handle_exact_delivery(id(0));
    let Drained::Retry { next, ids } = neg.handle_drained() else {
        panic!("a residual is retried");
    };
    assert_eq!(ids, vec![id(1), id(2)]);
    assert_eq!(next.hydration_progress(), Some((2, 0, false)));
    assert_eq!(
        next.filters.len(),
        1,
        "the semantic filters stay for a fallback"
    );

    // A later pass that delivers nothing fails the batch; its residual goes to recovery.
    let Drained::Failed { residual } = next.handle_drained() else {
        panic!("no progress in a retry fails the batch");
    };
    assert_eq!(residual, vec![id(1), id(2)]);
}

#[test]
fn a_relay_that_serves_almost_nothing_by_id_falls_back_to_semantic_filters() {
    let advertised = SEMANTIC_FALLBACK_MIN_ADVERTISED as u64;
    let mut neg = batch();
    neg.handle_round_diff(ids(0..advertised));
    let _ = neg.handle_rounds_done();
    let Drained::SemanticFallback {
        next,
        advertised: asked,
        delivered,
    } = neg.handle_drained()
    else {
        panic!("a materially incompatible first pass falls back");
    };
    assert_eq!((asked, delivered), (SEMANTIC_FALLBACK_MIN_ADVERTISED, 0));
    assert!(
        !next.may_trade_for_req(),
        "the fallback is final for the batch"
    );
    assert_eq!(next.filters.len(), 1);
}

#[test]
fn a_recovery_batch_reports_what_it_delivered() {
    let mut neg = NegBatch::recovery(ids(0..4).into_iter().collect());
    neg.handle_exact_delivery(id(1));
    neg.handle_exact_delivery(id(3));
    let Drained::RecoveryDone { pass } = neg.handle_drained() else {
        panic!("a recovery batch ends as recovery");
    };
    let residual: BTreeSet<EventId> = pass.residual().into_iter().collect();
    assert_eq!(residual, [id(0), id(2)].into_iter().collect());
}

#[test]
fn a_batch_drained_in_its_rounds_phase_confirms_its_fallback_groups() {
    let mut neg = batch();
    neg.handle_round_failed();
    assert_eq!(neg.handle_rounds_done(), RoundsDone::FallBack);
    assert!(matches!(neg.handle_drained(), Drained::Confirm));
}

/// A batch of `filters` filters that is a first sync below `FIRST_SYNC_MAX_HELD` held events.
fn checking(filters: usize) -> NegBatch {
    NegBatch::rounds(
        (0..filters)
            .map(|n| {
                Filter::new()
                    .kind(Kind::GitPatch)
                    .identifier(format!("repo-{n}"))
            })
            .collect(),
        true,
        FIRST_SYNC_MAX_HELD,
    )
}

const FIRST_SYNC: RelayFacts = RelayFacts {
    several_per_req: true,
    reconciling: false,
};

#[test]
fn coverage_the_store_holds_none_of_goes_by_req_where_it_sends_nothing_again() {
    let delivered = DeliveredIds::default();
    let mut neg = checking(3);
    assert_eq!(
        neg.handle_held(Some(&[]), FIRST_SYNC, &delivered),
        HistoryRoute::ReqEose
    );
    assert!(!neg.checking_held, "the rounds no longer wait");
    let one_per_req = RelayFacts {
        several_per_req: false,
        reconciling: true,
    };
    assert_eq!(
        checking(1).handle_held(Some(&[]), one_per_req, &delivered),
        HistoryRoute::ReqEose,
        "one filter is one start either way"
    );
    assert_eq!(
        checking(3).handle_held(Some(&[]), one_per_req, &delivered),
        HistoryRoute::Nip77,
        "REQ+EOSE would cost three starts"
    );
}

#[test]
fn coverage_the_store_barely_holds_goes_by_req_only_during_a_first_sync() {
    let delivered = DeliveredIds::default();
    let held = ids(0..FIRST_SYNC_MAX_HELD as u64 - 1);
    assert_eq!(
        checking(3).handle_held(Some(&held), FIRST_SYNC, &delivered),
        HistoryRoute::ReqEose
    );
    let reconciling = RelayFacts {
        reconciling: true,
        ..FIRST_SYNC
    };
    assert_eq!(
        checking(3).handle_held(Some(&held), reconciling, &delivered),
        HistoryRoute::Nip77
    );
    assert_eq!(
        checking(1).handle_held(Some(&held), FIRST_SYNC, &delivered),
        HistoryRoute::Nip77,
        "a single filter saves no start"
    );
    let enough = ids(0..FIRST_SYNC_MAX_HELD as u64);
    assert_eq!(
        checking(3).handle_held(Some(&enough), FIRST_SYNC, &delivered),
        HistoryRoute::Nip77
    );
}

#[test]
fn events_this_relay_delivered_or_a_failed_read_keep_the_batch_on_nip77() {
    let mut delivered = DeliveredIds::default();
    delivered.record(id(5));
    assert_eq!(
        checking(3).handle_held(Some(&ids(0..10)), FIRST_SYNC, &delivered),
        HistoryRoute::Nip77,
        "the relay would send event 5 again"
    );
    assert_eq!(
        checking(3).handle_held(Some(&ids(10..20)), FIRST_SYNC, &delivered),
        HistoryRoute::ReqEose
    );
    assert_eq!(
        checking(3).handle_held(None, FIRST_SYNC, &delivered),
        HistoryRoute::Nip77
    );
}

#[test]
fn a_batch_whose_rounds_failed_no_longer_trades_them_for_req() {
    let mut neg = checking(3);
    neg.handle_round_failed();
    assert_eq!(
        neg.handle_held(Some(&[]), FIRST_SYNC, &DeliveredIds::default()),
        HistoryRoute::Nip77
    );
}
