//! Root events whose repository the engine does not track yet wait for it, within
//! `max_waiting_roots`; the rest are dropped and counted in `/status`. On paused time, with
//! no relay to dial.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use grasp_sync_engine::{EngineConfig, EngineParts, SelfFeed, StoreError, SyncEngine};
use grasp_sync_testkit::MemoryNetwork;
use grasp_sync_testkit::nip34::{RootKind, root};
use nostr::{Event, Timestamp};
use tokio::sync::mpsc;

use crate::support::{RepoFixture, init_logs, paused_store, test_config, wait_until};

/// A self feed that hands the engine exactly the events a test gives it, and stays open (a
/// closed self feed ends the engine).
struct HandFedFeed {
    events: Mutex<Option<Vec<Event>>>,
    open: Mutex<Vec<mpsc::Sender<Event>>>,
}

#[async_trait]
impl SelfFeed for HandFedFeed {
    async fn start(&self) -> Result<mpsc::Receiver<Event>, StoreError> {
        let events = self
            .events
            .lock()
            .expect("feed lock")
            .take()
            .unwrap_or_default();
        let (tx, rx) = mpsc::channel(events.len().max(1));
        for event in events {
            tx.try_send(event).expect("room for every event");
        }
        self.open.lock().expect("feed lock").push(tx);
        Ok(rx)
    }
}

#[tokio::test(start_paused = true)]
async fn roots_of_an_untracked_repository_wait_within_the_cap_and_the_excess_is_counted() {
    init_logs();
    const CAP: usize = 3;
    let (store, clock) = paused_store().await;
    let repo = RepoFixture::new("not-announced");
    let author = nostr::Keys::generate();
    let issues: Vec<Event> = (0..5)
        .map(|n| {
            root(
                &author,
                RootKind::Issue,
                std::slice::from_ref(&repo.repo),
                &format!("issue {n}"),
                Timestamp::from_secs(1_700_000_000 + n),
            )
            .expect("issue")
        })
        .collect();
    let feed = Arc::new(HandFedFeed {
        events: Mutex::new(Some(issues)),
        open: Mutex::new(Vec::new()),
    });
    let parts =
        EngineParts::new(Arc::new(MemoryNetwork::default()), Arc::new(store), feed).clock(clock);
    let config = EngineConfig {
        max_waiting_roots: CAP,
        ..test_config(&[])
    };
    let engine = SyncEngine::start(config, parts)
        .await
        .expect("engine starts");

    let counted = wait_until(Duration::from_secs(600), || async {
        engine
            .status()
            .await
            .is_some_and(|s| s.tracking.waiting_roots_dropped > 0)
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(counted, "{:#?}", status.tracking);
    assert_eq!(status.tracking.max_waiting_roots, CAP);
    assert_eq!(status.tracking.waiting_roots, CAP);
    assert_eq!(status.tracking.waiting_roots_dropped, 2);
    assert_eq!(status.repos_tracked, 0);
    engine.shutdown().await;
}
