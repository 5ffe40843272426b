//! The daemon's configuration: [`RawConfig`] is one layer of optional keys (a TOML file,
//! environment variables, flags), layers are merged with the later one winning, and
//! [`Settings::resolve`] validates the result into typed values or one [`ConfigError`] naming
//! the key at fault.

mod auth;
pub mod bounds;
mod duration;
mod git;
mod participants;
mod relay;
mod shard;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use grasp_sync_engine::store::{DEFAULT_COLD_CAPACITY, DEFAULT_MAX_FUTURE_CREATED_AT};
use grasp_sync_engine::{AddressPolicy, EngineConfig, OutboxConfig, RecoveryConfig};
use grasp_sync_health::HealthConfig;
use grasp_sync_model::{RelayUrl, TrackingBounds};
use serde::Deserialize;

use crate::error::ConfigError;
use crate::relay::RelayLimits;
use bounds::{count_in, duration_in};

pub use auth::{AUTH_KEY_ENV, AuthKey, SecretText};
pub use duration::{format_duration, parse_duration};
pub use git::{
    DEFAULT_GIT_FETCH_CONCURRENCY, DEFAULT_GIT_FETCH_MAX_SIZE, DEFAULT_GIT_FETCH_TIMEOUT,
    DEFAULT_PURGATORY_INTERVAL, GitArgs, GitSettings,
};
pub use participants::ParticipantArgs;
pub use relay::RawRelayLimits;

/// Default address of the embedded relay.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7777";
/// Default data directory.
pub const DEFAULT_DATA_DIR: &str = "./grasp-sync-data";
/// Default address of the `/metrics` and `/status` endpoints.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9477";

/// One layer of configuration: every key optional. Deserialised from the TOML file (unknown
/// keys are an error) and built from environment variables and flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Address the embedded relay listens on.
    pub listen: Option<String>,
    /// Directory of the LMDB store (embedded) or the local index (external).
    pub data_dir: Option<PathBuf>,
    /// The relay URL that announcements must list for this service.
    pub service_url: Option<String>,
    /// An external own relay to sync into instead of the embedded one.
    pub own_relay: Option<String>,
    /// Relays connected from the start and never retired.
    pub bootstrap_relays: Option<Vec<String>>,
    /// Hosts (or relay URLs) allowed even when private.
    pub allow_relays: Option<Vec<String>>,
    /// Hosts (or relay URLs) never dialled.
    pub deny_relays: Option<Vec<String>>,
    /// Allow every private, loopback and link-local relay.
    pub allow_private_relays: Option<bool>,
    /// Self-feed batch window, e.g. `5s`.
    pub batch_window: Option<String>,
    /// First connection-failure backoff, e.g. `5s`.
    pub backoff_base: Option<String>,
    /// Largest connection-failure backoff, e.g. `1h`.
    pub backoff_cap: Option<String>,
    /// Address of the `/metrics` and `/status` endpoints.
    pub metrics_listen: Option<String>,
    /// How far in the future an event's `created_at` may be, e.g. `15m`.
    pub max_future_created_at: Option<String>,
    /// The embedded store's LMDB map size, e.g. `32GiB`.
    pub lmdb_map_size: Option<String>,
    /// Relays tracked at most.
    pub max_tracked_relays: Option<usize>,
    /// Distinct relay hosts one announcement author's repositories may name.
    pub max_relay_hosts_per_author: Option<usize>,
    /// Root events remembered at most while they wait for their repository.
    pub max_waiting_roots: Option<usize>,
    /// Missing-event recovery IDs one relay may have pending.
    pub max_recovery_ids_per_relay: Option<usize>,
    /// How long learned relay limits are restored after they were learned, e.g. `168h`.
    pub learned_limits_max_age: Option<String>,
    /// Whether coverage the store barely holds is fetched by REQ+EOSE, not NIP-77.
    pub first_sync_by_req: Option<bool>,
    /// Whether a first sync's new live groups carry their batch's first historic page.
    pub live_first_page: Option<bool>,
    /// Rejected event IDs the own store remembers at most (either mode).
    pub max_rejected_ids: Option<usize>,
    /// Mirror repositories here and hold announcements without git data in purgatory.
    pub git_root: Option<PathBuf>,
    /// Command run per burst of synced state events, with a JSON batch on standard input.
    pub on_sync_hook: Option<String>,
    /// Announcements held in purgatory at most.
    pub max_purgatory_announcements: Option<usize>,
    /// The longest one git fetch may take, e.g. `10m`.
    pub git_fetch_timeout: Option<String>,
    /// The largest a mirrored repository may grow, e.g. `2GiB`.
    pub git_fetch_max_size: Option<String>,
    /// Git fetches at once.
    pub git_fetch_concurrency: Option<usize>,
    /// Fetch `file://` clone URLs.
    pub git_allow_file_urls: Option<bool>,
    /// How often purgatory announcements are registered for state sync, e.g. `5s`.
    pub purgatory_interval: Option<String>,
    /// A file holding the NIP-42 signing key.
    pub auth_key_file: Option<PathBuf>,
    /// The NIP-42 signing key itself, from `GRASP_SYNC_AUTH_KEY` only (never the file).
    #[serde(skip)]
    pub auth_key: Option<SecretText>,
    /// Relays asked for participants' NIP-65 relay lists.
    pub index_relays: Option<Vec<String>>,
    /// Participants of tracked repositories remembered at most.
    pub max_participants: Option<usize>,
    /// Relays taken from one participant's relay list at most.
    pub max_relays_per_participant: Option<usize>,
    /// Interval between two probes of one participant mailbox relay, e.g. `15m`.
    pub mailbox_probe_interval: Option<String>,
    /// Repositories and root events one mailbox probe covers at most.
    pub mailbox_probe_items: Option<usize>,
    /// This daemon's shard of the remote relays, `INDEX/COUNT` from `0/1`.
    pub shard: Option<String>,
    /// The embedded relay's limits (the `[relay]` table).
    #[serde(default)]
    pub relay: RawRelayLimits,
}

