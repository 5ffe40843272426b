//! A store that fills up during sync: `lmdb_map_size` bounds it, and failed saves are counted.
//! (Reopening the same store with a larger map needs a new process: the LMDB binding keeps one
//! environment per path for the life of a process.)

use std::collections::BTreeSet;
use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{NetworkSpec, RootCount, TestNetwork, TestRelayConfig};
use nostr::EventId;

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
