//! Tests of the summary, the rows' sort orders and the uptime and byte texts.

use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::*;

fn status() -> EngineStatus {
    let mut status = EngineStatus {
        repos_tracked: 4,
        root_events_tracked: 9,
        participants: grasp_sync_engine::ParticipantStatus {
            participants: 5,
            relay_lists: 2,
            mailbox_relays: 3,
            ..Default::default()
        },
        ..EngineStatus::default()
    };
    let relay = |connection: &str, health: &str, saved: u64, used, budget| RelayStatus {
        connection: connection.into(),
        health: health.into(),
        events_saved: saved,
        live_subscriptions: used,
        subscription_budget: budget,
        bytes_sent: 100 * saved,
        bytes_received: 1000 * (10 - saved),
        ..RelayStatus::default()
    };
    status
        .relays
        .insert("ws://a/".into(), relay("syncing", "healthy", 3, 1, 10));
    status.relays.insert(
        "ws://b/".into(),
        relay("connected", "ratelimited", 9, 9, 10),
    );
    status
        .relays
        .insert("ws://c/".into(), relay("disconnected", "dead", 0, 0, 0));
    status
}

fn check_order(sort: &str, descending: bool, expected: &[&str]) {
    let sort = Sort {
        key: SortKey::parse(sort).expect("key"),
        descending,
    };
    let urls: Vec<String> = rows(&status(), |_, _| None, sort)
        .into_iter()
        .map(|row| row.url)
        .collect();
    assert_eq!(urls, expected, "{sort:?}");
}

#[test]
fn the_summary_counts_relays_by_state() {
    let summary = Summary::of(&status(), Some(Duration::from_secs(61)));
    assert_eq!(
        summary,
        Summary {
            repos: 4,
            root_events: 9,
            relays: 3,
            events_stored: 12,
            syncing: 1,
            connected: 1,
            paused: 1,
            dead: 1,
            uptime: Some(Duration::from_secs(61)),
            participants: 5,
            relay_lists: 2,
            mailbox_relays: 3,
        }
    );
}

#[test]
fn rows_sort_by_any_column_either_way() {
    check_order("relay", false, &["ws://a/", "ws://b/", "ws://c/"]);
    check_order("synced", true, &["ws://b/", "ws://a/", "ws://c/"]);
    check_order("budget", true, &["ws://b/", "ws://a/", "ws://c/"]);
    check_order("health", false, &["ws://c/", "ws://a/", "ws://b/"]);
    check_order("bytes", true, &["ws://c/", "ws://a/", "ws://b/"]);
    assert_eq!(SortKey::parse("nonsense"), None);
    for key in SortKey::ALL {
        assert_eq!(SortKey::parse(key.name()), Some(key));
    }
}

#[test]
fn uptime_reads_at_a_glance() {
    assert_eq!(format_uptime(Duration::from_secs(6)), "6s");
    assert_eq!(format_uptime(Duration::from_secs(245)), "4m 5s");
    assert_eq!(format_uptime(Duration::from_secs(3723)), "1h 2m");
    assert_eq!(format_uptime(Duration::from_secs(90_000)), "1d 1h");
}

#[test]
fn bytes_read_at_a_glance() {
    assert_eq!(format_bytes(0), "0 B");
    assert_eq!(format_bytes(1023), "1023 B");
    assert_eq!(format_bytes(1536), "1.5 KiB");
    assert_eq!(format_bytes(12 * 1024 * 1024), "12.0 MiB");
    assert_eq!(format_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
}

#[test]
fn extra_live_connections_are_shown_with_what_they_hold() {
    let relay = RelayStatus {
        subscription_budget: 20,
        live_subscriptions: 17,
        extra_connections: 2,
        extra_live_subscriptions: 30,
        ..RelayStatus::default()
    };
    let row = RelayRow::of("ws://a/", &relay, None);
    assert!(
        row.learned
            .contains(&"2 extra connections (30 live)".to_owned()),
        "{:?}",
        row.learned
    );
    let single = RelayRow::of("ws://a/", &RelayStatus::default(), None);
    assert!(!single.learned.iter().any(|l| l.contains("extra")));
}
