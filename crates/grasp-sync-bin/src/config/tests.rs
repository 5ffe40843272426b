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
        (r#"deny_relays = ["relay.example:8080"]"#, "deny_relays"),
        (r#"allow_relays = ["[fd00::1]:7000"]"#, "allow_relays"),
        (r#"allow_relays = ["user@relay.example"]"#, "allow_relays"),
        (r#"allow_relays = ["300.1.1.1"]"#, "allow_relays"),
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
    assert_eq!(
        parse_duration("18446744073709551615s"),
        Ok(Duration::from_secs(u64::MAX))
    );
    for text in [
        "18446744073709551615m",
        "5124095576030432h",
        "18446744073709551616ms",
    ] {
        let error = parse_duration(text).expect_err(text);
        assert!(error.contains("too long"), "{text}: {error}");
    }
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

/// A document setting `key` (top level, or `relay.KEY` in the `[relay]` table) to the TOML
/// value `value`, with `extra` top-level lines.
fn one_key(key: &str, value: &str, extra: &str) -> String {
    match key.strip_prefix("relay.") {
        Some(key) => format!("{extra}\n[relay]\n{key} = {value}\n"),
        None => format!("{extra}\n{key} = {value}\n"),
    }
}

/// Checks that `key` accepts each of `accepted` and refuses each of `refused` by name.
fn check_range(key: &'static str, accepted: &[&str], refused: &[&str], extra: &str) {
    for value in accepted {
        let text = one_key(key, value, extra);
        assert!(
            check_toml(&text).is_ok(),
            "{key} = {value} refused: {:?}",
            check_toml(&text).err()
        );
    }
    for value in refused {
        let text = one_key(key, value, extra);
        assert_eq!(
            check_toml(&text).err().as_deref(),
            Some(key),
            "{key} = {value} must be refused"
        );
    }
}

#[test]
fn batch_window_is_1ms_to_1h() {
    check_range(
        "batch_window",
        &[r#""1ms""#, r#""1h""#, r#""3600s""#],
        &[
            r#""0ms""#,
            r#""3601s""#,
            r#""61m""#,
            r#""18446744073709551615s""#,
            r#""18446744073709551615ms""#,
            r#""18446744073709551615h""#,
            r#""99999999999999999999s""#,
        ],
        "",
    );
}

#[test]
fn backoff_base_is_1ms_to_1_day() {
    check_range(
        "backoff_base",
        &[r#""1ms""#, r#""24h""#],
        &[r#""0s""#, r#""25h""#, r#""86401s""#],
        r#"backoff_cap = "168h""#,
    );
}

#[test]
fn backoff_cap_is_backoff_base_to_7_days() {
    check_range(
        "backoff_cap",
        &[r#""1ms""#, r#""168h""#],
        &[
            r#""0s""#,
            r#""169h""#,
            r#""8784h""#,
            r#""18446744073709551615s""#,
        ],
        r#"backoff_base = "1ms""#,
    );
    check_range(
        "backoff_cap",
        &[r#""5s""#],
        &[r#""4999ms""#],
        r#"backoff_base = "5s""#,
    );
}

#[test]
fn max_future_created_at_is_0_to_365_days() {
    check_range(
        "max_future_created_at",
        &[r#""0s""#, r#""8760h""#],
        &[r#""8761h""#, r#""18446744073709551615s""#],
        "",
    );
}

#[test]
fn relay_timeouts_are_1s_to_1_day() {
    for key in ["relay.header_read_timeout", "relay.idle_timeout"] {
        check_range(
            key,
            &[r#""1s""#, r#""1000ms""#, r#""24h""#],
            &[
                r#""0s""#,
                r#""999ms""#,
                r#""86401s""#,
                r#""18446744073709551615s""#,
            ],
            "",
        );
    }
}

#[test]
fn relay_counts_have_a_floor_and_a_ceiling() {
    for (key, lowest, highest) in [
        ("relay.max_connections", 1, 1_000_000),
        ("relay.max_connections_per_ip", 0, 1_000_000),
        ("relay.max_message_length", 1, 67_108_864),
        ("relay.max_content_length", 1, 67_108_864),
        ("relay.max_event_tags", 1, 100_000),
        ("relay.max_subscriptions", 1, 10_000),
        ("relay.max_filters", 1, 1_000),
        ("relay.max_subid_length", 1, 1_024),
        ("relay.max_negentropy_sessions", 1, 1_000),
        ("relay.max_negentropy_items", 1, 10_000_000),
        ("relay.queries_per_second", 1, 10_000),
        ("relay.query_burst", 1, 100_000),
        ("relay.events_per_minute", 1, 1_000_000),
        ("relay.concurrent_reads", 1, 512),
    ] {
        let (lowest, highest): (u64, u64) = (lowest, highest);
        let mut refused = vec![(highest + 1).to_string(), u32::MAX.to_string()];
        if lowest > 0 {
            refused.push((lowest - 1).to_string());
        }
        let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
        check_range(
            key,
            &[&lowest.to_string(), &highest.to_string()],
            &refused,
            "",
        );
    }
}

#[test]
fn max_limit_is_1_to_100000_and_default_limit_stays_under_it() {
    for (text, refused) in [
        ("max_limit = 1\ndefault_limit = 1", None),
        ("max_limit = 100000\ndefault_limit = 100000", None),
        ("max_limit = 0\ndefault_limit = 1", Some("relay.max_limit")),
        ("max_limit = 100001", Some("relay.max_limit")),
        (
            "max_limit = 10\ndefault_limit = 0",
            Some("relay.default_limit"),
        ),
        (
            "max_limit = 100000\ndefault_limit = 100001",
            Some("relay.default_limit"),
        ),
        (
            "max_limit = 10\ndefault_limit = 11",
            Some("relay.default_limit"),
        ),
    ] {
        let text = format!("[relay]\n{text}");
        assert_eq!(check_toml(&text).err().as_deref(), refused, "{text}");
    }
}

#[test]
fn negentropy_frame_size_is_off_or_4096_to_64_mib() {
    check_range(
        "relay.negentropy_frame_size",
        &["0", "4096", "67108864"],
        &["1", "4095", "67108865"],
        "",
    );
}

#[test]
fn an_out_of_range_value_is_refused_with_its_key_and_range() {
    let error = Settings::resolve(RawConfig {
        batch_window: Some("18446744073709551615s".to_owned()),
        ..RawConfig::default()
    })
    .expect_err("out of range");
    assert_eq!(error.key(), Some("batch_window"));
    assert_eq!(
        error.to_string(),
        "invalid configuration: `batch_window`: `18446744073709551615s` is out of range: \
         must be from 1ms to 1h"
    );
    let error = Settings::resolve(RawConfig {
        relay: super::RawRelayLimits {
            max_connections: Some(2_000_000),
            ..super::RawRelayLimits::default()
        },
        ..RawConfig::default()
    })
    .expect_err("out of range");
    assert_eq!(
        error.to_string(),
        "invalid configuration: `relay.max_connections`: 2000000 is out of range: \
         must be from 1 to 1000000"
    );
}

#[test]
fn the_longest_accepted_backoffs_are_ones_the_health_rules_accept() {
    // The health rules refuse durations over 366 days; every accepted backoff must pass them,
    // so none is ever replaced by a default once the engine runs.
    let settings = check_toml("backoff_base = \"24h\"\nbackoff_cap = \"168h\"").expect("valid");
    let engine = settings.engine_config(&RelayUrl::parse("wss://grasp.example.com").expect("url"));
    assert_eq!(
        engine.health.connect_backoff_max,
        Duration::from_secs(7 * 24 * 3600)
    );
    assert_eq!(engine.health.validate(), Ok(()));
}

#[test]
fn tracking_bounds_are_read_and_range_checked() {
    let settings =
        check_toml("max_tracked_relays = 50\nmax_relay_hosts_per_author = 4").expect("valid");
    assert_eq!(settings.tracking.max_relays, 50);
    assert_eq!(settings.tracking.max_hosts_per_author, 4);
    let defaults = check_toml("").expect("defaults");
    assert_eq!(
        defaults.tracking,
        grasp_sync_model::TrackingBounds::default()
    );
    assert_eq!(
        check_toml("max_tracked_relays = 0").map(|_| ()),
        Err("max_tracked_relays".to_owned())
    );
    assert_eq!(
        check_toml("max_relay_hosts_per_author = 1001").map(|_| ()),
        Err("max_relay_hosts_per_author".to_owned())
    );
}

#[test]
fn remote_data_bounds_are_read_range_checked_and_reach_the_engine() {
    let settings = check_toml(
        "max_waiting_roots = 300\nmax_recovery_ids_per_relay = 40\nlearned_limits_max_age = \"48h\"",
    )
    .expect("valid");
    assert_eq!(
        settings.learned_limits_max_age,
        Duration::from_secs(2 * 24 * 3600)
    );
    assert_eq!(settings.max_waiting_roots, 300);
    assert_eq!(settings.max_recovery_ids_per_relay, 40);
    let service = RelayUrl::parse("wss://grasp.example").expect("url");
    let engine = settings.engine_config(&service);
    assert_eq!(engine.max_waiting_roots, 300);
    assert_eq!(engine.recovery.max_pending_per_relay, 40);
    assert_eq!(
        engine.learned_limits_max_age,
        settings.learned_limits_max_age
    );
    assert!(engine.first_sync_by_req, "on unless switched off");
    let off = check_toml("first_sync_by_req = false").expect("valid");
    assert!(!off.engine_config(&service).first_sync_by_req);
    assert!(engine.live_first_page, "on unless switched off");
    let off = check_toml("live_first_page = false").expect("valid");
    assert!(!off.engine_config(&service).live_first_page);
    assert_eq!(
        engine.recovery.base_backoff,
        grasp_sync_engine::RecoveryConfig::default().base_backoff
    );

    let defaults = check_toml("").expect("defaults");
    assert_eq!(
        defaults.max_waiting_roots,
        grasp_sync_model::DEFAULT_MAX_WAITING_ROOTS
    );
    assert_eq!(
        defaults.learned_limits_max_age,
        grasp_sync_engine::config::DEFAULT_LEARNED_LIMITS_MAX_AGE
    );
    assert_eq!(
        defaults.max_recovery_ids_per_relay,
        grasp_sync_engine::RecoveryConfig::default().max_pending_per_relay
    );
    for bad in [
        "max_waiting_roots = 0",
        "max_waiting_roots = 10000001",
        "max_recovery_ids_per_relay = 0",
        "max_recovery_ids_per_relay = 1000001",
        "learned_limits_max_age = \"30s\"",
        "learned_limits_max_age = \"9000h\"",
    ] {
        let key = bad.split(' ').next().expect("key").to_owned();
        assert_eq!(check_toml(bad).map(|_| ()), Err(key), "{bad}");
    }
}

#[test]
fn bare_allow_and_deny_hosts_take_the_normal_form_of_relay_hosts() {
    let settings = check_toml(
        r#"
        allow_relays = ["127.1", "0x7f000002", "2130706435", "::1", "[FD00::2]", "Relay.Example."]
        deny_relays = ["BAD.example", "10.1"]
        "#,
    )
    .expect("valid");
    assert_eq!(
        settings.address_policy.allowed_hosts,
        [
            "127.0.0.1",
            "127.0.0.2",
            "127.0.0.3",
            "::1",
            "fd00::2",
            "relay.example"
        ]
    );
    assert_eq!(
        settings.address_policy.denied_hosts,
        ["bad.example", "10.0.0.1"]
    );
    // The bare form and a URL of the same host are one entry.
    let merged = check_toml(r#"allow_relays = ["127.1", "ws://127.0.0.1:7000"]"#).expect("valid");
    assert_eq!(merged.address_policy.allowed_hosts, ["127.0.0.1"]);
}

#[test]
fn max_rejected_ids_is_read_defaulted_and_range_checked() {
    assert_eq!(
        check_toml("max_rejected_ids = 2000")
            .expect("valid")
            .max_rejected_ids,
        2_000
    );
    assert_eq!(
        check_toml("").expect("defaults").max_rejected_ids,
        grasp_sync_engine::store::DEFAULT_COLD_CAPACITY
    );
    for out_of_range in ["max_rejected_ids = 999", "max_rejected_ids = 5000001"] {
        assert_eq!(
            check_toml(out_of_range).map(|_| ()),
            Err("max_rejected_ids".to_owned()),
            "{out_of_range}"
        );
    }
}

#[test]
fn git_keys_default_to_no_git_root_and_no_hook() {
    let settings = check_toml("").expect("defaults");
    assert_eq!(settings.git, super::GitSettings::default());
    assert_eq!(settings.git.root, None);
    assert_eq!(settings.git.fetch_timeout, super::DEFAULT_GIT_FETCH_TIMEOUT);
    assert!(!settings.git.allow_file_urls);
}

#[test]
fn git_keys_are_read_from_the_file_and_the_flags_win() {
    use clap::Parser;

    let file = RawConfig::from_toml(
        "git_root = \"/srv/git\"\non_sync_hook = \"logger\"\nmax_purgatory_announcements = 5\n\
         git_fetch_timeout = \"2m\"\ngit_fetch_max_size = \"1GiB\"\ngit_fetch_concurrency = 2\n\
         git_allow_file_urls = true\n",
        "test.toml",
    )
    .expect("file");
    let settings = Settings::resolve(file.clone()).expect("valid");
    assert_eq!(
        settings.git.root.as_deref(),
        Some(std::path::Path::new("/srv/git"))
    );
    assert_eq!(settings.git.on_sync_hook.as_deref(), Some("logger"));
    assert_eq!(settings.git.max_purgatory_announcements, 5);
    assert_eq!(settings.git.fetch_timeout, Duration::from_secs(120));
    assert_eq!(settings.git.fetch_max_size, 1 << 30);
    assert_eq!(settings.git.fetch_concurrency, 2);
    assert!(settings.git.allow_file_urls);

    let cli = crate::Cli::try_parse_from([
        "grasp-sync",
        "run",
        "--git-root",
        "/var/git",
        "--on-sync-hook",
        "true",
        "--git-allow-file-urls",
        "false",
    ])
    .expect("flags");
    let crate::Command::Run(args) = cli.command else {
        panic!("run");
    };
    let settings =
        Settings::resolve(file.merge(args.overrides().expect("overrides"))).expect("valid");
    assert_eq!(
        settings.git.root.as_deref(),
        Some(std::path::Path::new("/var/git"))
    );
    assert_eq!(settings.git.on_sync_hook.as_deref(), Some("true"));
    assert!(!settings.git.allow_file_urls);
    assert_eq!(
        settings.git.fetch_concurrency, 2,
        "unset flags keep the file's value"
    );
}

#[test]
fn git_counts_and_durations_have_their_ranges() {
    check_range(
        "max_purgatory_announcements",
        &["1", "1000000"],
        &["0", "1000001"],
        "",
    );
    check_range("git_fetch_concurrency", &["1", "64"], &["0", "65"], "");
    check_range(
        "purgatory_interval",
        &["\"100ms\"", "\"1h\""],
        &["\"99ms\"", "\"61m\""],
        "",
    );
    check_range(
        "git_fetch_timeout",
        &["\"1s\"", "\"24h\""],
        &["\"999ms\"", "\"25h\""],
        "",
    );
    check_range(
        "git_fetch_max_size",
        &["\"1MiB\""],
        &["\"0\"", "\"1PiB\""],
        "",
    );
    check_range("git_root", &["\"/srv/git\""], &["\"\""], "");
    check_range("on_sync_hook", &["\"logger\""], &["\"  \""], "");
}

#[test]
fn participant_keys_are_read_range_checked_overridden_by_flags_and_reach_the_engine() {
    use clap::Parser;

    let settings = check_toml(
        "index_relays = [\"wss://index.example\"]\nmax_participants = 50\nmax_relays_per_participant = 3\nmailbox_probe_interval = \"2m\"\nmailbox_probe_items = 40",
    )
    .expect("valid");
    let service = RelayUrl::parse("wss://grasp.example").expect("url");
    let outbox = settings.engine_config(&service).outbox;
    assert_eq!(
        outbox.index_relays,
        vec![RelayUrl::parse("wss://index.example").expect("url")]
    );
    assert_eq!(outbox.max_participants, 50);
    assert_eq!(outbox.max_relays_per_participant, 3);
    assert_eq!(outbox.mailbox_probe_interval, Duration::from_secs(120));
    assert_eq!(outbox.mailbox_probe_items, 40);

    let defaults = check_toml("").expect("defaults");
    assert_eq!(
        defaults.participants,
        grasp_sync_engine::OutboxConfig::default()
    );
    assert!(
        defaults.participants.index_relays.is_empty(),
        "none by default"
    );
    for bad in [
        "max_participants = 0",
        "max_participants = 1000001",
        "max_relays_per_participant = 0",
        "max_relays_per_participant = 65",
        "mailbox_probe_interval = \"500ms\"",
        "mailbox_probe_interval = \"25h\"",
        "mailbox_probe_items = 0",
        "mailbox_probe_items = 10001",
        "index_relays = [\"not a url\"]",
    ] {
        let key = bad.split(' ').next().expect("key").to_owned();
        assert_eq!(check_toml(bad).map(|_| ()), Err(key), "{bad}");
    }

    let cli = crate::Cli::try_parse_from([
        "grasp-sync",
        "run",
        "--index-relay",
        "wss://a.example",
        "--index-relay",
        "wss://b.example",
        "--max-participants",
        "9",
        "--mailbox-probe-interval",
        "30s",
    ])
    .expect("flags");
    let crate::Command::Run(args) = cli.command else {
        panic!("run");
    };
    let file = RawConfig::from_toml(
        "index_relays = [\"wss://file.example\"]\nmax_participants = 3\nmax_relays_per_participant = 2",
        "test.toml",
    )
    .expect("file");
    let settings =
        Settings::resolve(file.merge(args.overrides().expect("overrides"))).expect("valid");
    assert_eq!(settings.participants.index_relays.len(), 2);
    assert_eq!(settings.participants.max_participants, 9);
    assert_eq!(settings.participants.max_relays_per_participant, 2);
    assert_eq!(
        settings.participants.mailbox_probe_interval,
        Duration::from_secs(30)
    );
}

#[test]
fn the_shard_is_read_validated_and_needs_an_external_own_relay_when_one_of_several() {
    use grasp_sync_model::Shard;

    let external = "own_relay = \"wss://own.example\"\n";
    let settings = check_toml(&format!("{external}shard = \"2/3\"")).expect("valid");
    assert_eq!(settings.tracking.shard, Shard::new(2, 3).expect("shard"));
    let engine = settings.engine_config(&RelayUrl::parse("wss://own.example").expect("url"));
    assert_eq!(engine.tracking.shard, Shard::new(2, 3).expect("shard"));
    assert_eq!(
        check_toml("").expect("defaults").tracking.shard,
        Shard::WHOLE
    );
    // One shard of one is no sharding, valid in embedded mode.
    assert_eq!(
        check_toml("shard = \"0/1\"").expect("valid").tracking.shard,
        Shard::WHOLE
    );
    for bad in ["3/3", "0/0", "0/65", "1", "x/2", "-1/2", ""] {
        assert_eq!(
            check_toml(&format!("{external}shard = \"{bad}\"")).map(|_| ()),
            Err("shard".to_owned()),
            "{bad}"
        );
    }
    assert_eq!(
        check_toml("shard = \"0/2\"").map(|_| ()),
        Err("shard".to_owned()),
        "several shards in embedded mode"
    );
    let flags = RawConfig {
        shard: Some("1/4".to_owned()),
        ..RawConfig::default()
    };
    let file =
        RawConfig::from_toml(&format!("{external}shard = \"0/4\""), "test.toml").expect("file");
    let settings = Settings::resolve(file.merge(flags)).expect("valid");
    assert_eq!(settings.tracking.shard, Shard::new(1, 4).expect("shard"));
}
