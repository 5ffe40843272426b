//! Tests of the daemon's supervision: a stop request ends it cleanly, and an engine whose task
//! dies (here through a boundary that panics on the engine's task) ends it with an error.

use std::sync::Arc;
use std::time::Duration;

use grasp_sync_engine::{
    EngineConfig, EngineEnd, EngineHandle, EngineParts, MemoryStore, PurgatorySource, SdkConnector,
    SyncEngine,
};
use grasp_sync_model::PurgatoryEntry;

use super::{Daemon, EngineStopped, supervise};
use crate::config::{RawConfig, Settings};

/// Generous: the engine reads the purgatory as soon as its task runs.
const DEADLINE: Duration = Duration::from_secs(30);

/// A purgatory source that panics on every read, as a buggy boundary would.
struct PanickingPurgatory;

impl PurgatorySource for PanickingPurgatory {
    fn announcements_for_sync(&self) -> Vec<PurgatoryEntry> {
        panic!("purgatory source failed");
    }
}

async fn engine(purgatory: Option<Arc<dyn PurgatorySource>>) -> EngineHandle {
    let store = MemoryStore::accept_all().await.expect("store");
    let mut parts = EngineParts::new(
        Arc::new(SdkConnector::default()),
        Arc::new(store.clone()),
        Arc::new(store),
    );
    if let Some(purgatory) = purgatory {
        parts = parts.purgatory(purgatory);
    }
    SyncEngine::start(EngineConfig::default(), parts)
        .await
        .expect("engine starts")
}

#[tokio::test]
async fn an_engine_that_dies_ends_the_wait_with_an_error_naming_it() {
    let engine = engine(Some(Arc::new(PanickingPurgatory))).await;
    let outcome = tokio::time::timeout(DEADLINE, supervise(std::future::pending(), engine.exit()))
        .await
        .expect("the engine's death is noticed before the deadline");
    let error = outcome.expect_err("an engine that died is an error");
    assert!(matches!(
        &error,
        EngineStopped(EngineEnd::Panicked(message)) if message == "purgatory source failed"
    ));
    assert_eq!(
        error.to_string(),
        "the sync engine stopped on its own: panicked: purgatory source failed"
    );
}

#[tokio::test]
async fn a_stop_request_ends_the_wait_cleanly_while_the_engine_runs() {
    let engine = engine(None).await;
    let outcome = supervise(async { "SIGTERM" }, engine.exit()).await;
    assert!(matches!(outcome, Ok("SIGTERM")), "{outcome:?}");
    assert_eq!(engine.exit().ended(), None, "the engine still runs");
    assert_eq!(engine.shutdown().await, EngineEnd::Stopped);
}

#[tokio::test]
async fn a_served_daemon_stops_its_engine_when_asked() {
    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings::resolve(RawConfig {
        listen: Some("127.0.0.1:0".to_owned()),
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(dir.path().to_path_buf()),
        ..RawConfig::default()
    })
    .expect("settings");
    let daemon = Daemon::start(&settings).await.expect("daemon starts");
    let exit = daemon.engine_exit();
    assert_eq!(exit.ended(), None);
    daemon
        .serve_until(async { "test" })
        .await
        .expect("a requested stop is not an error");
    assert_eq!(exit.ended(), Some(EngineEnd::Stopped));
}
