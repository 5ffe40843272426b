//! `GitFollower`: what a burst of synced state events (kind 30618, stored or held in
//! purgatory) sets off. Each state event names its repositories (the accepted or purgatory
//! announcements with its `d` identifier that its author owns or maintains); each repository
//! becomes a [`FetchJob`] for the built-in fetcher and a [`RepoUpdate`] of the burst's one
//! [`SyncBatch`] for the operator's hook.

use std::collections::BTreeMap;
use std::sync::Arc;

use grasp_sync_engine::LmdbStore;
use grasp_sync_model::{RepoAnnouncement, RepoCoordinate};
use nostr::{Event, PublicKey, ToBech32};

use crate::git::{FetchJob, GitFetcher, GitRoot};

use crate::hook::{RepoUpdate, StateRefs, SyncBatch, SyncHook};

use grasp_sync_model::REPO_STATE_KIND as STATE_KIND;
/// Most refs of one state event passed on.
const MAX_REFS: usize = 10_000;

/// Where the announcements a state event describes are looked up.
pub trait RepositoryLookup: Send + Sync + 'static {
    /// Announcements with `identifier` that `author` owns or maintains, each with whether it
    /// is in purgatory.
    fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Vec<(RepoAnnouncement, bool)>;
}

impl RepositoryLookup for crate::external::ExternalStore {
    fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Vec<(RepoAnnouncement, bool)> {
        match crate::external::ExternalStore::repositories_for(self, identifier, author) {
            Ok(found) => found.into_iter().map(|a| (a, false)).collect(),
            Err(error) => {
                tracing::warn!(%error, "looking up a state event's repositories failed");
                Vec::new()
            }
        }
    }
}

impl RepositoryLookup for LmdbStore {
    fn repositories_for(
        &self,
        identifier: &str,
        author: &PublicKey,
    ) -> Vec<(RepoAnnouncement, bool)> {
        LmdbStore::repositories_for(self, identifier, author).unwrap_or_else(|error| {
            tracing::warn!(%error, "looking up a state event's repositories failed");
            Vec::new()
        })
    }
}

/// The fetcher and the hook, fed from synced state events.
#[derive(Clone)]
pub struct GitFollower {
    lookup: Arc<dyn RepositoryLookup>,
    root: Option<GitRoot>,
    fetcher: Option<GitFetcher>,
    hook: Option<SyncHook>,
}

impl GitFollower {
    /// A follower that looks repositories up in `lookup` and hands them to `fetcher` (which
    /// mirrors into `root`) and `hook`, either of which may be absent.
    pub fn new(
        lookup: Arc<dyn RepositoryLookup>,
        root: Option<GitRoot>,
        fetcher: Option<GitFetcher>,
        hook: Option<SyncHook>,
    ) -> Self {
        Self {
            lookup,
            root,
            fetcher,
            hook,
        }
    }

    /// Handles one burst of synced events (other kinds than 30618 are skipped).
    pub fn handle_burst<'a>(&self, events: impl IntoIterator<Item = &'a Event>) {
        let batch = self.batch(events);
        if let Some(fetcher) = &self.fetcher {
            for (_, job) in &batch {
                fetcher.request(job.clone());
            }
        }
        if let Some(hook) = &self.hook {
            hook.submit(SyncBatch {
                repositories: batch.into_iter().map(|(repo, _)| repo).collect(),
            });
        }
    }

    /// The burst by repository: what the hook is told, and the fetch job.
    fn batch<'a>(
        &self,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Vec<(RepoUpdate, FetchJob)> {
        let mut repos: BTreeMap<RepoCoordinate, (RepoUpdate, FetchJob)> = BTreeMap::new();
        for event in events {
            if event.kind.as_u16() != STATE_KIND {
                continue;
            }
            let Some(identifier) = event.tags.identifier() else {
                continue;
            };
            let state = state_refs(event);
            let head = state
                .refs
                .iter()
                .find(|[name, _]| name == "HEAD")
                .and_then(|[_, value]| value.strip_prefix("ref: "))
                .map(str::to_owned);
            for (announcement, purgatory) in self.lookup.repositories_for(identifier, &event.pubkey)
            {
                let coordinate = announcement.coordinate.clone();
                let (update, job) = repos.entry(coordinate.clone()).or_insert_with(|| {
                    (
                        RepoUpdate {
                            coordinate: format!(
                                "30617:{}:{}",
                                coordinate.owner().to_hex(),
                                coordinate.identifier()
                            ),
                            owner: coordinate
                                .owner()
                                .to_bech32()
                                .unwrap_or_else(|_| coordinate.owner().to_hex()),
                            identifier: coordinate.identifier().to_owned(),
                            purgatory,
                            clone_urls: announcement.clone_urls.clone(),
                            path: self
                                .root
                                .as_ref()
                                .map(|root| root.repository(&coordinate).display().to_string()),
                            states: Vec::new(),
                        },
                        FetchJob {
                            coordinate: coordinate.clone(),
                            clone_urls: announcement.clone_urls.clone(),
                            head: None,
                        },
                    )
                });
                update.states.push(state.clone());
                if head.is_some() {
                    job.head = head.clone();
                }
            }
        }
        repos.into_values().collect()
    }
}

impl std::fmt::Debug for GitFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitFollower")
            .field("root", &self.root)
            .field("fetcher", &self.fetcher.is_some())
            .field("hook", &self.hook.is_some())
            .finish_non_exhaustive()
    }
}

/// A state event's `refs/...` and `HEAD` tags.
fn state_refs(event: &Event) -> StateRefs {
    let refs = event
        .tags
        .iter()
        .filter_map(|tag| match tag.as_slice() {
            [name, value, ..] if name == "HEAD" || name.starts_with("refs/") => {
                Some([name.clone(), value.clone()])
            }
            _ => None,
        })
        .take(MAX_REFS)
        .collect();
    StateRefs {
        id: event.id.to_hex(),
        author: event.pubkey.to_hex(),
        created_at: event.created_at.as_secs(),
        refs,
    }
}

#[cfg(test)]
mod tests;
