//! Reading a counter from the idle daemon's Prometheus text: summed over its label sets, and
//! a value that is not a number is an error.

use super::counter_total;

const EXPOSITION: &str = "\
# HELP grasp_sync_events_synced_total events newly saved by sync (not duplicates, not rejected)
# TYPE grasp_sync_events_synced_total counter
grasp_sync_events_synced_total{otel_scope_name=\"grasp-sync\",relay=\"ws://a\"} 8000
grasp_sync_events_synced_total{otel_scope_name=\"grasp-sync\",relay=\"ws://b\"} 120
grasp_sync_events_synced_totally_else 5
grasp_sync_relays_tracked_total 8
";

#[test]
fn a_counter_is_summed_over_its_label_sets_and_nothing_else() {
    assert_eq!(
        counter_total(EXPOSITION, "grasp_sync_events_synced_total").expect("parses"),
        8_120
    );
    assert_eq!(
        counter_total(EXPOSITION, "grasp_sync_relays_tracked_total").expect("parses"),
        8
    );
    assert_eq!(counter_total(EXPOSITION, "absent").expect("parses"), 0);
}

#[test]
fn a_sample_that_is_not_a_number_is_an_error() {
    assert!(
        counter_total(
            "grasp_sync_events_synced_total x\n",
            "grasp_sync_events_synced_total"
        )
        .is_err()
    );
}
