//! The command line: `grasp-sync run` (the daemon), `grasp-sync demo`, `grasp-sync sim` and
//! `grasp-sync status` (a running daemon's status in the terminal), with every
//! configuration key as a flag and a `GRASP_SYNC_*` environment variable. Flags and the
//! environment are turned into a [`RawConfig`] layer over the configuration file.
//!
//! `demo` and `sim` need the `sim` feature; a build without it still knows both names, lists
//! them in `--help` as not in this build, and answers them with `NotInThisBuild::message`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{
    AUTH_KEY_ENV, GitArgs, ParticipantArgs, RawConfig, RawRelayLimits, SecretText, Settings,
    parse_bool,
};
use crate::error::ConfigError;
#[cfg(feature = "sim")]
use crate::sim::{Preset, Profiles};

/// GRASP-02 proactive sync for Nostr git relays.
#[derive(Debug, Parser)]
#[command(name = "grasp-sync", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: an own relay (embedded, or external with --own-relay) kept complete by
    /// proactive sync, with /metrics and /status endpoints.
    Run(Box<RunArgs>),
    /// Start a small local network of seeded relays, sync it into an embedded daemon on a
    /// temporary directory, and check that exactly the expected events arrived.
    #[cfg(feature = "sim")]
    Demo(DemoArgs),
    /// Not in this build (needs the `sim` feature): sync a small local network of seeded
    /// relays into a daemon and check the result.
    #[cfg(not(feature = "sim"))]
    Demo(NotInThisBuild),
    /// Simulate a network of any size against relays with real relays' limits, measure the
    /// daemon until convergence beside a naive baseline and the store's raw ingest rate, and
    /// check the design's targets.
    #[cfg(feature = "sim")]
    Sim(Box<SimArgs>),
    /// Not in this build (needs the `sim` feature): simulate a network of any size and
    /// measure the daemon against the design's targets.
    #[cfg(not(feature = "sim"))]
    Sim(NotInThisBuild),
    /// Show a running daemon's summary and relay table (its `/status`), or the JSON with
    /// --json.
    Status(StatusArgs),
}