impl RawConfig {
    /// Parses a TOML document; `path` only names the file in errors.
    pub fn from_toml(text: &str, path: &str) -> Result<RawConfig, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError::File {
            path: path.to_owned(),
            reason: describe_toml_error(text, &error),
        })
    }

    /// Reads and parses a TOML file.
    pub fn from_file(path: &Path) -> Result<RawConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: shown.clone(),
            reason: error.to_string(),
        })?;
        RawConfig::from_toml(&text, &shown)
    }

    /// This layer with every key that `over` sets replaced by its value.
    pub fn merge(self, over: RawConfig) -> RawConfig {
        RawConfig {
            listen: over.listen.or(self.listen),
            data_dir: over.data_dir.or(self.data_dir),
            service_url: over.service_url.or(self.service_url),
            own_relay: over.own_relay.or(self.own_relay),
            bootstrap_relays: over.bootstrap_relays.or(self.bootstrap_relays),
            allow_relays: over.allow_relays.or(self.allow_relays),
            deny_relays: over.deny_relays.or(self.deny_relays),
            allow_private_relays: over.allow_private_relays.or(self.allow_private_relays),
            batch_window: over.batch_window.or(self.batch_window),
            backoff_base: over.backoff_base.or(self.backoff_base),
            backoff_cap: over.backoff_cap.or(self.backoff_cap),
            metrics_listen: over.metrics_listen.or(self.metrics_listen),
            max_future_created_at: over.max_future_created_at.or(self.max_future_created_at),
            lmdb_map_size: over.lmdb_map_size.or(self.lmdb_map_size),
            max_tracked_relays: over.max_tracked_relays.or(self.max_tracked_relays),
            max_relay_hosts_per_author: over
                .max_relay_hosts_per_author
                .or(self.max_relay_hosts_per_author),
            max_waiting_roots: over.max_waiting_roots.or(self.max_waiting_roots),
            max_recovery_ids_per_relay: over
                .max_recovery_ids_per_relay
                .or(self.max_recovery_ids_per_relay),
            learned_limits_max_age: over.learned_limits_max_age.or(self.learned_limits_max_age),
            first_sync_by_req: over.first_sync_by_req.or(self.first_sync_by_req),
            live_first_page: over.live_first_page.or(self.live_first_page),
            max_rejected_ids: over.max_rejected_ids.or(self.max_rejected_ids),
            git_root: over.git_root.or(self.git_root),
            on_sync_hook: over.on_sync_hook.or(self.on_sync_hook),
            max_purgatory_announcements: over
                .max_purgatory_announcements
                .or(self.max_purgatory_announcements),
            git_fetch_timeout: over.git_fetch_timeout.or(self.git_fetch_timeout),
            git_fetch_max_size: over.git_fetch_max_size.or(self.git_fetch_max_size),
            git_fetch_concurrency: over.git_fetch_concurrency.or(self.git_fetch_concurrency),
            git_allow_file_urls: over.git_allow_file_urls.or(self.git_allow_file_urls),
            purgatory_interval: over.purgatory_interval.or(self.purgatory_interval),
            auth_key_file: over.auth_key_file.or(self.auth_key_file),
            auth_key: over.auth_key.or(self.auth_key),
            index_relays: over.index_relays.or(self.index_relays),
            max_participants: over.max_participants.or(self.max_participants),
            max_relays_per_participant: over
                .max_relays_per_participant
                .or(self.max_relays_per_participant),
            mailbox_probe_interval: over.mailbox_probe_interval.or(self.mailbox_probe_interval),
            mailbox_probe_items: over.mailbox_probe_items.or(self.mailbox_probe_items),
            shard: over.shard.or(self.shard),
            relay: self.relay.merge(over.relay),
        }
    }
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Address the embedded relay listens on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Data directory.
    pub data_dir: PathBuf,
    /// The service URL; `None` derives it from the embedded relay's bound address
    /// (`ws://ADDR`) or, in external mode, uses `own_relay`.
    pub service_url: Option<RelayUrl>,
    /// The external own relay; `None` runs the embedded relay.
    pub own_relay: Option<RelayUrl>,
    /// Bootstrap relays.
    pub bootstrap_relays: Vec<RelayUrl>,
    /// Which discovered relays may be dialled.
    pub address_policy: AddressPolicy,
    /// Self-feed batch window.
    pub batch_window: Duration,
    /// First connection-failure backoff.
    pub backoff_base: Duration,
    /// Largest connection-failure backoff.
    pub backoff_cap: Duration,
    /// Address of the `/metrics` and `/status` endpoints (port 0 picks a free port).
    pub metrics_listen: SocketAddr,
    /// How far ahead of the clock the own store takes an event's `created_at`.
    pub max_future_created_at: Duration,
    /// The embedded store's LMDB map size in bytes; `None` keeps the backend's default.
    pub lmdb_map_size: Option<usize>,
    /// How many relays announcements can make the daemon track, and its shard of them.
    pub tracking: TrackingBounds,
    /// Root events remembered at most while they wait for their repository.
    pub max_waiting_roots: usize,
    /// Missing-event recovery IDs one relay may have pending.
    pub max_recovery_ids_per_relay: usize,
    /// How long learned relay limits are restored after they were learned.
    pub learned_limits_max_age: Duration,
    /// Whether coverage the store barely holds is fetched by REQ+EOSE, not NIP-77.
    pub first_sync_by_req: bool,
    /// Whether a first sync's new live groups carry their batch's first historic page.
    pub live_first_page: bool,
    /// Most rejected event IDs the own store's rejected-events index remembers, in either
    /// mode (its cold tier's `RejectedConfig::cold_capacity`).
    pub max_rejected_ids: usize,
    /// The embedded relay's limits; its `created_at` window is `max_future_created_at`.
    pub relay: RelayLimits,
    /// Git data: the mirror root, the hook, the fetcher's limits and the purgatory's cap.
    pub git: GitSettings,
    /// The key that answers relays' NIP-42 challenges; `None` answers none.
    pub auth_key: Option<AuthKey>,
    /// Participant discovery: index relays and the bounds and cadence of mailbox probes.
    pub participants: OutboxConfig,
}

