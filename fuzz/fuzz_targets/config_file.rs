//! The configuration file: `RawConfig::from_toml` then `Settings::resolve`, on arbitrary text
//! and on documents assembled from the real keys with arbitrary values.
//!
//! Asserts: nothing panics; a file that does not parse is `ConfigError::File` naming the file;
//! a configuration that does not resolve is `ConfigError::Invalid` naming a key its message
//! repeats; a resolved configuration keeps its own rules (non-zero batch window and backoff
//! base, a backoff cap no shorter than the base, distinct bootstrap relays) and every duration
//! in it is written and read back unchanged by `format_duration` and `parse_duration`.
#![no_main]

use arbitrary::Arbitrary;
use grasp_sync_bin::config::{format_duration, parse_duration};
use grasp_sync_bin::{ConfigError, RawConfig, Settings};
use libfuzzer_sys::fuzz_target;

/// The path errors name.
const PATH: &str = "fuzz.toml";

#[derive(Debug, Arbitrary)]
enum Input {
    /// A file as an operator might write it.
    Text(String),
    /// A document of real keys.
    Built {
        top: Vec<(TopKey, Value)>,
        relay: Vec<(RelayKey, Value)>,
    },
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum TopKey {
    Listen,
    DataDir,
    ServiceUrl,
    OwnRelay,
    BootstrapRelays,
    AllowRelays,
    DenyRelays,
    AllowPrivateRelays,
    BatchWindow,
    BackoffBase,
    BackoffCap,
    MetricsListen,
    MaxFutureCreatedAt,
    LmdbMapSize,
}

impl TopKey {
    fn key(self) -> &'static str {
        match self {
            TopKey::Listen => "listen",
            TopKey::DataDir => "data_dir",
            TopKey::ServiceUrl => "service_url",
            TopKey::OwnRelay => "own_relay",
            TopKey::BootstrapRelays => "bootstrap_relays",
            TopKey::AllowRelays => "allow_relays",
            TopKey::DenyRelays => "deny_relays",
            TopKey::AllowPrivateRelays => "allow_private_relays",
            TopKey::BatchWindow => "batch_window",
            TopKey::BackoffBase => "backoff_base",
            TopKey::BackoffCap => "backoff_cap",
            TopKey::MetricsListen => "metrics_listen",
            TopKey::MaxFutureCreatedAt => "max_future_created_at",
            TopKey::LmdbMapSize => "lmdb_map_size",
        }
    }
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum RelayKey {
    MaxConnections,
    MaxConnectionsPerIp,
    HeaderReadTimeout,
    IdleTimeout,
    MaxMessageLength,
    MaxContentLength,
    MaxEventTags,
    MaxSubscriptions,
    MaxFilters,
    MaxSubidLength,
    MaxLimit,
    DefaultLimit,
    MaxNegentropySessions,
    NegentropyFrameSize,
    MaxNegentropyItems,
    QueriesPerSecond,
    QueryBurst,
    EventsPerMinute,
    ConcurrentReads,
}

impl RelayKey {
    fn key(self) -> &'static str {
        match self {
            RelayKey::MaxConnections => "max_connections",
            RelayKey::MaxConnectionsPerIp => "max_connections_per_ip",
            RelayKey::HeaderReadTimeout => "header_read_timeout",
            RelayKey::IdleTimeout => "idle_timeout",
            RelayKey::MaxMessageLength => "max_message_length",
            RelayKey::MaxContentLength => "max_content_length",
            RelayKey::MaxEventTags => "max_event_tags",
            RelayKey::MaxSubscriptions => "max_subscriptions",
            RelayKey::MaxFilters => "max_filters",
            RelayKey::MaxSubidLength => "max_subid_length",
            RelayKey::MaxLimit => "max_limit",
            RelayKey::DefaultLimit => "default_limit",
            RelayKey::MaxNegentropySessions => "max_negentropy_sessions",
            RelayKey::NegentropyFrameSize => "negentropy_frame_size",
            RelayKey::MaxNegentropyItems => "max_negentropy_items",
            RelayKey::QueriesPerSecond => "queries_per_second",
            RelayKey::QueryBurst => "query_burst",
            RelayKey::EventsPerMinute => "events_per_minute",
            RelayKey::ConcurrentReads => "concurrent_reads",
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Value {
    Integer(i64),
    Bool(bool),
    Text(String),
    Duration(u64, DurationUnit),
    Size(u64, SizeUnit),
    Address([u8; 4], u16),
    Relay(bool, String),
    List(Vec<String>),
}

#[derive(Debug, Arbitrary)]
enum DurationUnit {
    Ms,
    S,
    M,
    H,
}

#[derive(Debug, Arbitrary)]
enum SizeUnit {
    None,
    KiB,
    MiB,
    GiB,
    TiB,
}

impl Value {
    fn toml(&self) -> toml::Value {
        match self {
            Value::Integer(n) => toml::Value::Integer(*n),
            Value::Bool(b) => toml::Value::Boolean(*b),
            Value::Text(text) => toml::Value::String(text.clone()),
            Value::Duration(n, unit) => {
                let unit = match unit {
                    DurationUnit::Ms => "ms",
                    DurationUnit::S => "s",
                    DurationUnit::M => "m",
                    DurationUnit::H => "h",
                };
                toml::Value::String(format!("{n}{unit}"))
            }
            Value::Size(n, unit) => {
                let unit = match unit {
                    SizeUnit::None => "",
                    SizeUnit::KiB => "KiB",
                    SizeUnit::MiB => "MiB",
                    SizeUnit::GiB => "GiB",
                    SizeUnit::TiB => "TiB",
                };
                toml::Value::String(format!("{n}{unit}"))
            }
            Value::Address([a, b, c, d], port) => {
                toml::Value::String(format!("{a}.{b}.{c}.{d}:{port}"))
            }
            Value::Relay(secure, host) => {
                let scheme = if *secure { "wss" } else { "ws" };
                toml::Value::String(format!("{scheme}://{host}"))
            }
            Value::List(items) => {
                toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect())
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let text = match input {
        Input::Text(text) => {
            if let Ok(duration) = parse_duration(&text) {
                assert_eq!(parse_duration(&format_duration(duration)), Ok(duration));
            }
            text
        }
        Input::Built { top, relay } => {
            let mut table = toml::Table::new();
            for (key, value) in top {
                table.insert(key.key().to_owned(), value.toml());
            }
            let mut relay_table = toml::Table::new();
            for (key, value) in relay {
                relay_table.insert(key.key().to_owned(), value.toml());
            }
            if !relay_table.is_empty() {
                table.insert("relay".to_owned(), toml::Value::Table(relay_table));
            }
            toml::to_string(&table).expect("a table serialises")
        }
    };

    let raw = match RawConfig::from_toml(&text, PATH) {
        Ok(raw) => raw,
        Err(ConfigError::File { path, .. }) => {
            assert_eq!(path, PATH);
            return;
        }
        Err(other) => panic!("a file that does not parse gave {other:?}"),
    };
    assert_eq!(raw.clone().merge(RawConfig::default()), raw);
    assert_eq!(RawConfig::default().merge(raw.clone()), raw);

    let settings = match Settings::resolve(raw) {
        Ok(settings) => settings,
        Err(error) => {
            let key = error.key().unwrap_or_else(|| panic!("no key in {error:?}"));
            assert!(error.to_string().contains(key));
            return;
        }
    };
    assert!(!settings.batch_window.is_zero());
    assert!(!settings.backoff_base.is_zero());
    assert!(settings.backoff_cap >= settings.backoff_base);
    for (at, url) in settings.bootstrap_relays.iter().enumerate() {
        assert!(!settings.bootstrap_relays[..at].contains(url));
    }
    for duration in [
        settings.batch_window,
        settings.backoff_base,
        settings.backoff_cap,
        settings.max_future_created_at,
        settings.relay.header_read_timeout,
        settings.relay.idle_timeout,
    ] {
        assert_eq!(parse_duration(&format_duration(duration)), Ok(duration));
    }
});
