//! Embedded mode: an event the relay refused because its announcement had not arrived is
//! stored once the announcement is, without being sent again.

use std::time::Duration;

use grasp_sync_bin::Daemon;
use grasp_sync_testkit::nip34::{self, Announcement, RepoRef, RootKind};
use nostr::{Keys, Timestamp};

use crate::support::{Publisher, test_settings, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issue_published_before_its_announcement_is_stored_once_the_announcement_is() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&test_settings(dir.path()))
        .await
        .expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");
    let publisher = Publisher::connect(&service).await;

    let owner = Keys::generate();
    let repo = RepoRef::new(owner.public_key(), "tool");
    let early = nip34::root(
        &Keys::generate(),
        RootKind::Issue,
        &[repo],
        "bug",
        Timestamp::from_secs(1_700_000_100),
    )
    .expect("issue");
    let (accepted, message) = publisher.publish(&early).await;
    assert!(!accepted, "an issue of an unknown repository was accepted");
    assert!(message.starts_with("blocked:"), "{message}");
    assert!(!daemon.holds(&early.id).await.expect("holds"));
    let remembered = daemon
        .status()
        .await
        .and_then(|status| status.rejected_index)
        .map_or(0, |usage| usage.cold_ids);
    assert_eq!(remembered, 1);

    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "tool".to_owned(),
            name: "tool".to_owned(),
            relays: vec![service.clone()],
            clone: vec![format!(
                "http://{addr}/{}/tool.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    let (accepted, message) = publisher.publish(&announcement).await;
    assert!(accepted, "{message}");
    let stored = wait_until(Duration::from_secs(10), || async {
        daemon.holds(&early.id).await.expect("holds")
    })
    .await;
    assert!(stored, "the early issue was never stored");
    publisher.close().await;
    daemon.shutdown().await;
}
