//! The network generator and `TestNetwork` through the public API.

use std::collections::BTreeSet;

use grasp_sync_testkit::{NetworkSpec, TestNetwork, TestRelayConfig, generate};
use nostr::EventId;

const SERVICE: &str = "ws://127.0.0.1:4000";

fn urls() -> Vec<String> {
    (0..3)
        .map(|i| format!("ws://127.0.0.1:{}", 6000 + i))
        .collect()
}

fn ids(network: &grasp_sync_testkit::GeneratedNetwork) -> Vec<Vec<EventId>> {
    network
        .relay_events
        .iter()
        .map(|events| events.iter().map(|e| e.id).collect())
        .collect()
}

#[test]
fn the_same_seed_yields_the_same_event_ids() {
    let spec = NetworkSpec::small(42, SERVICE);
    let first = generate(&spec, &urls()).unwrap();
    let second = generate(&spec, &urls()).unwrap();
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(first.expected, second.expected);

    let other = generate(&NetworkSpec::small(43, SERVICE), &urls()).unwrap();
    assert!(first.expected.is_disjoint(&other.expected));
}

#[test]
fn the_expected_set_excludes_announcements_not_listing_the_service() {
    let network = generate(&NetworkSpec::small(42, SERVICE), &urls()).unwrap();
    let not_listing: Vec<_> = network.repos.iter().filter(|r| !r.lists_service).collect();
    assert_eq!(not_listing.len(), 1);
    for repo in not_listing {
        assert!(!network.expected.contains(&repo.announcement));
        assert!(network.excluded.contains(&repo.announcement));
        for root in &repo.roots {
            assert!(network.excluded.contains(root));
        }
    }
    for repo in network.repos.iter().filter(|r| r.accepted()) {
        assert!(network.expected.contains(&repo.announcement));
        assert!(
            repo.roots
                .iter()
                .all(|root| network.expected.contains(root))
        );
    }
}

#[tokio::test]
async fn test_network_seeds_each_relay_with_its_events() {
    let spec = NetworkSpec::small(9, SERVICE);
    let mut network = TestNetwork::start(&spec, &[TestRelayConfig::default()])
        .await
        .unwrap();
    let mut union = BTreeSet::new();
    for (relay, events) in network.relays.iter().zip(&network.generated.relay_events) {
        let stored = relay.event_ids().await.unwrap();
        let placed: BTreeSet<EventId> = events.iter().map(|e| e.id).collect();
        assert_eq!(stored, placed);
        union.extend(stored);
    }
    let all: BTreeSet<EventId> = network
        .expected()
        .union(&network.generated.excluded)
        .copied()
        .collect();
    assert_eq!(union, all);
    assert_eq!(network.urls().len(), 3);
    network.stop().await.unwrap();
    assert!(network.relays.iter().all(|r| !r.is_running()));
}

#[tokio::test]
async fn test_network_rejects_a_config_count_that_does_not_match() {
    let spec = NetworkSpec::small(9, SERVICE);
    let configs = vec![TestRelayConfig::default(); 2];
    assert!(matches!(
        TestNetwork::start(&spec, &configs).await,
        Err(grasp_sync_testkit::TestkitError::InvalidSpec(_))
    ));
}
