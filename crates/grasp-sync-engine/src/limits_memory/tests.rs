//! Unit tests of kept limits: age, count, change detection and the file's round trip.

use std::time::Duration;

use grasp_sync_ledger::RememberedLimits;
use grasp_sync_model::RelayUrl;

use super::*;

const DAY: u64 = 24 * 3600;

fn relay(n: usize) -> RelayUrl {
    RelayUrl::parse(&format!("wss://r{n}.example")).expect("url")
}

fn record(slots: usize, at: u64) -> RelayLimitsRecord {
    RelayLimitsRecord {
        subscription_slots: Some(slots),
        learned_at: at,
        ..RelayLimitsRecord::default()
    }
}

#[test]
fn records_older_than_the_age_or_empty_are_not_restored() {
    let now = 100 * DAY;
    let kept = RememberedRelays::restore(
        [
            (relay(1), record(8, now - 6 * DAY)),
            (relay(2), record(8, now - 8 * DAY)),
            (
                relay(3),
                RelayLimitsRecord {
                    learned_at: now,
                    ..RelayLimitsRecord::default()
                },
            ),
        ],
        now,
        Duration::from_secs(7 * DAY),
    );
    assert_eq!(kept.len(), 1);
    assert!(kept.get(&relay(1)).is_some());
    assert!(kept.get(&relay(2)).is_none(), "learned again after the age");
}

#[test]
fn at_most_the_newest_records_are_kept() {
    let records = (0..MAX_REMEMBERED_RELAYS + 10).map(|n| (relay(n), record(8, n as u64)));
    let mut kept = RememberedRelays::restore(records, 5_000, Duration::from_secs(7 * DAY));
    assert_eq!(kept.len(), MAX_REMEMBERED_RELAYS);
    assert!(kept.get(&relay(9)).is_none(), "the oldest went");
    assert!(kept.get(&relay(10)).is_some());
    // One more relay learns something: the oldest left goes.
    kept.observe(
        &relay(MAX_REMEMBERED_RELAYS + 10),
        Some(4),
        RememberedLimits::default(),
        6_000,
    );
    assert_eq!(kept.len(), MAX_REMEMBERED_RELAYS);
    assert!(kept.get(&relay(10)).is_none());
}

#[test]
fn only_a_change_in_what_was_learned_is_written() {
    let mut kept = RememberedRelays::default();
    assert_eq!(kept.take_changes(), None);
    let ledger = RememberedLimits {
        filter_ceiling: Some(3),
        filter_ceiling_known: false,
        retained_byte_cap: Some(9_000),
    };
    kept.observe(&relay(1), None, RememberedLimits::default(), 10);
    assert_eq!(kept.take_changes(), None, "nothing learned, nothing kept");
    kept.observe(&relay(1), Some(6), ledger, 10);
    let changes = kept.take_changes().expect("changed");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].1.learned_at, 10);
    assert_eq!(changes[0].1.ledger_limits(), ledger);
    // The same limits later: no write, and the record keeps its time.
    kept.observe(&relay(1), Some(6), ledger, 20);
    assert_eq!(kept.take_changes(), None);
    assert_eq!(kept.get(&relay(1)).map(|r| r.learned_at), Some(10));
    // A lower ceiling: written, learned now.
    kept.observe(
        &relay(1),
        Some(6),
        RememberedLimits {
            filter_ceiling: Some(2),
            ..ledger
        },
        30,
    );
    let changes = kept.take_changes().expect("changed");
    assert_eq!(changes[0].1.filter_ceiling, Some(2));
    assert_eq!(changes[0].1.learned_at, 30);
    // The same ceiling proven since: written, known now.
    kept.observe(
        &relay(1),
        Some(6),
        RememberedLimits {
            filter_ceiling: Some(2),
            filter_ceiling_known: true,
            ..ledger
        },
        40,
    );
    let changes = kept.take_changes().expect("changed");
    assert!(changes[0].1.filter_ceiling_known);
    assert_eq!(changes[0].1.learned_at, 40);
}

#[test]
fn records_marked_changed_after_a_failed_write_are_written_again() {
    let mut kept = RememberedRelays::default();
    kept.observe(&relay(1), Some(6), RememberedLimits::default(), 10);
    let first = kept.take_changes().expect("changed");
    assert_eq!(kept.take_changes(), None);
    kept.mark_changed();
    assert_eq!(kept.take_changes(), Some(first));
}

#[test]
fn the_file_round_trips_and_a_missing_file_holds_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let memory = FileLimitsMemory::new(dir.path().join("learned-limits.json"));
    assert!(memory.load().expect("missing file").is_empty());
    let records = vec![
        (relay(1), record(6, 10)),
        (
            relay(2),
            RelayLimitsRecord {
                subscription_slots: None,
                filter_ceiling: Some(3),
                filter_ceiling_known: true,
                retained_byte_cap: Some(9_000),
                learned_at: 11,
            },
        ),
        (
            relay(3),
            RelayLimitsRecord {
                filter_ceiling: Some(5),
                learned_at: 12,
                ..RelayLimitsRecord::default()
            },
        ),
    ];
    memory.save(&records).expect("save");
    assert_eq!(memory.load().expect("load"), records);
    assert!(!dir.path().join("learned-limits.json.tmp").exists());
}

#[test]
fn a_damaged_file_is_a_typed_error_and_foreign_urls_are_skipped() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("learned-limits.json");
    std::fs::write(&path, b"{not json").expect("write");
    let memory = FileLimitsMemory::new(&path);
    assert!(matches!(
        memory.load(),
        Err(LimitsMemoryError::Format { .. })
    ));
    std::fs::write(
        &path,
        br#"{"version":1,"relays":{"http://not-a-relay":{"learned_at":1,"subscription_slots":4},"wss://ok.example":{"learned_at":2,"subscription_slots":5}}}"#,
    )
    .expect("write");
    let loaded = memory.load().expect("load");
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].0.as_str(), "wss://ok.example");
}

#[test]
fn a_ceiling_kept_before_its_knowledge_was_kept_is_a_guess() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("learned-limits.json");
    std::fs::write(
        &path,
        br#"{"version":1,"relays":{"wss://old.example":{"learned_at":2,"filter_ceiling":5}}}"#,
    )
    .expect("write");
    let loaded = FileLimitsMemory::new(&path).load().expect("load");
    assert_eq!(
        loaded[0].1.ledger_limits(),
        RememberedLimits {
            filter_ceiling: Some(5),
            filter_ceiling_known: false,
            retained_byte_cap: None,
        }
    );
}
