//! An announcement, published through the daemon's own relay, that lists relays at every
//! spelling of a loopback address that is not allowed: the daemon dials none of them, and
//! the refusals show in `/status` and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use grasp_sync_bin::{Daemon, RawConfig, Settings};
use grasp_sync_testkit::nip34::{self, Announcement};
use nostr::{Keys, Timestamp};
use tokio::net::TcpListener;

use crate::support::{Publisher, http_get, wait_until};

/// The machine's host name, when it resolves to a loopback address (a DNS name that only
/// the dial-time check can catch).
async fn loopback_host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().to_ascii_lowercase();
    if name.is_empty() || name == "localhost" {
        return None;
    }
    let loopback = tokio::net::lookup_host((name.as_str(), 80))
        .await
        .ok()?
        .all(|a| a.ip().is_loopback());
    loopback.then_some(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_at_internal_addresses_in_any_spelling_are_never_dialled() {
    // The bait: a listener on loopback that counts every connection.
    let bait = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = bait.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((stream, _)) = bait.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });

    // A daemon with the default address policy (no private relays).
    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings::resolve(RawConfig {
        listen: Some("127.0.0.1:0".to_owned()),
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(dir.path().to_path_buf()),
        batch_window: Some("200ms".to_owned()),
        ..RawConfig::default()
    })
    .expect("settings");
    assert!(!settings.address_policy.allow_private);
    let daemon = Daemon::start(&settings).await.expect("daemon");
    let addr = daemon.relay_addr().expect("embedded relay");
    let service = format!("ws://{addr}");

    let spellings = [
        "2130706433",
        "127.1",
        "0x7f000001",
        "0177.0.0.1",
        "0",
        "localhost.",
        "LOCALHOST",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ];
    let mut relays: Vec<String> = spellings
        .iter()
        .map(|host| format!("ws://{host}:{port}"))
        .collect();
    // Distinct relays once normalised: 127.0.0.1, 0.0.0.0, localhost, ::ffff:127.0.0.1.
    let discovery_refusals = 4;
    let name = loopback_host_name().await;
    if let Some(name) = &name {
        relays.push(format!("ws://{name}:{port}"));
    }
    relays.push(service.clone());
    let owner = Keys::generate();
    let announcement = nip34::announcement(
        &owner,
        &Announcement {
            identifier: "bait".to_owned(),
            name: "bait".to_owned(),
            relays,
            clone: vec![format!(
                "http://{addr}/{}/bait.git",
                owner.public_key().to_hex()
            )],
            maintainers: Vec::new(),
            created_at: Timestamp::from_secs(1_700_000_000),
        },
    )
    .expect("announcement");
    let publisher = Publisher::connect(&service).await;
    let (accepted_announcement, message) = publisher.publish(&announcement).await;
    assert!(accepted_announcement, "{message}");
    publisher.close().await;

    let expected_dial = u64::from(name.is_some());
    let refused = wait_until(Duration::from_secs(30), || async {
        daemon.status().await.is_some_and(|status| {
            status.address_refusals.get("discovery:internal").copied() == Some(discovery_refusals)
                && status
                    .address_refusals
                    .get("dial:internal")
                    .copied()
                    .unwrap_or(0)
                    == expected_dial
        })
    })
    .await;
    let status = daemon.status().await.expect("status");
    assert!(refused, "{:?}", status.address_refusals);
    // Only the host name, if any, was tracked; it is refused at every dial.
    assert_eq!(
        status.relays.len() as u64,
        expected_dial,
        "{:?}",
        status.relays.keys()
    );
    if expected_dial == 1 {
        let tracked = status.relays.values().next().expect("one relay");
        let error = tracked.last_error.as_deref().unwrap_or_default();
        assert!(error.contains("address refused"), "{error}");
    }

    let (code, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
    assert_eq!(code, 200);
    let line = metrics
        .lines()
        .find(|line| {
            line.starts_with("grasp_sync_address_refusals_total")
                && line.contains("stage=\"discovery\"")
        })
        .unwrap_or_else(|| panic!("no refusal series in {metrics}"));
    assert!(line.ends_with(&format!(" {discovery_refusals}")), "{line}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "the bait was dialled");
    daemon.shutdown().await;
}
