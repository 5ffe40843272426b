//! Tests of the reconciliation's ratios and of when it counts as done.

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::{ReconcileReport, covers};

fn report(naive: Option<u64>) -> ReconcileReport {
    ReconcileReport {
        bytes_sent: 300,
        bytes_received: 100,
        full_sync_bytes: 10_000,
        naive_bytes: naive,
        ..ReconcileReport::default()
    }
}

#[test]
fn the_target_is_checked_against_the_cheaper_full_sync() {
    assert_eq!(report(None).ratio(), Some(0.04));
    assert_eq!(report(None).worst_ratio(), Some(0.04));
    assert_eq!(report(Some(4_000)).worst_ratio(), Some(0.1));
    assert_eq!(report(Some(40_000)).worst_ratio(), Some(0.04));
    let nothing = ReconcileReport::default();
    assert_eq!(nothing.worst_ratio(), None);
}

fn status(relays: &[(&str, &str, usize, usize)]) -> EngineStatus {
    let mut status = EngineStatus::default();
    for (url, connection, pending, repos) in relays {
        status.relays.insert(
            (*url).to_owned(),
            RelayStatus {
                connection: (*connection).to_owned(),
                pending_batches: *pending,
                confirmed_repos: *repos,
                confirmed_root_events: 2 * repos,
                ..RelayStatus::default()
            },
        );
    }
    status
}

#[test]
fn done_once_every_relay_the_first_run_synced_is_settled_with_its_coverage() {
    let first = status(&[
        ("ws://a/", "connected", 0, 3),
        ("ws://b/", "connected", 0, 2),
        ("ws://down/", "disconnected", 0, 0),
    ]);
    assert!(!covers(&EngineStatus::default(), &first, 0));
    assert!(!covers(
        &status(&[("ws://a/", "connected", 0, 3), ("ws://b/", "syncing", 1, 0)]),
        &first,
        0
    ));
    assert!(!covers(
        &status(&[
            ("ws://a/", "connected", 0, 3),
            ("ws://b/", "connected", 0, 1)
        ]),
        &first,
        0
    ));
    assert!(covers(
        &status(&[
            ("ws://a/", "connected", 0, 3),
            ("ws://b/", "connected", 0, 2)
        ]),
        &first,
        0
    ));
    assert!(
        !covers(&first, &EngineStatus::default(), 0),
        "a first run that synced nothing gives nothing to wait for, and no figure"
    );
}

#[test]
fn a_daily_run_is_done_only_once_every_synced_relay_ran_it() {
    let first = status(&[
        ("ws://a/", "connected", 0, 3),
        ("ws://b/", "connected", 0, 2),
    ]);
    let mut now = first.clone();
    assert!(covers(&now, &first, 0));
    assert!(
        !covers(&now, &first, 1),
        "the coverage still confirmed from before the call does not count"
    );
    if let Some(relay) = now.relays.get_mut("ws://a/") {
        relay.daily_reconciliations = 1;
    }
    assert!(!covers(&now, &first, 1), "ws://b/ has not run it");
    if let Some(relay) = now.relays.get_mut("ws://b/") {
        relay.daily_reconciliations = 1;
    }
    assert!(covers(&now, &first, 1));
}