impl Settings {
    /// Validates a merged configuration, filling in defaults. Every duration and count must lie
    /// in its range in [`bounds`].
    pub fn resolve(raw: RawConfig) -> Result<Settings, ConfigError> {
        let git = GitSettings::resolve(&raw)?;
        let participants = participants::resolve(&raw)?;
        let defaults = EngineConfig::default();
        let tracking = defaults.tracking;
        let health = HealthConfig::default();
        let batch_window = duration_in(
            "batch_window",
            raw.batch_window.as_deref(),
            bounds::BATCH_WINDOW,
        )?
        .unwrap_or(defaults.batch_window);
        let backoff_base = duration_in(
            "backoff_base",
            raw.backoff_base.as_deref(),
            bounds::BACKOFF_BASE,
        )?
        .unwrap_or(health.connect_backoff_base);
        let backoff_cap = duration_in(
            "backoff_cap",
            raw.backoff_cap.as_deref(),
            bounds::BACKOFF_CAP,
        )?
        .unwrap_or(health.connect_backoff_max);
        if backoff_cap < backoff_base {
            return Err(ConfigError::invalid(
                "backoff_cap",
                format!(
                    "{} is shorter than backoff_base ({})",
                    format_duration(backoff_cap),
                    format_duration(backoff_base)
                ),
            ));
        }
        let data_dir = raw
            .data_dir
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        if data_dir.as_os_str().is_empty() {
            return Err(ConfigError::invalid("data_dir", "must not be empty"));
        }
        let max_future_created_at = duration_in(
            "max_future_created_at",
            raw.max_future_created_at.as_deref(),
            bounds::MAX_FUTURE_CREATED_AT,
        )?
        .unwrap_or(DEFAULT_MAX_FUTURE_CREATED_AT);
        let relay = RelayLimits {
            max_future_created_at,
            ..raw.relay.resolve()?
        };
        let own_relay = url_key("own_relay", raw.own_relay.as_deref())?;
        let shard = shard::shard_key(raw.shard.as_deref(), own_relay.as_ref())?;
        Ok(Settings {
            listen: address_key("listen", raw.listen.as_deref(), DEFAULT_LISTEN)?,
            data_dir,
            service_url: url_key("service_url", raw.service_url.as_deref())?,
            own_relay,
            bootstrap_relays: url_list_key("bootstrap_relays", raw.bootstrap_relays)?,
            address_policy: AddressPolicy {
                allow_private: raw.allow_private_relays.unwrap_or(false),
                allowed_hosts: host_list_key("allow_relays", raw.allow_relays)?,
                denied_hosts: host_list_key("deny_relays", raw.deny_relays)?,
            },
            batch_window,
            backoff_base,
            backoff_cap,
            metrics_listen: address_key(
                "metrics_listen",
                raw.metrics_listen.as_deref(),
                DEFAULT_METRICS_LISTEN,
            )?,
            max_future_created_at,
            lmdb_map_size: size_key("lmdb_map_size", raw.lmdb_map_size.as_deref())?,
            tracking: TrackingBounds {
                max_relays: count_in(
                    "max_tracked_relays",
                    raw.max_tracked_relays,
                    bounds::MAX_TRACKED_RELAYS,
                )?
                .unwrap_or(tracking.max_relays),
                max_hosts_per_author: count_in(
                    "max_relay_hosts_per_author",
                    raw.max_relay_hosts_per_author,
                    bounds::MAX_RELAY_HOSTS_PER_AUTHOR,
                )?
                .unwrap_or(tracking.max_hosts_per_author),
                shard,
            },
            max_waiting_roots: count_in(
                "max_waiting_roots",
                raw.max_waiting_roots,
                bounds::MAX_WAITING_ROOTS,
            )?
            .unwrap_or(defaults.max_waiting_roots),
            max_recovery_ids_per_relay: count_in(
                "max_recovery_ids_per_relay",
                raw.max_recovery_ids_per_relay,
                bounds::MAX_RECOVERY_IDS_PER_RELAY,
            )?
            .unwrap_or(defaults.recovery.max_pending_per_relay),
            learned_limits_max_age: duration_in(
                "learned_limits_max_age",
                raw.learned_limits_max_age.as_deref(),
                bounds::LEARNED_LIMITS_MAX_AGE,
            )?
            .unwrap_or(defaults.learned_limits_max_age),
            first_sync_by_req: raw.first_sync_by_req.unwrap_or(defaults.first_sync_by_req),
            live_first_page: raw.live_first_page.unwrap_or(defaults.live_first_page),
            max_rejected_ids: count_in(
                "max_rejected_ids",
                raw.max_rejected_ids,
                bounds::MAX_REJECTED_IDS,
            )?
            .unwrap_or(DEFAULT_COLD_CAPACITY),
            relay,
            git,
            auth_key: auth::resolve_auth_key(raw.auth_key.as_ref(), raw.auth_key_file.as_deref())?,
            participants,
        })
    }

