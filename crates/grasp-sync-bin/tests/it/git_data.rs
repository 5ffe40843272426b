//! Git data that follows the events, end to end with real git: a remote relay announces a
//! repository whose clone URL is a local bare repository; the daemon (with `git_root`) holds
//! the announcement in purgatory, syncs its state events, runs the hook once for the burst,
//! mirrors the git data into the git root, promotes the announcement and then syncs the
//! repository's issue and patch.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use grasp_sync_bin::{Daemon, RawConfig, Settings};
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use grasp_sync_testkit::{TestRelay, TestRelayConfig};
use nostr::{Keys, Timestamp, ToBech32};
use tokio::net::TcpListener;

use crate::support::wait_until;

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

/// A bare repository with one commit on `main`: its path and the commit.
fn source_repository(dir: &Path) -> (std::path::PathBuf, String) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("dir");
    git(&work, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(work.join("README"), "hello\n").expect("write");
    git(&work, &["add", "README"]);
    git(&work, &["commit", "--quiet", "-m", "first"]);
    let commit = git(&work, &["rev-parse", "HEAD"]);
    git(dir, &["clone", "--quiet", "--bare", "work", "source.git"]);
    (dir.join("source.git"), commit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purgatory_announcement_is_promoted_once_its_git_data_is_mirrored() {
    let dir = tempfile::tempdir().expect("dir");
    let (source, commit) = source_repository(dir.path());
    let git_root = dir.path().join("git");
    let hook_log = dir.path().join("hook.log");
    let remote = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("remote relay");

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let service_addr = listener.local_addr().expect("addr");
    let service = format!("ws://{service_addr}");

    let owner = Keys::generate();
    let maintainer = Keys::generate();
    let created_at = Timestamp::from_secs(1_700_000_000);
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "tools".to_owned(),
            name: "tools".to_owned(),
            relays: vec![service.clone(), remote.url()],
            clone: vec![
                format!(
                    "http://{service_addr}/{}/tools.git",
                    owner.public_key().to_bech32().expect("npub")
                ),
                format!("file://{}", source.display()),
            ],
            maintainers: vec![maintainer.public_key()],
            created_at,
        },
    )
    .expect("announcement");
    let refs = [
        ("HEAD".to_owned(), "ref: refs/heads/main".to_owned()),
        ("refs/heads/main".to_owned(), commit.clone()),
    ];
    let owner_state = nip34::repo_state(&owner, "tools", &refs, created_at).expect("state");
    let maintainer_state =
        nip34::repo_state(&maintainer, "tools", &refs, created_at).expect("state");
    let repo = RepoRef::new(owner.public_key(), "tools");
    let issue = nip34::root(
        &maintainer,
        RootKind::Issue,
        std::slice::from_ref(&repo),
        "bug",
        created_at,
    )
    .expect("issue");
    let patch =
        nip34::root(&maintainer, RootKind::Patch, &[repo], "fix", created_at).expect("patch");
    remote
        .seed([
            announcement.clone(),
            owner_state.clone(),
            maintainer_state.clone(),
            issue.clone(),
            patch.clone(),
        ])
        .await
        .expect("seed");

    let settings = Settings::resolve(RawConfig {
        listen: Some("127.0.0.1:0".to_owned()),
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(dir.path().join("data")),
        allow_private_relays: Some(true),
        batch_window: Some("200ms".to_owned()),
        backoff_base: Some("1s".to_owned()),
        backoff_cap: Some("5s".to_owned()),
        bootstrap_relays: Some(vec![remote.url()]),
        git_root: Some(git_root.clone()),
        git_allow_file_urls: Some(true),
        purgatory_interval: Some("200ms".to_owned()),
        on_sync_hook: Some(format!("cat >> {0}; echo >> {0}", hook_log.display())),
        ..RawConfig::default()
    })
    .expect("settings");
    let daemon = Daemon::start_on(&settings, listener).await.expect("daemon");

    let everything = [
        announcement.id,
        owner_state.id,
        maintainer_state.id,
        issue.id,
        patch.id,
    ];
    let synced = wait_until(Duration::from_secs(30), || async {
        let mut all = true;
        for id in &everything {
            all &= daemon.holds(id).await.unwrap_or(false);
        }
        all
    })
    .await;
    assert!(
        synced,
        "the announcement, its states, issue and patch were stored"
    );

    // The git data was mirrored under the owner's npub.
    let mirror = git_root
        .join(owner.public_key().to_bech32().expect("npub"))
        .join("tools.git");
    assert_eq!(git(&mirror, &["rev-parse", "refs/heads/main"]), commit);
    assert_eq!(git(&mirror, &["symbolic-ref", "HEAD"]), "refs/heads/main");

    // The announcement went through purgatory: held, then promoted, nothing left.
    let status = daemon.status().await.expect("status");
    let purgatory = status.purgatory.expect("a purgatory with git_root");
    assert_eq!(
        (
            purgatory.promoted,
            purgatory.announcements,
            purgatory.held_events
        ),
        (1, 0, 0),
        "{purgatory:?}"
    );

    // The hook ran once, for the burst of both state events, while the repository was in
    // purgatory.
    let log = std::fs::read_to_string(&hook_log).expect("the hook ran");
    let runs: Vec<serde_json::Value> = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    assert_eq!(runs.len(), 1, "one run for the burst: {log}");
    let repository = &runs[0]["repositories"][0];
    assert_eq!(repository["identifier"], "tools");
    assert_eq!(repository["purgatory"], true);
    assert_eq!(repository["path"], mirror.display().to_string());
    let mut states: Vec<String> = repository["states"]
        .as_array()
        .expect("states")
        .iter()
        .map(|state| state["id"].as_str().expect("id").to_owned())
        .collect();
    states.sort();
    let mut expected = vec![owner_state.id.to_hex(), maintainer_state.id.to_hex()];
    expected.sort();
    assert_eq!(states, expected);

    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_external_mode_state_events_drive_the_fetcher_and_the_hook() {
    let dir = tempfile::tempdir().expect("dir");
    let (source_repo, commit) = source_repository(dir.path());
    let git_root = dir.path().join("git");
    let hook_log = dir.path().join("hook.log");
    let own = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("own relay");
    let source = TestRelay::start(TestRelayConfig::default())
        .await
        .expect("source");
    let owner = Keys::generate();
    let created_at = Timestamp::from_secs(1_700_000_000);
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "tools".to_owned(),
            name: "tools".to_owned(),
            relays: vec![own.url(), source.url()],
            // The policy wants a clone URL on the service's host; the fetcher skips that one
            // and mirrors from the other.
            clone: vec![
                format!(
                    "http://127.0.0.1:{}/{}/tools.git",
                    own.addr().port(),
                    owner.public_key().to_bech32().expect("npub")
                ),
                format!("file://{}", source_repo.display()),
            ],
            maintainers: Vec::new(),
            created_at,
        },
    )
    .expect("announcement");
    let refs = [("refs/heads/main".to_owned(), commit.clone())];
    let state = nip34::repo_state(&owner, "tools", &refs, created_at).expect("state");
    own.seed([announcement.clone()]).await.expect("seed own");
    source
        .seed([announcement, state.clone()])
        .await
        .expect("seed source");

    let settings = Settings::resolve(RawConfig {
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(dir.path().join("data")),
        own_relay: Some(own.url()),
        allow_private_relays: Some(true),
        batch_window: Some("200ms".to_owned()),
        backoff_base: Some("1s".to_owned()),
        backoff_cap: Some("5s".to_owned()),
        git_root: Some(git_root.clone()),
        git_allow_file_urls: Some(true),
        on_sync_hook: Some(format!("cat >> {0}; echo >> {0}", hook_log.display())),
        ..RawConfig::default()
    })
    .expect("settings");
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let mirror = git_root
        .join(owner.public_key().to_bech32().expect("npub"))
        .join("tools.git");
    let mirrored = wait_until(Duration::from_secs(30), || async {
        mirror.join("HEAD").is_file() && std::fs::read_to_string(&hook_log).is_ok()
    })
    .await;
    assert!(mirrored, "the mirror and the hook's record appeared");
    assert_eq!(git(&mirror, &["rev-parse", "refs/heads/main"]), commit);
    let log = std::fs::read_to_string(&hook_log).expect("log");
    let run: serde_json::Value =
        serde_json::from_str(log.lines().next().expect("a run")).expect("json");
    assert_eq!(run["repositories"][0]["identifier"], "tools");
    assert_eq!(run["repositories"][0]["purgatory"], false);
    assert_eq!(run["repositories"][0]["states"][0]["id"], state.id.to_hex());
    assert!(
        daemon.status().await.expect("status").purgatory.is_none(),
        "no purgatory in external mode"
    );
    daemon.shutdown().await;
}
