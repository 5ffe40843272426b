//! Holdings: what is kept, how long it counts, and the file that keeps it.

use std::io::Write;

use grasp_sync_model::RelayUrl;
use nostr::{EventId, Timestamp};

use super::*;

fn relay(url: &str) -> RelayUrl {
    RelayUrl::parse(url).expect("url")
}

fn event(n: u8, created_at: u64) -> (EventId, Timestamp) {
    (
        EventId::from_byte_array([n; 32]),
        Timestamp::from_secs(created_at),
    )
}

#[test]
fn learned_holdings_are_sorted_by_id_and_unique() {
    let holdings = RelayHoldings::learned(
        Timestamp::from_secs(10),
        vec![event(3, 1), event(1, 2), event(3, 1), event(2, 3)],
    );
    assert_eq!(
        holdings.held,
        Held::Events(vec![event(1, 2), event(2, 3), event(3, 1)])
    );
}

#[test]
fn holdings_past_the_cap_are_too_large() {
    let events = (0..=MAX_HELD_EVENTS)
        .map(|n| {
            let mut bytes = [0; 32];
            bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
            (EventId::from_byte_array(bytes), Timestamp::from_secs(1))
        })
        .collect();
    let holdings = RelayHoldings::learned(Timestamp::from_secs(10), events);
    assert_eq!(holdings.held, Held::TooLarge);
}

#[test]
fn holdings_are_current_for_their_age_limit_only() {
    let learned = Timestamp::from_secs(1_000_000);
    let events = RelayHoldings::learned(learned, vec![event(1, 1)]);
    let week = HOLDINGS_MAX_AGE.as_secs();
    assert!(events.is_current(Timestamp::from_secs(1_000_000 + week - 1)));
    assert!(!events.is_current(Timestamp::from_secs(1_000_000 + week)));
    let too_large = RelayHoldings {
        learned_at: learned,
        held: Held::TooLarge,
    };
    assert!(too_large.is_current(Timestamp::from_secs(1_000_000 + week)));
    assert!(!too_large.is_current(Timestamp::from_secs(1_000_000 + TOO_LARGE_PAUSE.as_secs())));
}

#[test]
fn a_file_keeps_each_relays_holdings_apart() {
    let dir = tempfile::tempdir().expect("dir");
    let memory = FileHoldingsMemory::new(dir.path().join("holdings"));
    let one = relay("wss://one.example");
    let two = relay("wss://two.example");
    assert_eq!(memory.load(&one).expect("load"), None);
    let held = RelayHoldings::learned(Timestamp::from_secs(5), vec![event(9, 100), event(4, 50)]);
    let too_large = RelayHoldings {
        learned_at: Timestamp::from_secs(6),
        held: Held::TooLarge,
    };
    memory.save(&one, &held).expect("save");
    memory.save(&two, &too_large).expect("save");
    assert_eq!(memory.load(&one).expect("load"), Some(held));
    assert_eq!(memory.load(&two).expect("load"), Some(too_large.clone()));
    let replaced = RelayHoldings::learned(Timestamp::from_secs(7), Vec::new());
    memory.save(&two, &replaced).expect("save");
    assert_eq!(memory.load(&two).expect("load"), Some(replaced));
}

#[test]
fn a_damaged_file_is_a_format_error() {
    let dir = tempfile::tempdir().expect("dir");
    let memory = FileHoldingsMemory::new(dir.path());
    let one = relay("wss://one.example");
    let held = RelayHoldings::learned(Timestamp::from_secs(5), vec![event(1, 1), event(2, 2)]);
    memory.save(&one, &held).expect("save");
    let path = std::fs::read_dir(dir.path())
        .expect("dir")
        .next()
        .expect("a file")
        .expect("entry")
        .path();
    let bytes = std::fs::read(&path).expect("read");
    // Cut in the middle of the last event.
    std::fs::File::create(&path)
        .expect("file")
        .write_all(&bytes[..bytes.len() - 5])
        .expect("write");
    assert!(matches!(
        memory.load(&one),
        Err(HoldingsError::Format { .. })
    ));
    std::fs::write(&path, b"something else entirely").expect("write");
    assert!(matches!(
        memory.load(&one),
        Err(HoldingsError::Format { .. })
    ));
}

