//! Tests of the hook runner with real commands: the batch arrives as JSON on standard input,
//! a failing command is retried, and the runs are counted.

use std::path::Path;
use std::time::Duration;

use super::{HookConfig, RepoUpdate, StateRefs, SyncBatch, SyncHook};
use crate::metrics::MetricsRegistry;

fn batch(identifier: &str) -> SyncBatch {
    SyncBatch {
        repositories: vec![RepoUpdate {
            coordinate: format!("30617:{}:{identifier}", "a".repeat(64)),
            owner: "npub1example".to_owned(),
            identifier: identifier.to_owned(),
            purgatory: true,
            clone_urls: vec!["https://example.org/a.git".to_owned()],
            path: None,
            states: vec![StateRefs {
                id: "b".repeat(64),
                author: "a".repeat(64),
                created_at: 1_700_000_000,
                refs: vec![["refs/heads/main".to_owned(), "c".repeat(40)]],
            }],
        }],
    }
}

/// Waits up to 10 s for `path` to hold `lines` lines.
async fn lines_of(path: &Path, lines: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let found: Vec<String> = text.lines().map(str::to_owned).collect();
        if found.len() >= lines || tokio::time::Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_command_reads_the_batch_and_a_failure_is_retried() {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("log");
    let tries = dir.path().join("tries");
    // Fails on its first run, succeeds on the second; each run records its input.
    let command = format!(
        "cat >> {log}; echo >> {log}; if [ -e {tries} ]; then exit 0; else touch {tries}; exit 3; fi",
        log = log.display(),
        tries = tries.display()
    );
    let registry = MetricsRegistry::new().expect("registry");
    let hook = SyncHook::start(
        HookConfig {
            retry_base: Duration::from_millis(10),
            ..HookConfig::new(command)
        },
        &registry.meter(),
    );
    hook.submit(batch("tools"));
    let runs = lines_of(&log, 2).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    for run in &runs {
        let value: serde_json::Value = serde_json::from_str(run).expect("json");
        assert_eq!(value["repositories"][0]["identifier"], "tools");
        assert_eq!(
            value["repositories"][0]["states"][0]["refs"][0][0],
            "refs/heads/main"
        );
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let text = registry.render().expect("render");
        if text.contains(r#"grasp_sync_sync_hook_runs_total{result="ok"} 1"#)
            || tokio::time::Instant::now() >= deadline
        {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        metrics.contains(r#"grasp_sync_sync_hook_runs_total{result="retried"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"grasp_sync_sync_hook_runs_total{result="ok"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_empty_batch_runs_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("log");
    let registry = MetricsRegistry::new().expect("registry");
    let hook = SyncHook::start(
        HookConfig::new(format!("echo run >> {}", log.display())),
        &registry.meter(),
    );
    hook.submit(SyncBatch::default());
    hook.submit(batch("after"));
    let runs = lines_of(&log, 1).await;
    assert_eq!(runs, vec!["run".to_owned()], "only the non-empty batch ran");
}
