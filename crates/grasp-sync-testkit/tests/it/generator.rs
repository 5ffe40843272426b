//! The network generator and `TestNetwork` through the public API.

use std::collections::BTreeSet;

use grasp_sync_testkit::{
    GeneratedNetwork, NetworkSpec, OutboxSpec, RootCount, TestNetwork, TestRelayConfig, generate,
};
use nostr::EventId;
use nostr::hashes::{Hash, HashEngine, sha256};

const SERVICE: &str = "ws://127.0.0.1:4000";

fn urls() -> Vec<String> {
    (0..3)
        .map(|i| format!("ws://127.0.0.1:{}", 6000 + i))
        .collect()
}

fn ids(network: &GeneratedNetwork) -> Vec<Vec<EventId>> {
    network
        .relay_events
        .iter()
        .map(|events| events.iter().map(|e| e.id).collect())
        .collect()
}

/// A digest of every placement (relay index and event ID, in order) and of the expected,
/// expected-descendant and excluded sets.
fn fingerprint(network: &GeneratedNetwork) -> String {
    let mut engine = sha256::Hash::engine();
    for (relay, events) in network.relay_events.iter().enumerate() {
        engine.input(&(relay as u64).to_le_bytes());
        for event in events {
            engine.input(event.id.as_bytes());
        }
    }
    for (name, set) in [
        (b"expected", &network.expected),
        (b"descends", &network.expected_descendants),
        (b"excluded", &network.excluded),
    ] {
        engine.input(name);
        for id in set {
            engine.input(id.as_bytes());
        }
    }
    sha256::Hash::from_engine(engine).to_string()
}

/// The simulator's small size: every kind of event the generator makes.
fn sim_small(seed: u64) -> NetworkSpec {
    NetworkSpec {
        relays: 5,
        repos: 40,
        roots: RootCount::Total(120),
        replies_per_root: 2,
        descendants_per_reply: 1,
        comments_per_repo: 1,
        authors: 40,
        ..NetworkSpec::small(seed, SERVICE)
    }
}

fn five_urls() -> Vec<String> {
    (0..5)
        .map(|i| format!("ws://127.0.0.1:{}", 6100 + i))
        .collect()
}

fn eight_urls() -> Vec<String> {
    (0..8)
        .map(|i| format!("ws://127.0.0.1:{}", 6200 + i))
        .collect()
}

/// Digests of networks generated before participants with outbox relays existed: a spec
/// that leaves them out must keep every event ID and placement.
#[test]
fn networks_without_outbox_participants_are_unchanged() {
    for (spec, urls, digest) in [
        (
            NetworkSpec::small(42, SERVICE),
            urls(),
            "868400024ed6c83f33289dd134ac40f0668b819fe9f9a1436eb919fb1cd2f805",
        ),
        (
            sim_small(7),
            five_urls(),
            "ad935c627141d6d8070f219ff3891c93b84b724fa5ee66b75443c7e0c74e7788",
        ),
        (
            NetworkSpec {
                share_without_service_clone: 0.1,
                ..sim_small(7)
            },
            five_urls(),
            "c4f731850c6ef74dca4b2d3eed9eaf5fb41879a0eb481848840cd866f9b7b659",
        ),
        (
            NetworkSpec::gitnostr(7, SERVICE),
            eight_urls(),
            "58fb2cd11973921fab538aa2d7739e433a1b27f1fe3d7f0375dee6284dd24b6c",
        ),
    ] {
        let network = generate(&spec, &urls).unwrap();
        assert_eq!(fingerprint(&network), digest, "seed {}", spec.seed);
    }
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
async fn outbox_relays_run_and_hold_the_outbox_only_events_that_listed_relays_lack() {
    let spec = NetworkSpec {
        outbox: OutboxSpec {
            relays: 2,
            share_of_authors: 0.5,
            share_of_events: 0.5,
        },
        ..NetworkSpec::small(21, SERVICE)
    };
    let configs = [
        TestRelayConfig::default(),
        TestRelayConfig::default(),
        TestRelayConfig::default(),
        TestRelayConfig::nos_lol_like(),
        TestRelayConfig::ditto_like(),
    ];
    let mut network = TestNetwork::start(&spec, &configs).await.unwrap();
    assert_eq!(network.relays.len(), 5);
    assert_eq!(network.relays[4].config().name, configs[4].name);
    let outbox = &network.generated.outbox;
    assert_eq!(outbox.relay_indices, vec![3, 4]);
    let only = &outbox.only_on_outbox;
    assert!(!outbox.expected_only_on_outbox.is_empty());
    let lists: BTreeSet<EventId> = outbox.relay_lists.iter().map(|l| l.event).collect();
    let mut on_outbox = BTreeSet::new();
    for (i, relay) in network.relays.iter().enumerate() {
        let stored = relay.event_ids().await.unwrap();
        if i < spec.relays {
            assert!(
                stored.is_disjoint(only),
                "relay {i} holds outbox-only events"
            );
        } else {
            assert!(
                stored
                    .iter()
                    .all(|id| only.contains(id) || lists.contains(id))
            );
            on_outbox.extend(stored.intersection(only).copied());
        }
    }
    assert_eq!(&on_outbox, only);
    // Every list is on a listed relay, where a sync connected there finds it.
    for list in &outbox.relay_lists {
        let listed = list.published_on.iter().filter(|&&r| r < spec.relays);
        for &r in listed {
            assert!(
                network.relays[r]
                    .event_ids()
                    .await
                    .unwrap()
                    .contains(&list.event)
            );
        }
    }
    network.stop().await.unwrap();
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
