//! Git data that follows the events: [`GitRoot`], the layout of mirrored repositories
//! (`ROOT/<npub>/<identifier>.git`) and the probe that tells the store's purgatory whether a
//! repository's git data is present; [`GitFetcher`], which mirrors repositories from the clone
//! URLs their announcements list with the `git` command line, within [`GitLimits`], under the
//! clone-URL rules of `url.rs` and a per-URL backoff (`backoff.rs`).

mod backoff;
mod command;
mod fetcher;
mod url;

use std::path::{Path, PathBuf};

use grasp_sync_engine::GitDataProbe;
use grasp_sync_model::RepoCoordinate;
use nostr::ToBech32;

pub use backoff::{UrlBackoff, UrlBackoffConfig};
pub use command::{GitError, GitLimits};
pub use fetcher::{FetchJob, FetchOutcome, GitFetcher};
pub use url::{CloneTarget, CloneUrlRefusal, CloneUrlRules};

/// The directory holding the mirrored repositories, one bare repository per announcement at
/// `<npub>/<identifier>.git`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRoot {
    root: PathBuf,
}

impl GitRoot {
    /// The layout under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Where the repository at `coordinate` lives. Identifiers hold no `/`, `\`, NUL, `.` or
    /// `..` (the model refuses them), so the path stays under the root.
    pub fn repository(&self, coordinate: &RepoCoordinate) -> PathBuf {
        let npub = coordinate
            .owner()
            .to_bech32()
            .unwrap_or_else(|_| coordinate.owner().to_hex());
        self.root
            .join(npub)
            .join(format!("{}.git", coordinate.identifier()))
    }

    /// Whether a bare repository with at least one branch or tag is at `path`.
    pub fn has_refs(path: &Path) -> bool {
        if !path.join("HEAD").is_file() {
            return false;
        }
        let packed = std::fs::metadata(path.join("packed-refs")).is_ok_and(|m| m.len() > 0);
        packed
            || has_file_under(&path.join("refs/heads"))
            || has_file_under(&path.join("refs/tags"))
    }
}

impl GitDataProbe for GitRoot {
    fn is_present(&self, coordinate: &RepoCoordinate) -> bool {
        GitRoot::has_refs(&self.repository(coordinate))
    }
}

/// Whether a directory holds a file, at any depth (refs may be nested: `refs/heads/a/b`).
fn has_file_under(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    let mut visited = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > 10_000 {
                return false;
            }
            match entry.file_type() {
                Ok(kind) if kind.is_file() => return true,
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                _ => {}
            }
        }
    }
    false
}

#[cfg(test)]
mod tests;
