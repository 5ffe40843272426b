//! Fresh-start sync from a bootstrap relay into the store, across a small network, including
//! one generation of descendants (events that tag only a direct thread member).

use std::time::Duration;

use grasp_sync_testkit::{NetworkSpec, TestNetwork, TestRelayConfig};

use crate::support::{SERVICE_URL, TestStore, start_engine, test_config, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovers_listed_relays_and_syncs_every_expected_event() {
    let spec = NetworkSpec {
        descendants_per_reply: 1,
        ..NetworkSpec::small(11, SERVICE_URL)
    };
    let network = TestNetwork::start(&spec, &[TestRelayConfig::default()])
        .await
        .expect("network");
    let urls = network.urls();
    let store = TestStore::open().await;
    let engine = start_engine(&store, test_config(&urls[..1])).await;

    let expected = network.expected().clone();
    let complete = wait_until(Duration::from_secs(60), || async {
        store.count_stored(&expected).await == expected.len()
    })
    .await;
    let status = engine.status().await.expect("status");
    assert!(
        complete,
        "stored {} of {} expected events; status: {status:#?}",
        store.count_stored(&expected).await,
        expected.len()
    );
    assert!(
        !network.generated.expected_descendants.is_empty(),
        "the network has no descendants"
    );
    let excluded = &network.generated.excluded;
    assert_eq!(
        store.count_stored(excluded).await,
        0,
        "events of unlisted repositories were stored"
    );
    assert_eq!(status.total_refusals(), 0, "{status:#?}");
    engine.shutdown().await;
}