    /// The engine configuration for a service reachable at `service_url`.
    pub fn engine_config(&self, service_url: &RelayUrl) -> EngineConfig {
        EngineConfig {
            own_relay: Some(service_url.clone()),
            bootstrap_relays: self.bootstrap_relays.clone(),
            address_policy: self.address_policy.clone(),
            tracking: self.tracking,
            max_waiting_roots: self.max_waiting_roots,
            learned_limits_max_age: self.learned_limits_max_age,
            first_sync_by_req: self.first_sync_by_req,
            live_first_page: self.live_first_page,
            recovery: RecoveryConfig {
                max_pending_per_relay: self.max_recovery_ids_per_relay,
                ..RecoveryConfig::default()
            },
            batch_window: self.batch_window,
            purgatory_interval: self.git.purgatory_interval,
            health: HealthConfig {
                connect_backoff_base: self.backoff_base,
                connect_backoff_max: self.backoff_cap,
                ..HealthConfig::default()
            },
            outbox: self.participants.clone(),
            ..EngineConfig::default()
        }
    }
}

/// Parses a boolean the way the environment and flags spell it.
pub fn parse_bool(key: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        other => Err(ConfigError::invalid(
            key,
            format!("expected true or false, got `{other}`"),
        )),
    }
}

/// A byte size: a whole number, optionally followed by `KiB`, `MiB`, `GiB` or `TiB`.
pub(crate) fn size_key(
    key: &'static str,
    value: Option<&str>,
) -> Result<Option<usize>, ConfigError> {
    let Some(text) = value.map(str::trim) else {
        return Ok(None);
    };
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u32 = match text[digits.len()..].trim() {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        other => {
            return Err(ConfigError::invalid(
                key,
                format!("unknown unit `{other}` (use KiB, MiB, GiB or TiB)"),
            ));
        }
    };
    let invalid = || ConfigError::invalid(key, format!("`{text}` is not a size such as `32GiB`"));
    let number: usize = digits.trim().parse().map_err(|_| invalid())?;
    let bytes = number.checked_mul(1usize << unit).ok_or_else(invalid)?;
    if bytes == 0 {
        return Err(ConfigError::invalid(key, "must be larger than 0"));
    }
    Ok(Some(bytes))
}

