//! The choice of mappings, the engine at rest, and a release against a real LMDB store.

use std::path::Path;

use grasp_sync_engine::{EngineStatus, RelayStatus};
use nostr::{EventBuilder, Filter, Keys, Kind};
use nostr_database::NostrDatabase;
use nostr_lmdb::NostrLMDB;

use super::{Mapping, at_rest, release_under, resident_kib_under, shared_mappings_under};

const SMAPS: &str = "\
7f0000000000-7f0000100000 r--s 00000000 08:01 1234                       /data/store/data.mdb
Size:               1024 kB
Rss:                 512 kB
VmFlags: rd sh mr mw me ms sd
7f0000100000-7f0000101000 rw-s 00000000 08:01 1235                       /data/store/lock.mdb
Rss:                   4 kB
7f0000200000-7f0000300000 r--p 00000000 08:01 1234                       /data/store/data.mdb
Rss:                 256 kB
7f0000300000-7f0000400000 r--s 00000000 08:01 999                        /elsewhere/data.mdb
Rss:                  64 kB
7f0000400000-7f0000500000 rw-p 00000000 00:00 0 
Rss:                1024 kB
7f0000500000-7f0000600000 r--s 00000000 08:01 1236                       /data/store-old/data.mdb (deleted)
Rss:                   8 kB
7f0000600000-7f0000700000 r--s 00000000 08:01 1237                       /data/store/other.bin
Rss:                  16 kB
";

#[test]
fn only_shared_mappings_of_files_under_the_directory_are_chosen() {
    let found = shared_mappings_under(SMAPS, Path::new("/data/store"));
    assert_eq!(
        found,
        vec![
            Mapping {
                range: 0x7f00_0000_0000..0x7f00_0010_0000,
                resident_kib: 512,
            },
            Mapping {
                range: 0x7f00_0010_0000..0x7f00_0010_1000,
                resident_kib: 4,
            },
        ],
        "the private mapping, the other directory, the anonymous mapping, a sibling \
         directory sharing the prefix and a file that is not LMDB's are left alone"
    );
}

#[test]
fn a_text_without_mappings_under_the_directory_gives_none() {
    assert!(shared_mappings_under(SMAPS, Path::new("/nowhere")).is_empty());
    assert!(shared_mappings_under("", Path::new("/data")).is_empty());
}

#[test]
fn the_engine_is_at_rest_only_with_nothing_in_flight_on_any_relay() {
    let mut status = EngineStatus::default();
    status.relays.insert(
        "ws://a/".into(),
        RelayStatus {
            live_subscriptions: 12,
            ..RelayStatus::default()
        },
    );
    assert!(at_rest(&status), "held live subscriptions are rest");
    let busy = [
        RelayStatus {
            pending_batches: 1,
            ..RelayStatus::default()
        },
        RelayStatus {
            negentropy_rounds: 1,
            ..RelayStatus::default()
        },
        RelayStatus {
            queued_starts: 1,
            ..RelayStatus::default()
        },
        RelayStatus {
            transient_subscriptions: 1,
            ..RelayStatus::default()
        },
    ];
    for relay in busy {
        let mut status = status.clone();
        status.relays.insert("ws://b/".into(), relay.clone());
        assert!(!at_rest(&status), "{relay:?} is work in flight");
    }
}

/// A real LMDB store: reading every event maps the store's pages into the process; the
/// release drops them from its resident memory, and reading again returns every event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_drops_the_stores_read_pages_and_loses_nothing() {
    const EVENTS: usize = 1_500;
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = NostrLMDB::open(dir.path()).expect("the store opens");
    let keys = Keys::generate();
    let content = "x".repeat(4_000);
    for i in 0..EVENTS {
        let event = EventBuilder::text_note(format!("{i} {content}"))
            .sign_with_keys(&keys)
            .expect("signed");
        store.save_event(&event).await.expect("saved");
    }
    let everything = || Filter::new().kind(Kind::TextNote);
    assert_eq!(store.query(everything()).await.expect("read").len(), EVENTS);
    let read = resident_kib_under(dir.path()).expect("smaps readable");
    assert!(
        read >= 4 * 1024,
        "reading {EVENTS} events of 4 KB maps at least 4 MiB, got {read} KiB"
    );

    let released = release_under(dir.path()).expect("released");
    assert!(released.mappings >= 1);
    assert!(released.resident_kib >= 4 * 1024, "{released:?}");
    let after = resident_kib_under(dir.path()).expect("smaps readable");
    assert!(
        after < read / 8,
        "{after} KiB still resident of the {read} KiB read"
    );

    assert_eq!(
        store.query(everything()).await.expect("read again").len(),
        EVENTS,
        "the released pages are read back from the page cache"
    );
}
