//! Unit tests for the network generator: validation, acceptance rules, placement and
//! determinism.

use std::collections::{BTreeSet, HashMap};

use nostr::{Event, EventId};
use proptest::prelude::*;

use super::generate::clone_base;
use super::*;
use crate::TestkitError;

const SERVICE: &str = "ws://127.0.0.1:4000";

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("ws://127.0.0.1:{}", 5000 + i))
        .collect()
}

fn small(seed: u64) -> NetworkSpec {
    NetworkSpec::small(seed, SERVICE)
}

/// Every distinct event, by ID.
fn events(network: &GeneratedNetwork) -> HashMap<EventId, Event> {
    network
        .relay_events
        .iter()
        .flatten()
        .map(|e| (e.id, e.clone()))
        .collect()
}

/// First values of the event's tags named `name`.
fn tag_values(event: &Event, name: &str) -> Vec<String> {
    event
        .tags
        .iter()
        .filter(|t| t.kind().as_str() == name)
        .filter_map(|t| t.content().map(str::to_owned))
        .collect()
}

/// Asserts that `spec` is rejected with a message containing `why`.
fn check_invalid(spec: NetworkSpec, relay_urls: &[String], why: &str) {
    match generate(&spec, relay_urls) {
        Err(TestkitError::InvalidSpec(message)) => {
            assert!(message.contains(why), "{message:?} should mention {why:?}")
        }
        other => panic!("expected an invalid spec error, got {other:?}"),
    }
}

#[test]
fn inconsistent_specs_are_typed_errors() {
    check_invalid(small(1), &urls(2), "relay urls");
    check_invalid(
        NetworkSpec {
            relays_per_repo: 4,
            ..small(1)
        },
        &urls(3),
        "relays_per_repo",
    );
    check_invalid(
        NetworkSpec {
            relays_per_repo: 0,
            ..small(1)
        },
        &urls(3),
        "relays_per_repo",
    );
    check_invalid(
        NetworkSpec {
            share_on_several_relays: 1.5,
            ..small(1)
        },
        &urls(3),
        "share_on_several_relays",
    );
    check_invalid(
        NetworkSpec {
            share_not_listing_service: f64::NAN,
            ..small(1)
        },
        &urls(3),
        "share_not_listing_service",
    );
    check_invalid(
        NetworkSpec {
            service_url: "not a url".to_owned(),
            ..small(1)
        },
        &urls(3),
        "not a relay url",
    );
}

#[test]
fn clone_urls_are_on_the_service_authority() {
    for (service, base) in [
        ("ws://127.0.0.1:4000", "http://127.0.0.1:4000"),
        ("wss://relay.example.com/", "https://relay.example.com"),
        ("wss://relay.example.com/path", "https://relay.example.com"),
    ] {
        assert_eq!(clone_base(service), base);
    }
}

#[test]
fn accepted_announcements_list_the_service_and_a_clone_url_on_its_domain() {
    let spec = NetworkSpec {
        repos: 10,
        share_not_listing_service: 0.2,
        share_without_service_clone: 0.3,
        ..small(3)
    };
    let network = generate(&spec, &urls(3)).unwrap();
    let events = events(&network);
    let mut categories = (0, 0, 0);
    for repo in &network.repos {
        let announcement = &events[&repo.announcement];
        let relays = announcement
            .tags
            .iter()
            .find(|t| t.kind().as_str() == "relays")
            .unwrap();
        let clones = announcement
            .tags
            .iter()
            .find(|t| t.kind().as_str() == "clone")
            .unwrap();
        let lists = relays.as_slice()[1..].iter().any(|u| u == SERVICE);
        let on_service = clones.as_slice()[1..]
            .iter()
            .any(|u| u.starts_with("http://127.0.0.1:4000/"));
        assert_eq!(lists, repo.lists_service);
        assert_eq!(on_service, repo.clone_on_service);
        assert_eq!(
            network.expected.contains(&repo.announcement),
            repo.accepted()
        );
        assert_eq!(network.expected.contains(&repo.state), repo.accepted());
        match (repo.lists_service, repo.clone_on_service) {
            (true, true) => categories.0 += 1,
            (false, _) => categories.1 += 1,
            (true, false) => categories.2 += 1,
        }
    }
    assert_eq!(categories, (5, 2, 3));
}

