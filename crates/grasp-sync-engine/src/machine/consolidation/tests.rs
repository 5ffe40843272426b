//! The consolidation rule: queued past the margin, run only once no batch is pending, taken
//! once, forgotten by a new session, and a rebuild only beyond the baseline plus the margin.

use super::{Consolidation, is_fragmented};

#[test]
fn a_check_is_queued_only_past_the_margin_and_runs_once_no_batch_is_pending() {
    let mut consolidation = Consolidation::default();
    consolidation.handle_live_changed(3, 3);
    assert!(
        !consolidation.take_due(false),
        "at the margin: nothing queued"
    );

    consolidation.handle_live_changed(4, 3);
    assert!(
        !consolidation.take_due(true),
        "a batch is pending: it waits"
    );
    assert!(consolidation.take_due(false));
    assert!(!consolidation.take_due(false), "taken once");
}

#[test]
fn a_new_session_forgets_the_queued_check() {
    let mut consolidation = Consolidation::default();
    consolidation.handle_live_changed(10, 3);
    consolidation.handle_session_started();
    assert!(!consolidation.take_due(false));
}

#[test]
fn groups_are_fragmented_only_beyond_the_baseline_plus_the_margin() {
    assert!(!is_fragmented(7, 4, 3));
    assert!(is_fragmented(8, 4, 3));
    assert!(!is_fragmented(usize::MAX, usize::MAX, 3));
}