#[test]
fn saving_past_the_file_cap_removes_the_oldest_files() {
    let dir = tempfile::tempdir().expect("dir");
    let memory = FileHoldingsMemory::new(dir.path());
    let held = RelayHoldings::learned(Timestamp::from_secs(5), Vec::new());
    for n in 0..MAX_HOLDINGS_FILES + 3 {
        memory
            .save(&relay(&format!("wss://relay{n}.example")), &held)
            .expect("save");
    }
    let files = std::fs::read_dir(dir.path()).expect("dir").count();
    assert_eq!(files, MAX_HOLDINGS_FILES);
    let newest = relay(&format!("wss://relay{}.example", MAX_HOLDINGS_FILES + 2));
    assert_eq!(memory.load(&newest).expect("load"), Some(held));
}

#[test]
fn a_save_removes_temporary_files_left_behind_an_hour_before() {
    let dir = tempfile::tempdir().expect("dir");
    let memory = FileHoldingsMemory::new(dir.path());
    let held = RelayHoldings::learned(Timestamp::from_secs(5), Vec::new());
    memory
        .save(&relay("wss://one.example"), &held)
        .expect("save");
    let left = dir.path().join("0123.held.tmp");
    let recent = dir.path().join("4567.held.tmp");
    let other = dir.path().join("notes.tmp");
    for path in [&left, &recent, &other] {
        std::fs::write(path, b"cut short").expect("write");
    }
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    for path in [&left, &other] {
        std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open")
            .set_modified(old)
            .expect("set mtime");
    }
    memory
        .save(&relay("wss://two.example"), &held)
        .expect("save");
    assert!(!left.exists(), "the old leftover is removed");
    assert!(recent.exists(), "a save in progress elsewhere is not");
    assert!(other.exists(), "nor a file that is not the holdings'");
    assert_eq!(
        memory.load(&relay("wss://one.example")).expect("load"),
        Some(held)
    );
}

#[test]
fn memory_keeps_each_relays_holdings_and_never_blocks() {
    let memory = MemoryHoldings::default();
    assert!(!memory.blocks());
    let (a, b) = (relay("wss://a.example"), relay("wss://b.example"));
    let held = RelayHoldings::learned(Timestamp::from_secs(10), vec![event(1, 1)]);
    memory.save(&a, &held).expect("save");
    assert_eq!(memory.load(&a).expect("load"), Some(held));
    assert_eq!(memory.load(&b).expect("load"), None);
    let replaced = RelayHoldings::learned(Timestamp::from_secs(20), vec![event(2, 2)]);
    memory.save(&a, &replaced).expect("save");
    assert_eq!(memory.load(&a).expect("load"), Some(replaced));
}

#[test]
fn memory_past_its_cap_forgets_the_holdings_learned_longest_ago() {
    let memory = MemoryHoldings::default();
    let url = |n: usize| relay(&format!("wss://r{n}.example"));
    for n in 0..MAX_HOLDINGS_FILES {
        // The first relay is learned last, so the second is the oldest.
        let learned_at = if n == 0 { 10_000 } else { 100 + n as u64 };
        let holdings = RelayHoldings::learned(Timestamp::from_secs(learned_at), vec![]);
        memory.save(&url(n), &holdings).expect("save");
    }
    let newcomer = RelayHoldings::learned(Timestamp::from_secs(20_000), vec![event(1, 1)]);
    memory
        .save(&url(MAX_HOLDINGS_FILES), &newcomer)
        .expect("save");
    assert_eq!(memory.load(&url(1)).expect("load"), None);
    assert!(memory.load(&url(0)).expect("load").is_some());
    assert!(memory.load(&url(2)).expect("load").is_some());
    assert_eq!(
        memory.load(&url(MAX_HOLDINGS_FILES)).expect("load"),
        Some(newcomer)
    );
    // A relay already kept is replaced in place: nothing else is forgotten.
    let again = RelayHoldings::learned(Timestamp::from_secs(30_000), vec![]);
    memory.save(&url(2), &again).expect("save");
    assert!(memory.load(&url(3)).expect("load").is_some());
}
