//! How the engine's task ends, as its handle reports it: stopped when shut down, panicked when
//! a boundary panics on the engine's own task, seen by every watcher even after the handle is
//! gone. On paused time, with no relay to dial.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use grasp_sync_engine::{
    EngineEnd, EngineExit, EngineHandle, EngineParts, PurgatorySource, SyncEngine,
};
use grasp_sync_model::PurgatoryEntry;
use grasp_sync_testkit::MemoryNetwork;

use crate::support::{init_logs, paused_store, test_config};

/// Generous (and virtual): the engine reads the purgatory every 500 ms in the test
/// configuration.
const DEADLINE: Duration = Duration::from_secs(30);

/// A purgatory source that panics on every read once armed, as a buggy boundary would.
#[derive(Debug, Default)]
struct PanickingPurgatory {
    armed: AtomicBool,
}

impl PurgatorySource for PanickingPurgatory {
    fn announcements_for_sync(&self) -> Vec<PurgatoryEntry> {
        assert!(
            !self.armed.load(Ordering::SeqCst),
            "purgatory source failed"
        );
        Vec::new()
    }
}

async fn start(purgatory: Arc<PanickingPurgatory>) -> EngineHandle {
    init_logs();
    let (store, clock) = paused_store().await;
    let parts = EngineParts::new(
        Arc::new(MemoryNetwork::default()),
        Arc::new(store.clone()),
        Arc::new(store),
    )
    .clock(clock)
    .purgatory(purgatory);
    SyncEngine::start(test_config(&[]), parts)
        .await
        .expect("engine starts")
}

async fn wait(exit: EngineExit) -> EngineEnd {
    tokio::time::timeout(DEADLINE, exit.wait())
        .await
        .expect("the engine's task ends before the deadline")
}

#[tokio::test(start_paused = true)]
async fn a_panicking_boundary_ends_the_engine_and_its_exit_says_so() {
    let purgatory = Arc::new(PanickingPurgatory::default());
    let engine = start(Arc::clone(&purgatory)).await;
    let exit = engine.exit();
    assert!(engine.status().await.is_some(), "running before the fault");
    assert_eq!(exit.ended(), None);

    purgatory.armed.store(true, Ordering::SeqCst);
    let end = wait(exit.clone()).await;
    assert_eq!(
        end,
        EngineEnd::Panicked("purgatory source failed".to_owned())
    );
    assert_eq!(
        exit.ended(),
        Some(end.clone()),
        "every watcher sees the same end"
    );
    assert!(
        engine.status().await.is_none(),
        "a dead engine answers no status"
    );
    assert_eq!(
        engine.shutdown().await,
        end,
        "shutdown reports the earlier death"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_engine_ends_stopped_for_watchers_that_outlive_the_handle() {
    let engine = start(Arc::new(PanickingPurgatory::default())).await;
    let exit = engine.exit();
    assert!(engine.status().await.is_some());
    assert_eq!(engine.shutdown().await, EngineEnd::Stopped);
    assert_eq!(exit.ended(), Some(EngineEnd::Stopped));
    assert_eq!(wait(exit).await, EngineEnd::Stopped);
}