/// The arguments of `demo` or `sim` in a build without the `sim` feature, taken as they come
/// so that the command is reported as missing whatever flags it was given.
#[cfg(not(feature = "sim"))]
#[derive(Debug, Clone, Args)]
pub struct NotInThisBuild {
    /// The command's arguments, unused.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}

#[cfg(not(feature = "sim"))]
impl NotInThisBuild {
    /// The one-line error for `grasp-sync <command>`, saying how to get a build that has it.
    pub fn message(command: &str) -> String {
        format!(
            "`grasp-sync {command}` is not in this build: it needs the `sim` feature \
             (cargo run --release -p grasp-sync-bin --features sim -- {command})"
        )
    }
}

/// Flags of `grasp-sync status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The daemon's endpoints (its `metrics_listen`), as http://HOST:PORT.
    #[arg(long, default_value = crate::status_cli::DEFAULT_STATUS_URL, value_name = "URL")]
    pub url: String,
    /// Print the `/status` JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `grasp-sync run`. Each overrides the same key of the configuration file; a
/// repeatable flag given at least once replaces the file's whole list.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// TOML configuration file.
    #[arg(long, env = "GRASP_SYNC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address of the embedded relay [default: 127.0.0.1:7777].
    #[arg(long, env = "GRASP_SYNC_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Data directory [default: ./grasp-sync-data].
    #[arg(long, env = "GRASP_SYNC_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Relay URL that announcements must list [default: ws://LISTEN, or --own-relay].
    #[arg(long, env = "GRASP_SYNC_SERVICE_URL", value_name = "URL")]
    pub service_url: Option<String>,
    /// Sync into this external relay instead of the embedded one.
    #[arg(long, env = "GRASP_SYNC_OWN_RELAY", value_name = "URL")]
    pub own_relay: Option<String>,
    /// Bootstrap relay (repeatable; comma-separated in the environment).
    #[arg(
        long = "bootstrap-relay",
        env = "GRASP_SYNC_BOOTSTRAP_RELAYS",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub bootstrap_relays: Vec<String>,
    /// Host or relay URL allowed even when private (repeatable).
    #[arg(
        long = "allow-relay",
        env = "GRASP_SYNC_ALLOW_RELAYS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub allow_relays: Vec<String>,
    /// Host or relay URL never dialled (repeatable).
    #[arg(
        long = "deny-relay",
        env = "GRASP_SYNC_DENY_RELAYS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub deny_relays: Vec<String>,
    /// Dial private, loopback and link-local relays [default: false].
    #[arg(
        long,
        env = "GRASP_SYNC_ALLOW_PRIVATE_RELAYS",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub allow_private_relays: Option<String>,
    /// Self-feed batch window [default: 5s].
    #[arg(long, env = "GRASP_SYNC_BATCH_WINDOW", value_name = "DURATION")]
    pub batch_window: Option<String>,
    /// First connection-failure backoff [default: 5s].
    #[arg(long, env = "GRASP_SYNC_BACKOFF_BASE", value_name = "DURATION")]
    pub backoff_base: Option<String>,
    /// Largest connection-failure backoff [default: 1h].
    #[arg(long, env = "GRASP_SYNC_BACKOFF_CAP", value_name = "DURATION")]
    pub backoff_cap: Option<String>,
    /// Address of /metrics and /status [default: 127.0.0.1:9477].
    #[arg(long, env = "GRASP_SYNC_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// How far in the future an event's created_at may be [default: 15m].
    #[arg(
        long,
        env = "GRASP_SYNC_MAX_FUTURE_CREATED_AT",
        value_name = "DURATION"
    )]
    pub max_future_created_at: Option<String>,
    /// The embedded store's LMDB map size, e.g. 32GiB [default: 32GiB].
    #[arg(long, env = "GRASP_SYNC_LMDB_MAP_SIZE", value_name = "SIZE")]
    pub lmdb_map_size: Option<String>,
    /// Relays tracked at most [default: 256].
    #[arg(long, env = "GRASP_SYNC_MAX_TRACKED_RELAYS", value_name = "N")]
    pub max_tracked_relays: Option<usize>,
    /// Distinct relay hosts one announcement author's repositories may name [default: 16].
    #[arg(long, env = "GRASP_SYNC_MAX_RELAY_HOSTS_PER_AUTHOR", value_name = "N")]
    pub max_relay_hosts_per_author: Option<usize>,
    /// Root events remembered at most while they wait for their repository [default: 100000].
    #[arg(long, env = "GRASP_SYNC_MAX_WAITING_ROOTS", value_name = "N")]
    pub max_waiting_roots: Option<usize>,
    /// Missing-event recovery IDs one relay may have pending [default: 10000].
    #[arg(long, env = "GRASP_SYNC_MAX_RECOVERY_IDS_PER_RELAY", value_name = "N")]
    pub max_recovery_ids_per_relay: Option<usize>,
    /// How long learned relay limits are restored after they were learned [default: 168h].
    #[arg(
        long,
        env = "GRASP_SYNC_LEARNED_LIMITS_MAX_AGE",
        value_name = "DURATION"
    )]
    pub learned_limits_max_age: Option<String>,
    /// Fetch coverage the store holds nothing of by REQ+EOSE, not NIP-77: true or false
    /// [default: true].
    #[arg(
        long,
        env = "GRASP_SYNC_FIRST_SYNC_BY_REQ",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub first_sync_by_req: Option<String>,
    /// During a first sync, new live groups carry their batch's first historic page
    /// (`false`: live groups send `limit: 0` only): true or false [default: true].
    #[arg(
        long,
        env = "GRASP_SYNC_LIVE_FIRST_PAGE",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub live_first_page: Option<String>,
    /// Rejected event IDs the own store remembers at most [default: 100000].
    #[arg(long, env = "GRASP_SYNC_MAX_REJECTED_IDS", value_name = "N")]
    pub max_rejected_ids: Option<usize>,
    /// A file holding the key that answers relays' NIP-42 challenges (an nsec or 64 hex
    /// digits). The key itself may instead be given in `GRASP_SYNC_AUTH_KEY`; no flag
    /// carries it.
    #[arg(long, env = "GRASP_SYNC_AUTH_KEY_FILE", value_name = "PATH")]
    pub auth_key_file: Option<PathBuf>,
    /// This daemon's shard of the remote relays, INDEX/COUNT numbered from 0 (e.g. 1/4);
    /// several shards need --own-relay [default: 0/1].
    #[arg(long, env = "GRASP_SYNC_SHARD", value_name = "I/N")]
    pub shard: Option<String>,
    /// The embedded relay's limits (`[relay]` keys).
    #[command(flatten)]
    pub relay: RawRelayLimits,
    /// Git data: mirror root, hook, fetcher limits, purgatory cap.
    #[command(flatten)]
    pub git: GitArgs,
    /// Participant discovery: index relays, bounds, mailbox probe cadence.
    #[command(flatten)]
    pub participants: ParticipantArgs,
}

