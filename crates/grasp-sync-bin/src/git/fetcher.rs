//! `GitFetcher`: mirrors repositories into the [`GitRoot`] with bounded concurrency. A job names
//! a repository and the clone URLs its announcement lists; the URLs are tried in order, each
//! under the clone-URL rules and its own backoff, until one fetch succeeds. A repository is
//! fetched by one task at a time: a job for a repository being fetched runs once more after it.
//! A fresh repository is fetched into a temporary directory beside its place and moved there
//! only once complete, so a half-fetched repository is never taken for present.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};

use grasp_sync_model::RepoCoordinate;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter};
use tokio::sync::{Notify, Semaphore};

use super::GitRoot;
use super::backoff::{UrlBackoff, UrlBackoffConfig};
use super::command::{GitError, GitLimits, run_git};
use super::url::{CloneTarget, CloneUrlRules};

/// Most clone URLs tried per job.
const MAX_URLS_PER_JOB: usize = 8;
/// Most repositories with a job running or waiting at once; jobs past it are dropped (the next
/// state event asks again).
const MAX_JOBS: usize = 4_096;

/// One repository to mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchJob {
    /// The repository.
    pub coordinate: RepoCoordinate,
    /// The clone URLs its announcement lists.
    pub clone_urls: Vec<String>,
    /// The branch `HEAD` should point at (`refs/heads/...`), from its state event.
    pub head: Option<String>,
}

/// How one job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// Fetched from this URL.
    Fetched(String),
    /// No URL could be tried: each was refused, or waiting out its backoff.
    NoUsableUrl,
    /// Every URL tried failed.
    Failed,
}

/// The fetcher. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct GitFetcher {
    inner: Arc<Inner>,
}

struct Inner {
    root: GitRoot,
    rules: CloneUrlRules,
    limits: GitLimits,
    backoff: Mutex<UrlBackoff>,
    slots: Semaphore,
    jobs: Mutex<Jobs>,
    fetched: Arc<Notify>,
    fetches: Counter<u64>,
}

#[derive(Default)]
struct Jobs {
    running: HashSet<RepoCoordinate>,
    again: HashMap<RepoCoordinate, FetchJob>,
    dropped: u64,
}

impl GitFetcher {
    /// A fetcher into `root` running at most `concurrency` fetches at once; `fetched` is
    /// notified after every successful fetch. Counts on `grasp_sync_git_fetches_total`.
    pub fn new(
        root: GitRoot,
        rules: CloneUrlRules,
        limits: GitLimits,
        concurrency: usize,
        backoff: UrlBackoffConfig,
        fetched: Arc<Notify>,
        meter: &Meter,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                root,
                rules,
                limits,
                backoff: Mutex::new(UrlBackoff::new(backoff)),
                slots: Semaphore::new(concurrency.max(1)),
                jobs: Mutex::new(Jobs::default()),
                fetched,
                fetches: meter
                    .u64_counter("grasp_sync_git_fetches_total")
                    .with_description("Git fetches of clone URLs, by result")
                    .build(),
            }),
        }
    }

    /// Queues a job; returns at once.
    pub fn request(&self, job: FetchJob) {
        let mut jobs = lock(&self.inner.jobs);
        if jobs.running.contains(&job.coordinate) {
            if jobs.again.len() < MAX_JOBS || jobs.again.contains_key(&job.coordinate) {
                jobs.again.insert(job.coordinate.clone(), job);
            } else {
                jobs.dropped += 1;
            }
            return;
        }
        if jobs.running.len() >= MAX_JOBS {
            jobs.dropped += 1;
            return;
        }
        jobs.running.insert(job.coordinate.clone());
        drop(jobs);
        let fetcher = self.clone();
        tokio::spawn(async move { fetcher.run(job).await });
    }

    /// Runs one job now, waiting for a slot; what became of it. Used by [`GitFetcher::request`]
    /// and by tests.
    pub async fn fetch(&self, job: &FetchJob) -> FetchOutcome {
        let Ok(_slot) = self.inner.slots.acquire().await else {
            return FetchOutcome::Failed;
        };
        let path = self.inner.root.repository(&job.coordinate);
        let mut tried = false;
        let mut seen = HashSet::new();
        for url in job
            .clone_urls
            .iter()
            .filter(|url| seen.insert(url.as_str()))
            .take(MAX_URLS_PER_JOB)
        {
            let target = match self.inner.rules.check(url).await {
                Ok(target) => target,
                Err(refusal) => {
                    self.count("refused");
                    tracing::debug!(%url, %refusal, "clone url not fetched");
                    continue;
                }
            };
            if !lock(&self.inner.backoff).is_ready(url, tokio::time::Instant::now()) {
                self.count("backoff");
                continue;
            }
            tried = true;
            match fetch_into(&path, &target, job.head.as_deref(), &self.inner.limits).await {
                Ok(()) => {
                    lock(&self.inner.backoff).handle_success(url);
                    self.count("ok");
                    tracing::info!(repository = %path.display(), %url, "git data fetched");
                    self.inner.fetched.notify_one();
                    return FetchOutcome::Fetched(url.clone());
                }
                Err(error) => {
                    lock(&self.inner.backoff).handle_failure(url, tokio::time::Instant::now());
                    self.count(error.label());
                    tracing::warn!(repository = %path.display(), %url, %error, "git fetch failed");
                }
            }
        }
        if tried {
            FetchOutcome::Failed
        } else {
            FetchOutcome::NoUsableUrl
        }
    }

    /// Jobs dropped because 4,096 repositories were waiting.
    pub fn dropped(&self) -> u64 {
        lock(&self.inner.jobs).dropped
    }

    async fn run(self, job: FetchJob) {
        let mut job = job;
        loop {
            self.fetch(&job).await;
            let mut jobs = lock(&self.inner.jobs);
            match jobs.again.remove(&job.coordinate) {
                Some(next) => job = next,
                None => {
                    jobs.running.remove(&job.coordinate);
                    return;
                }
            }
        }
    }

    fn count(&self, result: &'static str) {
        self.inner
            .fetches
            .add(1, &[KeyValue::new("result", result)]);
    }
}

