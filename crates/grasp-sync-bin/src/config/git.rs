//! The git-data keys: `git_root` (mirror repositories there, and hold announcements without
//! git data in purgatory), `on_sync_hook`, the fetcher's limits, the purgatory's cap and timer, as
//! [`GitArgs`] flags and `GRASP_SYNC_*` variables and resolved into [`GitSettings`].

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use grasp_sync_engine::store::DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS;

use super::bounds::{self, count_in, duration_in};
use super::{RawConfig, parse_bool, size_key};
use crate::error::ConfigError;

/// `git_fetch_timeout`'s default.
pub const DEFAULT_GIT_FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// `git_fetch_max_size`'s default: 2 GiB.
pub const DEFAULT_GIT_FETCH_MAX_SIZE: u64 = 2 << 30;
/// `purgatory_interval`'s default: the engine's.
pub const DEFAULT_PURGATORY_INTERVAL: Duration = Duration::from_secs(5);
/// `git_fetch_concurrency`'s default.
pub const DEFAULT_GIT_FETCH_CONCURRENCY: usize = 4;

/// The git-data settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSettings {
    /// Where repositories are mirrored; `None`: no fetcher and no purgatory.
    pub root: Option<PathBuf>,
    /// The operator's command run per burst of synced state events.
    pub on_sync_hook: Option<String>,
    /// Most announcements held in purgatory.
    pub max_purgatory_announcements: usize,
    /// The longest one fetch may take.
    pub fetch_timeout: Duration,
    /// The largest a mirrored repository may grow, in bytes.
    pub fetch_max_size: u64,
    /// Fetches at once.
    pub fetch_concurrency: usize,
    /// Whether `file://` clone URLs are fetched.
    pub allow_file_urls: bool,
    /// How often purgatory announcements are reconciled into `StateOnly` sync (the engine's
    /// purgatory timer, which also paces missing-event recovery).
    pub purgatory_interval: Duration,
}

impl Default for GitSettings {
    /// No git root, no hook, default limits.
    fn default() -> Self {
        Self {
            root: None,
            on_sync_hook: None,
            max_purgatory_announcements: DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS,
            fetch_timeout: DEFAULT_GIT_FETCH_TIMEOUT,
            fetch_max_size: DEFAULT_GIT_FETCH_MAX_SIZE,
            fetch_concurrency: DEFAULT_GIT_FETCH_CONCURRENCY,
            allow_file_urls: false,
            purgatory_interval: DEFAULT_PURGATORY_INTERVAL,
        }
    }
}

impl GitSettings {
    /// Validates the git keys of `raw`.
    pub(super) fn resolve(raw: &RawConfig) -> Result<GitSettings, ConfigError> {
        let root = raw.git_root.clone();
        if root
            .as_ref()
            .is_some_and(|root| root.as_os_str().is_empty())
        {
            return Err(ConfigError::invalid("git_root", "must not be empty"));
        }
        let on_sync_hook = raw.on_sync_hook.clone();
        if on_sync_hook
            .as_ref()
            .is_some_and(|hook| hook.trim().is_empty())
        {
            return Err(ConfigError::invalid("on_sync_hook", "must not be empty"));
        }
        Ok(GitSettings {
            root,
            on_sync_hook,
            max_purgatory_announcements: count_in(
                "max_purgatory_announcements",
                raw.max_purgatory_announcements,
                bounds::MAX_PURGATORY_ANNOUNCEMENTS,
            )?
            .unwrap_or(DEFAULT_MAX_PURGATORY_ANNOUNCEMENTS),
            fetch_timeout: duration_in(
                "git_fetch_timeout",
                raw.git_fetch_timeout.as_deref(),
                bounds::GIT_FETCH_TIMEOUT,
            )?
            .unwrap_or(DEFAULT_GIT_FETCH_TIMEOUT),
            fetch_max_size: size_key("git_fetch_max_size", raw.git_fetch_max_size.as_deref())?
                .map_or(DEFAULT_GIT_FETCH_MAX_SIZE, |bytes| bytes as u64),
            fetch_concurrency: count_in(
                "git_fetch_concurrency",
                raw.git_fetch_concurrency,
                bounds::GIT_FETCH_CONCURRENCY,
            )?
            .unwrap_or(DEFAULT_GIT_FETCH_CONCURRENCY),
            allow_file_urls: raw.git_allow_file_urls.unwrap_or(false),
            purgatory_interval: duration_in(
                "purgatory_interval",
                raw.purgatory_interval.as_deref(),
                bounds::PURGATORY_INTERVAL,
            )?
            .unwrap_or(DEFAULT_PURGATORY_INTERVAL),
        })
    }
}

/// Flags of the git-data keys (flattened into `grasp-sync run`).
#[derive(Debug, Clone, Default, Args)]
pub struct GitArgs {
    /// Mirror repositories under `DIR/<npub>/<identifier>.git` and hold announcements without
    /// git data there in purgatory.
    #[arg(long, env = "GRASP_SYNC_GIT_ROOT", value_name = "DIR")]
    pub git_root: Option<PathBuf>,
    /// Command (run by sh -c) given each burst of synced state events as JSON on stdin.
    #[arg(long, env = "GRASP_SYNC_ON_SYNC_HOOK", value_name = "CMD")]
    pub on_sync_hook: Option<String>,
    /// Announcements held in purgatory at most [default: 10000].
    #[arg(long, env = "GRASP_SYNC_MAX_PURGATORY_ANNOUNCEMENTS", value_name = "N")]
    pub max_purgatory_announcements: Option<usize>,
    /// The longest one git fetch may take [default: 10m].
    #[arg(long, env = "GRASP_SYNC_GIT_FETCH_TIMEOUT", value_name = "DURATION")]
    pub git_fetch_timeout: Option<String>,
    /// The largest a mirrored repository may grow [default: 2GiB].
    #[arg(long, env = "GRASP_SYNC_GIT_FETCH_MAX_SIZE", value_name = "SIZE")]
    pub git_fetch_max_size: Option<String>,
    /// Git fetches at once [default: 4].
    #[arg(long, env = "GRASP_SYNC_GIT_FETCH_CONCURRENCY", value_name = "N")]
    pub git_fetch_concurrency: Option<usize>,
    /// Fetch file:// clone URLs (tests and local mirrors) [default: false].
    #[arg(
        long,
        env = "GRASP_SYNC_GIT_ALLOW_FILE_URLS",
        value_name = "BOOL",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub git_allow_file_urls: Option<String>,
    /// How often purgatory announcements are registered for state sync [default: 5s].
    #[arg(long, env = "GRASP_SYNC_PURGATORY_INTERVAL", value_name = "DURATION")]
    pub purgatory_interval: Option<String>,
}

impl GitArgs {
    /// Sets these flags' keys on `raw`.
    pub fn apply(&self, raw: &mut RawConfig) -> Result<(), ConfigError> {
        raw.git_root = self.git_root.clone();
        raw.on_sync_hook = self.on_sync_hook.clone();
        raw.max_purgatory_announcements = self.max_purgatory_announcements;
        raw.git_fetch_timeout = self.git_fetch_timeout.clone();
        raw.git_fetch_max_size = self.git_fetch_max_size.clone();
        raw.git_fetch_concurrency = self.git_fetch_concurrency;
        raw.purgatory_interval = self.purgatory_interval.clone();
        raw.git_allow_file_urls = self
            .git_allow_file_urls
            .as_deref()
            .map(|value| parse_bool("git_allow_file_urls", value))
            .transpose()?;
        Ok(())
    }
}
