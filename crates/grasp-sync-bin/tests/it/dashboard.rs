//! The Grafana dashboard in `docs/`: every metric it queries is exported by a daemon that
//! syncs the demo network, or, for the few counters that appear only once their event
//! happened (a refusal, a failed save, a NIP-77 fallback), is an instrument the engine registers and a row of
//! `docs/metrics.md`; every panel is explained in `docs/dashboard.md`.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::status_page::SyncingDemo;
use crate::support::{http_get, wait_until};

const DASHBOARD: &str = include_str!("../../../../docs/grafana-dashboard.json");
const DASHBOARD_DOC: &str = include_str!("../../../../docs/dashboard.md");
const METRICS_DOC: &str = include_str!("../../../../docs/metrics.md");
const ENGINE_METRICS: &str = include_str!("../../../grasp-sync-engine/src/metrics.rs");

/// Metrics exported from their first event on (counters, and the per-reason fallback gauge),
/// which syncing the demo network never causes.
const FROM_FIRST_EVENT: &[&str] = &[
    "grasp_sync_negentropy_fallbacks",
    "grasp_sync_refusals_total",
    "grasp_sync_store_write_failures_total",
    "grasp_sync_history_truncated_total",
    "grasp_sync_relay_quirks_learned_total",
    "grasp_sync_address_refusals_total",
    "grasp_sync_reconnects_total",
];

fn dashboard() -> Value {
    serde_json::from_str(DASHBOARD).expect("the dashboard is JSON")
}

/// Every string under a key named `key`, anywhere in `value`.
fn strings_under<'a>(value: &'a Value, key: &str, found: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map {
                match inner {
                    Value::String(text) if name == key => found.push(text),
                    _ => strings_under(inner, key, found),
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| strings_under(item, key, found)),
        _ => {}
    }
}

/// The `grasp_sync_*` names in the dashboard's queries and variables.
fn queried_metrics(dashboard: &Value) -> BTreeSet<String> {
    let mut queries = Vec::new();
    strings_under(dashboard, "expr", &mut queries);
    strings_under(dashboard, "definition", &mut queries);
    let mut names = BTreeSet::new();
    for query in queries {
        for (start, _) in query.match_indices("grasp_sync_") {
            let name: String = query[start..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names
}

fn panels(dashboard: &Value) -> Vec<&Value> {
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .filter(|panel| panel["type"] != "row")
        .collect()
}

#[test]
fn the_dashboard_is_importable_and_every_panel_is_explained() {
    let dashboard = dashboard();
    let inputs = dashboard["__inputs"].as_array().expect("__inputs");
    assert!(inputs.iter().any(|input| input["name"] == "DS_PROMETHEUS"));
    assert!(dashboard["schemaVersion"].as_u64().is_some());
    let panels = panels(&dashboard);
    assert!(panels.len() >= 15, "{} panels", panels.len());
    let mut ids = BTreeSet::new();
    for panel in &dashboard["panels"].as_array().expect("panels").clone() {
        assert!(
            ids.insert(panel["id"].as_u64().expect("id")),
            "ids are unique"
        );
    }
    for panel in panels {
        let title = panel["title"].as_str().expect("title");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} queries nothing");
        for target in targets {
            assert!(
                target["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{title}"
            );
            assert_eq!(target["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        }
        assert!(
            DASHBOARD_DOC.contains(&format!("### {title}\n")),
            "docs/dashboard.md explains no panel `{title}`"
        );
        let grid = &panel["gridPos"];
        let right = grid["x"].as_u64().expect("x") + grid["w"].as_u64().expect("w");
        assert!(right <= 24, "{title} is wider than the dashboard");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_exported() {
    let queried = queried_metrics(&dashboard());
    assert!(queried.len() >= 15, "{queried:?}");
    let demo = SyncingDemo::start(13).await;
    // Each metric appears with its first value: wait for those syncing gives one (the checks
    // below name any still missing at the deadline).
    let expected: Vec<&String> = queried
        .iter()
        .filter(|name| !FROM_FIRST_EVENT.contains(&name.as_str()))
        .collect();
    wait_until(Duration::from_secs(30), || async {
        let (_, text) = http_get(demo.daemon.metrics_addr(), "/metrics").await;
        expected
            .iter()
            .all(|name| text.contains(&format!("# TYPE {name} ")))
    })
    .await;
    let (code, text) = http_get(demo.daemon.metrics_addr(), "/metrics").await;
    assert_eq!(code, 200, "{text}");
    demo.stop().await;
    let exported: BTreeSet<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    for name in &queried {
        if exported.contains(name.as_str()) {
            continue;
        }
        assert!(
            FROM_FIRST_EVENT.contains(&name.as_str()),
            "the dashboard queries {name}, which the daemon does not export:\n{text}"
        );
        assert!(
            ENGINE_METRICS.contains(&format!("\"{name}\"")),
            "{name} is no instrument of the engine"
        );
        assert!(
            METRICS_DOC.contains(&format!("| `{name}` |")),
            "{name} has no row in docs/metrics.md"
        );
    }
    for name in FROM_FIRST_EVENT {
        assert!(queried.contains(*name), "{name} is listed but not queried");
    }
}
