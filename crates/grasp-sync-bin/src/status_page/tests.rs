//! Tests of the status page: relays, plots, the day view, escaping and sorting.

use std::time::Duration;

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::*;
use crate::history::{DAY_INTERVAL, SAMPLE_INTERVAL, Sample, StatusHistory};

fn status(saved: u64) -> EngineStatus {
    let mut status = EngineStatus {
        repos_tracked: 2,
        ..EngineStatus::default()
    };
    status.relays.insert(
        "ws://a.example/".into(),
        RelayStatus {
            connection: "connected".into(),
            health: "healthy".into(),
            events_saved: saved,
            subscription_budget: 20,
            live_subscriptions: 5,
            ..RelayStatus::default()
        },
    );
    status.relays.insert(
        "ws://b.example/".into(),
        RelayStatus {
            connection: "syncing".into(),
            health: "degraded".into(),
            pending_batches: 3,
            last_error: Some("<script>alert(1)</script>".into()),
            ..RelayStatus::default()
        },
    );
    status
}

fn history(samples: u64, every: Duration) -> StatusHistory {
    let mut history = StatusHistory::default();
    for i in 0..samples {
        let at = every * i as u32;
        history.handle_sample(Sample::of(&status(i * 10), at));
    }
    history
}

fn values_of(page: &str, plot: &str) -> usize {
    let marker = format!(r#"data-plot="{plot}" data-values=""#);
    let rest = page
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("no plot {plot}"));
    rest.split('"')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("count")
}

#[test]
fn the_page_lists_every_relay_and_draws_each_hour_plot() {
    let history = history(6, SAMPLE_INTERVAL);
    let page = render(
        &status(60),
        &history,
        Duration::from_secs(55),
        Sort::default(),
    );
    for url in ["ws://a.example/", "ws://b.example/"] {
        assert!(
            page.contains(&format!(r#"<tr data-relay="{url}""#)),
            "{page}"
        );
    }
    assert!(page.contains(r#"data-state="syncing" data-health="degraded""#));
    assert!(page.contains(r#"data-figure="events-stored" data-value="60""#));
    for plot in ["events-stored-hour", "starts-hour", "refusals-hour"] {
        assert_eq!(values_of(&page, plot), 6, "{plot}");
    }
    assert_eq!(values_of(&page, "lag-hour"), 14);
    assert!(
        !page.contains(r#"id="day""#),
        "no day view within the first hour"
    );
    assert!(!page.contains("<script>"), "remote text is escaped");
    assert!(page.contains("&lt;script&gt;"));
}

#[test]
fn the_day_view_appears_once_the_history_reaches_past_the_hour() {
    let history = history(20, DAY_INTERVAL);
    let page = render(&status(0), &history, DAY_INTERVAL * 20, Sort::default());
    assert!(page.contains(r#"id="day""#));
    assert!(values_of(&page, "events-stored-day") >= 12);
}

#[test]
fn the_query_sorts_the_table_and_the_headers_flip_the_order() {
    let sort = sort_from_query(Some("sort=synced&dir=desc"));
    assert_eq!(
        sort,
        Sort {
            key: SortKey::Synced,
            descending: true
        }
    );
    assert_eq!(sort_from_query(Some("sort=bogus&x")), Sort::default());
    let page = render(&status(5), &StatusHistory::default(), Duration::ZERO, sort);
    let a = page.find(r#"data-relay="ws://a.example/""#).expect("a");
    let b = page.find(r#"data-relay="ws://b.example/""#).expect("b");
    assert!(a < b, "most synced first");
    assert!(
        page.contains(r#"href="?sort=synced&amp;dir=asc">Synced ▼"#),
        "{page}"
    );
    let ascending = render(
        &status(5),
        &StatusHistory::default(),
        Duration::ZERO,
        Sort {
            descending: false,
            ..sort
        },
    );
    assert!(
        ascending.find(r#"data-relay="ws://b.example/""#)
            < ascending.find(r#"data-relay="ws://a.example/""#)
    );
}
