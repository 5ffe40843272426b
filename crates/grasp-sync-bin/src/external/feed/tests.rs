//! Unit tests of the feed's bounded memory of recent event IDs.

use nostr::EventId;

use super::{MAX_RECENT_IDS, RecentIds};

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
