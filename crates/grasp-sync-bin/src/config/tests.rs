//! Tests of configuration layering and validation: every bad value is refused with the key it
//! came from, and later layers win.

use std::time::Duration;

use grasp_sync_model::RelayUrl;

use super::{RawConfig, Settings, format_duration, parse_duration};
use crate::error::ConfigError;

/// Resolves a TOML document; the error's key (or `file` for file-level errors).
fn check_toml(text: &str) -> Result<Settings, String> {
    RawConfig::from_toml(text, "test.toml")
        .and_then(Settings::resolve)
        .map_err(|error| match &error {
            ConfigError::Invalid { key, .. } => (*key).to_owned(),
            other => format!("file: {other}"),
        })
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let settings = check_toml("").expect("defaults");
    assert_eq!(settings.listen.to_string(), "127.0.0.1:7777");
    assert_eq!(settings.metrics_listen.to_string(), "127.0.0.1:9477");
    assert_eq!(settings.data_dir.to_str(), Some("./grasp-sync-data"));
    assert_eq!(settings.batch_window, Duration::from_secs(5));
    assert_eq!(settings.backoff_base, Duration::from_secs(5));
    assert_eq!(settings.backoff_cap, Duration::from_secs(3600));
    assert_eq!(settings.max_future_created_at, Duration::from_secs(900));
    assert!(!settings.address_policy.allow_private);
    assert!(settings.own_relay.is_none() && settings.service_url.is_none());
}

#[test]
fn every_key_is_read_from_the_file() {
    let settings = check_toml(
        r#"
        listen = "0.0.0.0:8000"
        data_dir = "/var/lib/grasp-sync"
        service_url = "wss://grasp.example.com"
        own_relay = "ws://127.0.0.1:9000"
        bootstrap_relays = ["wss://a.example.org", "wss://A.example.org/"]
        allow_relays = ["10.0.0.5", "ws://[fd00::1]:7000"]
        deny_relays = ["Bad.Example.org"]
        allow_private_relays = true
        batch_window = "250ms"
        backoff_base = "2s"
        backoff_cap = "10m"
        metrics_listen = "127.0.0.1:0"
        max_future_created_at = "1h"
        lmdb_map_size = "64MiB"
        "#,
    )
    .expect("valid");
    assert_eq!(settings.lmdb_map_size, Some(64 * 1024 * 1024));
    assert_eq!(settings.max_future_created_at, Duration::from_secs(3600));
    assert_eq!(settings.listen.to_string(), "0.0.0.0:8000");
    assert_eq!(
        settings.service_url,
        Some(RelayUrl::parse("wss://grasp.example.com").expect("url"))
    );
    assert_eq!(
        settings.bootstrap_relays.len(),
        1,
        "normalised duplicates merge"
    );
    assert_eq!(
        settings.address_policy.allowed_hosts,
        ["10.0.0.5", "fd00::1"]
    );
    assert_eq!(settings.address_policy.denied_hosts, ["bad.example.org"]);
    assert!(settings.address_policy.allow_private);
    assert_eq!(settings.batch_window, Duration::from_millis(250));
    assert_eq!(settings.backoff_cap, Duration::from_secs(600));
    let engine = settings.engine_config(&RelayUrl::parse("wss://grasp.example.com").expect("url"));
    assert_eq!(engine.health.connect_backoff_base, Duration::from_secs(2));
    assert_eq!(engine.batch_window, Duration::from_millis(250));
}

