//! The deployment examples in `docs/deploy/` stay true: the example configuration loads with
//! the daemon's own loader and names every documented key, and the alerting rules query only
//! metrics the engine registers.

use std::path::Path;

use grasp_sync_bin::{RawConfig, Settings};

const CONFIGURATION_DOC: &str = include_str!("../../../../docs/configuration.md");
const ALERTS: &str = include_str!("../../../../docs/deploy/grasp-sync-alerts.yml");
const ENGINE_METRICS: &str = include_str!("../../../grasp-sync-engine/src/metrics.rs");

fn example_path() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/deploy/grasp-sync.toml"
    ))
}

/// The keys of the configuration reference's tables: first cells that are a `key`.
fn documented_keys() -> Vec<&'static str> {
    CONFIGURATION_DOC
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(key, _)| key)
        .collect()
}

#[test]
fn the_example_configuration_loads_and_names_every_key() {
    let raw = RawConfig::from_file(example_path()).expect("the example parses");
    let settings = Settings::resolve(raw).expect("the example is valid");
    assert_eq!(settings.metrics_listen.to_string(), "127.0.0.1:9477");
    assert_eq!(settings.bootstrap_relays.len(), 2);
    assert!(!settings.address_policy.allow_private);
    assert_eq!(settings.relay, grasp_sync_bin::RelayLimits::default());

    let text = std::fs::read_to_string(example_path()).expect("read the example");
    let keys = documented_keys();
    assert!(keys.len() > 30, "{keys:?}");
    for key in keys {
        let named = text.lines().any(|line| {
            let line = line.trim_start_matches("# ");
            line.starts_with(&format!("{key} = "))
        });
        assert!(named, "the example names no `{key}`");
    }
}

#[test]
fn the_alerting_rules_query_metrics_the_engine_registers() {
    let mut names = 0;
    for (start, _) in ALERTS.match_indices("grasp_sync_") {
        let name: String = ALERTS[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        assert!(
            ENGINE_METRICS.contains(&format!("\"{name}\"")),
            "the alerts query {name}, which the engine does not register"
        );
        names += 1;
    }
    assert!(names >= 8, "{names}");
}
