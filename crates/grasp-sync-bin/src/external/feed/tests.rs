//! Unit tests of the feed's bounded memory of recent event IDs, and of when it re-reads the
//! stored events.

use std::time::Duration;

use nostr::EventId;
use tokio::time::Instant;

use super::{MAX_RECENT_IDS, REREAD_MAX, REREAD_MIN, REREAD_QUIET, RecentIds, Reread};

fn id(n: usize) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
    EventId::from_byte_array(bytes)
}

#[test]
fn recent_ids_skip_a_re_read_and_forget_the_oldest_past_the_cap() {
    let mut recent = RecentIds::default();
    assert!(recent.insert(id(0)));
    assert!(!recent.insert(id(0)), "a boundary re-read is skipped");
    for n in 1..=MAX_RECENT_IDS {
        assert!(recent.insert(id(n)));
    }
    assert_eq!(recent.set.len(), MAX_RECENT_IDS);
    assert_eq!(recent.order.len(), MAX_RECENT_IDS);
    assert!(recent.insert(id(0)), "the oldest was forgotten");
    assert!(
        !recent.insert(id(MAX_RECENT_IDS)),
        "the newest is remembered"
    );
}

#[test]
fn no_re_read_while_the_live_subscription_delivered_nothing() {
    let start = Instant::now();
    let mut reread = Reread::new(start);
    reread.handle_read_started(start);
    reread.handle_read_done(true);
    assert_eq!(reread.poll_timeout(), None);
}

#[test]
fn a_re_read_waits_for_a_quiet_live_subscription_and_the_pause() {
    let start = Instant::now();
    let mut reread = Reread::new(start);
    reread.handle_read_started(start);
    reread.handle_read_done(true);
    reread.handle_live(start + Duration::from_secs(1));
    assert_eq!(
        reread.poll_timeout(),
        Some(start + REREAD_MIN),
        "the pause since the last read"
    );
    let late = start + REREAD_MIN + Duration::from_secs(10);
    reread.handle_live(late);
    assert_eq!(
        reread.poll_timeout(),
        Some(late + REREAD_QUIET),
        "quiet after the last live event"
    );
}

#[test]
fn the_pause_doubles_while_re_reads_find_nothing_and_resets_when_one_does() {
    let mut now = Instant::now();
    let mut reread = Reread::new(now);
    reread.handle_read_started(now);
    reread.handle_read_done(true);
    let mut pauses = Vec::new();
    for _ in 0..10 {
        reread.handle_live(now);
        let due = reread.poll_timeout().expect("due after a live event");
        pauses.push(due - now);
        now = due;
        reread.handle_read_started(now);
        reread.handle_read_done(false);
    }
    assert_eq!(pauses[0], REREAD_MIN);
    assert_eq!(pauses[1], REREAD_MIN * 2);
    assert_eq!(pauses[2], REREAD_MIN * 4);
    assert_eq!(*pauses.last().expect("ten"), REREAD_MAX, "capped");
    reread.handle_live(now);
    now = reread.poll_timeout().expect("due");
    reread.handle_read_started(now);
    reread.found_by_read = 3;
    reread.handle_read_done(false);
    reread.handle_live(now);
    assert_eq!(
        reread.poll_timeout(),
        Some(now + REREAD_MIN),
        "a re-read that found events resets the pause"
    );
}