impl RunArgs {
    /// The layer these flags and variables set.
    pub fn overrides(&self) -> Result<RawConfig, ConfigError> {
        let list = |values: &Vec<String>| (!values.is_empty()).then(|| values.clone());
        let mut raw = RawConfig {
            listen: self.listen.clone(),
            data_dir: self.data_dir.clone(),
            service_url: self.service_url.clone(),
            own_relay: self.own_relay.clone(),
            bootstrap_relays: list(&self.bootstrap_relays),
            allow_relays: list(&self.allow_relays),
            deny_relays: list(&self.deny_relays),
            allow_private_relays: self
                .allow_private_relays
                .as_deref()
                .map(|value| parse_bool("allow_private_relays", value))
                .transpose()?,
            batch_window: self.batch_window.clone(),
            backoff_base: self.backoff_base.clone(),
            backoff_cap: self.backoff_cap.clone(),
            metrics_listen: self.metrics_listen.clone(),
            max_future_created_at: self.max_future_created_at.clone(),
            lmdb_map_size: self.lmdb_map_size.clone(),
            max_tracked_relays: self.max_tracked_relays,
            max_relay_hosts_per_author: self.max_relay_hosts_per_author,
            max_waiting_roots: self.max_waiting_roots,
            max_recovery_ids_per_relay: self.max_recovery_ids_per_relay,
            learned_limits_max_age: self.learned_limits_max_age.clone(),
            first_sync_by_req: self
                .first_sync_by_req
                .as_deref()
                .map(|value| parse_bool("first_sync_by_req", value))
                .transpose()?,
            live_first_page: self
                .live_first_page
                .as_deref()
                .map(|value| parse_bool("live_first_page", value))
                .transpose()?,
            max_rejected_ids: self.max_rejected_ids,
            auth_key_file: self.auth_key_file.clone(),
            auth_key: std::env::var(AUTH_KEY_ENV).ok().map(SecretText::new),
            shard: self.shard.clone(),
            relay: self.relay.clone(),
            ..RawConfig::default()
        };
        self.git.apply(&mut raw)?;
        self.participants.apply(&mut raw);
        Ok(raw)
    }

    /// The configuration file (if any) under these flags and variables, validated.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        let file = match &self.config {
            Some(path) => RawConfig::from_file(path)?,
            None => RawConfig::default(),
        };
        Settings::resolve(file.merge(self.overrides()?))
    }
}

/// Flags of `grasp-sync demo`.
#[cfg(feature = "sim")]
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Seed of the generated network.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Repository announcements in the network.
    #[arg(long, default_value_t = 6)]
    pub repos: usize,
    /// Relays in the network.
    #[arg(long, default_value_t = 3)]
    pub relays: usize,
    /// Fail if the store has not converged by then.
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    pub timeout: String,
}

