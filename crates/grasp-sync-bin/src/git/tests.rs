//! Tests of the git-data layer against real git: the layout and presence probe, the clone-URL
//! rules, the per-URL backoff on paused time, and fetches from local bare repositories.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{AddressPolicy, GitDataProbe};
use grasp_sync_model::RepoCoordinate;
use nostr::{Keys, SecretKey};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{
    CloneUrlRefusal, CloneUrlRules, FetchJob, FetchOutcome, GitFetcher, GitLimits, GitRoot,
    UrlBackoff, UrlBackoffConfig,
};

fn coordinate(identifier: &str) -> RepoCoordinate {
    let keys = Keys::new(SecretKey::from_slice(&[3; 32]).expect("key"));
    RepoCoordinate::new(keys.public_key(), identifier).expect("coordinate")
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .args(args)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A bare repository with one commit on `main`; its path and the commit.
fn source_repository(dir: &Path) -> (std::path::PathBuf, String) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("dir");
    git(&work, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(work.join("README"), "hello\n").expect("write");
    git(&work, &["add", "README"]);
    git(&work, &["commit", "--quiet", "-m", "first"]);
    let commit = git(&work, &["rev-parse", "HEAD"]);
    let bare = dir.join("source.git");
    git(dir, &["clone", "--quiet", "--bare", "work", "source.git"]);
    (bare, commit)
}

fn rules(allow_file: bool) -> CloneUrlRules {
    CloneUrlRules {
        address_policy: AddressPolicy::default(),
        allow_file,
        own_domain: "git.example.com".to_owned(),
    }
}

fn fetcher(root: &GitRoot, allow_file: bool, max_bytes: u64) -> GitFetcher {
    let registry = crate::metrics::MetricsRegistry::new().expect("registry");
    GitFetcher::new(
        root.clone(),
        rules(allow_file),
        GitLimits {
            timeout: Duration::from_secs(60),
            max_bytes,
            allow_file,
        },
        2,
        UrlBackoffConfig::default(),
        Arc::new(Notify::new()),
        &registry.meter(),
    )
}

#[test]
fn a_repository_lives_under_its_owners_npub() {
    let root = GitRoot::new("/srv/git");
    let path = root.repository(&coordinate("tools"));
    let text = path.display().to_string();
    assert!(text.starts_with("/srv/git/npub1"), "{text}");
    assert!(text.ends_with("/tools.git"), "{text}");
}

#[test]
fn clone_url_forms_are_checked_before_any_network_access() {
    let check = |allow_file: bool, url: &str| rules(allow_file).check_form(url).map(|_| ());
    let scheme = |s: &str| Err(CloneUrlRefusal::Scheme(s.to_owned()));
    for (allow_file, url, expected) in [
        (false, "https://example.org/a.git", Ok(())),
        (false, "git://example.org/a.git", Ok(())),
        (
            false,
            "-uhttps://example.org/a.git",
            Err(CloneUrlRefusal::Malformed),
        ),
        (
            false,
            "--upload-pack=touch /tmp/x",
            Err(CloneUrlRefusal::Malformed),
        ),
        (
            false,
            "ext::sh -c touch% /tmp/x",
            Err(CloneUrlRefusal::Malformed),
        ),
        (false, "ext::sh", scheme("ext")),
        (false, "ssh://git@example.org/a.git", scheme("ssh")),
        (false, "file:///srv/a.git", scheme("file")),
        (true, "file:///srv/a.git", Ok(())),
        (
            false,
            "https://user:pw@example.org/a.git",
            Err(CloneUrlRefusal::Malformed),
        ),
        (
            false,
            "https://GIT.example.com./npub/a.git",
            Err(CloneUrlRefusal::Own),
        ),
        (false, "example.org:a.git", scheme("example.org")),
    ] {
        assert_eq!(check(allow_file, url), expected, "{url}");
    }
}

#[tokio::test]
async fn clone_urls_resolving_to_internal_addresses_are_refused_unless_allowed() {
    let refused = rules(false).check("http://127.0.0.1:9/a.git").await;
    assert_eq!(refused, Err(CloneUrlRefusal::Address("internal")));
    let refused = rules(false).check("https://localhost/a.git").await;
    assert_eq!(refused, Err(CloneUrlRefusal::Address("internal")));

    let allowed = CloneUrlRules {
        address_policy: AddressPolicy {
            allowed_hosts: vec!["127.0.0.1".to_owned()],
            ..AddressPolicy::default()
        },
        ..rules(false)
    };
    let target = allowed
        .check("http://127.0.0.1:9/a.git")
        .await
        .expect("allowed");
    assert_eq!(target.pinned.as_deref(), Some("127.0.0.1:9:127.0.0.1"));
}

#[tokio::test(start_paused = true)]
async fn a_failing_url_waits_twice_as_long_after_each_failure_up_to_the_cap() {
    let mut backoff = UrlBackoff::new(UrlBackoffConfig {
        base: Duration::from_secs(60),
        cap: Duration::from_secs(200),
        max_urls: 2,
    });
    let url = "https://example.org/a.git";
    for expected_wait in [60, 120, 200, 200] {
        let now = Instant::now();
        backoff.handle_failure(url, now);
        assert!(!backoff.is_ready(url, now));
        tokio::time::sleep(Duration::from_secs(expected_wait - 1)).await;
        assert!(
            !backoff.is_ready(url, Instant::now()),
            "wait {expected_wait}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            backoff.is_ready(url, Instant::now()),
            "wait {expected_wait}"
        );
    }
    assert!(backoff.is_ready("https://other.example.org/b.git", Instant::now()));
    backoff.handle_success(url);
    assert!(backoff.is_empty());

    // Bounded: a third URL evicts the one whose wait ends first.
    let now = Instant::now();
    backoff.handle_failure("u1", now);
    tokio::time::sleep(Duration::from_secs(1)).await;
    backoff.handle_failure("u2", Instant::now());
    backoff.handle_failure("u3", Instant::now());
    assert_eq!(backoff.len(), 2);
    assert!(backoff.is_ready("u1", Instant::now()), "u1 was evicted");
}

#[tokio::test]
async fn a_repository_is_mirrored_from_a_local_bare_repository_and_then_present() {
    let dir = tempfile::tempdir().expect("dir");
    let (source, commit) = source_repository(dir.path());
    let root = GitRoot::new(dir.path().join("root"));
    let repo = coordinate("tools");
    assert!(!root.is_present(&repo));

    let job = FetchJob {
        coordinate: repo.clone(),
        clone_urls: vec![
            "https://git.example.com/own/tools.git".to_owned(),
            format!("file://{}", source.display()),
        ],
        head: Some("refs/heads/main".to_owned()),
    };
    let outcome = fetcher(&root, true, 1 << 30).fetch(&job).await;
    assert_eq!(outcome, FetchOutcome::Fetched(job.clone_urls[1].clone()));
    assert!(root.is_present(&repo));
    let mirror = root.repository(&repo);
    assert_eq!(git(&mirror, &["rev-parse", "refs/heads/main"]), commit);
    assert_eq!(git(&mirror, &["symbolic-ref", "HEAD"]), "refs/heads/main");

    // A second fetch updates the mirror in place.
    assert!(matches!(
        fetcher(&root, true, 1 << 30).fetch(&job).await,
        FetchOutcome::Fetched(_)
    ));
}

#[tokio::test]
async fn file_urls_are_not_fetched_by_default_and_a_failed_url_backs_off() {
    let dir = tempfile::tempdir().expect("dir");
    let (source, _) = source_repository(dir.path());
    let root = GitRoot::new(dir.path().join("root"));
    let repo = coordinate("tools");
    let job = FetchJob {
        coordinate: repo.clone(),
        clone_urls: vec![format!("file://{}", source.display())],
        head: None,
    };
    assert_eq!(
        fetcher(&root, false, 1 << 30).fetch(&job).await,
        FetchOutcome::NoUsableUrl
    );
    assert!(!root.is_present(&repo));

    let missing = FetchJob {
        clone_urls: vec![format!("file://{}/missing.git", dir.path().display())],
        ..job
    };
    let fetcher = fetcher(&root, true, 1 << 30);
    assert_eq!(fetcher.fetch(&missing).await, FetchOutcome::Failed);
    assert_eq!(
        fetcher.fetch(&missing).await,
        FetchOutcome::NoUsableUrl,
        "the failed url waits out its backoff"
    );
    assert!(!root.is_present(&repo), "nothing half-fetched is left");
}

#[tokio::test]
async fn a_repository_past_the_size_limit_is_not_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("dir");
    git(&work, &["init", "--quiet", "--initial-branch=main"]);
    // Incompressible content, so the fetched pack is larger than the limit.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..4_000_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    std::fs::write(work.join("blob"), noise).expect("write");
    git(&work, &["add", "blob"]);
    git(&work, &["commit", "--quiet", "-m", "big"]);
    let root = GitRoot::new(dir.path().join("root"));
    let repo = coordinate("big");
    let job = FetchJob {
        coordinate: repo.clone(),
        clone_urls: vec![format!("file://{}", work.join(".git").display())],
        head: None,
    };
    assert_eq!(
        fetcher(&root, true, 1_000_000).fetch(&job).await,
        FetchOutcome::Failed
    );
    assert!(!root.is_present(&repo));
}

