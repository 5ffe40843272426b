//! The tracking bounds: hosts per author, relays in total, bootstrap relays kept.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::test_support::{announcement, coord, relay};

/// An index of `repos` repositories of owner byte `owner`, each listing `relays` (as URLs).
fn index_of(announcements: &[(u8, &str, Vec<String>)]) -> RepoSyncIndex {
    let mut index = RepoSyncIndex::default();
    for (n, (owner, identifier, relays)) in announcements.iter().enumerate() {
        let relays: Vec<&str> = relays.iter().map(String::as_str).collect();
        let id_byte = u8::try_from(n % 250).expect("small");
        index.handle_announcement(&announcement(
            &coord(*owner, identifier),
            &relays,
            10,
            id_byte,
        ));
    }
    index
}

fn urls(hosts: impl IntoIterator<Item = String>) -> Vec<String> {
    hosts
        .into_iter()
        .map(|host| format!("wss://{host}"))
        .collect()
}

#[test]
fn one_author_reaches_at_most_its_host_cap_and_paths_or_ports_of_one_host_count_once() {
    let many: Vec<String> = urls((0..40).map(|n| format!("r{n:02}.example")));
    let same_host: Vec<String> = (0..32).map(|n| format!("wss://big.example/p{n}")).collect();
    let index = index_of(&[(1, "wide", many), (2, "paths", same_host)]);
    let bounds = TrackingBounds {
        max_relays: 1_000,
        max_hosts_per_author: 5,
        ..TrackingBounds::default()
    };
    let (targets, report) = derive_bounded_relay_targets(&index, None, bounds, &BTreeSet::new());
    let of_author = |owner: u8| {
        targets
            .iter()
            .filter(|(_, needs)| {
                needs
                    .repos
                    .keys()
                    .any(|c| c.owner() == coord(owner, "x").owner())
            })
            .count()
    };
    assert_eq!(of_author(1), 5, "the first five hosts in URL order");
    assert!(targets.contains_key(&relay("wss://r00.example")));
    assert!(!targets.contains_key(&relay("wss://r05.example")));
    // One host under 32 paths is one host: all 32 relays are kept.
    assert_eq!(of_author(2), 32);
    // The index keeps an announcement's first 32 relays; 27 of them are beyond the cap.
    assert_eq!(report.author_relays_dropped, 32 - 5);
    assert_eq!(report.relays_over_cap, 0);
}

#[test]
fn the_total_cap_keeps_the_relays_serving_most_repositories_and_every_bootstrap_relay() {
    // 40 authors, 32 relays each: 1,280 relays, plus one shared by every author.
    let announcements: Vec<(u8, String, Vec<String>)> = (0..40u8)
        .map(|author| {
            let mut relays = urls((0..31).map(|n| format!("a{author}-r{n}.example")));
            relays.push("wss://shared.example".to_owned());
            (author + 1, "repo".to_owned(), relays)
        })
        .collect();
    let borrowed: Vec<(u8, &str, Vec<String>)> = announcements
        .iter()
        .map(|(owner, identifier, relays)| (*owner, identifier.as_str(), relays.clone()))
        .collect();
    let index = index_of(&borrowed);
    let bootstrap = BTreeSet::from([relay("wss://a39-r30.example")]);
    let bounds = TrackingBounds {
        max_relays: 64,
        max_hosts_per_author: 32,
        ..TrackingBounds::default()
    };
    let (targets, report) = derive_bounded_relay_targets(&index, None, bounds, &bootstrap);
    assert_eq!(targets.len(), 64);
    assert_eq!(report.relays_over_cap, 1_241 - 64);
    assert!(
        targets.contains_key(&relay("wss://shared.example")),
        "serves 40 repositories"
    );
    assert!(
        targets.contains_key(&relay("wss://a39-r30.example")),
        "bootstrap relays stay"
    );
    // Deterministic.
    let (again, _) = derive_bounded_relay_targets(&index, None, bounds, &bootstrap);
    assert_eq!(targets, again);
}

#[test]
fn within_the_bounds_the_targets_are_the_unbounded_ones() {
    let index = index_of(&[
        (
            1,
            "a",
            urls(["x.example".to_owned(), "y.example".to_owned()]),
        ),
        (2, "b", urls(["y.example".to_owned()])),
    ]);
    let own = relay("wss://y.example/other-path");
    let (bounded, report) = derive_bounded_relay_targets(
        &index,
        Some(&own),
        TrackingBounds::default(),
        &BTreeSet::new(),
    );
    assert_eq!(bounded, crate::derive_relay_targets(&index, Some(&own)));
    assert_eq!(report, TrackingReport::default());
    assert_eq!(bounded.len(), 1, "the own relay is left out under any path");
}

#[test]
fn the_shards_of_a_deployment_split_the_targets_and_count_the_others() {
    // 30 authors, 12 relays each, 4 of them beyond the host cap of 8.
    let announcements: Vec<(u8, String, Vec<String>)> = (0..30u8)
        .map(|author| {
            let relays = urls((0..12).map(|n| format!("a{author}-r{n}.example")));
            (author + 1, "repo".to_owned(), relays)
        })
        .collect();
    let borrowed: Vec<(u8, &str, Vec<String>)> = announcements
        .iter()
        .map(|(owner, identifier, relays)| (*owner, identifier.as_str(), relays.clone()))
        .collect();
    let index = index_of(&borrowed);
    let bounds = |shard| TrackingBounds {
        max_relays: 1_000,
        max_hosts_per_author: 8,
        shard,
    };
    let (whole, whole_report) =
        derive_bounded_relay_targets(&index, None, bounds(Shard::WHOLE), &BTreeSet::new());
    assert_eq!(whole.len(), 30 * 8);
    assert_eq!(whole_report.relays_other_shards, 0);
    let mut together = BTreeMap::new();
    for index_of_shard in 0..3 {
        let shard = Shard::new(index_of_shard, 3).expect("shard");
        let (targets, report) =
            derive_bounded_relay_targets(&index, None, bounds(shard), &BTreeSet::new());
        assert!(!targets.is_empty(), "shard {shard} has relays");
        assert!(targets.keys().all(|relay| shard.owns(relay)));
        assert_eq!(report.relays_other_shards, whole.len() - targets.len());
        assert_eq!(
            report.author_relays_dropped,
            whole_report.author_relays_dropped
        );
        assert!(!report.leaves_out_any() || report.author_relays_dropped > 0);
        for (relay, needs) in targets {
            assert!(
                together.insert(relay, needs).is_none(),
                "one owner per relay"
            );
        }
    }
    assert_eq!(
        together, whole,
        "the shards together track what one daemon does"
    );
}

#[test]
fn the_total_cap_counts_only_the_shards_own_relays() {
    let relays = urls((0..30).map(|n| format!("r{n}.example")));
    let index = index_of(&[(1, "wide", relays)]);
    let shard = Shard::new(1, 2).expect("shard");
    let bounds = TrackingBounds {
        max_relays: 5,
        max_hosts_per_author: 100,
        shard,
    };
    let (targets, report) = derive_bounded_relay_targets(&index, None, bounds, &BTreeSet::new());
    assert_eq!(targets.len(), 5);
    assert!(targets.keys().all(|relay| shard.owns(relay)));
    let owned = (0..30)
        .filter(|n| shard.owns(&relay(&format!("wss://r{n}.example"))))
        .count();
    assert_eq!(report.relays_over_cap, owned - 5);
    assert_eq!(report.relays_other_shards, 30 - owned);
}
