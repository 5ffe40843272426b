//! Packing saves memory: the heap bytes a B-tree grown one insertion at a time holds, before
//! and after it is packed, counted by an instrumented allocator. The only test of its binary,
//! so nothing else allocates while it counts.

use std::alloc::System;
use std::collections::{BTreeMap, BTreeSet};

use grasp_sync_model::Pack;
use nostr::EventId;
use nostr::hashes::{Hash, sha256};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes held now, over what was held when `region` began.
fn held(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize + change.bytes_reallocated
}

fn event_id(n: u32) -> EventId {
    EventId::from_byte_array(sha256::Hash::hash(&n.to_be_bytes()).to_byte_array())
}

/// Bytes `build` leaves held, and bytes held once what it built is packed.
fn grown_and_packed<T: Pack>(build: impl FnOnce() -> T) -> (isize, isize) {
    let region = Region::new(GLOBAL);
    let mut value = build();
    let grown = held(&region);
    value.pack();
    let packed = held(&region);
    drop(value);
    (grown, packed)
}

#[test]
fn packed_b_trees_hold_less() {
    // Event IDs in random order: nodes about two thirds full.
    let (grown, packed) = grown_and_packed(|| {
        let mut ids = BTreeSet::new();
        for n in 0..20_000 {
            ids.insert(event_id(n));
        }
        ids
    });
    assert!(
        packed * 4 <= grown * 3,
        "set: grown {grown} bytes, packed {packed}"
    );

    // Keys in ascending order: nodes little more than half full.
    let mut ids: Vec<EventId> = (0..20_000).map(event_id).collect();
    ids.sort_unstable();
    let (grown, packed) = grown_and_packed(|| {
        let mut map = BTreeMap::new();
        for (n, id) in ids.iter().enumerate() {
            map.insert(*id, n);
        }
        map
    });
    assert!(
        packed * 3 <= grown * 2,
        "map: grown {grown} bytes, packed {packed}"
    );
}
