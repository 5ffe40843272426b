//! A store that fills up during sync: `lmdb_map_size` bounds it, failed saves are counted as
//! `full`, and once the daemon restarts with room every event ends in the store. (Reopening the
//! same store with a larger map needs a new process: the LMDB binding keeps one environment per
//! path for the life of a process, so the restart runs the `grasp-sync` binary twice.)

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{NetworkSpec, RootCount, TestNetwork, TestRelayConfig};
use nostr::{EventId, Filter};
use nostr_sdk::pool::{RelayOptions, RelayPool};
use nostr_sdk::prelude::ReqExitPolicy;

use crate::process::DaemonProcess;
use crate::support::{http_get, test_settings, wait_until};

const SERVICE: &str = "wss://grasp.test";

fn settings(dir: &std::path::Path, bootstrap: &str, map_size: usize) -> Settings {
    Settings {
        service_url: Some(RelayUrl::parse(SERVICE).expect("service url")),
        bootstrap_relays: vec![RelayUrl::parse(bootstrap).expect("bootstrap url")],
        lmdb_map_size: Some(map_size),
        ..test_settings(dir)
    }
}

async fn missing(daemon: &Daemon, expected: &BTreeSet<EventId>) -> usize {
    let mut missing = 0;
    for id in expected {
        if !daemon.holds(id).await.expect("holds") {
            missing += 1;
        }
    }
    missing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fills_during_sync_counts_its_failed_saves_as_full() {
    let spec = NetworkSpec {
        relays: 1,
        repos: 30,
        roots: RootCount::Total(600),
        replies_per_root: 2,
        relays_per_repo: 1,
        share_not_listing_service: 0.0,
        ..NetworkSpec::small(11, SERVICE)
    };
    let network = TestNetwork::start(&spec, &[TestRelayConfig::default()])
        .await
        .expect("network");
    let bootstrap = network.urls()[0].clone();
    let expected = network.expected().clone();
    let dir = tempfile::tempdir().expect("dir");

    // A map far too small for the network: saves fail, and are counted.
    let daemon = Daemon::start(&settings(dir.path(), &bootstrap, 512 * 1024))
        .await
        .expect("daemon with a tiny store");
    let full = wait_until(Duration::from_secs(60), || async {
        let (_, metrics) = http_get(daemon.metrics_addr(), "/metrics").await;
        metrics.contains("grasp_sync_store_write_failures_total{reason=\"full\"}")
    })
    .await;
    assert!(
        full,
        "{}",
        http_get(daemon.metrics_addr(), "/metrics").await.1
    );
    assert!(
        missing(&daemon, &expected).await > 0,
        "everything fitted after all"
    );
    daemon.shutdown().await;
}

/// A tiny or roomy daemon on `data_dir`, syncing from `bootstrap`.
fn daemon_process(data_dir: &Path, bootstrap: &str, map_size: &str) -> DaemonProcess {
    DaemonProcess::start(
        data_dir,
        &[
            "--service-url",
            SERVICE,
            "--bootstrap-relay",
            bootstrap,
            "--allow-private-relays",
            "--batch-window",
            "200ms",
            "--backoff-base",
            "1s",
            "--backoff-cap",
            "5s",
            "--lmdb-map-size",
            map_size,
        ],
    )
}

/// How many of `expected` the daemon's embedded relay serves.
async fn served(daemon: &DaemonProcess, expected: &BTreeSet<EventId>) -> usize {
    let pool = RelayPool::default();
    let url = nostr::RelayUrl::parse(&daemon.relay).expect("relay url");
    if pool
        .add_relay(url.clone(), RelayOptions::new().reconnect(false))
        .await
        .is_err()
    {
        return 0;
    }
    let Ok(relay) = pool.relay(&url).await else {
        return 0;
    };
    if relay.try_connect(Duration::from_secs(10)).await.is_err() {
        return 0;
    }
    let ids: Vec<EventId> = expected.iter().copied().collect();
    let mut held = 0;
    for chunk in ids.chunks(100) {
        let filter = Filter::new().ids(chunk.iter().copied());
        if let Ok(events) = relay
            .fetch_events(filter, Duration::from_secs(10), ReqExitPolicy::ExitOnEOSE)
            .await
        {
            held += events
                .into_iter()
                .filter(|e| expected.contains(&e.id))
                .count();
        }
    }
    pool.shutdown().await;
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_filled_during_sync_ends_complete_after_a_restart_with_room() {
    let spec = NetworkSpec {
        relays: 1,
        repos: 30,
        roots: RootCount::Total(600),
        replies_per_root: 2,
        relays_per_repo: 1,
        share_not_listing_service: 0.0,
        ..NetworkSpec::small(11, SERVICE)
    };
    let network = TestNetwork::start(&spec, &[TestRelayConfig::default()])
        .await
        .expect("network");
    let bootstrap = network.urls()[0].clone();
    let expected = network.expected().clone();
    let dir = tempfile::tempdir().expect("dir");

    // A map far too small for the network: it fills, and the daemon says so.
    let tiny = daemon_process(dir.path(), &bootstrap, "512KiB");
    let full = wait_until(Duration::from_secs(90), || async {
        let (_, metrics) = http_get(tiny.metrics, "/metrics").await;
        metrics.contains("grasp_sync_store_write_failures_total{reason=\"full\"}")
    })
    .await;
    assert!(full, "{}", http_get(tiny.metrics, "/metrics").await.1);
    let held = served(&tiny, &expected).await;
    assert!(held < expected.len(), "everything fitted after all");
    assert!(
        tiny.log().contains("the own store is full"),
        "no log line says the store is full: {}",
        tiny.log()
    );
    tiny.stop();

    // The same store with room: every event arrives, by the sync of a fresh start.
    let roomy = daemon_process(dir.path(), &bootstrap, "64MiB");
    let complete = wait_until(Duration::from_secs(180), || async {
        served(&roomy, &expected).await == expected.len()
    })
    .await;
    let held = served(&roomy, &expected).await;
    let (_, status) = http_get(roomy.metrics, "/status").await;
    assert!(
        complete,
        "{held} of {} events; status: {status}",
        expected.len()
    );
    let (_, metrics) = http_get(roomy.metrics, "/metrics").await;
    assert!(
        !metrics.contains("grasp_sync_store_write_failures_total"),
        "{metrics}"
    );
    roomy.stop();
}