impl std::fmt::Debug for GitFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitFetcher")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

/// Fetches every branch and tag of `target` into the bare repository at `path`, creating it
/// (through a temporary directory beside it) when absent, then points `HEAD` at `head`.
async fn fetch_into(
    path: &Path,
    target: &CloneTarget,
    head: Option<&str>,
    limits: &GitLimits,
) -> Result<(), GitError> {
    if path.join("HEAD").is_file() {
        fetch_refs(path, target, limits).await?;
        return point_head(path, head, limits).await;
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(GitError::Io)?;
    let incoming = tempfile::Builder::new()
        .prefix(".incoming-")
        .tempdir_in(parent)
        .map_err(GitError::Io)?;
    run_git(
        vec![
            "init".into(),
            "--bare".into(),
            "--quiet".into(),
            "--".into(),
            incoming.path().into(),
        ],
        None,
        limits,
        incoming.path(),
    )
    .await?;
    fetch_refs(incoming.path(), target, limits).await?;
    point_head(incoming.path(), head, limits).await?;
    let incoming = incoming.keep();
    if let Err(error) = std::fs::rename(&incoming, path) {
        let _ = std::fs::remove_dir_all(&incoming);
        return Err(GitError::Io(error));
    }
    Ok(())
}

async fn fetch_refs(path: &Path, target: &CloneTarget, limits: &GitLimits) -> Result<(), GitError> {
    run_git(
        vec![
            git_dir(path),
            "fetch".into(),
            "--quiet".into(),
            "--prune".into(),
            "--no-write-fetch-head".into(),
            "--no-recurse-submodules".into(),
            "--".into(),
            target.url.clone().into(),
            "+refs/heads/*:refs/heads/*".into(),
            "+refs/tags/*:refs/tags/*".into(),
        ],
        target.pinned.as_deref(),
        limits,
        path,
    )
    .await
}

/// Points `HEAD` at `head` when it names a plain branch that exists.
async fn point_head(path: &Path, head: Option<&str>, limits: &GitLimits) -> Result<(), GitError> {
    let Some(head) = head.filter(|head| is_plain_branch(head)) else {
        return Ok(());
    };
    if !path.join(head).is_file() && !packed_ref_exists(path, head) {
        return Ok(());
    }
    run_git(
        vec![
            git_dir(path),
            "symbolic-ref".into(),
            "HEAD".into(),
            head.into(),
        ],
        None,
        limits,
        path,
    )
    .await
}

/// `refs/heads/<name>` with a conservative character set and no `..`.
fn is_plain_branch(head: &str) -> bool {
    head.strip_prefix("refs/heads/").is_some_and(|name| {
        !name.is_empty()
            && name.len() <= 200
            && !name.contains("..")
            && !name.starts_with(['-', '/', '.'])
            && !name.ends_with(['/', '.'])
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    })
}

fn packed_ref_exists(path: &Path, name: &str) -> bool {
    std::fs::read_to_string(path.join("packed-refs")).is_ok_and(|text| {
        text.lines()
            .any(|line| line.split_once(' ').is_some_and(|(_, r)| r == name))
    })
}

fn git_dir(path: &Path) -> OsString {
    let mut arg = OsString::from("--git-dir=");
    arg.push(path);
    arg
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
