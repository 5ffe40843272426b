//! Fresh-start sync from a bootstrap relay into the store, across a small network, including
//! one generation of descendants (events that tag only a direct thread member); on paused time
//! over memory relays.

use std::time::Duration;

use grasp_sync_testkit::{MemoryNetwork, NetworkSpec, TestRelayConfig};

use crate::support::{SERVICE_URL, start_paused_engine, test_config};

#[tokio::test(start_paused = true)]
async fn discovers_listed_relays_and_syncs_every_expected_event() {
    let spec = NetworkSpec {
        descendants_per_reply: 1,
        ..NetworkSpec::small(11, SERVICE_URL)
    };
    let (network, generated) =
        MemoryNetwork::generate(&spec, &[TestRelayConfig::default()]).expect("network");
    let urls = network.urls();
    let run = start_paused_engine(&network, test_config(&urls[..1])).await;

    let status = run
        .wait_for_store(&generated.expected, Duration::from_secs(600))
        .await;
    assert!(
        !generated.expected_descendants.is_empty(),
        "the network has no descendants"
    );
    assert_eq!(
        run.count_stored(&generated.excluded).await,
        0,
        "events of unlisted repositories were stored"
    );
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    run.engine.shutdown().await;
}