#[test]
fn each_bad_value_names_its_key() {
    for (text, key) in [
        (r#"listen = "localhost""#, "listen"),
        (r#"metrics_listen = "9477""#, "metrics_listen"),
        (r#"lmdb_map_size = "12 parsecs""#, "lmdb_map_size"),
        (r#"lmdb_map_size = "0""#, "lmdb_map_size"),
        (
            r#"service_url = "https://grasp.example.com""#,
            "service_url",
        ),
        (r#"own_relay = "not a url""#, "own_relay"),
        (
            r#"bootstrap_relays = ["wss://ok.example", "http://x"]"#,
            "bootstrap_relays",
        ),
        (r#"allow_relays = ["has space"]"#, "allow_relays"),
        (r#"deny_relays = ["ftp://x/y"]"#, "deny_relays"),
        (r#"batch_window = "5""#, "batch_window"),
        (r#"batch_window = "0s""#, "batch_window"),
        (r#"backoff_base = "1 fortnight""#, "backoff_base"),
        (r#"backoff_cap = "1s""#, "backoff_cap"),
        (r#"data_dir = """#, "data_dir"),
    ] {
        assert_eq!(check_toml(text).err().as_deref(), Some(key), "{text}");
    }
}

#[test]
fn unknown_keys_and_wrong_types_are_refused_with_the_line_naming_the_key() {
    let unknown = check_toml("listen = \"127.0.0.1:1\"\ncolour = \"blue\"\n").expect_err("unknown");
    assert!(unknown.contains("unknown field `colour`"), "{unknown}");
    assert!(unknown.contains("line 2"), "{unknown}");
    let wrong_type = check_toml("allow_private_relays = \"yes\"").expect_err("type");
    assert!(wrong_type.contains("allow_private_relays"), "{wrong_type}");
}

#[test]
fn later_layers_win_key_by_key() {
    let file = RawConfig::from_toml(
        "listen = \"127.0.0.1:1\"\nbootstrap_relays = [\"wss://file.example\"]",
        "f",
    )
    .expect("file");
    let flags = RawConfig {
        bootstrap_relays: Some(vec!["wss://flag.example".to_owned()]),
        ..RawConfig::default()
    };
    let settings = Settings::resolve(file.merge(flags)).expect("valid");
    assert_eq!(settings.listen.to_string(), "127.0.0.1:1");
    assert_eq!(
        settings.bootstrap_relays,
        [RelayUrl::parse("wss://flag.example").expect("url")]
    );
}

#[test]
fn durations_round_trip_through_their_text_form() {
    for text in ["250ms", "5s", "2m", "1h", "90s", "0s"] {
        let duration = parse_duration(text).expect(text);
        assert_eq!(
            parse_duration(&format_duration(duration)),
            Ok(duration),
            "{text}"
        );
    }
    assert_eq!(parse_duration(" 3s "), Ok(Duration::from_secs(3)));
    assert!(parse_duration("s").is_err());
    assert!(parse_duration("3").is_err());
    assert!(parse_duration("3d").is_err());
}

#[test]
fn relay_limits_come_from_the_relay_table_with_defaults_for_the_rest() {
    let settings = check_toml(
        r#"
        max_future_created_at = "1h"
        [relay]
        max_connections = 10
        max_connections_per_ip = 0
        idle_timeout = "30s"
        max_filters = 3
        max_limit = 50
        default_limit = 20
        "#,
    )
    .expect("valid");
    let relay = settings.relay;
    assert_eq!(relay.max_connections, 10);
    assert_eq!(relay.max_connections_per_ip, 0);
    assert_eq!(relay.idle_timeout, Duration::from_secs(30));
    assert_eq!(
        (relay.max_filters, relay.max_limit, relay.default_limit),
        (3, 50, 20)
    );
    assert_eq!(relay.max_subscriptions, 100);
    assert_eq!(relay.max_future_created_at, Duration::from_secs(3600));
}

#[test]
fn bad_relay_limits_name_their_key() {
    assert_eq!(
        check_toml("[relay]\nmax_filters = 0").map(|_| ()),
        Err("relay.max_filters".to_owned())
    );
    assert_eq!(
        check_toml("[relay]\nmax_limit = 10\ndefault_limit = 11").map(|_| ()),
        Err("relay.default_limit".to_owned())
    );
    assert_eq!(
        check_toml("[relay]\nnegentropy_frame_size = 100").map(|_| ()),
        Err("relay.negentropy_frame_size".to_owned())
    );
    assert_eq!(
        check_toml("[relay]\nheader_read_timeout = \"0s\"").map(|_| ()),
        Err("relay.header_read_timeout".to_owned())
    );
    let unknown = check_toml("[relay]\nmax_connection = 5").expect_err("unknown key");
    assert!(
        unknown.starts_with("file:") && unknown.contains("max_connection"),
        "{unknown}"
    );
}

#[test]
fn relay_flags_and_variables_override_the_file() {
    use clap::Parser;

    let cli = crate::Cli::try_parse_from([
        "grasp-sync",
        "run",
        "--relay-max-subscriptions",
        "7",
        "--relay-idle-timeout",
        "1m",
    ])
    .expect("flags");
    let crate::Command::Run(args) = cli.command else {
        panic!("run");
    };
    let file = RawConfig::from_toml(
        "[relay]\nmax_subscriptions = 3\nmax_filters = 4",
        "test.toml",
    )
    .expect("file");
    let settings =
        Settings::resolve(file.merge(args.overrides().expect("overrides"))).expect("valid");
    assert_eq!(settings.relay.max_subscriptions, 7);
    assert_eq!(settings.relay.max_filters, 4);
    assert_eq!(settings.relay.idle_timeout, Duration::from_secs(60));
}
