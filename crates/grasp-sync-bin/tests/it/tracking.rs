//! Announcements that name far more relays than the service should track: 40 authors, 32
//! relays each. The tracked relays stay at the configured cap, the per-relay metric series
//! with them, and memory stays flat.

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_bin::{Daemon, RawConfig, Settings};
use grasp_sync_testkit::nip34::{self, Announcement};
use nostr::{Keys, Timestamp};

use crate::support::{Publisher, http_get, wait_until};

const CAP: usize = 20;

/// Resident memory of this process, in KiB.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
        })
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_announcements_of_32_relays_keep_the_tracked_relays_at_the_cap() {
    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings::resolve(RawConfig {
        listen: Some("127.0.0.1:0".to_owned()),
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(dir.path().to_path_buf()),
        batch_window: Some("200ms".to_owned()),
        max_tracked_relays: Some(CAP),
        ..RawConfig::default()
    })
    .expect("settings");
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");
    let before = resident_kib();

    let publisher = Publisher::connect(&service).await;
    for author in 0..40 {
        let owner = Keys::generate();
        // The service and 31 relays no one else lists (names that never resolve).
        let mut relays = vec![service.clone()];
        relays.extend((0..31).map(|n| format!("wss://a{author}-r{n}.invalid")));
        let announcement = nip34::announcement(
            &owner,
            &Announcement {
                identifier: format!("repo-{author}"),
                name: format!("repo {author}"),
                relays,
                clone: vec![format!(
                    "http://{addr}/{}/repo-{author}.git",
                    owner.public_key().to_hex()
                )],
                maintainers: Vec::new(),
                created_at: Timestamp::from_secs(1_700_000_000),
            },
        )
        .expect("announcement");
        let (accepted, message) = publisher.publish(&announcement).await;
        assert!(accepted, "{message}");
    }
    publisher.close().await;

    let bounded = wait_until(Duration::from_secs(30), || async {
        daemon
            .status()
            .await
            .is_some_and(|status| status.repos_tracked == 40 && status.relays.len() == CAP)
    })
    .await;
    let status = daemon.status().await.expect("status");
    assert!(bounded, "{} relays tracked", status.relays.len());
    // 40 authors × 15 hosts besides the service (each author's first 16 hosts) = 600
    // candidates; all but CAP are left out.
    assert_eq!(status.tracking.max_tracked_relays, CAP);
    assert_eq!(status.tracking.relays_over_cap, 40 * 15 - CAP);
    assert_eq!(status.tracking.author_relays_dropped, 40 * 16);

    // The per-relay series are those of the tracked relays, no more (the gauges are
    // refreshed on the engine's health tick).
    let untracked = wait_until(Duration::from_secs(30), || async {
        let (_, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
        metrics.lines().any(|line| {
            line == format!(
                "grasp_sync_relays_untracked{{reason=\"over_cap\"}} {}",
                40 * 15 - CAP
            )
        })
    })
    .await;
    assert!(untracked, "no untracked gauge");
    let (code, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
    assert_eq!(code, 200);
    let labelled: BTreeSet<&str> = metrics
        .lines()
        .filter_map(|line| line.split("relay=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(labelled.len() <= CAP, "{} relay series", labelled.len());

    // The index and the runtimes hold a few hundred entries: memory stays flat.
    let grown = resident_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "resident memory grew by {grown} KiB");
    daemon.shutdown().await;
}
