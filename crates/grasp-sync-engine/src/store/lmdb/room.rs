//! `MapRoom`: telling a full LMDB map apart from other write failures. nostr-lmdb 0.44.1 aborts
//! a whole write batch on the first failure and answers every save of it, the one that hit
//! `MDB_MAP_FULL` included, with the same "Batched transaction failed"; the cause is only
//! logged. What survives is the data file: LMDB writes pages at their offset and grows the file
//! to its last used page (it is not sized to the map up front unless opened with `WRITEMAP`,
//! which nostr-lmdb does not use), so the room a failed save leaves in the map can be measured.

use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// The backend's map size when none is configured (nostr-lmdb's default on 64-bit hosts).
#[cfg(target_pointer_width = "64")]
pub(crate) const DEFAULT_MAP_SIZE: usize = 32 * 1024 * 1024 * 1024;

/// The backend's map size when none is configured (nostr-lmdb's default on 32-bit hosts).
#[cfg(not(target_pointer_width = "64"))]
pub(crate) const DEFAULT_MAP_SIZE: usize = 0xFFFF_F000;

/// Room a failed save must leave in the map to count as a failure of another kind. One write
/// batch holds at most the ingest pipeline's saves in flight (1,024 by default), a few MiB with
/// their indexes for events of ordinary size; a failure with less room than this left is taken
/// for a full map. A map no larger than this is full whenever a save fails.
pub(crate) const FULL_ROOM: u64 = 16 * 1024 * 1024;

/// The LMDB data file of a store and its map size.
#[derive(Debug, Clone)]
pub(crate) struct MapRoom {
    data_file: PathBuf,
    map_size: usize,
}

impl MapRoom {
    /// The map of the LMDB environment in `directory`, of `map_size` bytes.
    pub(crate) fn new(directory: &Path, map_size: usize) -> Self {
        Self {
            data_file: directory.join("data.mdb"),
            map_size,
        }
    }

    /// What a failed save means: [`StoreError::Full`] when the map has less than
    /// [`FULL_ROOM`] left, else `other`.
    pub(crate) fn classify(&self, other: StoreError) -> StoreError {
        let used = std::fs::metadata(&self.data_file).map_or(0, |m| m.len());
        let room = (self.map_size as u64).saturating_sub(used);
        if room < FULL_ROOM {
            StoreError::Full {
                map_size: self.map_size,
                used,
            }
        } else {
            other
        }
    }
}