fn address_key(
    key: &'static str,
    value: Option<&str>,
    default: &str,
) -> Result<SocketAddr, ConfigError> {
    let text = value.unwrap_or(default).trim();
    text.parse().map_err(|_| {
        ConfigError::invalid(
            key,
            format!("`{text}` is not an IP address with a port (e.g. `127.0.0.1:7777`)"),
        )
    })
}

fn url_key(key: &'static str, value: Option<&str>) -> Result<Option<RelayUrl>, ConfigError> {
    value.map(|text| parse_url(key, text)).transpose()
}

pub(crate) fn url_list_key(
    key: &'static str,
    values: Option<Vec<String>>,
) -> Result<Vec<RelayUrl>, ConfigError> {
    let mut urls: Vec<RelayUrl> = Vec::new();
    for text in values.unwrap_or_default() {
        let url = parse_url(key, &text)?;
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    Ok(urls)
}

fn parse_url(key: &'static str, text: &str) -> Result<RelayUrl, ConfigError> {
    RelayUrl::parse(text).map_err(|error| ConfigError::invalid(key, error.to_string()))
}

/// Hosts, given as bare hosts or as relay URLs (whose host is taken).
fn host_list_key(
    key: &'static str,
    values: Option<Vec<String>>,
) -> Result<Vec<String>, ConfigError> {
    let mut hosts: Vec<String> = Vec::new();
    for text in values.unwrap_or_default() {
        let text = text.trim();
        let not_a_host = || {
            ConfigError::invalid(
                key,
                format!("`{text}` is not a host name, an IP address or a relay URL"),
            )
        };
        let host = if text.contains("://") {
            parse_url(key, text)?.host().to_owned()
        } else {
            bare_host(text).ok_or_else(not_a_host)?
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(not_a_host());
        }
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    Ok(hosts)
}

/// A bare host (`relay.example`, `127.1`, `::1`, `[fd00::1]`) in the normal form relay URLs
/// give their hosts, so every spelling of an address matches the address the engine compares:
/// read as the host of a `ws://` URL, with no port, path, query or user part.
fn bare_host(text: &str) -> Option<String> {
    if text.is_empty() || text.contains(|c: char| c.is_whitespace() || "/?#@".contains(c)) {
        return None;
    }
    let bracketed = if text.contains(':') && !text.starts_with('[') {
        format!("[{text}]")
    } else {
        text.to_owned()
    };
    let url = RelayUrl::parse(&format!("ws://{bracketed}")).ok()?;
    (url.port() == 80).then(|| url.host().to_owned())
}

/// One line: where in the file, the offending line's text (which names the key) and the
/// problem.
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    let Some(span) = error.span() else {
        return message.to_owned();
    };
    let start = span.start.min(text.len());
    let line_number = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_number - 1).unwrap_or_default().trim();
    format!("line {line_number} (`{line}`): {message}")
}

#[cfg(test)]
mod tests;
