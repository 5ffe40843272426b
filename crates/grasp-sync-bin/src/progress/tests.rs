//! Tests of the progress line, its silence off a terminal, and the first-sync log.

use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::*;

fn status(connections: &[&str], saved: u64) -> EngineStatus {
    let mut status = EngineStatus::default();
    for (i, connection) in connections.iter().enumerate() {
        status.relays.insert(
            format!("ws://r{i}/"),
            RelayStatus {
                connection: (*connection).into(),
                events_saved: saved,
                ..RelayStatus::default()
            },
        );
    }
    status
}

#[test]
fn the_line_shows_events_against_expected_and_relays_done() {
    let progress = SyncProgress::of(
        &status(
            &["connected", "syncing", "connected_historic_sync_failures"],
            1,
        ),
        12,
        Some(48),
        Duration::from_millis(3500),
    );
    assert_eq!(
        progress.render(),
        "[   3.5s] [######..................] 12/48 events stored, 2/3 relays done"
    );
    let unknown = SyncProgress {
        expected: None,
        ..progress
    };
    assert_eq!(
        unknown.render(),
        "[   3.5s] 12 events stored, 2/3 relays done"
    );
}

#[test]
fn a_terminal_gets_one_rewritten_line_and_anything_else_nothing() {
    let progress = SyncProgress::of(&status(&["syncing"], 0), 1, Some(2), Duration::ZERO);
    let mut quiet = Vec::new();
    let mut line = ProgressLine::new(false);
    line.show(&mut quiet, &progress).expect("show");
    line.finish(&mut quiet).expect("finish");
    assert!(quiet.is_empty());

    let mut shown = Vec::new();
    let mut line = ProgressLine::new(true);
    line.show(&mut shown, &progress).expect("show");
    line.show(&mut shown, &progress).expect("show");
    line.finish(&mut shown).expect("finish");
    line.finish(&mut shown)
        .expect("a second finish adds nothing");
    let text = String::from_utf8(shown).expect("utf-8");
    assert_eq!(text.matches("\r\x1b[2K").count(), 2, "{text:?}");
    assert!(text.ends_with("relays done\n"), "{text:?}");
    assert_eq!(text.matches('\n').count(), 1, "{text:?}");
}

#[test]
fn the_first_sync_is_reported_until_no_relay_is_syncing() {
    let mut first = FirstSync::default();
    let second = Duration::from_secs(1);
    assert_eq!(first.handle_status(&EngineStatus::default(), second), None);
    let (last, line) = first
        .handle_status(&status(&["connected", "syncing"], 4), second)
        .expect("progress");
    assert!(!last);
    assert_eq!(line, "first sync: 8 events stored, 1/2 relays done");
    let (last, line) = first
        .handle_status(
            &status(&["connected", "disconnected"], 5),
            Duration::from_secs(42),
        )
        .expect("done");
    assert!(last);
    assert_eq!(
        line,
        "first sync done in 42s: 10 events stored, 1/2 relays done"
    );
    assert_eq!(first.handle_status(&status(&["syncing"], 5), second), None);
}