/// Flags of `grasp-sync sim`. Size flags override the preset's value.
#[cfg(feature = "sim")]
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Network size.
    #[arg(long, value_enum, default_value_t = Preset::Small)]
    pub preset: Preset,
    /// Seed of the generated network.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Relays (R).
    #[arg(long)]
    pub relays: Option<usize>,
    /// Repository announcements (N).
    #[arg(long)]
    pub repos: Option<usize>,
    /// Root events in total (M), spread unevenly over the repositories.
    #[arg(long)]
    pub roots: Option<usize>,
    /// Replies and comments per root (K).
    #[arg(long)]
    pub replies_per_root: Option<usize>,
    /// Second-generation descendants per reply.
    #[arg(long)]
    pub descendants_per_reply: Option<usize>,
    /// Comments per repository.
    #[arg(long)]
    pub comments_per_repo: Option<usize>,
    /// Relays each announcement lists.
    #[arg(long)]
    pub relays_per_repo: Option<usize>,
    /// Share of events stored on all of their repository's relays (0 to 1).
    #[arg(long)]
    pub share_on_several_relays: Option<f64>,
    /// Share of announcements not listing the service (0 to 1).
    #[arg(long)]
    pub share_not_listing_service: Option<f64>,
    /// Outbox relays: extra relays no announcement lists, named as write relays by the
    /// kind-10002 lists of participants [default when any --outbox-* flag is given: 2;
    /// otherwise none].
    #[arg(long, value_name = "N")]
    pub outbox_relays: Option<usize>,
    /// Share of contributors (0 to 1) whose relay list names one or two outbox relays
    /// [default with outbox relays: 0.25].
    #[arg(long, value_name = "SHARE")]
    pub outbox_authors: Option<f64>,
    /// Share of those contributors' roots, replies and comments (0 to 1) drawn to go only to
    /// their outbox relays, which they do where their author takes part in the repository or
    /// thread through another event on its relays [default with outbox relays: 0.1].
    #[arg(long, value_name = "SHARE")]
    pub outbox_share: Option<f64>,
    /// Interval between two probes of one participant mailbox relay in the daemon (the
    /// daemon's `mailbox_probe_interval`; the sim compresses time as with `--batch-window`)
    /// [default: the daemon's, 15m].
    #[arg(long, value_name = "DURATION")]
    pub mailbox_probe_interval: Option<String>,
    /// Relay limit profiles, taken in turn.
    #[arg(long, value_enum, default_value_t = Profiles::Mixed)]
    pub profiles: Profiles,
    /// The daemon's self-feed batch window [default: the daemon's].
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub batch_window: String,
    /// Stop waiting for convergence after this.
    #[arg(long, default_value = "600s", value_name = "DURATION")]
    pub timeout: String,
    /// Fetch coverage the daemon's store barely holds by REQ+EOSE, not NIP-77 (`false` to
    /// reconcile every batch by NIP-77).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub first_sync_by_req: bool,
    /// During the daemon's first sync, new live groups carry their batch's first historic page
    /// (the engine's default; `false` sends live groups with `limit: 0` only and fetches history
    /// apart).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = grasp_sync_engine::EngineConfig::default().live_first_page,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub live_first_page: bool,
    /// Skip the naive baseline.
    #[arg(long)]
    pub no_baseline: bool,
    /// Skip the raw ingest measurement.
    #[arg(long)]
    pub no_raw_ingest: bool,
    /// Once the daemon settled, ask it for the daily reconciliation on the connections that
    /// are up, then start it again over the same, complete store (it then reconciles every
    /// relay by NIP-77); report the bytes and events each moved, against the first sync's and
    /// the naive client's.
    #[arg(long)]
    pub reconcile: bool,
    /// After the run, start an idle daemon process on the synced store and read its memory
    /// once it settled (waiting up to `--timeout`: it reconciles every relay first) and idled
    /// this long.
    #[arg(long, value_name = "DURATION")]
    pub idle_rss: Option<String>,
    /// With `--idle-rss`: the idle daemon starts over an empty data directory and does the
    /// first sync itself; it is read once it saved the expected events, settled and idled.
    #[arg(long, requires = "idle_rss")]
    pub idle_from_empty: bool,
    /// Once the first sync settled, publish fresh events tagging N sampled tracked
    /// repositories and one root of each (every core tag family) and count how many reach
    /// the daemon's store within 20 s, that is through live subscriptions.
    #[arg(long, value_name = "N")]
    pub live_probe: Option<usize>,
    /// Write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run N external-mode daemons, shards 0/N to N-1/N, over one own relay (1 to 64), and
    /// report each shard; skips the baseline, the raw ingest and the idle daemon.
    #[arg(long, value_name = "N")]
    pub shards: Option<u16>,
}

#[cfg(test)]
mod tests;