#[test]
fn thread_members_follow_their_repository_into_or_out_of_the_expected_set() {
    let spec = NetworkSpec {
        descendants_per_reply: 2,
        ..small(4)
    };
    let network = generate(&spec, &urls(3)).unwrap();
    let events = events(&network);
    let coordinates: HashMap<String, bool> = network
        .repos
        .iter()
        .map(|r| (r.repo.coordinate(), r.accepted()))
        .collect();
    // Resolve each event to its repository through a/A/q coordinates or e/E/q parents.
    fn accepted_of(
        id: &EventId,
        events: &HashMap<EventId, Event>,
        coordinates: &HashMap<String, bool>,
        network: &GeneratedNetwork,
    ) -> bool {
        if let Some(repo) = network
            .repos
            .iter()
            .find(|r| r.announcement == *id || r.state == *id)
        {
            return repo.accepted();
        }
        let event = &events[id];
        for name in ["a", "A", "q"] {
            for value in tag_values(event, name) {
                if let Some(accepted) = coordinates.get(&value) {
                    return *accepted;
                }
            }
        }
        for name in ["e", "E", "q"] {
            for value in tag_values(event, name) {
                if let Ok(parent) = EventId::from_hex(&value) {
                    return accepted_of(&parent, events, coordinates, network);
                }
            }
        }
        panic!("event {id} references nothing");
    }
    for id in events.keys() {
        assert_eq!(
            network.expected.contains(id),
            accepted_of(id, &events, &coordinates, &network),
            "{id}"
        );
    }
    let roots = spec.repos * 2;
    let replies = roots * spec.replies_per_root;
    let accepted = network.repos.iter().filter(|r| r.accepted()).count();
    assert_eq!(network.expected_descendants.len(), accepted * 2 * 2 * 2);
    assert!(network.expected_descendants.is_subset(&network.expected));
    assert_eq!(
        network.event_count(),
        spec.repos * (2 + spec.comments_per_repo) + roots + replies + replies * 2
    );
}

#[test]
fn every_event_is_on_at_least_one_of_its_repository_relays() {
    let network = generate(&small(5), &urls(3)).unwrap();
    let mut seen: HashMap<EventId, BTreeSet<usize>> = HashMap::new();
    for (relay, events) in network.relay_events.iter().enumerate() {
        for event in events {
            seen.entry(event.id).or_default().insert(relay);
        }
    }
    for repo in &network.repos {
        let listed: BTreeSet<usize> = repo.relay_indices.iter().copied().collect();
        assert_eq!(seen[&repo.announcement], listed);
        assert_eq!(seen[&repo.state], listed);
        for root in &repo.roots {
            assert!(!seen[root].is_empty() && seen[root].is_subset(&listed));
        }
    }
    let all: BTreeSet<EventId> = seen.keys().copied().collect();
    let union: BTreeSet<EventId> = network.expected.union(&network.excluded).copied().collect();
    assert_eq!(all, union);
}

#[test]
fn total_root_count_is_exact_and_uneven() {
    let spec = NetworkSpec {
        repos: 20,
        roots: RootCount::Total(60),
        replies_per_root: 0,
        comments_per_repo: 0,
        ..small(6)
    };
    let network = generate(&spec, &urls(3)).unwrap();
    let counts: Vec<usize> = network.repos.iter().map(|r| r.roots.len()).collect();
    assert_eq!(counts.iter().sum::<usize>(), 60);
    assert!(counts.iter().max() > counts.iter().min());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn same_seed_same_network_and_expected_never_overlaps_excluded(
        seed in any::<u64>(),
        repos in 1usize..5,
        relays in 1usize..4,
        replies in 0usize..3,
    ) {
        let spec = NetworkSpec {
            repos,
            relays,
            relays_per_repo: relays.min(2),
            roots: RootCount::PerRepo(1),
            replies_per_root: replies,
            share_not_listing_service: 0.5,
            ..small(seed)
        };
        let first = generate(&spec, &urls(relays)).unwrap();
        let second = generate(&spec, &urls(relays)).unwrap();
        let ids = |n: &GeneratedNetwork| -> Vec<Vec<EventId>> {
            n.relay_events.iter().map(|r| r.iter().map(|e| e.id).collect()).collect()
        };
        prop_assert_eq!(ids(&first), ids(&second));
        prop_assert_eq!(&first.expected, &second.expected);
        prop_assert!(first.expected.is_disjoint(&first.excluded));
    }
}
