//! Tests of `grasp-sync status`: URL reading and the text table.

use grasp_sync_engine::{EngineStatus, RelayStatus};

use super::*;

fn check_url(url: &str, expected: Result<&str, &str>) {
    let got = StatusUrl::parse(url).map(|u| u.status());
    match (got, expected) {
        (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{url}"),
        (Err(StatusClientError::Url { reason, .. }), Err(expected)) => {
            assert_eq!(reason, expected, "{url}")
        }
        (got, expected) => panic!("{url}: {got:?}, expected {expected:?}"),
    }
}

#[test]
fn urls_name_the_endpoints() {
    check_url("http://127.0.0.1:9477", Ok("http://127.0.0.1:9477/status"));
    check_url("http://127.0.0.1:9477/", Ok("http://127.0.0.1:9477/status"));
    check_url(
        "http://ops.example/sync/",
        Ok("http://ops.example:80/sync/status"),
    );
    check_url("http://[::1]:9477", Ok("http://[::1]:9477/status"));
    check_url("http://[::1]", Ok("http://[::1]:80/status"));
    check_url("https://x", Err("only http:// is served by the endpoints"));
    check_url("http://", Err("no host"));
    check_url("http://h:99999", Err("bad port"));
    check_url("http://u@h:1", Err("the host may hold no user or spaces"));
    check_url("http://[::1", Err("unclosed ["));
}

#[test]
fn the_text_has_the_summary_and_one_line_per_relay_with_its_notes() {
    let mut status = EngineStatus {
        repos_tracked: 3,
        ..EngineStatus::default()
    };
    let mut relay = RelayStatus {
        connection: "connected".into(),
        health: "ratelimited".into(),
        bootstrap: true,
        events_saved: 12,
        subscription_budget: 20,
        live_subscriptions: 4,
        last_error: Some("rate-limited: slow\ndown".into()),
        quirks: vec!["oldest_first".into()],
        ..RelayStatus::default()
    };
    relay.refusals.insert("rate_limited".into(), 2);
    status.relays.insert("wss://a.example/".into(), relay);
    status.relays.insert(
        "wss://b.example/".into(),
        RelayStatus {
            connection: "syncing".into(),
            health: "healthy".into(),
            ..RelayStatus::default()
        },
    );
    let text = render_text(&status);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("repositories 3") && lines[0].contains("events stored 12"),
        "{text}"
    );
    assert!(
        lines[1].contains("syncing 1  connected 1  paused 1  dead 0"),
        "{text}"
    );
    assert!(
        lines[1].contains("participants 0  relay lists 0  mailbox relays 0"),
        "{text}"
    );
    assert!(lines[3].starts_with("RELAY"), "{text}");
    assert!(
        lines[4].starts_with("wss://a.example/ (bootstrap)  connected  ratelimited"),
        "{text}"
    );
    assert!(lines[4].contains("4/20"), "{text}");
    assert!(text.contains("    refusals: rate_limited 2"), "{text}");
    assert!(text.contains("    learned: B=20, oldest_first"), "{text}");
    assert!(
        text.contains("    last error: rate-limited: slowdown"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("wss://b.example/")),
        "{text}"
    );
    let width = |l: &str| {
        l.find("STATE")
            .or_else(|| l.find("connected"))
            .or_else(|| l.find("syncing"))
    };
    assert_eq!(width(lines[3]), width(lines[4]), "columns line up:\n{text}");
}
