//! The acceptance policy through the running embedded relay: announcements published over
//! WebSocket are answered with `OK` by the store's policy, and the operator endpoints serve
//! metrics and status.

use std::time::Duration;

use grasp_sync_bin::Daemon;
use grasp_sync_testkit::nip34::{self, Announcement, RootKind};
use nostr::{Keys, Timestamp};

use crate::support::{Publisher, http_get, test_settings, wait_until};

fn announcement(
    keys: &Keys,
    identifier: &str,
    relays: &[String],
    clone_base: &str,
) -> nostr::Event {
    nip34::announcement(
        keys,
        &Announcement {
            identifier: identifier.to_owned(),
            name: identifier.to_owned(),
            relays: relays.to_vec(),
            clone: vec![format!(
                "{clone_base}/{}/{identifier}.git",
                keys.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_accepts_announcements_listing_the_service_and_blocks_others() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&test_settings(dir.path()))
        .await
        .expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");
    assert_eq!(daemon.service_url().as_str(), service);
    let clone_base = format!("http://{addr}");
    let publisher = Publisher::connect(&service).await;

    let owner = Keys::generate();
    let listed = announcement(
        &owner,
        "listed",
        std::slice::from_ref(&service),
        &clone_base,
    );
    let (accepted, message) = publisher.publish(&listed).await;
    assert!(accepted, "listing announcement refused: {message}");

    let elsewhere = announcement(
        &owner,
        "elsewhere",
        &["wss://other.example.org".to_owned()],
        &clone_base,
    );
    let (accepted, message) = publisher.publish(&elsewhere).await;
    assert!(!accepted, "non-listing announcement accepted");
    assert!(message.starts_with("blocked:"), "{message}");

    // An issue on the accepted repository is accepted; one on the refused repository is not.
    let author = Keys::generate();
    let repo = nip34::RepoRef::new(owner.public_key(), "listed");
    let issue = nip34::root(
        &author,
        RootKind::Issue,
        &[repo],
        "bug",
        Timestamp::from_secs(1_700_000_100),
    )
    .expect("issue");
    assert!(publisher.publish(&issue).await.0);
    let refused_repo = nip34::RepoRef::new(owner.public_key(), "elsewhere");
    let stray = nip34::root(
        &author,
        RootKind::Issue,
        &[refused_repo],
        "bug",
        Timestamp::from_secs(1_700_000_100),
    )
    .expect("issue");
    let (accepted, message) = publisher.publish(&stray).await;
    assert!(!accepted && message.starts_with("blocked:"), "{message}");

    assert!(daemon.holds(&listed.id).await.expect("holds"));
    assert!(daemon.holds(&issue.id).await.expect("holds"));
    assert!(!daemon.holds(&elsewhere.id).await.expect("holds"));

    // The engine saw the accepted repository on its self feed.
    let tracked = wait_until(Duration::from_secs(20), || async {
        daemon.status().await.is_some_and(|s| s.repos_tracked == 1)
    })
    .await;
    assert!(tracked, "{:?}", daemon.status().await);
    publisher.close().await;
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoints_serve_prometheus_metrics_and_json_status() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&test_settings(dir.path()))
        .await
        .expect("daemon");
    let addr = daemon.metrics_addr();

    let (code, body) = http_get(addr, "/status").await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert!(status.get("relays").is_some(), "{body}");
    assert_eq!(status["repos_tracked"], 0);

    // Totals are recorded on the engine's health tick.
    let recorded = wait_until(Duration::from_secs(20), || async {
        let (code, body) = http_get(addr, "/metrics").await;
        code == 200 && body.contains("grasp_sync_relays_tracked_total")
    })
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await;
    assert!(recorded, "{metrics}");
    assert!(
        metrics.contains("# TYPE grasp_sync_relays_tracked_total gauge"),
        "{metrics}"
    );
    assert!(!metrics.contains("otel_scope_name"), "{metrics}");

    assert_eq!(http_get(addr, "/nothing").await.0, 404);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_dated_ten_years_ahead_is_refused_with_a_clear_reason() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&test_settings(dir.path()))
        .await
        .expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");
    let publisher = Publisher::connect(&service).await;
    let owner = Keys::generate();
    let ten_years = 10 * 365 * 24 * 3600;
    let ahead = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "ahead".to_owned(),
            name: "ahead".to_owned(),
            relays: vec![service.clone()],
            clone: vec![format!(
                "http://{addr}/{}/ahead.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(Timestamp::now().as_secs() + ten_years),
        },
    )
    .expect("announcement");
    let (accepted, message) = publisher.publish(&ahead).await;
    assert!(!accepted, "an announcement ten years ahead was accepted");
    assert!(
        message.contains("invalid: created_at is more than 900 s in the future"),
        "{message}"
    );
    assert!(!daemon.holds(&ahead.id).await.expect("holds"));
    publisher.close().await;
    daemon.shutdown().await;
}
