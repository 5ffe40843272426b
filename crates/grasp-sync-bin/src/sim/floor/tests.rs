//! Tests of the byte floor.

use super::*;

fn check(values: &[&str], expected_bytes: usize, expected_floor: usize) {
    let family = family_floor(values.iter().copied());
    assert_eq!(family.bytes, expected_bytes, "{values:?}");
    assert_eq!(family.floor, expected_floor, "{values:?}");
}

#[test]
fn each_value_costs_its_length_plus_quotes_and_comma() {
    check(&["ab", "cde"], 5 + 6, 1);
}

#[test]
fn an_empty_family_needs_no_subscription() {
    check(&[], 0, 0);
}

#[test]
fn duplicate_values_count_once() {
    check(&["x", "x"], 4, 1);
}

#[test]
fn the_floor_rounds_up_at_the_payload_budget() {
    let id = "0".repeat(64);
    let ids: Vec<String> = (0..1468).map(|i| format!("{i:04}{}", &id[4..])).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    // 1,467 hex IDs (67 bytes each) fit in 96 KiB; the 1,468th needs a second REQ.
    check(&refs[..1467], 1467 * 67, 1);
    check(&refs, 1468 * 67, 2);
}

#[test]
fn the_relay_floor_sums_the_families() {
    let set = TargetSet {
        identifiers: ["repo-0".to_owned()].into(),
        coordinates: ["30617:aa:repo-0".to_owned()].into(),
        roots: ["r".to_owned()].into(),
        members: BTreeSet::new(),
    };
    let floor = set.floor();
    // d, a, A, e, E and q each hold at least one value.
    assert_eq!(floor.floor, 6);
    assert_eq!(floor.families["q"].values, 2);
}

#[test]
fn target_sets_hold_only_accepted_repositories_listing_the_relay() {
    let spec = grasp_sync_testkit::NetworkSpec::small(3, "ws://127.0.0.1:9");
    let urls: Vec<String> = (0..spec.relays)
        .map(|i| format!("ws://127.0.0.1:{}", 20_000 + i))
        .collect();
    let network = grasp_sync_testkit::generate(&spec, &urls).expect("generates");
    let sets = target_sets(&network);
    assert_eq!(sets.len(), spec.relays);
    for (r, set) in sets.iter().enumerate() {
        let expected: BTreeSet<String> = network
            .repos
            .iter()
            .filter(|repo| repo.accepted() && repo.relay_indices.contains(&r))
            .map(|repo| repo.repo.coordinate())
            .collect();
        assert_eq!(set.coordinates, expected, "relay {r}");
        // Every accepted root has its replies (2 per root in the small spec) as members.
        assert!(set.members.len() >= set.roots.len(), "relay {r}");
    }
}
