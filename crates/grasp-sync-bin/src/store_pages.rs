//! Dropping the store's pages from the daemon's resident memory while the engine is at rest
//! (Linux).
//!
//! LMDB reads through a shared, read-only mapping of its data file. A restart reads nearly the
//! whole store (the sync index, every NIP-77 round's have-set), and every page it read stays
//! mapped into the process: at ten times the gitnostr size that is about 350 MiB of the idle
//! daemon's resident memory, though the kernel holds it as page cache. While the engine is at
//! rest, the daemon asks the kernel to drop those pages from its mappings
//! (`madvise(MADV_DONTNEED)`). The data stays in the page cache, so the next read maps it again
//! without disk I/O while the cache holds it.
//!
//! Only shared mappings of LMDB's files (`data.mdb`, `lock.mdb`) under the store's directory
//! are released. On a private mapping the same call would discard the process's own copies of
//! pages it wrote; on a shared one it changes neither the file nor the page cache.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use grasp_sync_engine::EngineStatus;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::endpoints::{EngineSlot, engine_status};

/// How often the daemon looks whether the engine is at rest, and then releases the pages.
pub(crate) const RELEASE_PERIOD: Duration = Duration::from_secs(30);

/// What one release dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Released {
    /// Shared file mappings under the directory.
    pub(crate) mappings: usize,
    /// Their resident memory before the release, in KiB.
    pub(crate) resident_kib: u64,
}

/// Whether the engine has nothing in flight: no relay has a historic batch pending, a NIP-77
/// round open, a start queued or a transient subscription held. Live subscriptions and
/// disconnected relays do not count; they read the store only when an event arrives.
pub(crate) fn at_rest(status: &EngineStatus) -> bool {
    status.relays.values().all(|relay| {
        relay.pending_batches == 0
            && relay.negentropy_rounds == 0
            && relay.queued_starts == 0
            && relay.transient_subscriptions == 0
    })
}

/// LMDB's files, the only ones released.
const LMDB_FILES: [&str; 2] = ["data.mdb", "lock.mdb"];

/// Every `period`, releases the pages of the shared mappings of LMDB's files under `dir` if the
/// engine is at rest. `keep_open` is the store whose environment lives in `dir`: the task holds
/// it, so the mappings it releases stay mapped for as long as the task runs, and dropping the
/// store elsewhere cannot unmap them during a release.
pub(crate) fn spawn_release_at_rest<S: Send + 'static>(
    slot: EngineSlot,
    dir: PathBuf,
    keep_open: S,
    period: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let _keep_open = keep_open;
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let status = engine_status(&slot).await;
            if !status.as_ref().is_some_and(at_rest) {
                continue;
            }
            let released = {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || release_under(&dir)).await
            };
            match released.unwrap_or_else(|error| Err(std::io::Error::other(error))) {
                Ok(released) if released.resident_kib > 0 => tracing::debug!(
                    mappings = released.mappings,
                    resident_kib = released.resident_kib,
                    "released the store's resident pages"
                ),
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "could not release the store's pages"),
            }
        }
    })
}

/// Releases the resident pages of this process's shared mappings of LMDB's files under `dir`.
/// A mapping the kernel refuses to advise is skipped; the first such error is returned once
/// the others are released.
///
/// The caller keeps the mapped files open for the duration of the call (see
/// [`spawn_release_at_rest`]): a range unmapped and mapped again by something else between
/// reading the process's mappings and releasing them would lose that memory's contents.
#[allow(unsafe_code)]
pub(crate) fn release_under(dir: &Path) -> std::io::Result<Released> {
    let dir = dir.canonicalize()?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let mappings = shared_mappings_under(&smaps, &dir);
    let mut released = Released::default();
    let mut refused = None;
    for mapping in &mappings {
        let len = mapping.range.end - mapping.range.start;
        // SAFETY: the range is a whole shared file mapping of this process, kept mapped by the
        // caller. `MADV_DONTNEED` on a shared file mapping only unmaps its pages: the file and
        // the page cache keep the data, and the next access maps the page again.
        let outcome = unsafe {
            libc::madvise(
                mapping.range.start as *mut libc::c_void,
                len,
                libc::MADV_DONTNEED,
            )
        };
        if outcome != 0 {
            refused.get_or_insert_with(std::io::Error::last_os_error);
            continue;
        }
        released.mappings += 1;
        released.resident_kib += mapping.resident_kib;
    }
    match refused {
        Some(error) => Err(error),
        None => Ok(released),
    }
}

/// Resident memory of this process's shared mappings of LMDB's files under `dir`, in KiB.
#[cfg(test)]
pub(crate) fn resident_kib_under(dir: &Path) -> std::io::Result<u64> {
    let dir = dir.canonicalize()?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    Ok(shared_mappings_under(&smaps, &dir)
        .iter()
        .map(|m| m.resident_kib)
        .sum())
}

/// One mapping of a `/proc/<pid>/smaps` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) range: Range<usize>,
    pub(crate) resident_kib: u64,
}

/// The shared mappings of LMDB's files under `dir` in a `/proc/<pid>/smaps` text, with their
/// `Rss`.
pub(crate) fn shared_mappings_under(smaps: &str, dir: &Path) -> Vec<Mapping> {
    let mut found = Vec::new();
    let mut current: Option<Mapping> = None;
    for line in smaps.lines() {
        if let Some(header) = parse_header(line) {
            found.extend(current.take());
            current = header
                .path
                .is_some_and(|path| header.shared && is_lmdb_file_under(Path::new(path), dir))
                .then_some(Mapping {
                    range: header.range,
                    resident_kib: 0,
                });
        } else if let Some(mapping) = current.as_mut()
            && let Some(rest) = line.strip_prefix("Rss:")
        {
            mapping.resident_kib = rest
                .split_whitespace()
                .next()
                .and_then(|kib| kib.parse().ok())
                .unwrap_or(0);
        }
    }
    found.extend(current);
    found
}

/// Whether `path` is one of LMDB's files under `dir`.
fn is_lmdb_file_under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
        && path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| LMDB_FILES.contains(&name))
}

/// A mapping's header line: `start-end perms offset dev inode [path]`.
struct Header<'a> {
    range: Range<usize>,
    shared: bool,
    path: Option<&'a str>,
}

fn parse_header(line: &str) -> Option<Header<'_>> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let range = usize::from_str_radix(start, 16).ok()?..usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    // Offset, device and inode.
    for _ in 0..3 {
        fields.next()?;
    }
    let path = fields.next().map(str::trim_start).filter(|p| !p.is_empty());
    Some(Header {
        range,
        shared: perms.ends_with('s'),
        path,
    })
}

#[cfg(test)]
mod tests;
