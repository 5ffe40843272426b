//! `UrlBackoff`: after a failed fetch a clone URL waits, doubling from a base to a cap, before
//! it is tried again; a success forgets it. Pure: every method takes `now`. Keyed by remote
//! data, so it remembers at most [`UrlBackoffConfig::max_urls`] URLs, forgetting the one whose
//! wait ends first.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// How long failed URLs wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlBackoffConfig {
    /// The wait after the first failure.
    pub base: Duration,
    /// The longest wait.
    pub cap: Duration,
    /// Most URLs remembered.
    pub max_urls: usize,
}

impl Default for UrlBackoffConfig {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(6 * 3600),
            max_urls: 10_000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Failing {
    failures: u32,
    retry_at: Instant,
}

/// The per-URL backoff state.
#[derive(Debug)]
pub struct UrlBackoff {
    config: UrlBackoffConfig,
    urls: HashMap<String, Failing>,
}

impl UrlBackoff {
    /// Nothing failed yet.
    pub fn new(config: UrlBackoffConfig) -> Self {
        Self {
            config,
            urls: HashMap::new(),
        }
    }

    /// Whether `url` may be tried at `now`.
    pub fn is_ready(&self, url: &str, now: Instant) -> bool {
        self.urls.get(url).is_none_or(|f| now >= f.retry_at)
    }

    /// When `url` may be tried again; `None` when it may be tried now.
    pub fn retry_at(&self, url: &str, now: Instant) -> Option<Instant> {
        self.urls
            .get(url)
            .map(|f| f.retry_at)
            .filter(|at| *at > now)
    }

    /// A fetch from `url` failed at `now`: it waits twice as long as last time, up to the cap.
    pub fn handle_failure(&mut self, url: &str, now: Instant) {
        let failures = self.urls.get(url).map_or(0, |f| f.failures) + 1;
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(31));
        let wait = self.config.base.saturating_mul(factor).min(self.config.cap);
        if !self.urls.contains_key(url)
            && self.urls.len() >= self.config.max_urls
            && let Some(soonest) = self
                .urls
                .iter()
                .min_by_key(|(_, f)| f.retry_at)
                .map(|(url, _)| url.clone())
        {
            self.urls.remove(&soonest);
        }
        self.urls.insert(
            url.to_owned(),
            Failing {
                failures,
                retry_at: now + wait,
            },
        );
    }

    /// A fetch from `url` succeeded: it is forgotten.
    pub fn handle_success(&mut self, url: &str) {
        self.urls.remove(url);
    }

    /// URLs remembered.
    pub fn len(&self) -> usize {
        self.urls.len()
    }

    /// Whether no URL is remembered.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }
}