// Real time: the child process does not follow a paused clock, so only a real timer shows
// that git is killed while it still waits on the server.
#[tokio::test]
async fn a_fetch_from_a_server_that_never_answers_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // Accepts connections and holds them without a word, counting them.
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let rules = CloneUrlRules {
        address_policy: AddressPolicy::allow_all(),
        ..rules(false)
    };
    let target = rules
        .check(&format!("http://127.0.0.1:{port}/silent.git"))
        .await
        .expect("allowed");
    let repository = dir.path().join("silent.git");
    git(dir.path(), &["init", "--quiet", "--bare", "silent.git"]);
    let limits = GitLimits {
        timeout: Duration::from_secs(2),
        max_bytes: 1 << 30,
        allow_file: false,
    };
    let outcome = super::command::run_git(
        vec![
            format!("--git-dir={}", repository.display()).into(),
            "fetch".into(),
            "--".into(),
            target.url.clone().into(),
            "+refs/heads/*:refs/heads/*".into(),
        ],
        target.pinned.as_deref(),
        &limits,
        &repository,
    )
    .await;
    assert!(
        matches!(outcome, Err(super::GitError::Timeout(_))),
        "{outcome:?}"
    );
    assert!(
        accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "git never reached the server, so nothing was waited for"
    );
    server.abort();
}
